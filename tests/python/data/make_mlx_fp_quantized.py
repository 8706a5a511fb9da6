# Writes mlx_fp_quantized.npz beside this file with MLX's CPU package (mlx[cpu]): MLX's mxfp4,
# mxfp8 and nvfp4 codes and dequantized values for float32 / float16 / bfloat16 matrices with the
# groups that exercise the rounding (ties between fp4 codes, an all-zero group, tiny and huge
# magnitudes, a scale just under a power of two), nvfp4 also under a global scale. The tests read the file and never
# need MLX. Run: python make_mlx_fp_quantized.py
import os
import numpy as np
import mlx.core as mx

mx.set_default_device(mx.cpu)
rng = np.random.default_rng(11)
out = {}


def raw(a):
    return np.array(a.view(mx.uint16)) if a.dtype == mx.bfloat16 else np.array(a)


def matrix(gs):
    w = (rng.standard_normal((8, 4 * gs)) * rng.uniform(0.05, 4.0, (8, 1))).astype(np.float32)
    w[0, :gs] = 0.0                                              # all zero
    ties = np.array([6, 0.25, -0.25, 0.75, -0.75, 2.5, -2.5, 5, -5, 1.25, 1.75, 3.5], np.float32)
    w[1, :gs] = np.resize(ties, gs) * 4.0                        # exact scale, tied codes
    w[2, :gs] = rng.standard_normal(gs).astype(np.float32) * 1e-6  # tiny
    w[3, :gs] = rng.standard_normal(gs).astype(np.float32) * 3e4   # huge (saturates float16's e8m0 range)
    w[4, :gs] = np.linspace(-8.4, 8.4, gs, dtype=np.float32)     # max / 6 just under sqrt(2): rounds up
    return w


for mode, gs in (("mxfp4", 32), ("mxfp8", 32), ("nvfp4", 16)):
    w = matrix(gs)
    for dt in ("float32", "float16", "bfloat16", "float64"):
        wm = mx.array(w).astype(getattr(mx, dt))
        wq, s = mx.quantize(wm, mode=mode)
        key = f"{mode}_{dt}"
        out[key + "_w"] = raw(wm)
        out[key + "_wq"] = np.array(wq)
        out[key + "_scales"] = np.array(s)
        out[key + "_deq"] = raw(mx.dequantize(wq, s, mode=mode, dtype=getattr(mx, dt)))
    if mode == "nvfp4":
        g = mx.array(np.float32(np.abs(w).max() / 3.0))
        out["nvfp4_global_gs"] = np.array(g)
        for dt in ("float32", "bfloat16"):
            wq, s = mx.quantize(mx.array(w).astype(getattr(mx, dt)), mode=mode, global_scale=g)
            out[f"nvfp4_global_{dt}_wq"] = np.array(wq)
            out[f"nvfp4_global_{dt}_scales"] = np.array(s)
            out[f"nvfp4_global_{dt}_deq"] = np.array(
                mx.dequantize(wq, s, mode=mode, global_scale=g, dtype=mx.float32))
    x = rng.standard_normal((3, w.shape[1])).astype(np.float32)
    wq, s = (mx.array(out[f"{mode}_float32_" + k]) for k in ("wq", "scales"))
    out[f"{mode}_qmm_x"] = x
    out[f"{mode}_qmm_out"] = np.array(mx.quantized_matmul(mx.array(x), wq, s, transpose=True, mode=mode))

np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlx_fp_quantized.npz"),
                    mlx_version=np.array(mx.__version__), **out)
print(len(out), mx.__version__)
