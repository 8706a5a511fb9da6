"""Distributed training helpers across real processes started by `tessera launch`:
average_gradients against the mean of every rank's known gradients (NumPy), the tensor-parallel
linear layers and fully_shard against the dense layer, and the data-parallel example (accuracy,
equal weights on every rank, checkpoint and resume reaching the uninterrupted run's weights)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

TESSERA = os.path.join(os.path.dirname(sys.executable), "tessera")
EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "data_parallel.py")


def launch(tmp_path, script, n, *args, timeout=180):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    r = subprocess.run([TESSERA, "launch", "-n", str(n), str(path), *args], capture_output=True,
                       text=True, timeout=timeout, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


AVERAGE = """
    import numpy as np
    import pytest
    import tessera.core as mx
    import tessera.nn as nn

    g = mx.distributed.init()
    n, r = g.size(), g.rank()

    def grads_of(rank):
        # Every rank's gradients are known to all: a tree of mixed dtypes and sizes.
        rng = np.random.default_rng(rank)
        return {
            "w": [rng.standard_normal((33, 7)).astype(np.float32),
                  rng.standard_normal((5,)).astype(np.float32)],
            "h": rng.standard_normal((4, 3)).astype(np.float16),
            "d": rng.standard_normal((9,)),  # float64
            "big": rng.standard_normal((70000,)).astype(np.float32),
            "t": (rng.standard_normal((2,)).astype(np.float32),),
        }

    def to_mx(tree):
        if isinstance(tree, dict):
            return {k: to_mx(v) for k, v in tree.items()}
        if isinstance(tree, (list, tuple)):
            return type(tree)(to_mx(v) for v in tree)
        return mx.array(tree)

    def leaves(tree):
        if isinstance(tree, dict):
            return [x for k in tree for x in leaves(tree[k])]
        if isinstance(tree, (list, tuple)):
            return [x for v in tree for x in leaves(v)]
        return [tree]

    all_ranks = [grads_of(k) for k in range(n)]
    want = [np.mean([np.asarray(l, dtype=np.float64) for l in ls], axis=0) for ls in zip(*map(leaves, all_ranks))]
    mine = to_mx(all_ranks[r])
    for kw in ({}, {"all_reduce_size": 0}, {"all_reduce_size": 1000}, {"all_reduce_size": 1},
               {"communication_type": mx.float16}):
        out = nn.average_gradients(mine, **kw)
        assert type(out["w"]) is list and type(out["t"]) is tuple, kw
        got = leaves(out)
        for x, ref, orig in zip(got, want, leaves(mine)):
            assert x.dtype == orig.dtype and x.shape == orig.shape, (kw, x.dtype, x.shape)
            tol = 2e-3 if (x.dtype == mx.float16 or "communication_type" in kw) else 1e-6
            np.testing.assert_allclose(np.asarray(x.astype(mx.float64)), ref, rtol=tol, atol=tol)
    # One rank's group: the gradients come back as they are.
    solo = mx.distributed.init().split(r)
    assert nn.average_gradients(mine, group=solo) is mine
    assert nn.average_gradients({}) == {}
    # all_mean: the bits of all_sum / n for every floating dtype and path (tiny, one unit, many).
    for dt in (mx.float32, mx.float16, mx.bfloat16, mx.float64):
        for size in (3, 1000, 70000, 1 << 20):
            x = mx.array(np.random.default_rng(size + r).standard_normal(size)).astype(dt)
            a, b = mx.distributed.all_mean(x), mx.distributed.all_sum(x) / n
            assert a.dtype == dt and np.array_equal(np.asarray(a.view(mx.uint8)), np.asarray(b.view(mx.uint8))), (dt, size)
    with pytest.raises(ValueError, match="all_mean.*int32"):
        mx.distributed.all_mean(mx.array([1, 2]))
    # Its gradient is the cotangent divided by n, as that of all_sum(x) / n.
    gx = mx.grad(lambda v: (mx.distributed.all_mean(v) * mx.arange(3.0)).sum())(mx.ones(3))
    np.testing.assert_allclose(np.asarray(gx), np.arange(3.0) / n, rtol=1e-6)
    print("ok", r)
