"""`make bench-llm`: LLM prefill and decode speed of mlx-lm on Tessera against llama.cpp
(llama-cpp-python), PyTorch + transformers and MLX's CPU backend, on models from
tools/make_llm.py (random weights): the 111 M one of the LLM-speed issue and one of ~1 B
parameters. Every contender runs in its own process, in interleaved rounds, with 2 threads;
the tables give medians (min-max) of tokens per second and Tessera's ratio to each peer, and
the bound: weight bytes per decoded token over the read bandwidth measured in the same run.

    python benchmarks/python/bench_llm.py [--rounds 2] [--prompt 512] [--decode 128]
        [--models 111m,1b] [--cache build/bench-llm]

Tessera runs from the test environment (build/venv, the package `pip install .` builds, through
`python -m tessera.mlx`), the peers from the shared benchmark environment (build/bench-venv,
scripts/bench_llm_deps.sh). Models and GGUF files are cached under --cache.
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

MODELS = {
    "111m": ["--hidden", "576", "--layers", "30", "--heads", "9", "--kv-heads", "3", "--mlp",
             "1536", "--vocab", "8192", "--tie"],
    "1b": ["--hidden", "2048", "--layers", "16", "--heads", "32", "--kv-heads", "8", "--mlp",
           "8192", "--vocab", "32000"],
}
# A peer whose one run would take longer than this runs a short form (prompt 64, decode 16).
LONG_RUN_S = 300


# ---- one contender in its own process ------------------------------------------------------

def prompt_ids(n, vocab):
    import random

    rng = random.Random(7)
    return [rng.randrange(3, vocab) for _ in range(n)]  # 0..2 are <unk>, <s>, </s>


def run_mlx_lm(args):
    if args.engine == "tessera":  # mlx-lm's `import mlx` gives Tessera
        import tessera.mlx

        tessera.mlx.install()
    from mlx_lm import load
    from mlx_lm.generate import stream_generate

    model, tok = load(args.model)
    tok.eos_token_ids = []  # random weights: never stop early
    vocab = json.load(open(os.path.join(args.model, "config.json")))["vocab_size"]
    prompt = prompt_ids(args.prompt, vocab)
    for _ in stream_generate(model, tok, prompt[:16], max_tokens=4):
        pass
    last = None
    for last in stream_generate(model, tok, prompt, max_tokens=args.decode):
        pass
    return {"prefill": last.prompt_tps, "decode": last.generation_tps}


def run_torch(args):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    model.eval()
    vocab = model.config.vocab_size
    ids = torch.tensor([prompt_ids(args.prompt, vocab)])
    with torch.inference_mode():
        model(ids[:, :16])
        t0 = time.perf_counter()
        out = model(ids, use_cache=True)
        t1 = time.perf_counter()
        past, tok = out.past_key_values, out.logits[:, -1].argmax(-1)
        t2 = time.perf_counter()
        for _ in range(args.decode):
            out = model(tok[:, None], past_key_values=past, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1].argmax(-1)
        t3 = time.perf_counter()
    return {"prefill": args.prompt / (t1 - t0), "decode": args.decode / (t3 - t2)}


def run_llamacpp(args):
    import numpy as np
    import llama_cpp
    from llama_cpp import Llama

    def next_token():  # greedy, from the last evaluated token's logits
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits(llm.ctx), shape=(llm.n_vocab(),))
        return int(np.argmax(logits))

    llm = Llama(model_path=args.model, n_ctx=args.prompt + args.decode + 32, n_threads=2,
                n_threads_batch=2, n_batch=max(512, args.prompt), n_ubatch=512, verbose=False)
    prompt = prompt_ids(args.prompt, llm.n_vocab())
    llm.eval(prompt[:16])
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt)
    t1 = time.perf_counter()
    tok = next_token()
    t2 = time.perf_counter()
    for _ in range(args.decode):
        llm.eval([tok])
        tok = next_token()
    t3 = time.perf_counter()
    return {"prefill": args.prompt / (t1 - t0), "decode": args.decode / (t3 - t2)}


def run_one(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=("tessera", "mlx", "torch", "llamacpp"))
    ap.add_argument("--model")
    ap.add_argument("--prompt", type=int)
    ap.add_argument("--decode", type=int)
    args = ap.parse_args(argv)
    fn = {"tessera": run_mlx_lm, "mlx": run_mlx_lm, "torch": run_torch,
          "llamacpp": run_llamacpp}[args.engine]
    print("RESULT " + json.dumps(fn(args)), flush=True)


# ---- the orchestration ---------------------------------------------------------------------

def sh(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def prepare(name, cache, tessera_py, peer_py):
    """The model folders and GGUF files of one model, made once."""
    base = os.path.join(cache, name)
    folders = {"bf16": os.path.join(base, "bf16"), "q4": os.path.join(base, "q4g64")}
    if not os.path.exists(os.path.join(folders["bf16"], "model.safetensors")):
        print(f"[bench-llm] generating the {name} model", flush=True)
        sh([tessera_py, os.path.join(ROOT, "tools", "make_llm.py"), folders["bf16"],
            *MODELS[name], "--dtype", "bfloat16"])
    if not os.path.exists(os.path.join(folders["q4"], "model.safetensors")):
        sh([tessera_py, "-m", "tessera.mlx", "-m", "mlx_lm", "convert", "--hf-path",
            folders["bf16"], "--mlx-path", folders["q4"], "-q", "--q-bits", "4",
            "--q-group-size", "64"], env=dict(os.environ, HF_HUB_OFFLINE="1"))
    gguf = {k: os.path.join(base, f"model-{k}.gguf") for k in ("BF16", "Q4_0", "Q4_K_M")}
    try:
        if not os.path.exists(gguf["BF16"]):
            sh([peer_py, "-c", f"import sys; sys.path.insert(0, {HERE!r}); import llm_gguf; "
                f"llm_gguf.write_bf16_gguf({folders['bf16']!r}, {gguf['BF16']!r})"])
        for kind in ("Q4_0", "Q4_K_M"):
            if not os.path.exists(gguf[kind]):
                sh([peer_py, "-c", f"import sys; sys.path.insert(0, {HERE!r}); import llm_gguf; "
                    f"llm_gguf.quantize({gguf['BF16']!r}, {gguf[kind]!r}, {kind!r})"])
    except RuntimeError as e:
        print(f"[bench-llm] no GGUF files for llama.cpp: {e}", flush=True)
        gguf = {}
    return folders, gguf


def weight_bytes(folder):
    """Bytes a decoded token reads: every tensor of the model's files (norms are noise)."""
    total = 0
    for f in os.listdir(folder):
        if f.endswith(".safetensors"):
            with open(os.path.join(folder, f), "rb") as fh:
                total += os.fstat(fh.fileno()).st_size
    return total


