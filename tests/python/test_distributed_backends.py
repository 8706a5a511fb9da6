"""tessera.core.distributed's backends from Python: init's arguments as MLX's, and the MPI
backend under a real Open MPI mpirun (2 ranks), checked against NumPy."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import tessera.core as mx


def test_all_gather_factory_is_for_jaccl_only():
    with pytest.raises(ValueError, match="all_gather_factory is only supported with backend='jaccl'"):
        mx.distributed.init(backend="ring", all_gather_factory=lambda rank, size: (lambda src, n: b""))
    with pytest.raises(TypeError):
        mx.distributed.init(backend="jaccl", all_gather_factory="not callable")
    # Tessera has no JACCL: a group of one without strict, as for any unconfigured backend.
    assert mx.distributed.init(backend="jaccl", all_gather_factory=lambda r, s: None).size() == 1


RANK_SCRIPT = textwrap.dedent("""
    import sys

    import numpy as np
    import tessera.core as mx

    world = mx.distributed.init(strict=True, backend="mpi")
    r, n = world.rank(), world.size()
    x = np.arange(12, dtype=np.float32).reshape(3, 4) * (r + 1)
    want = sum(np.arange(12, dtype=np.float32).reshape(3, 4) * (k + 1) for k in range(n))
    got = np.array(mx.distributed.all_sum(mx.array(x)))
    assert np.array_equal(got, want), (got, want)
    for dt in [mx.float16, mx.bfloat16, mx.int64, mx.bool_]:
        y = mx.distributed.all_max(mx.array([r, n - r, 3]).astype(dt))
        assert np.array_equal(np.array(y.astype(mx.int64)), np.array([n - 1, n, 3]) if dt != mx.bool_ else [1, 1, 1])
    g = np.array(mx.distributed.all_gather(mx.array([float(r)])))
    assert np.array_equal(g, np.arange(n, dtype=np.float32)), g
    s = np.array(mx.distributed.sum_scatter(mx.ones((2 * n,))))
    assert np.array_equal(s, np.full(2, n, np.float32)), s
    sub = world.split(r % 2)
    assert sub.size() == (n + 1 - r % 2) // 2
    sys.stdout.write(f"rank {r} ok on {mx.distributed.init().size()} ranks\\n")  # one write: no interleaving
    sys.stdout.flush()
""")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun (make test installs it)")
def test_mpi_backend_under_mpirun(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TESSERA_RANK", "MLX_RANK", "TESSERA_HOSTFILE", "MLX_HOSTFILE"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    r = subprocess.run(["mpirun", "-n", "2", sys.executable, str(script)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for k in range(2):
        assert f"rank {k} ok on 2 ranks" in r.stdout, r.stdout + r.stderr
