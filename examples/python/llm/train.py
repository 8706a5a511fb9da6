"""Train a small Llama-architecture language model on the Python standard library's sources,
data-parallel over the ranks of ``tessera launch``; checkpoint, resume, plot, and generate.

    tessera launch -n 4 examples/python/llm/train.py --run-dir runs/llm --resume   # make demo
    python examples/python/llm/train.py --run-dir runs/llm                        # 1 process

Phases (each timed): the data (a BPE tokenizer trained on the corpus and the tokenized corpus,
cached in --cache-dir), the model (tessera.nn, mlx-lm's layout), training (AdamW with linear
warm-up and cosine decay, gradient clipping, ``nn.average_gradients`` across ranks; float32:
this CPU has no fast half-precision training path and float32 needs no loss scaling), then on
rank 0 a loss-curve PNG and completions of Python prompts from the final checkpoint through
mlx-lm's own ``load`` and ``generate``.

The run folder (--run-dir) holds ``checkpoints/step-NNNNNN`` (each one loads in ``mlx_lm.load``
as it is, plus ``training_state.safetensors``), ``latest`` (a link to the newest checkpoint,
replaced atomically), ``metrics.jsonl``, ``loss.png`` and, once the run is done, ``finished``.
With --resume (or TESSERA_RESTART_COUNT > 0, when the launcher restarts a job) an unfinished run
continues from its latest checkpoint; a finished run, or any run without --resume, is moved
aside to ``<run-dir>-<time>`` and a new one starts, so nothing is lost.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import data  # noqa: E402
import model as llama  # noqa: E402

import tessera.core as mx  # noqa: E402
import tessera.nn as nn  # noqa: E402
import tessera.optimizers as optim  # noqa: E402
from tessera.utils import tree_flatten, tree_unflatten  # noqa: E402

PROMPTS = ["def fibonacci(n):", "import os\n\n\ndef ", "class Stack:\n    def __init__(self"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--run-dir", default="runs/llm", help="the run's folder (checkpoints, metrics, plot)")
    a("--cache-dir", default="", help="tokenizer and token cache (default: <run-dir>/../cache)")
    a("--resume", action="store_true", help="continue the unfinished run in --run-dir")
    a("--vocab", type=int, default=4096, help="BPE vocabulary size")
    a("--max-corpus-mb", type=float, default=0, help="use only the first files, up to this "
      "many MB (0: the whole standard library)")
    a("--hidden", type=int, default=256)
    a("--layers", type=int, default=6)
    a("--heads", type=int, default=4)
    a("--kv-heads", type=int, default=4)
    a("--mlp", type=int, default=768)
    a("--seq-len", type=int, default=256)
    a("--batch", type=int, default=2, help="sequences per rank per step")
    a("--steps", type=int, default=300)
    a("--lr", type=float, default=2e-3, help="peak learning rate")
    a("--warmup", type=int, default=None,
      help="steps of linear warm-up (default: 20, at most a tenth of --steps)")
    a("--min-lr", type=float, default=2e-4, help="the cosine decay's end")
    a("--weight-decay", type=float, default=0.1)
    a("--clip", type=float, default=1.0, help="global gradient norm limit")
    a("--eval-every", type=int, default=25, help="steps between validation losses")
    a("--eval-sequences", type=int, default=64, help="validation sequences (fixed)")
    a("--checkpoint-every", type=int, default=50)
    a("--keep-checkpoints", type=int, default=2, help="checkpoints kept (the newest)")
    a("--seed", type=int, default=0)
    a("--stop-after", type=int, default=0,
      help="stop (unfinished) after this step, as an interrupted run would (tests)")
    a("--max-new-tokens", type=int, default=48)
    a("--no-generate", action="store_true", help="skip the completions at the end")
    a("--require-margin", type=float, default=1.0, help="fail unless the final validation "
      "loss is this many nats below the validation tokens' unigram entropy (negative: never)")
    args = p.parse_args(argv)
    for name in ("vocab", "hidden", "layers", "heads", "kv_heads", "mlp", "seq_len", "batch",
                 "steps", "eval_every", "eval_sequences", "checkpoint_every", "keep_checkpoints"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.hidden % args.heads or args.heads % args.kv_heads:
        p.error(f"--hidden ({args.hidden}) must be a multiple of --heads ({args.heads}) and "
                f"--heads of --kv-heads ({args.kv_heads})")
    if args.warmup is None:
        args.warmup = min(20, args.steps // 10)
    if not 0 <= args.warmup < args.steps:
        p.error(f"--warmup ({args.warmup}) must be at least 0 and below --steps ({args.steps})")
    if args.vocab < 300:
        p.error(f"--vocab must be at least 300 (256 bytes and the special tokens), got {args.vocab}")
    args.cache_dir = args.cache_dir or os.path.join(os.path.dirname(os.path.abspath(args.run_dir)),
                                                    "cache")
    return args


class Progress:
    """Rank 0's progress: one line rewritten in place on a terminal (the launcher says whether
    its own output is one: TESSERA_LAUNCH_TTY), a plain line per report otherwise."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.tty = enabled and (sys.stdout.isatty() or os.environ.get("TESSERA_LAUNCH_TTY") == "1")
        self.open = False

    def update(self, text, keep=False):
        """Redraws the line on a terminal; a line to keep (a validation) stays on the screen,
        and is the only kind printed when the output is not a terminal."""
        if not self.enabled:
            return
        if self.tty:
            sys.stdout.write(text + ("\x1b[K\n" if keep else "\x1b[K\r"))
            self.open = not keep
        elif keep:
            sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def print(self, text=""):
        if not self.enabled:
            return
        if self.open:
            sys.stdout.write("\x1b[K")
            self.open = False
        print(text, flush=True)