def read_bandwidth(tessera_py):
    """2-thread read-only sweep over 1 GiB (Tessera's sum) and memcpy of 1 GiB (NumPy): the
    fastest of 7 and of 5 (what the machine can do; the noise of a shared host only slows)."""
    code = (
        "import time, numpy as np, tessera.core as mx\n"
        "x = mx.random.uniform(shape=(1 << 28,)); mx.eval(x)\n"
        "ts = []\n"
        "for _ in range(7):\n"
        "    t = time.perf_counter(); mx.eval(mx.sum(x)); ts.append(time.perf_counter() - t)\n"
        "a = np.ones(1 << 28, np.float32); b = np.empty_like(a); np.copyto(b, a)\n"
        "cs = []\n"
        "for _ in range(5):\n"
        "    t = time.perf_counter(); np.copyto(b, a); cs.append(time.perf_counter() - t)\n"
        "print((1 << 30) / min(ts) / 1e9, (1 << 30) / min(cs) / 1e9)\n")
    read, copy = sh([tessera_py, "-c", code], env=dict(os.environ, TESSERA_NUM_THREADS="2")).split()
    return float(read), float(copy)


def contenders(folders, gguf, have):
    out = [("Tessera", "bf16", "tessera", folders["bf16"]),
           ("Tessera", "4-bit", "tessera", folders["q4"])]
    if have["mlx"]:
        out += [("MLX", "bf16", "mlx", folders["bf16"]), ("MLX", "4-bit", "mlx", folders["q4"])]
    if have["torch"]:
        out += [("PyTorch", "bf16", "torch", folders["bf16"])]
    if have["llamacpp"] and gguf:
        out += [("llama.cpp", "bf16", "llamacpp", gguf["BF16"]),
                ("llama.cpp", "4-bit", "llamacpp", gguf["Q4_0"]),
                ("llama.cpp Q4_K_M", "4-bit", "llamacpp", gguf["Q4_K_M"])]
    return out


