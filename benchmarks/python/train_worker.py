"""One rank of `make bench-train`: an MLP (64-512-512-10) trained with SGD on one fixed batch of
synthetic data (256 examples per rank, the same on every framework), in one framework:

    train_worker.py tessera|tessera-compiled|torch|jax|mlx|mlx-compiled [--steps N]

Rank 0 prints one JSON line: the median step time (each step synchronised: evaluated, or
blocked on) and the ranks. Started alone, or by `tessera launch` / `torchrun` / `mlx.launch`.
"""

import argparse
import json
import os
import statistics
import time

import numpy as np

SIZES = [64, 512, 512, 10]
BATCH = 256
LR = 0.01


def data(rank):
    rng = np.random.default_rng(100 + rank)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int32)
    return x, y


def timed(step, steps, warmup):
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_mlx_api(steps, warmup, package, compiled=False):
    """Tessera or MLX: the same code, on `package` ("tessera" or "mlx")."""
    import importlib

    mx = importlib.import_module(package + ".core")
    nn = importlib.import_module(package + ".nn")
    optim = importlib.import_module(package + ".optimizers")
    # The ring, as mlx.launch starts it: MLX's default ("any") tries MPI first, and with MPICH
    # as the system's libmpi MLX 0.32 aborts there ("stack smashing detected").
    group = mx.distributed.init(backend="ring") if package == "mlx" else mx.distributed.init()
    n = group.size()

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(a, b) for a, b in zip(SIZES[:-1], SIZES[1:])]

        def __call__(self, x):
            for layer in self.layers[:-1]:
                x = nn.relu(layer(x))
            return self.layers[-1](x)

    mx.random.seed(0)
    model = MLP()
    opt = optim.SGD(learning_rate=LR)
    loss_and_grad = nn.value_and_grad(model, lambda x, y: nn.losses.cross_entropy(model(x), y, reduction="mean"))

    def train_step(x, y):
        loss, grads = loss_and_grad(x, y)
        if n > 1:
            grads = nn.average_gradients(grads, group)
        opt.update(model, grads)
        return loss

    if compiled:
        state = [model.state, opt.state]
        train_step = mx.compile(train_step, inputs=state, outputs=state)
    xs, ys = data(group.rank())
    x, y = mx.array(xs), mx.array(ys)

    def step():
        loss = train_step(x, y)
        mx.eval(loss, model.parameters(), opt.state)

    return group.rank(), n, timed(step, steps, warmup)


def run_torch(steps, warmup):
    import torch
    import torch.distributed as dist

    n = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    # As PyTorch's CPU performance guide recommends: intra-op threads = the cores each process
    # has (the 2 cores shared by the ranks).
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // n))
    torch.manual_seed(0)
    layers = []
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(SIZES) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    if n > 1:
        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    xs, ys = data(rank)
    x, y = torch.from_numpy(xs), torch.from_numpy(ys.astype(np.int64))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()

    t = timed(step, steps, warmup)
    if n > 1:
        dist.destroy_process_group()
    return rank, n, t


def run_jax(steps, warmup):
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    params = []
    for a, b in zip(SIZES[:-1], SIZES[1:]):
        key, k1, k2 = jax.random.split(key, 3)
        s = 1 / np.sqrt(a)
        params.append((jax.random.uniform(k1, (b, a), minval=-s, maxval=s),
                       jax.random.uniform(k2, (b,), minval=-s, maxval=s)))

    def loss_fn(ps, x, y):
        for w, b in ps[:-1]:
            x = jax.nn.relu(x @ w.T + b)
        w, b = ps[-1]
        logits = x @ w.T + b
        return jnp.mean(jax.nn.logsumexp(logits, axis=1) - jnp.take_along_axis(logits, y[:, None], axis=1)[:, 0])

    @jax.jit
    def train_step(ps, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(ps, x, y)
        return loss, jax.tree_util.tree_map(lambda p, g: p - LR * g, ps, grads)

    xs, ys = data(0)
    x, y = jnp.asarray(xs), jnp.asarray(ys)
    state = {"p": params}

    def step():
        loss, state["p"] = train_step(state["p"], x, y)
        loss.block_until_ready()

    return 0, 1, timed(step, steps, warmup)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("framework",
                   choices=["tessera", "tessera-compiled", "torch", "jax", "mlx", "mlx-compiled"])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    a = p.parse_args()
    if a.framework.startswith("tessera"):
        rank, n, t = run_mlx_api(a.steps, a.warmup, "tessera", a.framework == "tessera-compiled")
    elif a.framework == "torch":
        rank, n, t = run_torch(a.steps, a.warmup)
    elif a.framework == "jax":
        rank, n, t = run_jax(a.steps, a.warmup)
    else:
        rank, n, t = run_mlx_api(a.steps, a.warmup, "mlx", a.framework == "mlx-compiled")
    if rank == 0:
        print(json.dumps({"framework": a.framework, "ranks": n, "step_s": t}), flush=True)


if __name__ == "__main__":
    main()
