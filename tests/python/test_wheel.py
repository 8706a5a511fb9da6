"""`pip wheel .` with pip's defaults (build isolation) makes a wheel that installs into a fresh
virtual environment and works there as on a fresh machine: the module, its libtessera, the
stubs and the `tessera` command, with nothing from the build tree or this environment.

`make test` passes its `pip install .` tree (TESSERA_PIP_INSTALL_TREE: the build-dir and CMake
settings), so the wheel comes from the build already made, without compiling again; run by hand
without it, the wheel is built from scratch in a temporary folder (several minutes on 2 cores).
"""

import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import venv

import numpy as np
import pytest

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


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built once for this file's tests."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    tree = shlex.split(os.environ.get("TESSERA_PIP_INSTALL_TREE", ""))
    if not tree:
        tree = ["--config-settings=build-dir=" + str(tmp_path / "build")]
    for setting in tree:  # as the Makefile does: keep scikit-build-core from clearing the objects
        if setting.startswith("--config-settings=build-dir="):
            (ROOT / setting.split("=", 2)[2] / ".skbuild-info.json").unlink(missing_ok=True)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                    *tree, str(ROOT)], check=True, timeout=1800, cwd=ROOT)
    (built,) = wheels.glob("tessera-*.whl")
    return built


def fresh_env(wheel, env_dir):
    """A new virtual environment with the wheel installed; its folder."""
    venv.create(env_dir, with_pip=True)
    subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                   check=True, timeout=600)
    return env_dir


def runner(cwd):
    """run(program, args...): a subprocess in `cwd` with a login-like environment."""
    return lambda *args, **kw: subprocess.run([str(a) for a in args], capture_output=True, text=True,
                                              cwd=cwd, timeout=120, env=clean_env(), **kw)


def test_the_wheel_installs_and_runs_in_a_fresh_environment(wheel, tmp_path):
    env_dir = fresh_env(wheel, tmp_path / "env")
    py = env_dir / "bin" / "python"
    run = runner(tmp_path)

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


# Run by the fresh environment's interpreter: the extension's values for the inputs in argv[1]
# (JSON), as JSON; the reference values come from NumPy in this process.
EXTENSION_PROGRAM = r"""
import json, sys
import tessera.core as mx
from tessera_sample_extensions import axpby

data = json.loads(sys.argv[1])
x, y = mx.array(data["x"]), mx.array(data["y"])
out = {}
out["z"] = axpby(x, y, 2.0, -0.5).tolist()
# A transposed (strided) x and a broadcast y, on a stream given by keyword.
out["zt"] = axpby(x.T, y[:, None], 1.5, 0.25, stream=mx.cpu).tolist()
gx, gy = mx.grad(lambda a, b: (axpby(a, b, 2.0, -0.5) * a).sum(), argnums=(0, 1))(x, y)
out["gx"], out["gy"] = gx.tolist(), gy.tolist()
_, jv = mx.jvp(lambda a, b: axpby(a, b, 2.0, -0.5), [x, y], [mx.ones_like(x), mx.ones_like(y)])
out["jvp"] = jv[0].tolist()
f = lambda a, b: axpby(a, b, 2.0, -0.5)
out["vmap"] = mx.vmap(f, in_axes=(1, 0))(x, y).tolist()  # both batched
out["vmap_none"] = mx.vmap(f, in_axes=(0, None))(x, y).tolist()  # y unbatched
out["compiled"] = mx.compile(lambda a, b: axpby(a, b, 2.0, -0.5) + 1)(x, y).tolist()
out["dtypes"] = [str(axpby(x.astype(mx.bfloat16), y.astype(mx.bfloat16), 1.0, 1.0).dtype),
                 str(axpby(mx.array([1, 2]), mx.array([3, 4]), 1.0, 1.0).dtype)]
xb, yb = x.astype(mx.bfloat16), y.astype(mx.bfloat16)
out["bf16"] = axpby(xb, yb, 2.0, -0.5).astype(mx.float32).tolist()
try:
    mx.eval(axpby(mx.array([1j]), mx.array([1j]), 1.0, 1.0))
except ValueError as e:
    out["complex"] = str(e)
print(json.dumps(out))
"""


def test_a_cpp_extension_builds_against_the_installed_wheel(wheel, tmp_path):
    """examples/extension (a primitive with a CPU kernel, vjp, jvp and vmap, bound with
    nanobind) builds against the wheel installed in a fresh environment, as its README says,
    and its function takes and returns tessera.core arrays there."""
    env_dir = fresh_env(wheel, tmp_path / "env")
    py = env_dir / "bin" / "python"
    pip_env = dict(clean_env(), CMAKE_BUILD_PARALLEL_LEVEL="2")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "setuptools>=70.1", "nanobind==3.1.0"],
                   check=True, timeout=600, env=pip_env)
    source = tmp_path / "extension"  # pip builds in the source folder: a copy keeps the tree clean
    shutil.copytree(ROOT / "examples" / "extension", source)
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-build-isolation", str(source)],
                       capture_output=True, text=True, timeout=900, env=pip_env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]

    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal(4).astype(np.float32)
    out = runner(tmp_path)(py, "-c", EXTENSION_PROGRAM,
                           json.dumps({"x": x.tolist(), "y": y.tolist()}))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    close = lambda a, b, tol=1e-6: np.testing.assert_allclose(np.array(a), b, rtol=tol, atol=tol)
    close(got["z"], 2 * x - 0.5 * y)
    close(got["zt"], 1.5 * x.T + 0.25 * y[:, None])
    # d/da sum((2a - b/2) * a) = 4a - b/2; d/db = -a/2 summed over the broadcast rows.
    close(got["gx"], 4 * x - 0.5 * y, 1e-5)
    close(got["gy"], (-0.5 * x).sum(axis=0), 1e-5)
    close(got["jvp"], np.full((3, 4), 2 - 0.5))
    close(got["vmap"], 2 * x.T - 0.5 * y[:, None])
    close(got["vmap_none"], 2 * x - 0.5 * y)
    close(got["compiled"], 2 * x - 0.5 * y + 1)
    assert got["dtypes"] == ["tessera.core.bfloat16", "tessera.core.float32"]
    close(got["bf16"], 2 * x - 0.5 * y, 0.05)  # bfloat16 inputs and output: 8-bit mantissas
    assert "float16, bfloat16, float32, float64" in got["complex"]
