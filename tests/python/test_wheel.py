"""`pip wheel .` makes a wheel that installs into a fresh virtual environment and works there:
the module, its libtessera, the stubs and the `tessera` command (make test-long; it rebuilds
everything, a few minutes on 2 cores)."""

import os
import pathlib
import subprocess
import sys
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.long
def test_the_wheel_installs_and_runs_in_a_fresh_environment(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-w", str(wheels), "--config-settings=build-dir=" + str(tmp_path / "build"),
                    str(ROOT)], check=True, timeout=1800)
    (wheel,) = wheels.glob("tessera-*.whl")
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=600)
    out = subprocess.run([str(py), "-c", "import tessera.core as mx; print((mx.ones(3) * 2).tolist())"],
                         capture_output=True, text=True, check=True, cwd=tmp_path, timeout=120)
    assert out.stdout.strip() == "[2.0, 2.0, 2.0]"
    site = pathlib.Path(subprocess.run([str(py), "-c", "import tessera, os; print(os.path.dirname(tessera.__file__))"],
                                       capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip())
    assert (site / "core" / "__init__.pyi").exists()
    script = tmp_path / "s.py"
    script.write_text("import tessera.core as mx\nprint(mx.distributed.all_sum(mx.ones(2)).tolist())\n")
    r = subprocess.run([str(env_dir / "bin" / "tessera"), "launch", "-n", "2", "--no-prefix", str(script)],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, PATH=str(env_dir / "bin")))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[2.0, 2.0]", "[2.0, 2.0]"]
