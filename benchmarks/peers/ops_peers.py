"""Peer side of benchmarks/ops.cpp: times the same ops in NumPy and MLX (CPU) and prints JSON.

Run by bench_ops once per round, so peers and Tessera interleave. Each op is timed `--reps`
times; the JSON holds every sample (seconds) per framework and op.
"""
import argparse
import json
import sys
import time

N_SIDE = 4096  # 16 Mi float32 elements


def time_it(fn, reps):
    fn()  # warm-up (allocations, lazy init)
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def numpy_ops(reps, sizes):
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((N_SIDE, N_SIDE), dtype=np.float32)
    b = rng.standard_normal((N_SIDE, N_SIDE), dtype=np.float32)

    def softmax(x):
        m = x.max(axis=-1, keepdims=True)
        e = np.exp(x - m)
        return e / e.sum(axis=-1, keepdims=True)

    ops = {
        "add": lambda: a + b,
        "multiply": lambda: a * b,
        "exp": lambda: np.exp(a),
        "tanh": lambda: np.tanh(a),
        "sum_all": lambda: a.sum(),
        "sum_axis0": lambda: a.sum(axis=0),
        "sum_axis1": lambda: a.sum(axis=1),
        "max_all": lambda: a.max(),
        "transpose_copy": lambda: np.ascontiguousarray(a.T),
        "softmax": lambda: softmax(a),
    }
    res = {k: time_it(f, reps) for k, f in ops.items()}
    for n in sizes:
        x = rng.standard_normal((n, n), dtype=np.float32)
        y = rng.standard_normal((n, n), dtype=np.float32)
        res[f"matmul_{n}"] = time_it(lambda: x @ y, reps)
    return res


def mlx_ops(reps, sizes):
    import mlx.core as mx

    mx.set_default_device(mx.cpu)
    a = mx.random.normal((N_SIDE, N_SIDE))
    b = mx.random.normal((N_SIDE, N_SIDE))
    mx.eval(a, b)

    def run(f):
        return lambda: mx.eval(f())

    contiguous = getattr(mx, "contiguous", None)
    ops = {
        "add": run(lambda: a + b),
        "multiply": run(lambda: a * b),
        "exp": run(lambda: mx.exp(a)),
        "tanh": run(lambda: mx.tanh(a)),
        "sum_all": run(lambda: mx.sum(a)),
        "sum_axis0": run(lambda: mx.sum(a, axis=0)),
        "sum_axis1": run(lambda: mx.sum(a, axis=1)),
        "max_all": run(lambda: mx.max(a)),
        "transpose_copy": run(lambda: contiguous(a.T) if contiguous else mx.array(a.T)),
        "softmax": run(lambda: mx.softmax(a, axis=-1)),
    }
    res = {k: time_it(f, reps) for k, f in ops.items()}
    for n in sizes:
        x = mx.random.normal((n, n))
        y = mx.random.normal((n, n))
        mx.eval(x, y)
        res[f"matmul_{n}"] = time_it(run(lambda: x @ y), reps)
    return res


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--sizes", default="512,1024,2048")
    p.add_argument("--peer", choices=["numpy", "mlx"], required=True)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    try:
        res = numpy_ops(args.reps, sizes) if args.peer == "numpy" else mlx_ops(args.reps, sizes)
    except ImportError as e:
        print(json.dumps({"unavailable": str(e)}))
        return 0
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
