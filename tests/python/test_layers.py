"""tools/check_layers.py, the include check that keeps the library's layers (docs/architecture.md):
on small trees of its own (ctest's Layers.IncludeGraph runs it on this one)."""

import os
import subprocess
import sys

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                     "check_layers.py")


def run_check(root):
    return subprocess.run([sys.executable, CHECK, str(root)], capture_output=True, text=True,
                          timeout=60)


def write(root, path, text):
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text)


def small_tree(tmp_path):
    write(tmp_path, "include/tessera/array.h", "#pragma once\n")
    write(tmp_path, "include/tessera/ops.h", '#include "tessera/array.h"\n')
    write(tmp_path, "src/core/array.cpp", '#include "tessera/array.h"\n#include "core/util.h"\n')
    write(tmp_path, "src/core/util.h", "#pragma once\n")
    write(tmp_path, "src/ops/shape.cpp", '#include "core/util.h"\n#include "tessera/ops.h"\n')
    write(tmp_path, "src/backend/cpu/shape.cpp", '#include "ops/shape.h"\n')
    write(tmp_path, "src/ops/shape.h", "#pragma once\n")
    return tmp_path


def test_a_tree_that_includes_downward_passes(tmp_path):
    r = run_check(small_tree(tmp_path))
    assert r.returncode == 0, r.stdout
    assert "every include goes the allowed way" in r.stdout


def test_a_wrong_way_include_is_named_with_its_line_and_the_rule(tmp_path):
    root = small_tree(tmp_path)
    write(root, "src/core/eval.cpp", '#include <vector>\n\n#include "ops/shape.h"\n')
    write(root, "src/ops/fused.cpp", '#include "backend/cpu/kernels.h"\n')
    write(root, "src/backend/cpu/kernels.h", "#pragma once\n")
    r = run_check(root)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert 'src/core/eval.cpp:3: "ops/shape.h" (core -> ops); core may include seam' in lines
    assert any(l.startswith('src/ops/fused.cpp:1: "backend/cpu/kernels.h" (ops -> backend)')
               for l in lines), lines
    assert lines[-1].startswith("2 wrong-way include(s) or call(s)")


def test_bindings_use_public_headers_only(tmp_path):
    root = small_tree(tmp_path)
    write(root, "python/src/convert.cpp", '#include "tessera/ops.h"\n#include "core/util.h"\n')
    r = run_check(root)
    assert r.returncode == 1
    assert 'python/src/convert.cpp:2: "core/util.h" (bindings -> internal core)' in r.stdout


def test_an_unknown_public_header_must_be_placed(tmp_path):
    root = small_tree(tmp_path)
    write(root, "include/tessera/newthing.h", "#pragma once\n")
    r = run_check(root)
    assert r.returncode == 1
    assert "include/tessera/newthing.h: a public header this check does not know" in r.stdout


def test_only_the_cpu_back_end_names_its_namespace(tmp_path):
    root = small_tree(tmp_path)
    write(root, "src/compile/compile.cpp",
          "// cpu::jit in a comment is fine\nbool b = s.device == Device::cpu;\n"
          "auto k = cpu::jit::load(src);\n")
    write(root, "src/backend/cpu/jit.cpp", "auto k = tessera::cpu::jit::load(src);\n")
    r = run_check(root)
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == ("src/compile/compile.cpp:3: names the CPU back end "
                                        "(compile -> backend): reach a device through "
                                        "src/backend/*.h"), r.stdout
    assert "jit.cpp" not in r.stdout