def run_contender(py, engine, model, prompt, decode, timeout):
    cmd = [py, os.path.abspath(__file__), "run-one", "--engine", engine, "--model", model,
           "--prompt", str(prompt), "--decode", str(decode)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TESSERA_NUM_THREADS="2", OMP_NUM_THREADS="2")
    t = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                       env=env)
    wall = time.perf_counter() - t
    line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    if r.returncode != 0 or line is None:
        raise RuntimeError(f"{engine} on {model} failed:\n{r.stderr[-2000:]}")
    return json.loads(line[7:]), wall


def fmt(values):
    if not values:
        return "—"
    med = statistics.median(values)
    return f"{med:.1f}" if len(values) == 1 else f"{med:.1f} ({min(values):.1f}–{max(values):.1f})"


def main(argv):
    if argv[:1] == ["run-one"]:
        return run_one(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--models", default="111m,1b")
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "bench-llm"))
    ap.add_argument("--tessera-python", default=os.path.join(ROOT, "build", "venv", "bin", "python"))
    ap.add_argument("--peer-python", default=os.path.join(ROOT, "build", "bench-venv", "bin", "python"))
    args = ap.parse_args(argv)
    start = time.perf_counter()
    have = {}
    for key, mod in (("mlx", "mlx_lm"), ("torch", "transformers, torch"), ("llamacpp", "llama_cpp")):
        have[key] = subprocess.run([args.peer_python, "-c", f"import {mod}"],
                                   capture_output=True).returncode == 0
        if not have[key]:
            print(f"[bench-llm] {key} is not installed in {args.peer_python}: its column is empty")
    walls = {}  # (who, precision) -> (seconds of one full run, weight bytes) on the last model
    for name in args.models.split(","):
        folders, gguf = prepare(name, args.cache, args.tessera_python, args.peer_python)
        # The bandwidth before and after this model's rounds (this machine's speed drifts over
        # minutes); the bound uses the larger.
        bw = [read_bandwidth(args.tessera_python)]
        print(f"{name}: read bandwidth (2 threads, 1 GiB sweep) {bw[0][0]:.1f} GB/s; memcpy 1 GiB "
              f"(1 thread) {bw[0][1]:.1f} GB/s\n", flush=True)
        runs = contenders(folders, gguf, have)
        results = {(who, prec): {"prefill": [], "decode": []} for who, prec, _, _ in runs}
        # A contender whose run, scaled from the previous model by weight bytes, would exceed
        # LONG_RUN_S runs the short form once.
        short, skipped, once = set(), {}, set()
        folder_of = lambda prec: folders["bf16" if prec == "bf16" else "q4"]
        for who, prec, _, _ in runs:
            if (who, prec) in walls:
                seconds, nbytes = walls[(who, prec)]
                est = seconds * weight_bytes(folder_of(prec)) / nbytes
                if est * 80 / (args.prompt + args.decode) > LONG_RUN_S:
                    skipped[(who, prec)] = est * 80 / (args.prompt + args.decode)
                elif est > LONG_RUN_S:
                    short.add((who, prec))
        for key, est in skipped.items():
            print(f"[bench-llm] {key[0]} {key[1]} on {name}: not run, even prompt 64 / decode 16 "
                  f"would take about {est / 60:.0f} min (scaled from the previous model)")
        for rnd in range(args.rounds):
            for who, prec, engine, model in runs:
                key = (who, prec)
                if key in skipped or (key in short and rnd > 0):
                    continue
                py = args.tessera_python if engine == "tessera" else args.peer_python
                p, d = (64, 16) if key in short else (args.prompt, args.decode)
                try:
                    try:
                        res, wall = run_contender(py, engine, model, p, d, timeout=2 * LONG_RUN_S)
                    except subprocess.TimeoutExpired:
                        if key in short:
                            raise
                        print(f"[bench-llm] {who} {prec} on {name}: over {2 * LONG_RUN_S} s; "
                              "the short form instead", flush=True)
                        short.add(key)
                        walls[key] = (2 * LONG_RUN_S, weight_bytes(folder_of(prec)))  # at least
                        res, wall = run_contender(py, engine, model, 64, 16, timeout=2 * LONG_RUN_S)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    print(f"[bench-llm] {who} {prec} on {name}: {e}", flush=True)
                    continue
                results[key]["prefill"].append(res["prefill"])
                results[key]["decode"].append(res["decode"])
                if key not in short:
                    walls[key] = (wall, weight_bytes(folder_of(prec)))
                    if wall > LONG_RUN_S:
                        short.add(key)  # one full round is enough of this one
                        once.add(key)
                print(f"  round {rnd + 1}: {who:17s} {prec:5s} prefill {res['prefill']:8.1f} "
                      f"decode {res['decode']:7.1f} tok/s ({wall:.0f} s)", flush=True)
        bw.append(read_bandwidth(args.tessera_python))
        print(f"\n{name}: read bandwidth after its rounds {bw[1][0]:.1f} GB/s; memcpy "
              f"{bw[1][1]:.1f} GB/s", flush=True)
        print_table(name, args, results, short - once, once, folders, max(b[0] for b in bw))
    print(f"\nmake bench-llm took {(time.perf_counter() - start) / 60:.1f} min")