def hms(seconds):
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# --- the run folder ----------------------------------------------------------------------------

def prepare_run_dir(args, rank, group):
    """Rank 0 decides whether the run continues or starts anew (moving an old run aside); then
    every rank returns the checkpoint to load, or None."""
    resume = args.resume or int(os.environ.get("TESSERA_RESTART_COUNT", "0") or 0) > 0
    decision = np.zeros(1, np.int32)
    if rank == 0:
        run = args.run_dir
        if os.path.isdir(run):
            finished = os.path.exists(os.path.join(run, "finished"))
            if finished or not resume:
                stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(os.path.getmtime(run)))
                aside = f"{run.rstrip(os.sep)}-{stamp}"
                n = 1
                while os.path.exists(aside):
                    n += 1
                    aside = f"{run.rstrip(os.sep)}-{stamp}-{n}"
                os.rename(run, aside)
                why = "finished" if finished else "unfinished; --resume continues a run"
                print(f"run: the previous run in {run} ({why}) is kept as {aside}", flush=True)
            else:
                decision[0] = 1
        os.makedirs(os.path.join(run, "checkpoints"), exist_ok=True)
    decision = np.asarray(mx.distributed.all_sum(mx.array(decision), group=group))
    latest = os.path.join(args.run_dir, "latest")
    if decision[0] and os.path.exists(latest):
        return os.path.realpath(latest)
    return None


def save_checkpoint(args, model, optimizer, corpus, step, positions, rank, group):
    """Every rank sends its data position; rank 0 writes the folder under a temporary name,
    renames it, then replaces ``latest``."""
    positions = np.asarray(mx.distributed.all_gather(mx.array(positions, mx.int64)[None],
                                                     group=group))
    if rank != 0:
        return None
    name = f"step-{step:06d}"
    final = os.path.join(args.run_dir, "checkpoints", name)
    tmp = os.path.join(args.run_dir, "checkpoints", f".{name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    cfg = model.config.to_hf(corpus.tokenizer.token_to_id("<s>"),
                             corpus.tokenizer.token_to_id("</s>"))
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    model.save_weights(os.path.join(tmp, "model.safetensors"))
    for path in corpus.tokenizer_files():
        shutil.copy(path, tmp)
    state = {"optimizer." + k: v for k, v in tree_flatten(optimizer.state)}
    state["step"] = mx.array(step, mx.int64)
    state["data_positions"] = mx.array(positions, mx.int64)  # (world, 2): epoch, next batch
    state["random_state"] = mx.random.state[0]
    meta = {"world_size": str(group.size()), "seed": str(args.seed),
            "seq_len": str(args.seq_len), "batch": str(args.batch)}
    mx.save_safetensors(os.path.join(tmp, "training_state.safetensors"), state, metadata=meta)
    if os.path.exists(final):
        shutil.rmtree(final)
    os.rename(tmp, final)
    link = os.path.join(args.run_dir, "latest")
    tmp_link = link + ".tmp"
    if os.path.lexists(tmp_link):
        os.remove(tmp_link)
    os.symlink(os.path.join("checkpoints", name), tmp_link)
    os.replace(tmp_link, link)
    folder = os.path.join(args.run_dir, "checkpoints")
    for old in sorted(n for n in os.listdir(folder) if n.startswith("step-"))[:-args.keep_checkpoints]:
        shutil.rmtree(os.path.join(folder, old))
    return final


