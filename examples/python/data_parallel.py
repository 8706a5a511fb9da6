"""Data-parallel training of an MLP on scikit-learn's handwritten digits.

    tessera launch -n 4 examples/python/data_parallel.py            # 4 ranks
    python examples/python/data_parallel.py                         # 1 process
    tessera launch -n 2 examples/python/data_parallel.py --checkpoint-every 20 --checkpoint-dir ck
    tessera launch -n 2 examples/python/data_parallel.py --checkpoint-dir ck --resume

Every rank holds the whole model and trains on its slice of each global batch; the gradients
are averaged with ``nn.average_gradients`` (one ``all_sum`` per bucket), so every rank takes the
same step and the weights stay equal (checked at the end). The data (1797 8x8 images, shipped
inside scikit-learn's wheel) is split 80/20 into training and test sets with a fixed seed.
"""

import argparse
import json
import os
import time

import numpy as np

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim
from tessera.utils import tree_flatten, tree_unflatten


class MLP(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.layers = [nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = nn.relu(layer(x))
        return self.layers[-1](x)


def load_data(seed):
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def batches_of_epoch(epoch, n_train, global_batch, seed):
    """The epoch's global batches of indices (a permutation from the seed and the epoch, so a
    resumed run sees the same batches); the last partial batch is dropped."""
    order = np.random.default_rng([seed, epoch]).permutation(n_train)
    return [order[i:i + global_batch] for i in range(0, n_train - global_batch + 1, global_batch)]


def save_checkpoint(directory, model, optimizer, step, group):
    if group.rank() != 0:
        return
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, "tmp")
    model.save_weights(tmp + ".model.safetensors")
    mx.save_safetensors(tmp + ".optimizer.safetensors", dict(tree_flatten(optimizer.state)))
    with open(tmp + ".json", "w") as f:
        json.dump({"step": step}, f)
    # Renamed last-to-first: a crash leaves either the old checkpoint or the new one whole.
    for suffix in (".model.safetensors", ".optimizer.safetensors", ".json"):
        os.replace(tmp + suffix, os.path.join(directory, "checkpoint" + suffix))


def load_checkpoint(directory, model, optimizer):
    base = os.path.join(directory, "checkpoint")
    with open(base + ".json") as f:
        step = json.load(f)["step"]
    model.load_weights(base + ".model.safetensors")
    optimizer.state = tree_unflatten(list(mx.load(base + ".optimizer.safetensors").items()))
    return step


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64, help="examples per rank per step")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2, help="hidden layers")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=0, help="steps (0: never)")
    p.add_argument("--checkpoint-dir", default="checkpoint")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint-dir")
    p.add_argument("--stop-after", type=int, default=0, help="stop after this step (tests)")
    p.add_argument("--save-final", default="", help="write the final weights here (rank 0)")
    args = p.parse_args()

    group = mx.distributed.init()
    rank, size = group.rank(), group.size()
    log = print if rank == 0 else (lambda *a, **k: None)

    x_train, y_train, x_test, y_test = load_data(args.seed)
    global_batch = args.batch_size * size
    if global_batch > len(x_train):
        raise SystemExit(f"--batch-size {args.batch_size} x {size} ranks exceeds the "
                         f"{len(x_train)} training examples")

    mx.random.seed(args.seed)  # the same initial weights on every rank
    model = MLP([64] + [args.hidden] * args.layers + [10])
    mx.eval(model.parameters())
    optimizer = optim.SGD(learning_rate=args.lr, momentum=args.momentum)

    def loss_fn(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)

    def step(x, y):
        loss, grads = loss_and_grad(x, y)
        grads = nn.average_gradients(grads, group)
        optimizer.update(model, grads)
        return loss

    start_step = 0
    if args.resume:
        start_step = load_checkpoint(args.checkpoint_dir, model, optimizer)
        log(f"resumed from step {start_step} ({args.checkpoint_dir})")

    x_test_mx, y_test_np = mx.array(x_test), y_test
    steps_per_epoch = len(batches_of_epoch(0, len(x_train), global_batch, args.seed))
    log(f"{size} rank(s), {len(x_train)} training / {len(x_test)} test examples, "
        f"global batch {global_batch}, {steps_per_epoch} steps per epoch")
    step_no = 0
    t_start = time.perf_counter()
    trained = 0
    accuracy = 0.0
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        losses = []
        for batch in batches_of_epoch(epoch, len(x_train), global_batch, args.seed):
            step_no += 1
            if step_no <= start_step:
                continue
            mine = batch[rank * args.batch_size:(rank + 1) * args.batch_size]
            loss = step(mx.array(x_train[mine]), mx.array(y_train[mine]))
            mx.eval(loss, model.parameters(), optimizer.state)
            losses.append(loss)
            trained += global_batch
            if args.checkpoint_every and step_no % args.checkpoint_every == 0:
                save_checkpoint(args.checkpoint_dir, model, optimizer, step_no, group)
            if args.stop_after and step_no >= args.stop_after:
                break
        if losses:
            mean_loss = mx.distributed.all_sum(mx.mean(mx.stack(losses)), group=group).item() / size
            pred = np.asarray(mx.argmax(model(x_test_mx), axis=1))
            accuracy = float((pred == y_test_np).mean())
            seconds = time.perf_counter() - t0
            log(f"epoch {epoch + 1:3d}  loss {mean_loss:.4f}  test accuracy {accuracy:.4f}  "
                f"{len(losses) * global_batch / seconds:9.0f} samples/s")
        if args.stop_after and step_no >= args.stop_after:
            break

    elapsed = time.perf_counter() - t_start
    # Every rank must hold the same weights: compare the bytes of all ranks' parameters.
    flat = mx.concatenate([v.reshape(-1) for _, v in tree_flatten(model.parameters())])
    every = np.asarray(mx.distributed.all_gather(flat.view(mx.uint32)[None], group=group))
    if not all(np.array_equal(every[0], every[r]) for r in range(size)):
        raise SystemExit(f"rank {rank}: the ranks' weights differ after training")
    log(f"done: {trained} samples in {elapsed:.1f} s ({trained / max(elapsed, 1e-9):.0f} samples/s), "
        f"final test accuracy {accuracy:.4f}, weights equal on all {size} rank(s)")
    if args.save_final and rank == 0:
        model.save_weights(args.save_final)


if __name__ == "__main__":
    main()
