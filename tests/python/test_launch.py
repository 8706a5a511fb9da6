"""Multi-process Python through `tessera launch` (the command the package installs): MLX's
three-line example, unmodified MLX scripts with --mlx, failures, and the interpreter used."""

import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

TESSERA = os.path.join(os.path.dirname(sys.executable), "tessera")


def launch(tmp_path, script, *args, timeout=120):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    return subprocess.run([TESSERA, "launch", *args, str(path)], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)


THREE_LINES = """
    import {module} as mx
    world = mx.distributed.init()
    x = mx.distributed.all_sum(mx.ones(10))
    print(world.rank(), x)
"""


def test_the_reference_example_runs_on_four_ranks(tmp_path):
    r = launch(tmp_path, THREE_LINES.format(module="tessera.core"), "-n", "4")
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.splitlines())
    assert lines == [f"[{i}] {i} array([4, 4, 4, ..., 4, 4, 4], dtype=float32)" for i in range(4)]


def test_unmodified_mlx_code_runs_with_mlx_and_no_prefix(tmp_path):
    r = launch(tmp_path, THREE_LINES.format(module="mlx.core"), "--mlx", "--no-prefix", "-n", "2")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"{i} array([2, 2, 2, ..., 2, 2, 2], dtype=float32)"
                                              for i in range(2)]


