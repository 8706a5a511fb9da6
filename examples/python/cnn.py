"""A small convolutional classifier trained on scikit-learn's handwritten digits.

    python examples/python/cnn.py                       # 1 process
    python examples/python/cnn.py --epochs 5 --min-accuracy 0.9
    tessera launch -n 2 examples/python/cnn.py          # data parallel over 2 ranks

Two 3x3 convolutions with ReLU and 2x2 max pooling turn each 8x8 image into 2x2x32 features
and a linear layer maps them to the 10 classes. The data (1797 images, shipped inside
scikit-learn's wheel) is split 80/20 into training and test sets with a fixed seed. With
several ranks every rank trains on its slice of each global batch and the gradients are averaged
with ``nn.average_gradients``, as in data_parallel.py. The run exits with status 1 if the final
test accuracy is below ``--min-accuracy``.
"""

import argparse
import sys
import time
from functools import partial

import numpy as np

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim


class CNN(nn.Module):
    def __init__(self, channels=(16, 32), classes=10):
        super().__init__()
        c1, c2 = channels
        self.conv1 = nn.Conv2d(1, c1, kernel_size=3, padding=1)   # (N, 8, 8, c1)
        self.conv2 = nn.Conv2d(c1, c2, kernel_size=3, padding=1)  # (N, 4, 4, c2) after pooling
        self.pool = nn.MaxPool2d(kernel_size=2)
        self.head = nn.Linear(2 * 2 * c2, classes)

    def __call__(self, x):
        x = self.pool(nn.relu(self.conv1(x)))
        x = self.pool(nn.relu(self.conv2(x)))
        return self.head(x.reshape(x.shape[0], -1))


def load_data(seed):
    """Training and test images as (N, 8, 8, 1) float32 in [0, 1], labels as int32."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32, help="examples per rank per step")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-compile", action="store_true", help="run the training step eagerly")
    p.add_argument("--min-accuracy", type=float, default=0.9,
                   help="exit with status 1 if the final test accuracy is below this")
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
    model = CNN()
    mx.eval(model.parameters())
    optimizer = optim.Adam(learning_rate=args.lr)

    def loss_fn(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)

    def step(x, y):
        loss, grads = loss_and_grad(x, y)
        if size > 1:
            grads = nn.average_gradients(grads, group)
        optimizer.update(model, grads)
        return loss

    if not args.no_compile:
        state = [model.state, optimizer.state]
        step = partial(mx.compile, inputs=state, outputs=state)(step)

    x_test_mx = mx.array(x_test)
    steps_per_epoch = len(x_train) // global_batch
    log(f"{size} rank(s), {len(x_train)} training / {len(x_test)} test examples, global batch "
        f"{global_batch}, {steps_per_epoch} steps per epoch, "
        f"{'eager' if args.no_compile else 'compiled'} step")
    t_start = time.perf_counter()
    trained = 0
    accuracy = 0.0
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        order = np.random.default_rng([args.seed, epoch]).permutation(len(x_train))
        losses = []
        for s in range(steps_per_epoch):
            batch = order[s * global_batch:(s + 1) * global_batch]
            mine = batch[rank * args.batch_size:(rank + 1) * args.batch_size]
            loss = step(mx.array(x_train[mine]), mx.array(y_train[mine]))
            mx.eval(loss, model.parameters(), optimizer.state)
            losses.append(loss)
        trained += steps_per_epoch * global_batch
        seconds = time.perf_counter() - t0
        mean_loss = mx.mean(mx.stack(losses))
        if size > 1:
            mean_loss = mx.distributed.all_sum(mean_loss, group=group) / size
        pred = np.asarray(mx.argmax(model(x_test_mx), axis=1))
        accuracy = float((pred == y_test).mean())
        log(f"epoch {epoch + 1:3d}  loss {mean_loss.item():.4f}  test accuracy {accuracy:.4f}  "
            f"{steps_per_epoch * global_batch / seconds:8.0f} samples/s")

    elapsed = time.perf_counter() - t_start
    log(f"done: {trained} samples in {elapsed:.1f} s ({trained / max(elapsed, 1e-9):.0f} "
        f"samples/s), final test accuracy {accuracy:.4f}")
    if accuracy < args.min_accuracy:
        log(f"FAILED: the accuracy {accuracy:.4f} is below --min-accuracy {args.min_accuracy}")
        sys.exit(1)


if __name__ == "__main__":
    main()
