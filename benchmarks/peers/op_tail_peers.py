"""Peer side of benchmarks/op_tail.cpp: the same ops in PyTorch (CPU) and MLX (CPU), as JSON.

Run once per round by bench_op_tail, so peers and Tessera interleave. Each peer is set up the way
its documentation recommends for this machine: PyTorch with one intra-op thread per core and
channels-last tensors (its oneDNN convolutions' fast layout, the same layout as Tessera's and
MLX's NHWC); MLX on its CPU device; NumPy's pocketfft (single-threaded by design); SciPy's FFT
with workers = cores and its LAPACK (through the OpenBLAS SciPy ships, which threads by itself).
"""
import argparse
import json
import os
import sys
import time

N, H, W, C, O = 32, 56, 56, 64, 64


def time_it(fn, reps):
    fn()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def torch_ops(reps):
    import numpy as np
    import torch

    torch.set_num_threads(os.cpu_count())
    rng = np.random.default_rng(0)
    cl = torch.channels_last
    x = torch.from_numpy(rng.standard_normal((N, H, W, C), dtype=np.float32)).permute(0, 3, 1, 2)
    w = torch.from_numpy(0.05 * rng.standard_normal((O, 3, 3, C), dtype=np.float32))
    w = w.permute(0, 3, 1, 2).contiguous(memory_format=cl)
    dy = torch.from_numpy(rng.standard_normal((N, H, W, O), dtype=np.float32)).permute(0, 3, 1, 2)
    conv = torch.nn.functional.conv2d
    xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)

    def fwd_bwd():
        y = conv(xg, wg, padding=1)
        y.backward(dy)
        xg.grad = wg.grad = None

    with torch.no_grad():
        res = {"conv2d_fwd": time_it(lambda: conv(x, w, padding=1), reps)}
    res["conv2d_fwd_bwd"] = time_it(fwd_bwd, reps)
    return res


FFT_N, FFT_PRIME = 1 << 20, 1048573


def signals(np):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(n).astype(np.complex64) for n in (FFT_N, FFT_PRIME)]


def numpy_ops(reps):
    import numpy as np

    sig, sig_p = signals(np)
    return {"fft_2^20": time_it(lambda: np.fft.fft(sig), reps),
            "fft_prime": time_it(lambda: np.fft.fft(sig_p), reps)}


def scipy_ops(reps):
    import numpy as np
    import scipy.fft
    import scipy.linalg

    sig, sig_p = signals(np)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((512, 512), dtype=np.float32)
    b = rng.standard_normal((512, 1), dtype=np.float32)
    workers = os.cpu_count()
    return {
        "fft_2^20": time_it(lambda: scipy.fft.fft(sig, workers=workers), reps),
        "fft_prime": time_it(lambda: scipy.fft.fft(sig_p, workers=workers), reps),
        "svd_512": time_it(lambda: scipy.linalg.svd(a, lapack_driver="gesdd"), reps),
        "solve_512": time_it(lambda: scipy.linalg.solve(a, b), reps),
    }


def mlx_ops(reps):
    import mlx.core as mx

    mx.set_default_device(mx.cpu)
    x = mx.random.normal((N, H, W, C))
    w = 0.05 * mx.random.normal((O, 3, 3, C))
    dy = mx.random.normal((N, H, W, O))
    mx.eval(x, w, dy)

    def fwd_bwd():
        out, grads = mx.vjp(lambda a, b: mx.conv2d(a, b, padding=1), [x, w], [dy])
        mx.eval(out, grads)

    import numpy as np

    sig, sig_p = (mx.array(v) for v in signals(np))
    a, b = mx.random.normal((512, 512)), mx.random.normal((512, 1))
    wq, scales, biases = mx.quantize(mx.random.normal((4096, 4096)), group_size=64, bits=4)
    fq, fscales = mx.quantize(mx.random.normal((4096, 4096)), mode="mxfp4")
    xv, x32 = mx.random.normal((1, 4096)), mx.random.normal((32, 4096))
    mx.eval(wq, scales, biases, fq, fscales, xv, x32)

    def qmm(x):
        return lambda: mx.eval(mx.quantized_matmul(x, wq, scales, biases, group_size=64, bits=4))

    def fp_qmm(x):
        return lambda: mx.eval(mx.quantized_matmul(x, fq, fscales, mode="mxfp4"))

    return {
        "conv2d_fwd": time_it(lambda: mx.eval(mx.conv2d(x, w, padding=1)), reps),
        "conv2d_fwd_bwd": time_it(fwd_bwd, reps),
        "qmm_4bit_vec": time_it(qmm(xv), reps),
        "qmm_4bit_32": time_it(qmm(x32), reps),
        "qmm_mxfp4_vec": time_it(fp_qmm(xv), reps),
        "qmm_mxfp4_32": time_it(fp_qmm(x32), reps),
        "fft_2^20": time_it(lambda: mx.eval(mx.fft.fft(sig)), reps),
        "fft_prime": time_it(lambda: mx.eval(mx.fft.fft(sig_p)), reps),
        "svd_512": time_it(lambda: mx.eval(*mx.linalg.svd(a, stream=mx.cpu)), reps),
        "solve_512": time_it(lambda: mx.eval(mx.linalg.solve(a, b, stream=mx.cpu)), reps),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--peer", choices=["numpy", "scipy", "torch", "mlx"], required=True)
    args = p.parse_args()
    try:
        runs = {"numpy": numpy_ops, "scipy": scipy_ops, "torch": torch_ops, "mlx": mlx_ops}
        res = runs[args.peer](args.reps)
    except ImportError as e:
        print(json.dumps({"unavailable": str(e)}))
        return 0
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