def load_checkpoint(path, args, model, optimizer, rank, world):
    state, meta = mx.load(os.path.join(path, "training_state.safetensors"), return_metadata=True)
    for key, want in (("world_size", world), ("seq_len", args.seq_len), ("batch", args.batch),
                      ("seed", args.seed)):
        if int(meta[key]) != want:
            raise SystemExit(f"{path} was written with {key} {meta[key]}, this run has {want}: "
                             f"the data order depends on it; resume with the same value or "
                             f"start a new run (without --resume)")
    model.load_weights(os.path.join(path, "model.safetensors"))
    optimizer.state = tree_unflatten([(k[len("optimizer."):], v) for k, v in state.items()
                                      if k.startswith("optimizer.")])
    mx.random.state[0] = state["random_state"]
    positions = np.asarray(state["data_positions"])
    return int(state["step"].item()), (int(positions[rank, 0]), int(positions[rank, 1]))


class Metrics:
    """metrics.jsonl: one line per step (and per validation), rank 0 only; on resume the lines
    past the checkpoint's step are dropped, since those steps run again."""

    def __init__(self, path, enabled, resume_step):
        self.path, self.enabled = path, enabled
        self.rows = []
        if enabled and os.path.exists(path):
            with open(path) as f:
                self.rows = [r for r in map(json.loads, f) if r["step"] <= resume_step]
            with open(path, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in self.rows)

    def add(self, **row):
        if not self.enabled:
            return
        self.rows.append(row)
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")


def plot(metrics, entropy, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(r["tokens"], r["loss"]) for r in metrics if "loss" in r]
    val = [(r["tokens"], r["val_loss"]) for r in metrics if "val_loss" in r]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if train:
        ax.plot(*zip(*train), label="training loss", color="tab:blue", alpha=0.8)
    if val:
        ax.plot(*zip(*val), "o-", label="validation loss", color="tab:orange")
    ax.axhline(entropy, ls="--", color="gray", label=f"unigram entropy ({entropy:.2f})")
    ax.set_xlabel("tokens seen")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title("Llama decoder on the Python standard library")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def generate(checkpoint, prompts, max_tokens, seed):
    """Completions through mlx-lm's own Python API, on Tessera (tessera.mlx stands in for MLX):
    sampled at temperature 0.6 (top-p 0.95) with a repetition penalty, since greedy decoding of
    a model this small repeats itself; seeded, so a run's completions are reproducible."""
    import tessera.mlx

    tessera.mlx.install()
    from mlx_lm import generate as lm_generate
    from mlx_lm import load
    from mlx_lm.sample_utils import make_logits_processors, make_sampler

    lm, tokenizer = load(checkpoint)
    texts = []
    for prompt in prompts:
        mx.random.seed(seed)
        texts.append(lm_generate(
            lm, tokenizer, prompt=prompt, max_tokens=max_tokens, verbose=False,
            sampler=make_sampler(temp=0.6, top_p=0.95),
            logits_processors=make_logits_processors(repetition_penalty=1.3,
                                                     repetition_context_size=32)))
    return texts


# --- training ----------------------------------------------------------------------------------

