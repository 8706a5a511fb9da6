"""make bench-compile: compile's speed-up, Tessera side by side with MLX (eager and mx.compile),
PyTorch (eager and torch.compile), JAX (eager and jax.jit) and NumPy, measured in one run with
the contenders interleaved.

Cases: the 10-op chain tanh(exp(-v*v)*0.5 + sin(v) - cos(v)*v/3 + 1) on 4 Mi float32, sum(x*x)
and a softmax written with elementwise ops and reductions on 4096x4096, and a 2-layer MLP
training step (batch 256, 784-512-10) -- each eager and compiled; then the first call of a
compiled function in a new process with a cold and with a warm kernel cache.

Prints the median of each case (min-max in brackets) and the ratios against Tessera compiled.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench_py import CHAIN, case_chain

N_CHAIN = 4 * 1024 * 1024
N_SQ = 4096


def load(name):
    try:
        if name == "tessera":
            import tessera.core as m
        elif name == "mlx":
            import mlx.core as m
        elif name == "torch":
            import torch as m

            m.set_num_threads(os.cpu_count())  # PyTorch's recommended intra-op threads: the cores
        elif name == "jax":
            os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
            import jax
            import jax.numpy as jnp

            jax.config.update("jax_platforms", "cpu")
            m = (jax, jnp)
        else:
            m = np
        return m
    except Exception:
        return None


def timed(fn, repeat):
    # The framework measured before may leave worker threads spinning (PyTorch's OpenMP threads
    # poll for ~10 ms after each parallel region): let them go to sleep first, so that each
    # framework is timed on idle CPUs. Measured: Tessera's MLP step right after a PyTorch call
    # took 3.1-4.4 ms instead of 2.1.
    time.sleep(0.2)
    fn()  # warm-up (and the compile of compiled variants)
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return ts


def chain_mx(m, v):
    return m.tanh(m.exp(-v * v) * 0.5 + m.sin(v) - m.cos(v) * v / 3 + 1)


def softmax_mx(m, x):
    e = m.exp(x - m.max(x, axis=-1, keepdims=True))
    return e / m.sum(e, axis=-1, keepdims=True)


def cases(name, m):
    """{case: callable} for a framework (missing keys: no equivalent)."""
    rng = np.random.default_rng(0)
    v_np = rng.standard_normal(N_CHAIN).astype(np.float32)
    x_np = rng.standard_normal((N_SQ, N_SQ)).astype(np.float32)
    out = {}
    if name in ("tessera", "mlx"):
        v, x = m.array(v_np), m.array(x_np)
        m.eval(v, x)
        chain_c = m.compile(lambda v: chain_mx(m, v))
        sq_c = m.compile(lambda x: m.sum(x * x))
        sm_c = m.compile(lambda x: softmax_mx(m, x))
        out["chain eager"] = lambda: m.eval(chain_mx(m, v))
        out["chain compiled"] = lambda: m.eval(chain_c(v))
        out["sum(x*x) eager"] = lambda: m.eval(m.sum(x * x))
        out["sum(x*x) compiled"] = lambda: m.eval(sq_c(x))
        out["softmax eager"] = lambda: m.eval(softmax_mx(m, x))
        out["softmax compiled"] = lambda: m.eval(sm_c(x))
        out.update(mlp_mx(m, rng))
    elif name == "torch":
        import torch

        v, x = torch.from_numpy(v_np), torch.from_numpy(x_np)
        chain_t = lambda v: torch.tanh(torch.exp(-v * v) * 0.5 + torch.sin(v) - torch.cos(v) * v / 3 + 1)
        softmax_t = lambda x: (lambda e: e / e.sum(-1, keepdim=True))(torch.exp(x - x.amax(-1, keepdim=True)))
        chain_c, sq_c, sm_c = torch.compile(chain_t), torch.compile(lambda x: (x * x).sum()), torch.compile(softmax_t)
        out["chain eager"] = lambda: chain_t(v)
        out["chain compiled"] = lambda: chain_c(v)
        out["sum(x*x) eager"] = lambda: (x * x).sum()
        out["sum(x*x) compiled"] = lambda: sq_c(x)
        out["softmax eager"] = lambda: softmax_t(x)
        out["softmax compiled"] = lambda: sm_c(x)
        out.update(mlp_torch(torch, rng))
    elif name == "jax":
        jax, jnp = m
        v, x = jnp.asarray(v_np), jnp.asarray(x_np)
        chain_j = lambda v: jnp.tanh(jnp.exp(-v * v) * 0.5 + jnp.sin(v) - jnp.cos(v) * v / 3 + 1)
        softmax_j = lambda x: (lambda e: e / e.sum(-1, keepdims=True))(jnp.exp(x - x.max(-1, keepdims=True)))
        chain_c, sq_c, sm_c = jax.jit(chain_j), jax.jit(lambda x: (x * x).sum()), jax.jit(softmax_j)
        out["chain eager"] = lambda: chain_j(v).block_until_ready()
        out["chain compiled"] = lambda: chain_c(v).block_until_ready()
        out["sum(x*x) eager"] = lambda: (x * x).sum().block_until_ready()
        out["sum(x*x) compiled"] = lambda: sq_c(x).block_until_ready()
        out["softmax eager"] = lambda: softmax_j(x).block_until_ready()
        out["softmax compiled"] = lambda: sm_c(x).block_until_ready()
    else:
        out["chain eager"] = lambda: chain_mx(np, v_np)
        out["sum(x*x) eager"] = lambda: np.sum(x_np * x_np)
        out["softmax eager"] = lambda: softmax_mx(np, x_np)
        dst = np.empty_like(x_np)
        dst[...] = 0  # pages mapped before timing
        out["memcpy of x (reference)"] = lambda: np.copyto(dst, x_np)
    return out


def mlp_data(rng):
    X = rng.standard_normal((256, 784)).astype(np.float32)
    Y = rng.integers(0, 10, 256)
    W1 = (rng.standard_normal((784, 512)) * 0.03).astype(np.float32)
    W2 = (rng.standard_normal((512, 10)) * 0.03).astype(np.float32)
    return X, Y, W1, W2


def mlp_mx(m, rng):
    X, Y, W1, W2 = mlp_data(rng)
    x, y = m.array(X), m.array(Y)
    onehot = m.array(np.eye(10, dtype=np.float32)[Y])
    state = [{"w1": m.array(W1), "b1": m.zeros((512,)), "w2": m.array(W2), "b2": m.zeros((10,))}]

    def loss(p, x, t):
        h = m.maximum(x @ p["w1"] + p["b1"], 0)
        logits = h @ p["w2"] + p["b2"]
        return m.mean(m.logsumexp(logits, axis=-1) - m.sum(logits * t, axis=-1))

    def step(x, t):
        l, g = m.value_and_grad(loss)(state[0], x, t)
        state[0] = {k: state[0][k] - 0.1 * g[k] for k in g}
        return l

    step_c = m.compile(step, inputs=state, outputs=state)
    return {
        "MLP step eager": lambda: m.eval(step(x, onehot), state[0]),
        "MLP step compiled": lambda: m.eval(step_c(x, onehot), state[0]),
    }


def mlp_torch(torch, rng):
    X, Y, W1, W2 = mlp_data(rng)
    x, y = torch.from_numpy(X), torch.from_numpy(Y)
    p = [torch.from_numpy(W1).requires_grad_(), torch.zeros(512, requires_grad=True),
         torch.from_numpy(W2).requires_grad_(), torch.zeros(10, requires_grad=True)]

    def step():
        logits = torch.relu(x @ p[0] + p[1]) @ p[2] + p[3]
        l = torch.nn.functional.cross_entropy(logits, y)
        gs = torch.autograd.grad(l, p)
        with torch.no_grad():
            for w, g in zip(p, gs):
                w -= 0.1 * g
        return l

    return {"MLP step eager": step, "MLP step compiled": torch.compile(step)}


FIRST_CALL = """
import sys, time
t0 = time.perf_counter()
import tessera.core as mx
v = mx.ones(1024)
mx.eval(v)
t1 = time.perf_counter()
mx.eval(mx.compile(lambda v: mx.tanh(mx.exp(-v * v) * 0.5 + mx.sin(v) - mx.cos(v) * v / 3 + 1))(v))
print(time.perf_counter() - t1)
"""


def first_call(cache):
    env = dict(os.environ, TESSERA_COMPILE_CACHE_DIR=cache)
    return float(subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, check=True,
                                capture_output=True, text=True).stdout)


def trace_cost(mx, repeat):
    """Per-op time of bench_py's eager chain of tiny adds with the timeline trace off and on (a
    slice per kernel recorded), interleaved."""
    chain = case_chain("tessera", mx)
    off, on = [], []
    with tempfile.TemporaryDirectory() as d:
        for i in range(repeat):
            off.append(timed(chain, 1)[0] / CHAIN)
            mx.start_trace(os.path.join(d, f"t{i}.json"))
            on.append(timed(chain, 1)[0] / CHAIN)
            mx.stop_trace()
    return off, on


def fmt(ts):
    if not ts:
        return ""
    med = statistics.median(ts)
    unit, s = ("ms", 1e3) if med >= 1e-3 else ("us", 1e6)
    return f"{med * s:.2f} {unit} [{min(ts) * s:.2f}-{max(ts) * s:.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    names = ["tessera", "mlx", "torch", "jax", "numpy"]
    mods = {n: load(n) for n in names}
    built = {n: cases(n, m) for n, m in mods.items() if m is not None}
    order = ["chain eager", "chain compiled", "sum(x*x) eager", "sum(x*x) compiled",
             "memcpy of x (reference)", "softmax eager", "softmax compiled", "MLP step eager",
             "MLP step compiled"]
    res = {}
    for case in order:  # case by case, every framework in turn
        for n in names:
            f = built.get(n, {}).get(case)
            if f is not None:
                res[(n, case)] = timed(f, args.repeat)
    trace_off, trace_on = [], []
    if mods.get("tessera") is not None:
        trace_off, trace_on = trace_cost(mods["tessera"], args.repeat)
    with tempfile.TemporaryDirectory() as d:
        cold = [first_call(os.path.join(d, f"cold{i}")) for i in range(3)]
        warm = [first_call(os.path.join(d, "cold0")) for _ in range(3)]
    print(f"compile benchmark: {os.cpu_count()} CPUs, medians of {args.repeat} (min-max)")
    print(f"| case | {' | '.join(names)} |")
    print("|---|" + "---|" * len(names))
    for case in order:
        cells = [fmt(res.get((n, case), [])) for n in names]
        print(f"| {case} | " + " | ".join(cells) + " |")
    print()
    t = {c: statistics.median(res[("tessera", c)]) for c in order if ("tessera", c) in res}
    print("Tessera compiled vs eager: chain %.2fx, sum(x*x) %.2fx, softmax %.2fx, MLP step %.2fx"
          % tuple(t[f"{c} eager"] / t[f"{c} compiled"] for c in ("chain", "sum(x*x)", "softmax", "MLP step")))
    for peer in ("mlx", "torch", "jax"):
        if (peer, "chain compiled") in res:
            print(f"{peer} compiled chain / Tessera compiled chain: "
                  f"{statistics.median(res[(peer, 'chain compiled')]) / t['chain compiled']:.2f}x")
    if ("numpy", "memcpy of x (reference)") in res:
        print("Tessera compiled sum(x*x) / memcpy of x: %.2f"
              % (t["sum(x*x) compiled"] / statistics.median(res[("numpy", "memcpy of x (reference)")])))
    print(f"first call of a compiled function in a new process: cold cache {fmt(cold)}, warm cache {fmt(warm)}")
    if trace_off:
        off, on = statistics.median(trace_off), statistics.median(trace_on)
        print(f"timeline trace, eager {CHAIN}-op lazy chain per op: off {fmt(trace_off)}, "
              f"on {fmt(trace_on)} (on / off {on / off:.2f}x; off, each hook is one relaxed load "
              "and a branch not taken)")


if __name__ == "__main__":
    main()
