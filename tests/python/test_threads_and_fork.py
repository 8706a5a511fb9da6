"""Threads and fork: graphs built from several Python threads at once, and a forked child
(multiprocessing's default start method on Linux) that computes with fresh engine threads."""

import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tessera.core as mx


def test_graphs_built_and_evaluated_from_several_threads():
    errors, results = [], {}

    def work(k):
        try:
            x = mx.arange(1000, dtype=mx.float32) * (k + 1)
            acc = x
            for _ in range(50):
                acc = acc + x * 0.5
            results[k] = float(acc.sum().item())
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    base = np.arange(1000, dtype=np.float64).sum()
    for k in range(8):
        np.testing.assert_allclose(results[k], base * (k + 1) * (1 + 50 * 0.5), rtol=1e-5)


def _child(q):
    x = mx.ones((512, 512))
    y = (x @ x).sum()  # uses the intra-op pool and a stream worker of the child's own
    q.put(float(y.item()))


def test_a_forked_child_computes_after_the_parent_did():
    x = mx.ones((512, 512))
    assert (x @ x).sum().item() == 512.0 ** 3  # the parent's pool and workers are running
    pending = (x * 2).sum()
    mx.async_eval(pending)  # queued work at fork time is finished before the fork
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    got = q.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert got == 512.0 ** 3
    assert pending.item() == 2 * 512 * 512


def test_openblas_runs_one_thread_from_import_on():
    # OpenBLAS starts thread servers as it loads, and they spin for ~0.1 s, taking a core from
    # the engine's pool: importing tessera.core must set one thread at once, before any product.
    code = textwrap.dedent("""
        import ctypes, os, scipy_openblas32
        lib = ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(), "libscipy_openblas.so"))
        before = lib.scipy_openblas_get_num_threads()
        import tessera.core
        print(before, lib.scipy_openblas_get_num_threads())
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    before, after = map(int, r.stdout.split())
    if before == 1:
        pytest.skip("OpenBLAS starts with one thread here (one CPU)")
    assert after == 1
