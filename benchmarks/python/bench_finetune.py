"""Fine-tuning step time (a table of `make bench-llm`): `mlx_lm.lora` on Tessera (LoRA with
mlx-lm's default adapter, and `--fine-tune-type full`) against PyTorch + PEFT doing the same, on
the 111 M model of bench_llm.py, batches of 4 × 256 tokens of real text, bf16 base weights,
2 threads.

    python benchmarks/python/bench_finetune.py [--steps 10] [--warmup 3] [--rounds 2] [--mlx]

mlx-lm's defaults, applied identically in PEFT: adapters of rank 8 and scale 20 (PEFT's
lora_alpha = 160) with no dropout on every linear layer (q, k, v, o, gate, up, down) of the last
16 blocks, float32 adapter weights, Adam (lr 1e-5); full fine-tuning trains every parameter of
the last 16 blocks. The loss is the mean token cross entropy of the bf16 logits. Tessera runs the
`mlx_lm.lora` command itself (`python -m tessera.mlx -m mlx_lm lora`, one report per step; its
tokens per second give the step time); PyTorch's step is forward, backward and Adam, timed
around each step. The first --warmup steps (tracing, compilation, first allocations) are left
out; a cell is the median step over all rounds. --mlx adds MLX's CPU backend (slow: minutes per
step).
"""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

BATCH, SEQ = 4, 256
LORA_LAYERS, RANK, SCALE = 16, 8, 20.0
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def write_data(folder, records=64, chars=4000):
    """train.jsonl: `records` texts of `chars` characters from this Python's standard library
    (each is well over SEQ + 1 tokens, so every batch is BATCH x (SEQ + 1) after truncation)."""
    os.makedirs(folder, exist_ok=True)
    text = ""
    for path in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            text += f.read()
        if len(text) > records * chars:
            break
    with open(os.path.join(folder, "train.jsonl"), "w") as f:
        for i in range(records):
            f.write(json.dumps({"text": text[i * chars:(i + 1) * chars]}) + "\n")


# ---- PyTorch + PEFT, one process ------------------------------------------------------------

def run_torch(model_dir, data_dir, mode, steps, warmup):
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(model_dir)
    texts = [json.loads(l)["text"] for l in open(os.path.join(data_dir, "train.jsonl"))]
    seqs = []
    for t in texts:
        ids = tok(t)["input_ids"]
        if tok.eos_token_id is not None:
            ids = ids + [tok.eos_token_id]
        if len(ids) < SEQ + 1:
            raise RuntimeError(f"a text gives {len(ids)} tokens, fewer than {SEQ + 1}")
        seqs.append(ids[:SEQ + 1])
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    n_layers = model.config.num_hidden_layers
    first = n_layers - LORA_LAYERS
    if mode == "lora":
        from peft import LoraConfig, get_peft_model

        cfg = LoraConfig(r=RANK, lora_alpha=RANK * SCALE, lora_dropout=0.0, bias="none",
                         target_modules=TARGETS, layers_to_transform=list(range(first, n_layers)))
        model = get_peft_model(model, cfg)  # adapters in float32 (autocast_adapter_dtype)
    else:
        for name, p in model.named_parameters():
            m = re.search(r"layers\.(\d+)\.", name)
            p.requires_grad_(m is not None and int(m.group(1)) >= first)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-5)
    times = []
    for i in range(warmup + steps):
        batch = torch.tensor([seqs[(i * BATCH + j) % len(seqs)] for j in range(BATCH)])
        t = time.perf_counter()
        logits = model(input_ids=batch[:, :-1]).logits
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    return {"step_s": times[warmup:], "trainable": sum(p.numel() for p in params),
            "loss": float(loss)}


# ---- mlx_lm.lora on Tessera or MLX ----------------------------------------------------------

REPORT = re.compile(r"^\s*(\d+)\s+([0-9.]+) [▼▲]\s+([0-9,]+)\s+([0-9.]+)k\s*$")


def run_mlx_lora(py, engine, model_dir, data_dir, mode, steps, warmup, timeout):
    with tempfile.TemporaryDirectory() as adapters:
        cmd = [py, "-m", "tessera.mlx"] if engine == "tessera" else [py]
        cmd += ["-m", "mlx_lm", "lora", "--model", model_dir, "--train", "--data", data_dir,
                "--iters", str(warmup + steps), "--batch-size", str(BATCH), "--max-seq-length",
                str(SEQ + 1), "--steps-per-report", "1", "--save-every", "1000000",
                "--adapter-path", adapters]
        if mode == "full":
            cmd += ["--fine-tune-type", "full"]
        env = dict(os.environ, HF_HUB_OFFLINE="1", TESSERA_NUM_THREADS="2", OMP_NUM_THREADS="2")
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"mlx_lm.lora on {engine} failed:\n{r.stderr[-2000:]}")
    rows = []
    for line in r.stdout.splitlines():
        m = REPORT.match(re.sub(r"\x1b\[[0-9;]*m", "", line))
        if m:
            rows.append((int(m.group(1)), float(m.group(2)), float(m.group(3).replace(",", ""))))
    if len(rows) != warmup + steps:
        raise RuntimeError(f"expected {warmup + steps} report lines from mlx_lm.lora on {engine}, "
                           f"found {len(rows)}:\n{r.stdout[-2000:]}")
    return {"step_s": [BATCH * SEQ / tps for _, _, tps in rows[warmup:]], "loss": rows[-1][1]}


