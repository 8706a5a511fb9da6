# Writes mlx_affine_quantized.npz beside this file with MLX's CPU package (mlx[cpu], e.g. the
# venv of `make bench`); the tests read the file and never need MLX. Run: python make_mlx_affine_quantized.py
import numpy as np, mlx.core as mx
mx.set_default_device(mx.cpu)
rng = np.random.default_rng(3)
out = {}
cases = [(b, 64, "float32") for b in (2, 3, 4, 5, 6, 8)] + [(4, 32, "float32"), (4, 128, "float32"),
         (3, 128, "float32"), (4, 64, "float16"), (6, 32, "float16"), (4, 64, "bfloat16")]
for bits, gs, dt in cases:
    w = (rng.standard_normal((6, 256)) * rng.uniform(0.1, 3.0, (6, 1))).astype(np.float32)
    w[0, :gs] = 0.0      # a constant group (scale falls back to eps)
    w[1, :gs] = np.abs(w[1, :gs])  # a group of one sign
    wm = mx.array(w).astype(getattr(mx, dt))
    wq, s, b = mx.quantize(wm, group_size=gs, bits=bits)
    deq = mx.dequantize(wq, s, b, group_size=gs, bits=bits)
    key = f"b{bits}_g{gs}_{dt}"
    def raw(a):
        if a.dtype == mx.bfloat16:
            return np.array(a.view(mx.uint16))
        return np.array(a)
    out[key + "_w"] = raw(wm)
    out[key + "_wq"] = np.array(wq)
    out[key + "_scales"] = raw(s)
    out[key + "_biases"] = raw(b)
    out[key + "_deq"] = raw(deq)
x = rng.standard_normal((3, 256)).astype(np.float32)
wq, s, b = (out["b4_g64_float32_" + k] for k in ("wq", "scales", "biases"))
out["qmm_x"] = x
out["qmm_out"] = np.array(mx.quantized_matmul(mx.array(x), mx.array(wq), mx.array(s), mx.array(b), transpose=True, group_size=64, bits=4))
import os
np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlx_affine_quantized.npz"), mlx_version=np.array(mx.__version__), **out)
print(len(out), mx.__version__)
