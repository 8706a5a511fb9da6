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


def _run_on_threads(work, n):
    """Runs work(k) for k < n on n threads at once; returns the exceptions they raised."""
    errors = []

    def run(k):
        try:
            work(k)
        except Exception as e:  # noqa: BLE001 - handed back to the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


def test_graphs_built_and_evaluated_from_several_threads():
    results = {}

    def work(k):
        x = mx.arange(1000, dtype=mx.float32) * (k + 1)
        acc = x
        for _ in range(50):
            acc = acc + x * 0.5
        results[k] = float(acc.sum().item())

    errors = _run_on_threads(work, 8)
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


def _on_thread(f):
    """Runs f on a new thread; returns (its result, the exception it raised)."""
    out = {}

    def run():
        try:
            out["value"] = f()
        except Exception as e:  # noqa: BLE001 - handed back to the test
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive()
    return out.get("value"), out.get("error")


def test_streams_belong_to_their_thread_as_in_mlx_0_32():
    main_default = mx.default_stream(mx.cpu)
    theirs, err = _on_thread(lambda: mx.default_stream(mx.cpu))
    assert err is None and theirs != main_default and isinstance(theirs, mx.Stream)
    mine = mx.new_stream(mx.cpu)
    lazy = mx.multiply(mx.arange(10, stream=mine), 2, stream=mine)
    _, err = _on_thread(lambda: mx.eval(lazy))
    assert isinstance(err, RuntimeError)
    index = repr(mine).rsplit(", ", 1)[1].rstrip(")")
    assert f"There is no Stream(cpu, {index}) in current thread" in str(err)
    assert "new_thread_local_stream" in str(err)
    assert lazy.tolist() == list(range(0, 20, 2))  # still fine on this thread
    built_here = mx.ones(3) + 1  # this thread's default stream
    _, err = _on_thread(built_here.tolist)
    assert isinstance(err, RuntimeError)
    assert built_here.tolist() == [2.0, 2.0, 2.0]
    value, err = _on_thread(lambda: (built_here * 3).tolist())  # computed arrays go anywhere
    assert err is None and value == [6.0, 6.0, 6.0]
    # set_default_stream and `with stream(...)` change the calling thread's default only.
    s = mx.new_stream(mx.cpu)
    with mx.stream(s):
        assert mx.default_stream(mx.cpu) == s
        other, _ = _on_thread(lambda: mx.default_stream(mx.cpu))
        assert other != s
    assert mx.default_stream(mx.cpu) == main_default


def test_thread_local_and_thread_unsafe_streams():
    tls = mx.new_thread_local_stream(mx.cpu)
    assert isinstance(tls, mx.ThreadLocalStream) and not isinstance(tls, mx.Stream)
    assert tls.device == mx.cpu and repr(tls).startswith("ThreadLocalStream(Device(cpu, 0), ")
    assert tls == tls and tls != mx.new_thread_local_stream(mx.cpu) and tls != mx.default_stream(mx.cpu)
    with pytest.raises(TypeError):
        mx.set_default_stream(tls)
    seen, sums = {}, {}

    def work(k):
        with mx.stream(tls):
            seen[k] = mx.default_stream(mx.cpu)
            x = mx.arange(100, dtype=mx.float32) * (k + 1)
            sums[k] = mx.sum(x * x).item()
            mx.synchronize(tls)

    errors = _run_on_threads(work, 4)
    assert not errors, errors
    ref = float((np.arange(100, dtype=np.float64) ** 2).sum())
    for k in range(4):
        assert sums[k] == pytest.approx(ref * (k + 1) ** 2, rel=1e-6)
    assert len({repr(s) for s in seen.values()}) == 4  # a stream of each thread's own
    with mx.stream(tls):
        mine = mx.default_stream(mx.cpu)
        assert mx.add(mx.array(1), 2, stream=tls).item() == 3
    assert repr(mine) not in {repr(s) for s in seen.values()}

    shared = mx.new_thread_unsafe_stream(mx.cpu)
    lazy = mx.add(mx.arange(6, stream=shared), 1, stream=shared)
    value, err = _on_thread(lambda: lazy.tolist())
    assert err is None and value == [1, 2, 3, 4, 5, 6]


def test_a_with_stream_block_ends_on_its_own_thread():
    ctx = mx.stream(mx.new_stream(mx.cpu))
    ctx.__enter__()
    _, err = _on_thread(lambda: ctx.__exit__(None, None, None))
    assert isinstance(err, RuntimeError) and "different thread" in str(err)
    ctx.__exit__(None, None, None)


def test_clear_streams_waits_and_leaves_the_thread_working():
    x = mx.arange(1000, dtype=mx.float32)
    y = (x * 2).sum()
    mx.async_eval(y)
    mx.clear_streams()
    assert y.item() == 999 * 1000
    assert (mx.ones(2) + 1).tolist() == [2.0, 2.0]


def test_interpreter_exit_with_streams_busy_on_several_threads():
    # Threads that made streams, left work queued on them, and were never joined (daemons), or
    # ended before exit: the interpreter exits at once, cleanly.
    code = textwrap.dedent("""
        import threading, time
        import tessera.core as mx
        tls = mx.new_thread_local_stream(mx.cpu)
        def work(k, spin):
            s = mx.new_stream(mx.cpu)
            x = mx.ones((256, 256), stream=s)
            for _ in range(50):
                x = mx.matmul(x, x, stream=s) * 1e-3
            mx.async_eval(x)
            with mx.stream(tls):
                mx.async_eval(mx.sum(mx.ones((1000,)) * k))
            while spin:
                time.sleep(0.01)
        for k in range(3):
            threading.Thread(target=work, args=(k, True), daemon=True).start()
        done = [threading.Thread(target=work, args=(k, False)) for k in range(3)]
        for t in done: t.start()
        for t in done: t.join()
        print("bye")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "bye"


def test_interpreter_exit_while_daemon_threads_are_inside_eval():
    # Daemon threads evaluating in a loop when the main thread ends: Python ends such a thread
    # when it asks for the GIL during finalization (pthread_exit), which nanobind's dispatcher
    # cannot let pass (the process aborted, every time, before the exit hook); they now wait
    # for the process to end.
    code = textwrap.dedent("""
        import threading, time
        import numpy as np
        import tessera.core as mx
        def spin():
            x = np.ones(1000, dtype=np.float32)
            while True:
                mx.eval(mx.array(x) * 2)
        for _ in range(4):
            threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.2)
        print("bye")
    """)
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "bye"
