"""make bench-py: per-call costs of the Python layer, Tessera side by side with MLX (mlx[cpu]),
NumPy and PyTorch (CPU), measured in one run with the contenders interleaved (A B C D A B ...).

Prints one table: the median time of each case for each framework (min-max in brackets) and
the ratio peer / Tessera (> 1: Tessera is faster). A framework that is not installed, or has
no equivalent for a case, leaves its cell empty.
"""

import argparse
import statistics
import sys
import time

import numpy as np

FRAMEWORKS = ["tessera", "mlx", "numpy", "torch"]


def load(name):
    try:
        if name == "tessera":
            import tessera.core as m
        elif name == "mlx":
            import mlx.core as m
        elif name == "torch":
            import torch as m

            m.set_num_threads(2)  # this machine's cores (PyTorch's own default here too)
        else:
            m = np
        return m
    except ImportError:
        return None


def per_call(fn, calls):
    """Seconds per call of fn(), over `calls` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


# Each case: name, unit divisor (report per-op for the chain), calls per sample, and a builder
# that returns the callable to time for a framework (or None: no equivalent).
def case_add_eval(name, m):
    if name in ("tessera", "mlx"):
        x, y = m.ones(4), m.ones(4)
        m.eval(x, y)

        def f():
            z = x + y
            m.eval(z)
        return f
    if name == "torch":
        x, y = m.ones(4), m.ones(4)
        return lambda: x + y
    x, y = np.ones(4, np.float32), np.ones(4, np.float32)
    return lambda: x + y


CHAIN = 2000


def case_chain(name, m):
    if name in ("tessera", "mlx"):
        x = m.ones(4)
        m.eval(x)

        def f():
            z = x
            for _ in range(CHAIN):
                z = z + 1.0
            m.eval(z)
        return f
    x = m.ones(4) if name == "torch" else np.ones(4, np.float32)

    def g():
        z = x
        for _ in range(CHAIN):
            z = z + 1.0
        return z
    return g


MIB64 = 16 * 1024 * 1024  # float32 elements in 64 MiB


def case_asarray(name, m):
    if name in ("tessera", "mlx"):
        a = m.ones(MIB64)
        m.eval(a)
        return lambda: np.asarray(a)
    if name == "torch":
        t = m.ones(MIB64)
        return lambda: t.numpy()
    return None


def case_from_numpy(name, m):
    src = np.ones(MIB64, np.float32)
    if name in ("tessera", "mlx"):
        def f():
            a = m.array(src)
            m.eval(a)
        return f
    if name == "torch":
        return lambda: m.tensor(src)  # copies, as mx.array does
    return lambda: np.array(src)  # a copy


def case_index(name, m):
    src = np.arange(1024 * 1024, dtype=np.float32).reshape(1024, 1024)
    idx_np = np.arange(0, 1024, 3)
    if name in ("tessera", "mlx"):
        a, idx = m.array(src), m.array(idx_np)
        m.eval(a, idx)

        def f():
            m.eval(a[1:-1:2, idx])
        return f
    if name == "torch":
        a, idx = m.tensor(src), m.tensor(idx_np)
        return lambda: a[1:-1:2, idx]
    return lambda: src[1:-1:2, idx_np]


def case_value_and_grad(name, m):
    if name in ("tessera", "mlx"):
        x = m.array([0.1, 0.2, 0.3, 0.4])
        m.eval(x)
        vg = m.value_and_grad(lambda v: (m.sin(v) * v).sum())

        def f():
            val, g = vg(x)
            m.eval(val, g)
        return f
    if name == "torch":
        x = m.tensor([0.1, 0.2, 0.3, 0.4], requires_grad=True)

        def g():
            x.grad = None
            val = (m.sin(x) * x).sum()
            val.backward()
        return g
    return None


CASES = [
    ("z = x + y; eval(z), 4 elements", 1, 2000, case_add_eval),
    ("2,000-op lazy chain, per op", CHAIN, 20, case_chain),
    ("np.asarray(a), 64 MiB", 1, 50, case_asarray),
    ("array(np_array), 64 MiB", 1, 5, case_from_numpy),
    ("a[1:-1:2, idx], 1024x1024", 1, 50, case_index),
    ("value_and_grad, small function", 1, 500, case_value_and_grad),
]


def fmt(seconds):
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:.2f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=7, help="interleaved samples per case")
    args = ap.parse_args()
    mods = {n: load(n) for n in FRAMEWORKS}
    present = [n for n in FRAMEWORKS if mods[n] is not None]
    print("frameworks:", ", ".join(f"{n} {getattr(mods[n], '__version__', '')}" for n in present))
    missing = [n for n in FRAMEWORKS if mods[n] is None]
    if missing:
        print("not installed (empty columns):", ", ".join(missing))
    rows = []
    for title, per, calls, build in CASES:
        fns = {n: build(n, mods[n]) for n in present}
        samples = {n: [] for n in present if fns[n] is not None}
        for n in samples:  # warm-up (first-touch pages, caches, lazy init)
            per_call(fns[n], max(1, calls // 10))
        for _ in range(args.rounds):
            for n in samples:
                samples[n].append(per_call(fns[n], calls) / per)
        rows.append((title, samples))
    header = f"| case | " + " | ".join(FRAMEWORKS) + " | " + " | ".join(
        f"{p}/tessera" for p in FRAMEWORKS[1:]) + " |"
    print(header)
    print("|" + "---|" * (1 + 2 * len(FRAMEWORKS) - 1))
    for title, samples in rows:
        med = {n: statistics.median(v) for n, v in samples.items()}
        cells = []
        for n in FRAMEWORKS:
            if n in samples:
                cells.append(f"{fmt(med[n])} [{fmt(min(samples[n]))}-{fmt(max(samples[n]))}]")
            else:
                cells.append("")
        ratios = []
        for n in FRAMEWORKS[1:]:
            ratios.append(f"{med[n] / med['tessera']:.2f}x" if n in med and "tessera" in med else "")
        print(f"| {title} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
