"""Tensor-parallel training of a small character-level transformer language model.

    tessera launch -n 2 examples/python/tensor_parallel.py       # 2 ranks (or -n 4)
    python examples/python/tensor_parallel.py                     # the same model in 1 process

The text is the Python standard library's own sources (every machine with Python has them).
Each attention block's query / key / value projections and each MLP's first projection are
sharded by output (``nn.shard_linear(..., "all-to-sharded")``: a rank computes its heads and its
slice of the hidden units), the attention output and the MLP's second projection by input
(``"sharded-to-all"``: partial products summed with ``all_sum``). Every rank sees the same batch,
so every rank computes the same loss; on N ranks it equals the 1-process loss up to rounding.
"""

import argparse
import glob
import math
import os
import time

import numpy as np

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim
from tessera.utils import tree_flatten


def load_text(max_chars):
    """Characters of the standard library's sources (files in name order), as byte codes < 128."""
    root = os.path.dirname(os.__file__)
    chunks, total = [], 0
    for path in sorted(glob.glob(os.path.join(root, "*.py"))):
        with open(path, "rb") as f:
            data = f.read()
        chunks.append(data)
        total += len(data)
        if total >= max_chars:
            break
    codes = np.frombuffer(b"".join(chunks)[:max_chars], dtype=np.uint8)
    return np.minimum(codes, 127).astype(np.int32)


class Block(nn.Module):
    def __init__(self, dims, heads, group):
        super().__init__()
        n = group.size()
        if heads % n:
            raise SystemExit(f"{heads} attention heads cannot be split over {n} ranks")
        self.local_heads = heads // n
        self.head_dims = dims // heads
        self.norm1 = nn.LayerNorm(dims)
        self.norm2 = nn.LayerNorm(dims)
        # Dense layers made first (the same initial weights on every rank), then sharded.
        self.q = nn.shard_linear(nn.Linear(dims, dims, bias=False), "all-to-sharded", group=group)
        self.k = nn.shard_linear(nn.Linear(dims, dims, bias=False), "all-to-sharded", group=group)
        self.v = nn.shard_linear(nn.Linear(dims, dims, bias=False), "all-to-sharded", group=group)
        self.out = nn.shard_linear(nn.Linear(dims, dims, bias=False), "sharded-to-all", group=group)
        self.up = nn.shard_linear(nn.Linear(dims, 4 * dims), "all-to-sharded", group=group)
        self.down = nn.shard_linear(nn.Linear(4 * dims, dims), "sharded-to-all", group=group)

    def __call__(self, x, mask):
        b, t, _ = x.shape
        h = self.norm1(x)

        def heads(y):
            return y.reshape(b, t, self.local_heads, self.head_dims).transpose(0, 2, 1, 3)

        q, k, v = heads(self.q(h)), heads(self.k(h)), heads(self.v(h))
        a = mx.fast.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(self.head_dims), mask=mask)
        x = x + self.out(a.transpose(0, 2, 1, 3).reshape(b, t, -1))
        return x + self.down(nn.gelu(self.up(self.norm2(x))))


class CharLM(nn.Module):
    def __init__(self, vocab, dims, heads, layers, context, group):
        super().__init__()
        self.embed = nn.Embedding(vocab, dims)
        self.pos = nn.Embedding(context, dims)
        self.blocks = [Block(dims, heads, group) for _ in range(layers)]
        self.norm = nn.LayerNorm(dims)
        self.head = nn.Linear(dims, vocab)

    def __call__(self, tokens):
        t = tokens.shape[1]
        x = self.embed(tokens) + self.pos(mx.arange(t))
        mask = nn.MultiHeadAttention.create_additive_causal_mask(t)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--dims", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chars", type=int, default=400_000)
    p.add_argument("--print-every", type=int, default=10)
    args = p.parse_args()

    group = mx.distributed.init()
    rank = group.rank()
    log = print if rank == 0 else (lambda *a, **k: None)
    text = load_text(args.chars)
    mx.random.seed(args.seed)
    model = CharLM(128, args.dims, args.heads, args.layers, args.context, group)
    mx.eval(model.parameters())
    optimizer = optim.SGD(learning_rate=args.lr, momentum=0.9)

    def loss_fn(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    rng = np.random.default_rng(args.seed)  # the same batches on every rank
    n_params = sum(v.size for _, v in tree_flatten(model.parameters()))
    log(f"{group.size()} rank(s), {len(text)} characters of the standard library, "
        f"{n_params} parameters on this rank")
    t0 = time.perf_counter()
    loss = None
    for step in range(1, args.steps + 1):
        starts = rng.integers(0, len(text) - args.context - 1, args.batch)
        window = np.stack([text[s:s + args.context + 1] for s in starts])
        x, y = mx.array(window[:, :-1]), mx.array(window[:, 1:])
        loss, grads = loss_and_grad(x, y)
        optimizer.update(model, grads)
        mx.eval(loss, model.parameters(), optimizer.state)
        if step % args.print_every == 0 or step == 1:
            log(f"step {step:4d}  loss {loss.item():.6f}  {step * args.batch * args.context / (time.perf_counter() - t0):8.0f} tokens/s")
    log(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
