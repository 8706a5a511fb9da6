"""`make bench-train`: one training step of an MLP (64-512-512-10, SGD, 256 examples per rank)
in Tessera (eager and mx.compile), PyTorch (eager; DistributedDataParallel over Gloo under
torchrun), JAX (jit, 1 rank) and MLX (mlx[cpu], eager and mx.compile; mlx.launch), side by side
in one run; then
nn.average_gradients of a 100 MB tree against one all_sum of the same bytes (2 ranks).

Each configuration runs REPEATS times, interleaved, and the table shows the median. Throughput
is samples per second over all ranks; scaling efficiency is N-rank throughput over 1-rank
throughput (the ranks share this machine's cores).
"""

import json
import os
import statistics
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "train_worker.py")
BIN = os.path.dirname(sys.executable)
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
BATCH = 256


def has(module):
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


def command(framework, n):
    if framework.startswith("tessera"):
        return [os.path.join(BIN, "tessera"), "launch", "-n", str(n), "--no-prefix", WORKER, framework]
    if framework == "torch" and n > 1:
        return [os.path.join(BIN, "torchrun"), "--standalone", f"--nproc_per_node={n}", WORKER, "torch"]
    if framework.startswith("mlx") and n > 1:
        return [os.path.join(BIN, "mlx.launch"), "--python", sys.executable, "-n", str(n), WORKER, framework]
    return [sys.executable, WORKER, framework]


def run(framework, n):
    r = subprocess.run(command(framework, n), capture_output=True, text=True, timeout=600)
    for line in r.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)["step_s"]
    print(f"[bench-train] {framework} on {n} rank(s) failed ({r.returncode}):\n{r.stderr[-2000:]}",
          file=sys.stderr)
    return None


def main():
    frameworks = ["tessera", "tessera-compiled"]
    for names, module in ((["torch"], "torch"), (["jax"], "jax"), (["mlx", "mlx-compiled"], "mlx.core")):
        if has(module):
            frameworks.extend(names)
        else:
            print(f"[bench-train] {module} is not installed: its column is empty", file=sys.stderr)
    configs = [(f, n) for f in frameworks for n in ((1,) if f == "jax" else (1, 2, 4))]
    samples = {c: [] for c in configs}
    for _ in range(REPEATS):
        for c in configs:
            t = run(*c)
            if t is not None:
                samples[c].append(t)
    step = {c: statistics.median(v) for c, v in samples.items() if v}

    def cell(c):
        return step.get(c)

    print(f"\nMLP 64-512-512-10, SGD, batch {BATCH} per rank, {os.cpu_count()} CPUs; median of {REPEATS} runs "
          "(each the median of 200 synchronised steps)\n")
    head = f"{'framework':<18}{'1-rank step ms':>15}{'2 ranks samples/s':>19}{'4 ranks samples/s':>19}" \
           f"{'eff 2':>7}{'eff 4':>7}"
    print(head)
    print("-" * len(head))
    for f in frameworks:
        t1 = cell((f, 1))
        row = f"{f:<18}{(t1 * 1e3 if t1 else float('nan')):>15.3f}"
        for n in (2, 4):
            tn = cell((f, n))
            row += f"{(n * BATCH / tn if tn else float('nan')):>19.0f}"
        for n in (2, 4):
            tn = cell((f, n))
            row += f"{((n * BATCH / tn) / (BATCH / t1) if tn and t1 else float('nan')):>7.2f}"
        print(row)
    print("\nRatios: peer's step time / Tessera's (the faster of eager and compiled); above 1, Tessera is faster")
    for f in frameworks:
        if f.startswith("tessera"):
            continue
        parts = []
        for n in (1, 2, 4):
            ours = [t for t in (cell(("tessera", n)), cell(("tessera-compiled", n))) if t]
            peer = cell((f, n))
            if peer and ours:
                parts.append(f"{n} rank(s) {peer / min(ours):.2f}x")
        print(f"  {f:<8} " + ", ".join(parts))
    average_gradients_bench()


AVERAGE = textwrap.dedent("""
    import statistics, time, json
    import tessera.core as mx
    import tessera.nn as nn
    g = mx.distributed.init()
    # 100 MB of float32 gradients in 25 arrays of 1 Mi elements, and the same bytes as one array.
    tree = {f"layer{i}": mx.random.normal((1024, 1024)) for i in range(25)}
    flat = mx.random.normal((25 * 1024 * 1024,))
    mx.eval(tree, flat)
    def t(fn, reps=7):
        fn(); out = []
        for _ in range(reps):
            t0 = time.perf_counter(); fn(); out.append(time.perf_counter() - t0)
        return statistics.median(out)
    avg = t(lambda: mx.eval(nn.average_gradients(tree, g)))
    one = t(lambda: mx.eval(mx.distributed.all_sum(flat, group=g)))
    if g.rank() == 0:
        print(json.dumps({"average_gradients_s": avg, "all_sum_s": one}))
""")


def average_gradients_bench():
    path = os.path.join(HERE, ".bench_average.py")
    with open(path, "w") as f:
        f.write(AVERAGE)
    try:
        r = subprocess.run([os.path.join(BIN, "tessera"), "launch", "-n", "2", "--no-prefix", path],
                           capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(path)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            print(f"\nnn.average_gradients of a 100 MB tree (25 arrays), 2 ranks: "
                  f"{d['average_gradients_s'] * 1e3:.1f} ms; one all_sum of 100 MB: {d['all_sum_s'] * 1e3:.1f} ms "
                  f"(ratio {d['average_gradients_s'] / d['all_sum_s']:.2f})")
            return
    print(f"[bench-train] average_gradients benchmark failed:\n{r.stderr[-2000:]}", file=sys.stderr)


if __name__ == "__main__":
    main()