# ---- the orchestration ---------------------------------------------------------------------

def run_worker(py, argv, timeout):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TESSERA_NUM_THREADS="2", OMP_NUM_THREADS="2")
    r = subprocess.run([py, os.path.abspath(__file__), "run-torch", *argv], capture_output=True,
                       text=True, env=env, timeout=timeout)
    line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    if r.returncode != 0 or line is None:
        raise RuntimeError(f"PyTorch failed:\n{r.stderr[-2000:]}")
    return json.loads(line[7:])


def main(argv):
    if argv[:1] == ["run-torch"]:
        model_dir, data_dir, mode, steps, warmup = argv[1:6]
        print("RESULT " + json.dumps(run_torch(model_dir, data_dir, mode, int(steps), int(warmup))),
              flush=True)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mlx", action="store_true", help="add MLX's CPU backend (minutes per step)")
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "bench-llm"))
    ap.add_argument("--tessera-python", default=os.path.join(ROOT, "build", "venv", "bin", "python"))
    ap.add_argument("--peer-python", default=os.path.join(ROOT, "build", "bench-venv", "bin", "python"))
    args = ap.parse_args(argv)
    import bench_llm

    folders, _ = bench_llm.prepare("111m", args.cache, args.tessera_python, args.peer_python)
    model_dir = folders["bf16"]
    data_dir = os.path.join(args.cache, "finetune-data")
    if not os.path.exists(os.path.join(data_dir, "train.jsonl")):
        write_data(data_dir)
    have = {k: subprocess.run([args.peer_python, "-c", f"import {m}"], capture_output=True).returncode == 0
            for k, m in (("torch", "torch, transformers, peft"), ("mlx", "mlx_lm"))}
    if not have["torch"]:
        print(f"[bench-finetune] torch, transformers or peft is not installed in {args.peer_python}: "
              "its column is empty")
    engines = [("Tessera", "tessera")] + ([("PyTorch + PEFT", "torch")] if have["torch"] else [])
    if args.mlx and have["mlx"]:
        engines.append(("MLX", "mlx"))
    steps = {}
    timeout = 3600
    for rnd in range(args.rounds):
        for mode in ("lora", "full"):
            for who, engine in engines:
                try:
                    if engine == "torch":
                        res = run_worker(args.peer_python, [model_dir, data_dir, mode, str(args.steps),
                                                            str(args.warmup)], timeout)
                    else:
                        py = args.tessera_python if engine == "tessera" else args.peer_python
                        n = args.steps if engine == "tessera" else 2
                        w = args.warmup if engine == "tessera" else 1
                        res = run_mlx_lora(py, engine, model_dir, data_dir, mode, n, w, timeout)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    print(f"[bench-finetune] {who} {mode}: {e}", flush=True)
                    continue
                steps.setdefault((who, mode), []).extend(res["step_s"])
                print(f"  round {rnd + 1}: {who:15s} {mode:4s} median step "
                      f"{statistics.median(res['step_s']):.2f} s, last loss {res['loss']:.3f}", flush=True)
        if args.mlx:
            engines = [e for e in engines if e[1] != "mlx"]  # one round of MLX is enough
    print(f"\n### Fine-tuning step, 111 M model, batch {BATCH} × {SEQ} tokens, bf16 weights, "
          f"2 threads (median of {args.rounds} × {args.steps} steps after {args.warmup} warm-up)\n")
    print("| fine-tuning | Tessera (mlx_lm.lora) | PyTorch + PEFT | MLX | Tessera tok/s | "
          "Tessera / PyTorch |")
    print("|---|---|---|---|---|---|")
    for mode, label in (("lora", f"LoRA (rank {RANK}, last {LORA_LAYERS} blocks, 7 projections)"),
                        ("full", f"full (last {LORA_LAYERS} blocks)")):
        cell = lambda who: steps.get((who, mode), [])
        t, p, m = cell("Tessera"), cell("PyTorch + PEFT"), cell("MLX")
        f = lambda v: f"{statistics.median(v) * 1e3:.0f} ms" if v else "—"
        tps = f"{BATCH * SEQ / statistics.median(t):.0f}" if t else "—"
        ratio = f"{statistics.median(p) / statistics.median(t):.2f}×" if t and p else "—"
        print(f"| {label} | {f(t)} | {f(p)} | {f(m)}{' (2 steps)' if m else ''} | {tps} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