def test_collectives_from_python_match_local_sums(tmp_path):
    r = launch(tmp_path, """
        import numpy as np
        import tessera.core as mx
        g = mx.distributed.init()
        n, r = g.size(), g.rank()
        x = mx.arange(6, dtype=mx.float32) * (r + 1)
        ref = np.arange(6, dtype=np.float32)
        assert np.array_equal(np.asarray(mx.distributed.all_sum(x)), ref * sum(range(1, n + 1)))
        assert np.array_equal(np.asarray(mx.distributed.all_max(x)), ref * n)
        assert mx.distributed.all_gather(x[None]).shape == (n, 6)
        assert mx.distributed.sum_scatter(mx.ones((n, 2))).tolist() == [[float(n)] * 2]
        if r == 0:
            mx.eval(mx.distributed.send(mx.array([7.0, 8.0]), 1))
        elif r == 1:
            assert mx.distributed.recv((2,), mx.float32, 0).tolist() == [7.0, 8.0]
        print("ok", r)
    """, "-n", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(" ok ") == 3


def test_a_failing_rank_fails_the_job_with_its_error(tmp_path):
    r = launch(tmp_path, """
        import tessera.core as mx
        g = mx.distributed.init()
        if g.rank() == 1:
            raise ValueError("rank one gives up")
        mx.eval(mx.distributed.all_sum(mx.ones(4)))
    """, "-n", "2", "--grace", "1")
    assert r.returncode != 0
    assert "rank one gives up" in r.stderr


def test_ranks_run_with_the_environment_interpreter(tmp_path):
    r = launch(tmp_path, "import sys; print(sys.executable)\n", "-n", "1", "--no-prefix")
    assert r.returncode == 0, r.stderr
    assert os.path.realpath(r.stdout.strip()) == os.path.realpath(sys.executable)


def test_mlx_shim_never_shadows_a_real_mlx_unless_forced(tmp_path):
    fake = tmp_path / "site" / "mlx"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "core.py").write_text("REAL = True\n")
    script = tmp_path / "s.py"
    script.write_text("import mlx.core as mx\nprint(getattr(mx, 'REAL', False), hasattr(mx, 'array'))\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    r = subprocess.run([sys.executable, "-m", "tessera.mlx", str(script)], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode != 0 and "real MLX is installed" in r.stderr
    r = subprocess.run([sys.executable, "-m", "tessera.mlx", "--force", str(script)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False True"


def test_mlx_shim_answers_find_spec_as_an_installed_package_does(tmp_path):
    # transformers (which mlx-lm imports) asks importlib.util.find_spec("mlx"): a module in
    # sys.modules with no spec made that a ValueError.
    script = tmp_path / "s.py"
    script.write_text("import importlib.util\n"
                      "spec = importlib.util.find_spec('mlx')\n"
                      "print(spec.name, spec.submodule_search_locations is not None,\n"
                      "      importlib.util.find_spec('mlx.core') is not None)\n")
    r = subprocess.run([sys.executable, "-m", "tessera.mlx", str(script)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["mlx", "True", "True"]


PROGRESS = """
    import os, sys, time
    print("tty", os.environ.get("TESSERA_LAUNCH_TTY"), flush=True)
    for text in ("step 1\\r", "step 2\\r", "done\\r\\n", "split\\r", "\\n", "half", " line\\n"):
        sys.stdout.write(text)
        sys.stdout.flush()
        time.sleep(0.05)  # each piece reaches the launcher in its own read
"""


def test_progress_lines_redraw_in_place_on_a_terminal(tmp_path):
    """On a terminal the ranks are told so (TESSERA_LAUNCH_TTY=1) and text ended by a carriage
    return is passed on at once, prefixed; "\\r\\n" ends a line. Through a pipe, no variable."""
    import pty

    path = tmp_path / "progress.py"
    path.write_text(textwrap.dedent(PROGRESS))
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(TESSERA, [TESSERA, "launch", "-n", "1", str(path)])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the launcher closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    out = out.replace(b"\r\n", b"\n")  # the terminal's own newline translation
    assert out == (b"[0] tty 1\n[0] step 1\r[0] step 2\r[0] done\r\n[0] split\r\n"
                   b"[0] half line\n"), out

    r = launch(tmp_path, PROGRESS, "-n", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == "[0] tty None"


ROOT_CAUSE_LATE = """
    import os, sys, time
    import tessera.core as mx
    g = mx.distributed.init()
    mx.eval(mx.distributed.all_sum(mx.ones(4)))
    if g.rank() == 2:
        # The root cause, whose exit reaches the launcher after its survivors' errors: it drops
        # its connections (as a process that is exiting has), then takes a second to end.
        for fd in map(int, os.listdir("/proc/self/fd")):
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                    os.close(fd)
            except OSError:
                pass
        time.sleep(1.5)
        os._exit(3)
    mx.eval(mx.distributed.all_sum(mx.ones(4)))
"""


def test_the_verdict_names_the_root_cause_when_its_exit_is_seen_last(tmp_path):
    """Ranks 1 and 3 fail at once blaming rank 2 (the closed connection); rank 2 exits with its
    own status 1.5 s later. The launcher awaits the blamed peer (up to --grace) and names it."""
    r = launch(tmp_path, ROOT_CAUSE_LATE, "-n", "4", "--env", "TESSERA_RING_SHM=0")
    assert r.returncode == 3, r.stderr
    assert "[launch] rank 2 failed first: it exited with status 3" in r.stderr, r.stderr
    assert "[ring] rank 1: rank 2 (127.0.0.1:" in r.stderr  # the survivors did blame rank 2


FAILS_AFTER_A_COLLECTIVE = """
    import sys
    import tessera.core as mx
    g = mx.distributed.init()
    mx.eval(mx.distributed.all_sum(mx.ones(1024)))
    if g.rank() == 2:
        sys.exit(3)
    for _ in range(3):
        mx.eval(mx.distributed.all_sum(mx.ones(1024)))
"""


def simhosts_program():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = (Path(os.environ.get("TESSERA_TEST_PROGRAMS", root / "build" / "py")) / "simhosts").resolve()
    if os.geteuid() != 0 or not path.exists():
        pytest.skip("needs root and the simhosts program of the test build (make test builds it)")
    return path


class CpuHogs:
    """Busy processes beside the job (as many as CPUs + 1), each ending by itself within
    `seconds` even if the test is killed."""

    def __init__(self, seconds=600):
        code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"
        self.procs = [subprocess.Popen([sys.executable, "-c", code])
                      for _ in range((os.cpu_count() or 1) + 1)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


@pytest.mark.parametrize("ranks,hosts,runs", [
    (4, 0, 1), (8, 0, 1), (4, 2, 1),
    pytest.param(4, 0, 50, marks=pytest.mark.long), pytest.param(8, 0, 50, marks=pytest.mark.long),
    pytest.param(4, 2, 50, marks=pytest.mark.long), pytest.param(8, 2, 50, marks=pytest.mark.long)])
def test_the_first_failure_is_named_under_load(tmp_path, ranks, hosts, runs):
    """Rank 2 exits with status 3 after a collective; its peers fail in the next one. With the
    machine busy, every verdict still names rank 2 and its status (not a peer's reaction)."""
    path = tmp_path / "fails.py"
    path.write_text(textwrap.dedent(FAILS_AFTER_A_COLLECTIVE))
    cmd = [TESSERA, "launch", "-n", str(ranks), str(path)]
    if hosts:
        names = ",".join(f"node{h}" for h in range(hosts))
        cmd = [str(simhosts_program()), str(hosts), "--", TESSERA, "launch", "--hosts", names,
               "-n", str(ranks // hosts), str(path)]
    wrong = []
    with CpuHogs():
        for i in range(runs):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
            verdict = [line for line in r.stderr.splitlines() if "failed first" in line]
            want = r"\[launch\] rank 2( \(host node\d\))? failed first: it exited with status 3"
            if r.returncode != 3 or len(verdict) != 1 or not re.match(want, verdict[0]):
                wrong.append((i, r.returncode, verdict))
    assert not wrong, wrong


RESTARTS = """
    import os, sys
    import tessera.core as mx
    g = mx.distributed.init()
    k = int(os.environ["TESSERA_RESTART_COUNT"])
    print("attempt", k, os.environ["TESSERA_JOB_TOKEN"], flush=True)
    total = mx.distributed.all_sum(mx.array([float(g.rank())])).item()
    assert total == sum(range(g.size())), total
    if k < 2 and g.rank() == 1:
        sys.exit(3)
"""


@pytest.mark.parametrize("hosts", [0, 2])
def test_max_restarts_starts_the_whole_job_again(tmp_path, hosts):
    """Rank 1 fails on the first two attempts; with --max-restarts 2 the third succeeds, each
    attempt numbered, with its own job token; with 1 the job fails with the last status."""
    path = tmp_path / "restarts.py"
    path.write_text(textwrap.dedent(RESTARTS))
    prefix = [str(simhosts_program()), "2", "--"] if hosts else []
    where = ["--hosts", "node0,node1"] if hosts else ["-n", "2"]
    r = subprocess.run([*prefix, TESSERA, "launch", *where, "--max-restarts", "2", str(path)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    attempts = {}
    for line in r.stdout.splitlines():
        _, _, k, token = line.split()
        attempts.setdefault(int(k), []).append(token)
    # Both ranks in each attempt, sharing a token; a fresh token each time.
    assert sorted(attempts) == [0, 1, 2]
    assert all(len(v) == 2 and len(set(v)) == 1 for v in attempts.values())
    assert len({v[0] for v in attempts.values()}) == 3
    for k in (1, 2):
        assert f"[launch] restart {k} of 2 after rank 1" in r.stderr
        assert "exited with status 3: starting every rank again" in r.stderr

    env = dict(os.environ, TESSERA_MAX_RESTARTS="1")  # the variable, as the flag
    r = subprocess.run([*prefix, TESSERA, "launch", *where, str(path)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 3 and r.stderr.count("starting every rank again") == 1, r.stderr


def test_a_signalled_job_is_never_restarted(tmp_path):
    path = tmp_path / "wait.py"
    path.write_text("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    p = subprocess.Popen([TESSERA, "launch", "-n", "2", "--max-restarts", "3", str(path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert p.stdout.readline().endswith("ready\n")
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 128 + signal.SIGTERM and "restart" not in err, err


def test_max_restarts_is_refused_for_the_mpi_backend(tmp_path):
    path = tmp_path / "x.py"
    path.write_text("")
    r = subprocess.run([TESSERA, "launch", "--backend", "mpi", "-n", "2", "--max-restarts", "1",
                        str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--max-restarts (or TESSERA_MAX_RESTARTS) is for the ring" in r.stderr
