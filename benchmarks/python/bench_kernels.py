"""The fused kernels of `mx.fast` on LLM-shaped inputs (a table of `make bench-llm`): each kernel
against the same computation written with Tessera's ops (the composite) and against PyTorch's own
fused CPU op, forward and forward + gradient, 2 threads.

    python benchmarks/python/bench_kernels.py [--rounds 3] [--repeat 7] [--kernels rope,attention]

Each engine runs in its own process (Tessera from the test environment, PyTorch from the shared
benchmark environment), in interleaved rounds; a cell is the median over rounds of each round's
median time. Ratios are speed ratios (> 1: Tessera's fused kernel is faster).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ROWS, HIDDEN = 2048, 2048            # 4 sequences of 512 tokens of a 1 B model
HEADS, KV_HEADS, HEAD_DIM, SEQ = 32, 8, 64, 2048  # causal attention, grouped-query heads
VOCAB = 32000

# (name, dtype): the cases, in table order. rope has no fused op in PyTorch.
CASES = [(k, d) for k in ("rms_norm", "layer_norm", "rope", "attention", "cross_entropy")
         for d in ("float32", "bfloat16")]


def timed(fn, repeat):
    fn()
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


# ---- Tessera: the fused kernel and its composite -------------------------------------------

def tessera_cases(repeat, cases):
    import numpy as np
    import tessera.core as mx

    rng = np.random.default_rng(0)

    def arr(shape, dtype, scale=1.0):
        return mx.array((rng.standard_normal(shape) * scale).astype(np.float32)).astype(dtype)

    def rms_comp(x, w, eps=1e-5):
        xf = x.astype(mx.float32)
        return (xf * mx.rsqrt(mx.mean(xf * xf, axis=-1, keepdims=True) + eps)).astype(x.dtype) * w

    def ln_comp(x, w, b, eps=1e-5):
        xf = x.astype(mx.float32)
        mu = mx.mean(xf, axis=-1, keepdims=True)
        var = mx.var(xf, axis=-1, keepdims=True)
        return ((xf - mu) * mx.rsqrt(var + eps)).astype(x.dtype) * w + b

    def rope_comp(x, base=10000.0):
        d = x.shape[-1]
        pos = mx.arange(x.shape[-2], dtype=mx.float32)
        inv = mx.exp(-mx.arange(0, d // 2, dtype=mx.float32) * (np.log(base) / (d // 2)))
        theta = pos[:, None] * inv[None, :]
        c, s = mx.cos(theta), mx.sin(theta)
        x1, x2 = x[..., : d // 2].astype(mx.float32), x[..., d // 2:].astype(mx.float32)
        return mx.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1).astype(x.dtype)

    def attn_comp(q, k, v, scale):
        rep = q.shape[1] // k.shape[1]
        k, v = mx.repeat(k, rep, axis=1), mx.repeat(v, rep, axis=1)
        s = (q * scale) @ k.swapaxes(-1, -2)
        n = q.shape[-2]
        mask = mx.arange(n)[:, None] >= mx.arange(n)[None, :]
        s = mx.where(mask, s, mx.array(-np.inf, s.dtype))
        return mx.softmax(s, axis=-1, precise=True) @ v

    def ce_comp(logits, t):
        lf = logits.astype(mx.float32)
        return mx.logsumexp(lf, axis=-1) - mx.take_along_axis(lf, t[:, None], axis=-1)[:, 0]

    out = {}
    for kernel, dt in cases:
        dtype = getattr(mx, dt)
        if kernel == "rms_norm":
            args = [arr((ROWS, HIDDEN), dtype), arr((HIDDEN,), dtype)]
            fused = lambda x, w: mx.fast.rms_norm(x, w, 1e-5)
            comp = rms_comp
        elif kernel == "layer_norm":
            args = [arr((ROWS, HIDDEN), dtype), arr((HIDDEN,), dtype), arr((HIDDEN,), dtype)]
            fused = lambda x, w, b: mx.fast.layer_norm(x, w, b, 1e-5)
            comp = ln_comp
        elif kernel == "rope":
            args = [arr((1, HEADS, SEQ, HEAD_DIM), dtype)]
            fused = lambda x: mx.fast.rope(x, HEAD_DIM, traditional=False, base=10000.0, scale=1.0,
                                           offset=0)
            comp = rope_comp
        elif kernel == "attention":
            args = [arr((1, HEADS, SEQ, HEAD_DIM), dtype), arr((1, KV_HEADS, SEQ, HEAD_DIM), dtype),
                    arr((1, KV_HEADS, SEQ, HEAD_DIM), dtype)]
            scale = HEAD_DIM ** -0.5
            fused = lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale,
                                                                         mask="causal")
            comp = lambda q, k, v: attn_comp(q, k, v, scale)
        else:
            args = [arr((ROWS, VOCAB), dtype, 3.0),
                    mx.array(rng.integers(0, VOCAB, ROWS).astype(np.int32))]
            fused = lambda x, t: mx.fast.cross_entropy(x, t)
            comp = ce_comp
        mx.eval(*args)
        n_diff = 1 if kernel == "cross_entropy" else len(args)
        for name, fn in (("fused", fused), ("composite", comp)):
            res = fn(*args)
            mx.eval(res)
            cot = arr(res.shape, res.dtype)
            mx.eval(cot)

            def fwd(fn=fn):
                mx.eval(fn(*args))

            def bwd(fn=fn, cot=cot):
                f = lambda *p: fn(*p, *args[n_diff:])
                o, g = mx.vjp(f, args[:n_diff], [cot])
                mx.eval(o, g)

            out[f"{kernel}/{dt}/forward/{name}"] = timed(fwd, repeat)
            out[f"{kernel}/{dt}/gradient/{name}"] = timed(bwd, repeat)
    return out


# ---- PyTorch's fused CPU ops ---------------------------------------------------------------

def torch_cases(repeat, cases):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(2)
    g = torch.Generator().manual_seed(0)

    def arr(shape, dtype, scale=1.0):
        return (torch.randn(shape, generator=g) * scale).to(dtype)

    out = {}
    for kernel, dt in cases:
        if kernel == "rope":
            continue
        dtype = getattr(torch, dt)
        if kernel == "rms_norm":
            args = [arr((ROWS, HIDDEN), dtype), arr((HIDDEN,), dtype)]
            fn = lambda x, w: F.rms_norm(x, (HIDDEN,), w, 1e-5)
        elif kernel == "layer_norm":
            args = [arr((ROWS, HIDDEN), dtype), arr((HIDDEN,), dtype), arr((HIDDEN,), dtype)]
            fn = lambda x, w, b: F.layer_norm(x, (HIDDEN,), w, b, 1e-5)
        elif kernel == "attention":
            args = [arr((1, HEADS, SEQ, HEAD_DIM), dtype), arr((1, KV_HEADS, SEQ, HEAD_DIM), dtype),
                    arr((1, KV_HEADS, SEQ, HEAD_DIM), dtype)]
            fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                enable_gqa=True)
        else:
            args = [arr((ROWS, VOCAB), dtype, 3.0), torch.randint(0, VOCAB, (ROWS,), generator=g)]
            fn = lambda x, t: F.cross_entropy(x, t, reduction="none")
        n_diff = 1 if kernel == "cross_entropy" else len(args)
        with torch.no_grad():
            cot = arr(fn(*args).shape, fn(*args).dtype)

        def fwd():
            with torch.no_grad():
                fn(*args)

        def bwd():
            leaves = [a.detach().requires_grad_(True) for a in args[:n_diff]]
            fn(*leaves, *args[n_diff:]).backward(cot)

        out[f"{kernel}/{dt}/forward/torch"] = timed(fwd, repeat)
        out[f"{kernel}/{dt}/gradient/torch"] = timed(bwd, repeat)
    return out


# ---- the orchestration ---------------------------------------------------------------------

def run_engine(py, engine, repeat, kernels):
    env = dict(os.environ, TESSERA_NUM_THREADS="2", OMP_NUM_THREADS="2")
    r = subprocess.run([py, os.path.abspath(__file__), "run-one", engine, str(repeat), kernels],
                       capture_output=True, text=True, env=env, timeout=1800)
    line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    if r.returncode != 0 or line is None:
        raise RuntimeError(f"{engine} failed:\n{r.stderr[-2000:]}")
    return json.loads(line[7:])


def ms(values):
    return f"{statistics.median(values) * 1e3:.2f}" if values else "—"


def ratio(num, den):
    return f"{statistics.median(num) / statistics.median(den):.2f}×" if num and den else "—"


def main(argv):
    if argv[:1] == ["run-one"]:
        fn = tessera_cases if argv[1] == "tessera" else torch_cases
        kernels = argv[3].split(",")
        cases = [(k, d) for k, d in CASES if k in kernels]
        print("RESULT " + json.dumps(fn(int(argv[2]), cases)), flush=True)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--kernels", default=",".join(dict.fromkeys(k for k, _ in CASES)),
                    help="comma-separated subset of the kernels (default: all)")
    ap.add_argument("--tessera-python", default=os.path.join(ROOT, "build", "venv", "bin", "python"))
    ap.add_argument("--peer-python", default=os.path.join(ROOT, "build", "bench-venv", "bin", "python"))
    args = ap.parse_args(argv)
    have_torch = subprocess.run([args.peer_python, "-c", "import torch"],
                                capture_output=True).returncode == 0
    if not have_torch:
        print(f"[bench-kernels] torch is not installed in {args.peer_python}: its column is empty")
    times = {}
    for rnd in range(args.rounds):
        engines = [("tessera", args.tessera_python)] + ([("torch", args.peer_python)] if have_torch else [])
        for engine, py in engines:
            try:
                for k, v in run_engine(py, engine, args.repeat, args.kernels).items():
                    times.setdefault(k, []).append(v)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print(f"[bench-kernels] round {rnd + 1}: {e}", flush=True)
        print(f"  round {rnd + 1} of {args.rounds} done", flush=True)
    shapes = {"rms_norm": f"{ROWS} × {HIDDEN}", "layer_norm": f"{ROWS} × {HIDDEN}, weight and bias",
              "rope": f"{HEADS} heads × {SEQ} × {HEAD_DIM}",
              "attention": f"causal, {HEADS} / {KV_HEADS} heads × {SEQ} × {HEAD_DIM}",
              "cross_entropy": f"{ROWS} × {VOCAB}"}
    print(f"\n### Fused kernels, 2 threads (ms, median of {args.rounds} rounds × {args.repeat} runs)\n")
    print("| kernel | shape | dtype | pass | fused | composite | PyTorch | fused / composite | "
          "fused / PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kernel, dt in CASES:
        if kernel not in args.kernels.split(","):
            continue
        for phase in ("forward", "gradient"):
            cell = lambda who: times.get(f"{kernel}/{dt}/{phase}/{who}", [])
            f, c, t = cell("fused"), cell("composite"), cell("torch")
            print(f"| `{kernel}` | {shapes[kernel]} | {dt} | "
                  f"{'forward' if phase == 'forward' else 'forward + gradient'} | {ms(f)} | {ms(c)} | "
                  f"{ms(t)} | {ratio(c, f)} | {ratio(t, f)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
