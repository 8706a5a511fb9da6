"""Multi-process Python through `tessera launch` (the command the package installs): MLX's
three-line example, unmodified MLX scripts with --mlx, failures, and the interpreter used."""

import os
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
