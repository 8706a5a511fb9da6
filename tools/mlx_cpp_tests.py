#!/usr/bin/env python3
"""Builds MLX's own C++ tests (tests/*_tests.cpp of an MLX source tree, doctest) against Tessera
and prints the test cases that pass, fail and do not build.

    tools/mlx_cpp_tests.py [--skip-if-missing] MLX_SOURCE BUILD_DIR [OUT_DIR]

MLX_SOURCE: a checkout of github.com/ml-explore/mlx (0.32.x; MLX publishes no source archive on
PyPI, so none can be fetched here). BUILD_DIR: a Tessera build tree (libtessera.so).

Each test file is compiled with generated `mlx/*.h` headers in front that map `mlx::core` onto
`tessera` (and answer MLX's GPU queries with "not available"); nothing of MLX's is kept in the
repository. A test case that does not compile is not built: the file is compiled again in OUT_DIR
with that case between `#if 0` and `#endif` (its text otherwise unchanged), until the rest
compiles; an error outside every case leaves the whole file not built. The built cases link into
one doctest runner and each runs in a process of its own (a crash or a hang, bounded by a
timeout, costs that case only). GPU-only files (gpu_tests, residency_tests) are left out.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

COMPAT = """#pragma once
#include <future>
#include <set>
#include <thread>
#include <tessera/primitives.h>
#include <tessera/scheduler.h>
#include <tessera/tessera.h>
namespace mlx::core {
using namespace tessera;
namespace gpu {
inline bool is_available() { return false; }
}  // namespace gpu
namespace cu {
inline bool is_available() { return false; }
}  // namespace cu
}  // namespace mlx::core
"""
HEADERS = ["mlx.h", "primitives.h", "scheduler.h", "memory.h", "allocator.h", "stream.h", "ops.h",
           "graph_utils.h", "export.h", "device.h", "backend/cuda/cuda.h",
           "backend/metal/device.h"]
GPU_ONLY = {"gpu_tests.cpp", "residency_tests.cpp"}
CASE = re.compile(r'^TEST_CASE\("((?:[^"\\]|\\.)*)"')


def fail(message, code=2):
    print(f"mlx_cpp_tests: {message}", file=sys.stderr)
    sys.exit(code)


def body_end(lines, start):
    """The index after the line closing the body that opens at or after lines[start] (braces
    counted outside string and character literals and // comments)."""
    depth, opened = 0, False
    for i in range(start, len(lines)):
        code = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', "", lines[i]).split("//")[0]
        for c in code:
            if c == "{":
                depth, opened = depth + 1, True
            elif c == "}":
                depth -= 1
        if opened and depth == 0:
            return i + 1
    return len(lines)


def cases_of(lines):
    """[(name, first line index, end index)] of the TEST_CASEs: each from its TEST_CASE line to
    the end of its body (the helpers between cases belong to none)."""
    return [(CASE.match(l).group(1), i, body_end(lines, i))
            for i, l in enumerate(lines) if CASE.match(l)]


def compile_file(path, out, flags):
    """(object or None, {case name: first error}, total cases) for one test file."""
    lines = path.read_text().split("\n")
    cases = cases_of(lines)
    excluded = {}
    src = out / "src" / path.name
    obj = out / "obj" / (path.stem + ".o")
    for _ in range(len(cases) + 1):
        text = list(lines)
        for name, start, end in cases:
            if name in excluded:
                # #line keeps the following lines' numbers those of the original file.
                text[start] = "#if 0\n" + text[start]
                text[end - 1] = text[end - 1] + f"\n#endif\n#line {end + 1}"
        src.write_text("\n".join(text))
        r = subprocess.run(["g++", *flags, "-c", str(src), "-o", str(obj)],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return obj, excluded, len(cases)
        new = False
        for m in re.finditer(rf"{re.escape(str(src))}:(\d+):\d+: error: (.*)", r.stderr):
            original = int(m.group(1)) - 1
            owner = [c for c in cases if c[1] <= original < c[2]]
            if not owner:
                excluded = {n: f"line {original + 1}: {m.group(2)} (outside every case)"
                            for n, _, _ in cases}
                (out / "obj" / (path.stem + ".log")).write_text(r.stderr)
                return None, excluded, len(cases)
            name = owner[0][0]
            if name not in excluded:
                excluded[name] = f"line {original + 1}: {m.group(2)}"
                new = True
        if not new:
            break
    (out / "obj" / (path.stem + ".log")).write_text(r.stderr)
    return None, {n: excluded.get(n, "the file does not compile") for n, _, _ in cases}, len(cases)


def main(argv):
    skip = argv[:1] == ["--skip-if-missing"]
    if skip:
        argv = argv[1:]
    mlx = Path(argv[0]) if argv and argv[0] else (Path(os.environ["MLX_SRC"])
                                                 if os.environ.get("MLX_SRC") else None)
    if mlx is None or not (mlx / "tests" / "tests.cpp").exists():
        message = (f"MLX's C++ tests not found (MLX_SOURCE='{mlx or ''}'): pass a checkout of "
                   "github.com/ml-explore/mlx")
        if skip:
            print(f"mlx_cpp_tests: skipped: {message}")
            return 0
        fail(message)
    if len(argv) < 2 or not (Path(argv[1]) / "libtessera.so").exists():
        fail("no libtessera.so in BUILD_DIR (build Tessera first)")
    if not Path("/usr/include/doctest/doctest.h").exists():
        fail("doctest is missing: apt-get install doctest-dev")
    build = Path(argv[1]).resolve()
    out = Path(argv[2] if len(argv) > 2 else build / "mlx-cpp-tests").resolve()
    root = Path(__file__).resolve().parents[1]
    for sub in ("compat/mlx/backend/cuda", "compat/mlx/backend/metal", "obj", "src"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    (out / "compat" / "mlx" / "compat.h").write_text(COMPAT)
    for h in HEADERS:
        (out / "compat" / "mlx" / h).write_text('#include "mlx/compat.h"\n')
    flags = ["-std=c++20", "-O1", "-w", f"-I{out / 'compat'}", f"-I{root / 'include'}"]

    objects, not_built, totals = [], {}, {}
    for path in sorted((mlx / "tests").glob("*_tests.cpp")):
        if path.name in GPU_ONLY:
            continue
        obj, excluded, totals[path.stem] = compile_file(path, out, flags)
        if obj:
            objects.append(str(obj))
        for name, why in excluded.items():
            not_built[(path.stem, name)] = why
    main_obj = out / "obj" / "main.o"
    subprocess.run(["g++", *flags, "-c", str(mlx / "tests" / "tests.cpp"), "-o", str(main_obj)],
                   check=True)
    runner = out / "runner"
    subprocess.run(["g++", *objects, str(main_obj), "-o", str(runner), f"-L{build}",
                    f"-Wl,-rpath,{build}", "-ltessera", "-lpthread"], check=True)

    listing = subprocess.run([str(runner), "--list-test-cases", "--no-colors"],
                             capture_output=True, text=True).stdout.split("\n")
    names = [l for l in listing if l and not l.startswith("[doctest]") and not l.startswith("=")]
    passed, failed = [], []
    for name in names:
        # doctest's filters split on commas and take * ? [ as wildcards: those become '?'.
        pattern = re.sub(r"[,*?\[\]]", "?", name)
        try:
            r = subprocess.run([str(runner), "--no-colors", f"-tc={pattern}"], cwd=out,
                               capture_output=True, text=True, timeout=300)
            ok = r.returncode == 0
            log = r.stdout + r.stderr
        except subprocess.TimeoutExpired:
            ok, log = False, "timed out after 300 s"
        (passed if ok else failed).append(name)
        if not ok:
            with open(out / "failures.log", "a") as f:
                f.write(f"=== {name}\n{log[-3000:]}\n")

    total = sum(totals.values())
    print(f"MLX's C++ test cases against Tessera ({mlx}):")
    for (stem, name), why in sorted(not_built.items()):
        print(f"  not built: {stem}: {name}: {why[:150]}")
    for name in failed:
        print(f"  failed: {name}")
    print(f"passed {len(passed)}, failed {len(failed)}, not built {len(not_built)}, of {total}: "
          f"{100.0 * len(passed) / max(total, 1):.1f}% passed (failure logs: {out}/failures.log)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