def print_table(name, args, results, short, once, folders, read_bw):
    peers = [("llama.cpp", "llama.cpp"), ("PyTorch", "PyTorch"), ("MLX", "MLX")]
    print(f"\n### {name} model, {args.prompt}-token prompt, {args.decode} decoded tokens, 2 threads "
          f"(tok/s, median (min–max) of {args.rounds} interleaved rounds)\n")
    print("| phase | precision | Tessera | llama.cpp | llama.cpp Q4_K_M | PyTorch | MLX | "
          "Tessera / llama.cpp | / PyTorch | / MLX |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for phase in ("decode", "prefill"):
        for prec in ("bf16", "4-bit"):
            cell = lambda who: results.get((who, prec), {}).get(phase, [])
            t = cell("Tessera")
            row = [phase, prec + (" (g64)" if prec == "4-bit" else ""), fmt(t)]
            for who in ("llama.cpp", "llama.cpp Q4_K_M", "PyTorch", "MLX"):
                mark = " *" if (who, prec) in short else " †" if (who, prec) in once else ""
                row.append(fmt(cell(who)) + mark)
            for who, _ in peers:
                c = cell(who)
                row.append(f"{statistics.median(t) / statistics.median(c):.2f}×" if t and c else "—")
            print("| " + " | ".join(row) + " |")
    if short:
        print("\n\\* prompt 64, decode 16, one round: a full run would take over "
              f"{LONG_RUN_S // 60} minutes")
    if once:
        print(f"\n† one round: the run took over {LONG_RUN_S // 60} minutes")
    for prec, folder in (("bf16", folders["bf16"]), ("4-bit", folders["q4"])):
        nbytes = weight_bytes(folder)
        bound = read_bw * 1e9 / nbytes
        t = results.get(("Tessera", prec), {}).get("decode", [])
        share = f"; Tessera at {100 * statistics.median(t) / bound:.0f}% of it" if t else ""
        print(f"\nbound, {prec}: {nbytes / 1e6:.0f} MB of weights per token / {read_bw:.1f} GB/s "
              f"= {bound:.0f} tok/s{share}")


if __name__ == "__main__":
    main(sys.argv[1:])