def main(argv=None):
    args = parse_args(argv)
    t_all = time.perf_counter()
    group = mx.distributed.init()
    rank, world = group.rank(), group.size()
    out = Progress(rank == 0)
    phases = {}

    t0 = time.perf_counter()
    # Rank 0 builds the cache on a first run while the others wait, then they read it.
    if rank == 0:
        corpus = data.prepare(args.cache_dir, args.vocab, args.max_corpus_mb, log=out.print)
    mx.eval(mx.distributed.all_sum(mx.array(0), group=group))
    if rank != 0:
        corpus = data.prepare(args.cache_dir, args.vocab, args.max_corpus_mb)
    entropy = data.unigram_entropy(corpus.validation, corpus.vocab_size)
    phases["data"] = time.perf_counter() - t0
    out.print(f"data: {len(corpus.files)} files of the Python {sys.version.split()[0]} standard "
              f"library, {len(corpus.train):,} training / {len(corpus.validation):,} validation "
              f"tokens, vocabulary {corpus.vocab_size} ({'cached' if corpus.cached else 'built'}, "
              f"{phases['data']:.1f} s)")

    t0 = time.perf_counter()
    checkpoint = prepare_run_dir(args, rank, group)
    cfg = llama.Config(vocab_size=corpus.vocab_size, hidden_size=args.hidden,
                       num_hidden_layers=args.layers, num_attention_heads=args.heads,
                       num_key_value_heads=args.kv_heads, intermediate_size=args.mlp,
                       max_position_embeddings=max(1024, args.seq_len))
    model = llama.Llama(cfg)
    llama.init_weights(model, args.seed)  # the same weights on every rank
    warm = optim.linear_schedule(args.lr / max(args.warmup, 1), args.lr, max(args.warmup, 1))
    cosine = optim.cosine_decay(args.lr, args.steps - args.warmup, args.min_lr)
    schedule = optim.join_schedules([warm, cosine], [args.warmup]) if args.warmup else cosine
    optimizer = optim.AdamW(learning_rate=schedule, betas=[0.9, 0.95],
                            weight_decay=args.weight_decay)
    shards = data.Shards(corpus.train, args.seq_len, args.batch, rank, world, args.seed)
    step, position = 0, (0, 0)
    if checkpoint:
        step, position = load_checkpoint(checkpoint, args, model, optimizer, rank, world)
    mx.eval(model.parameters(), optimizer.state)
    phases["model"] = time.perf_counter() - t0
    n_params = llama.parameter_count(model)
    tokens_per_step = args.batch * world * args.seq_len
    out.print(f"model: Llama decoder, {n_params / 1e6:.2f} M parameters (hidden {args.hidden}, "
              f"{args.layers} layers, {args.heads} heads, MLP {args.mlp}, tied embeddings), "
              f"float32")
    out.print(f"training: {world} rank(s) x {args.batch} sequences x {args.seq_len} tokens = "
              f"{tokens_per_step:,} tokens per step, {args.steps} steps "
              f"({shards.batches_per_epoch} per epoch), AdamW lr {args.lr:g} "
              f"(warm-up {args.warmup}, cosine to {args.min_lr:g}), clip {args.clip:g}")
    if checkpoint:
        out.print(f"run: resumed from {checkpoint} (step {step})")
    metrics = Metrics(os.path.join(args.run_dir, "metrics.jsonl"), rank == 0, step)

    def loss_fn(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    val_x, val_y = data.validation_batches(corpus.validation, args.seq_len,
                                           args.eval_sequences, rank, world)
    n_val = min(args.eval_sequences, (len(corpus.validation) - 1) // args.seq_len) * args.seq_len

    def validation_loss():
        total = mx.array(0.0)
        for i in range(0, len(val_x), args.batch):
            logits = model(mx.array(val_x[i:i + args.batch]))
            total = total + nn.losses.cross_entropy(logits, mx.array(val_y[i:i + args.batch]),
                                                    reduction="sum")
            mx.eval(total)
        return mx.distributed.all_sum(total, group=group).item() / n_val

    def train_step(x, y):
        loss, grads = loss_and_grad(x, y)
        grads = nn.average_gradients(grads, group)
        grads, norm = optim.clip_grad_norm(grads, args.clip)
        optimizer.update(model, grads)
        return mx.distributed.all_sum(loss, group=group) / world, norm

    t0 = time.perf_counter()
    first_step, val = step, None
    times = []
    if step == 0:  # where the curve starts
        val = validation_loss()
        metrics.add(step=0, tokens=0, val_loss=val)
    while step < args.steps:
        t_step = time.perf_counter()
        x, y = shards.batch_at(*position)
        loss, norm = train_step(mx.array(x), mx.array(y))
        mx.eval(loss, norm, model.parameters(), optimizer.state)
        step += 1
        position = shards.next_position(*position)
        times.append(time.perf_counter() - t_step)
        loss = loss.item()
        if not math.isfinite(loss):
            raise SystemExit(f"rank {rank}: the loss is {loss} at step {step}; lower --lr "
                             f"(now {args.lr:g})")
        row = dict(step=step, tokens=step * tokens_per_step, loss=loss,
                   lr=float(optimizer.learning_rate.item()), grad_norm=float(norm.item()))
        if step % args.eval_every == 0 or step == args.steps:
            val = validation_loss()
            row["val_loss"] = val
        metrics.add(**row)
        recent = sorted(times[-10:])[len(times[-10:]) // 2]
        tok_s = tokens_per_step / recent
        eta = (args.steps - step) * recent
        val_text = f"{val:.3f}" if val is not None else "-"
        out.update(f"step {step:4d}/{args.steps} | {tok_s:7,.0f} tok/s | loss {loss:.3f} | "
                   f"val {val_text} | ETA {hms(eta)}", keep="val_loss" in row)
        if step % args.checkpoint_every == 0 or step == args.steps:
            save_checkpoint(args, model, optimizer, corpus, step, position, rank, group)
        if args.stop_after and step >= args.stop_after and step < args.steps:
            out.print(f"stopped after step {step} (--stop-after); resume with --resume")
            return 0
    phases["training"] = time.perf_counter() - t0
    trained = (step - first_step) * tokens_per_step
    out.print(f"trained {step - first_step} steps, {trained:,} tokens in "
              f"{phases['training']:.1f} s ({trained / max(phases['training'], 1e-9):,.0f} "
              f"tokens/s; {step * tokens_per_step:,} tokens seen in all)")

    # Every rank must hold the same weights: an exact checksum of their bits from each rank.
    flat = mx.concatenate([v.reshape(-1) for _, v in tree_flatten(model.parameters())])
    checksum = mx.sum(flat.view(mx.uint32).astype(mx.uint64))
    sums = mx.distributed.all_gather(checksum[None], group=group)
    if len(set(np.asarray(sums).tolist())) != 1:
        raise SystemExit(f"rank {rank}: the ranks' weights differ after training")
    if rank != 0:
        return 0

    final_val = val if val is not None else validation_loss()
    margin = entropy - final_val
    checkpoint = os.path.realpath(os.path.join(args.run_dir, "latest"))
    t0 = time.perf_counter()
    plot(metrics.rows, entropy, os.path.join(args.run_dir, "loss.png"))
    phases["plot"] = time.perf_counter() - t0
    out.print(f"validation loss {final_val:.3f} nats/token; unigram entropy of the validation "
              f"tokens {entropy:.3f}: {margin:.2f} nats better than a model without context")
    out.print(f"checkpoint: {checkpoint} (loads with mlx_lm.load); loss curve: "
              f"{os.path.join(args.run_dir, 'loss.png')}")
    if not args.no_generate:
        t0 = time.perf_counter()
        texts = generate(checkpoint, PROMPTS, args.max_new_tokens, args.seed)
        for prompt, text in zip(PROMPTS, texts):
            out.print("-" * 72)
            out.print((prompt + text).rstrip())
        out.print("-" * 72)
        phases["generation"] = time.perf_counter() - t0
    with open(os.path.join(args.run_dir, "finished"), "w") as f:
        json.dump({"step": step, "val_loss": final_val, "unigram_entropy": entropy}, f)
    phases["total"] = time.perf_counter() - t_all
    out.print("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
    if args.require_margin >= 0 and margin < args.require_margin:
        out.print(f"FAILED: the validation loss is only {margin:.2f} nats below the unigram "
                  f"entropy; at least {args.require_margin:g} is required (train longer: --steps)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