"""


@pytest.mark.parametrize("n", [2, 3])
def test_average_gradients_is_the_mean_of_every_ranks_gradients(tmp_path, n):
    out = launch(tmp_path, AVERAGE, n)
    assert sorted(out.split()) == sorted([f"[{r}]" for r in range(n)] + ["ok"] * n + [str(r) for r in range(n)])


SHARDED = """
    import numpy as np
    import tessera.core as mx
    import pytest
    import tessera.nn as nn
    from tessera.utils import tree_flatten

    g = mx.distributed.init()
    n, r = g.size(), g.rank()
    mx.random.seed(7)  # the same dense layers on every rank
    d_in, d_hidden, d_out = 12, 24, 5
    up, down = nn.Linear(d_in, d_hidden), nn.Linear(d_hidden, d_out)
    x = mx.random.normal((3, d_in))

    def dense(xs):
        return down(mx.maximum(up(xs), 0))

    # Megatron-style MLP: the up projection's outputs and the down projection's inputs sharded.
    sup = nn.shard_linear(up, "all-to-sharded")
    sdown = nn.shard_linear(down, "sharded-to-all")
    assert sup.weight.shape == (d_hidden // n, d_in) and sdown.weight.shape == (d_out, d_hidden // n)
    def sharded(xs):
        return sdown(mx.maximum(sup(xs), 0))
    np.testing.assert_allclose(np.asarray(sharded(x)), np.asarray(dense(x)), rtol=1e-5, atol=1e-5)
    # Gradients with respect to the input (summed over the shards by sum_gradients) and to the
    # sharded weights (this rank's rows / columns of the dense gradient).
    gx_dense = mx.grad(lambda t: mx.sum(dense(t) ** 2))(x)
    gx_sharded = mx.grad(lambda t: mx.sum(sharded(t) ** 2))(x)
    np.testing.assert_allclose(np.asarray(gx_sharded), np.asarray(gx_dense), rtol=1e-5, atol=1e-5)
    _, gd = nn.value_and_grad(up, lambda t: mx.sum(dense(t) ** 2))(x)
    _, gs = nn.value_and_grad(sup, lambda t: mx.sum(sharded(t) ** 2))(x)
    rows = slice(r * d_hidden // n, (r + 1) * d_hidden // n)
    np.testing.assert_allclose(np.asarray(gs["weight"]), np.asarray(gd["weight"])[rows], rtol=1e-5, atol=1e-5)
    # Fused projections (q, k, v in one weight) shard each segment.
    qkv = nn.Linear(d_in, 3 * d_hidden)
    sq = nn.shard_linear(qkv, "all-to-sharded", segments=3)
    dense_out = np.asarray(qkv(x))
    parts = [dense_out[:, s * d_hidden:(s + 1) * d_hidden][:, rows] for s in range(3)]
    np.testing.assert_allclose(np.asarray(sq(x)), np.concatenate(parts, axis=1), rtol=1e-5, atol=1e-5)
    # fully_shard: the same outputs, and this rank's slice of the gradient averaged over the
    # ranks (every rank has the same data here, so the slice of the dense gradient).
    model = nn.Sequential(nn.Linear(d_in, d_hidden), nn.Linear(d_hidden, 2 * n))
    ref_out = np.asarray(model(x))
    _, ref_g = nn.value_and_grad(model, lambda t: mx.sum(model(t) ** 2))(x)
    ref_g = {k: np.asarray(v) for k, v in tree_flatten(ref_g)}
    fs = nn.fully_shard(model)
    np.testing.assert_allclose(np.asarray(fs(x)), ref_out, rtol=1e-5, atol=1e-5)
    _, g_fs = nn.value_and_grad(fs, lambda t: mx.sum(fs(t) ** 2))(x)
    for k, v in tree_flatten(g_fs):
        ref = ref_g[k[len("module."):]]
        chunk = ref.shape[0] // n
        np.testing.assert_allclose(np.asarray(v), ref[r * chunk:(r + 1) * chunk], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="not divisible"):
        nn.AllToShardedLinear(4, 4 * n + 1)
    print("ok", r)
"""


@pytest.mark.parametrize("n", [2, 3, 4])
def test_sharded_layers_equal_the_dense_layer(tmp_path, n):
    out = launch(tmp_path, SHARDED, n)
    assert out.count("ok") == n


def run_example(tmp_path, n, *args):
    r = subprocess.run([TESSERA, "launch", "-n", str(n), EXAMPLE, *args], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_data_parallel_example_learns_keeps_ranks_equal_and_resumes(tmp_path):
    # Uninterrupted: 2 ranks, 100 steps (the example checks every rank's weights are equal bit
    # for bit); then the same run stopped at step 50 (checkpointing every 25 steps) and resumed:
    # the final weights must equal the uninterrupted run's bit for bit.
    common = ["--epochs", "5", "--batch-size", "32", "--stop-after", "100"]
    out = run_example(tmp_path, 2, *common, "--save-final", str(tmp_path / "full.npz"))
    assert "weights equal on all 2 rank(s)" in out
    acc = float(out.split("final test accuracy ")[1].split(",")[0])
    assert acc > 0.9, out
    ck = str(tmp_path / "ck")
    run_example(tmp_path, 2, "--epochs", "5", "--batch-size", "32", "--stop-after", "50",
                "--checkpoint-every", "25", "--checkpoint-dir", ck)
    out = run_example(tmp_path, 2, *common, "--checkpoint-dir", ck, "--resume",
                      "--save-final", str(tmp_path / "resumed.npz"))
    assert "resumed from step 50" in out
    full = np.load(tmp_path / "full.npz")
    resumed = np.load(tmp_path / "resumed.npz")
    assert sorted(full.files) == sorted(resumed.files)
    for k in full.files:
        assert np.array_equal(full[k], resumed[k]), k


TP_EXAMPLE = os.path.join(os.path.dirname(EXAMPLE), "tensor_parallel.py")


def final_loss(out):
    return float(out.split("final loss ")[1].split()[0])


@pytest.mark.parametrize("n", [2, pytest.param(4, marks=pytest.mark.long)])
def test_tensor_parallel_example_matches_one_process(tmp_path, n):
    # A smaller model than the example's default, 100 steps: the loss falls, and the sharded
    # run's loss equals the one-process run's within 1e-4.
    args = ["--steps", "100", "--dims", "64", "--context", "32", "--batch", "8", "--print-every", "50"]
    one = subprocess.run([sys.executable, TP_EXAMPLE, *args], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    r = subprocess.run([TESSERA, "launch", "-n", str(n), TP_EXAMPLE, *args], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    first = float(one.stdout.split("step    1  loss ")[1].split()[0])
    assert final_loss(one.stdout) < first - 1.0, one.stdout
    assert abs(final_loss(r.stdout) - final_loss(one.stdout)) < 1e-4, (one.stdout, r.stdout)
