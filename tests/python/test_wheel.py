"""`pip wheel .` with pip's defaults (build isolation) makes a wheel that installs into a fresh
virtual environment and works there as on a fresh machine: the module, its libtessera, the
stubs and the `tessera` command, with nothing from the build tree or this environment.

`make test` passes its `pip install .` tree (TESSERA_PIP_INSTALL_TREE: the build-dir and CMake
settings), so the wheel comes from the build already made, without compiling again; run by hand
without it, the wheel is built from scratch in a temporary folder (several minutes on 2 cores).
"""

import os
import pathlib
import re
import shlex
import subprocess
import sys
import venv

ROOT = pathlib.Path(__file__).resolve().parents[2]

# What every Linux machine of this kind has (glibc, the GCC runtime, zlib: Debian's required
# packages): a wheel's binaries may need these, and otherwise only what the wheel or its declared
# dependencies (scipy-openblas32) bring.
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1",
               "ld-linux-x86-64.so.2", "libpthread.so.0", "libdl.so.2", "librt.so.1"}


def dynamic_section(path):
    """(NEEDED names, RUNPATH/RPATH entries) of an ELF file, from readelf."""
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                         check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
    paths = []
    for entry in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[(.+?)\]", out):
        paths += entry.split(":")
    return needed, paths


def clean_env(**extra):
    """A login-like environment: no LD_LIBRARY_PATH, PYTHONPATH or build variables."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def test_the_wheel_installs_and_runs_in_a_fresh_environment(tmp_path):
    tree = shlex.split(os.environ.get("TESSERA_PIP_INSTALL_TREE", ""))
    if not tree:
        tree = ["--config-settings=build-dir=" + str(tmp_path / "build")]
    for setting in tree:  # as the Makefile does: keep scikit-build-core from clearing the objects
        if setting.startswith("--config-settings=build-dir="):
            (ROOT / setting.split("=", 2)[2] / ".skbuild-info.json").unlink(missing_ok=True)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                    *tree, str(ROOT)], check=True, timeout=1800, cwd=ROOT)
    (wheel,) = wheels.glob("tessera-*.whl")

    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=600)
    run = lambda *args, **kw: subprocess.run([str(a) for a in args], capture_output=True, text=True,
                                             cwd=tmp_path, timeout=120, env=clean_env(), **kw)

    out = run(py, "-c", "import tessera.core as mx; print((mx.arange(4) * 2 + 1).tolist())")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1, 3, 5, 7]"
    # The build requirements stayed in pip's build environment.
    out = run(py, "-c", "import importlib.util as u; print(u.find_spec('nanobind'))")
    assert out.stdout.strip() == "None"

    site = pathlib.Path(run(py, "-c", "import tessera, os; print(os.path.dirname(tessera.__file__))")
                        .stdout.strip())
    assert (site / "core" / "__init__.pyi").exists()
    binaries = [site / "bin" / "tessera", site / "lib" / "libtessera.so", *site.glob("core*.so")]
    assert len(binaries) == 3, binaries
    bundled = {b.name for b in binaries} | {"libscipy_openblas.so"}
    for binary in binaries:
        needed, paths = dynamic_section(binary)
        assert set(needed) <= SYSTEM_LIBS | bundled, (binary, set(needed) - SYSTEM_LIBS - bundled)
        assert paths and all(p.startswith("$ORIGIN") for p in paths), (binary, paths)

    # The opt-in for programs written for MLX, from the installed package, and its undoing.
    tessera_cmd = env_dir / "bin" / "tessera"
    assert run(tessera_cmd, "mlx", "enable").returncode == 0
    out = run(py, "-c", "import mlx.core as mx; print(mx.array([1, 2]).sum().item())")
    assert out.returncode == 0 and out.stdout.strip() == "3", out.stderr
    assert run(tessera_cmd, "mlx", "disable").returncode == 0
    assert "No module named 'mlx'" in run(py, "-c", "import mlx.core").stderr

    # A Python job started by the console script: ranks run with the environment's interpreter.
    script = tmp_path / "s.py"
    script.write_text("import tessera.core as mx\n"
                      "w = mx.distributed.init()\n"
                      "print(mx.distributed.all_sum(mx.ones(2) * (w.rank() + 1)).tolist())\n")
    r = subprocess.run([str(env_dir / "bin" / "tessera"), "launch", "-n", "2", "--no-prefix",
                        str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env=clean_env(PATH=str(env_dir / "bin") + ":/usr/bin:/bin"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[3.0, 3.0]", "[3.0, 3.0]"]
