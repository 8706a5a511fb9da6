#!/usr/bin/env python3
"""The layers of libtessera and who may include whom (docs/architecture.md, "Layers").

Every quoted #include in include/tessera/, src/, python/src/ and tools/ is resolved to the layer
it names and checked against ALLOWED, and code outside the CPU back end may not name its namespace
(cpu::); a wrong-way include is printed as
`file:line: "header" (layer a -> layer b)` with the layers that file may use, and the exit
status is 1. ctest runs this (Layers.IncludeGraph), so a wrong-way include fails `make test`.

    python3 tools/check_layers.py [SOURCE_ROOT]
"""

import os
import re
import sys

# Who may include whom. A layer always may include itself.
ALLOWED = {
    "core": {"seam"},  # eval and the scheduler reach the devices through the seam
    "common": {"core"},  # src/backend/common: device-neutral pieces of the kernels
    "ops": {"core", "common"},  # the ops and the transformations (vjp, vmap, custom_function)
    "io": {"core", "common", "ops"},
    "seam": {"core", "common"},  # src/backend/*.h: what a device implements for compile & co.
    "backend": {"core", "common", "ops", "seam"},
    "compile": {"core", "common", "ops", "seam"},
    "export": {"core", "common", "ops", "compile", "io"},
    "distributed": {"core", "common", "ops"},
    # The bindings and the command-line tools use the public headers (every public layer) and the
    # distributed library's own headers; nothing else of src/.
    "bindings": {"core", "ops", "io", "compile", "export", "distributed"},
    "tools": {"core", "ops", "distributed"},
    "umbrella": {"core", "ops", "io", "compile", "export", "distributed"},  # tessera/tessera.h
}

# Single files allowed across layers, each with its reason.
EXCEPTIONS = {
    # The CPU kernels of the collectives implement the distributed primitives' eval_cpu, as the
    # CPU kernels of every other family implement theirs (the primitives are declared with the
    # distributed layer because they hold a Group).
    ("src/backend/cpu/distributed.cpp", "distributed/primitives.h"),
}

# The layer of each public header (include/tessera/...): the layer that implements it.
PUBLIC = {
    "allocator.h": "core", "array.h": "core", "config.h": "core", "device.h": "core",
    "dtype.h": "core", "eval.h": "core", "export_state.h": "core", "graph_utils.h": "core",
    "interrupt.h": "core", "memory.h": "core", "primitive.h": "core", "scheduler.h": "core",
    "stream.h": "core", "trace.h": "core", "types.h": "core", "utils.h": "core",
    "ops.h": "ops", "ops/": "ops", "primitives.h": "ops", "primitives/": "ops", "einsum.h": "ops",
    "fast.h": "ops", "fft.h": "ops", "linalg.h": "ops", "random.h": "ops", "transforms.h": "ops",
    "compile.h": "compile", "export.h": "export", "io.h": "io", "distributed.h": "distributed",
    "tessera.h": "umbrella",  # every layer: for users, not for the library itself
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# A name of the CPU back end's namespace (cpu::jit::load, tessera::cpu::FusedKernel), not the
# device (Device::cpu): only the back end itself may use it; the rest reach a device through the
# seam (src/backend/*.h).
BACKEND_NAME = re.compile(r"(?<!Device::)(?<!DeviceType::)\bcpu::")


def layer_of_src(rel):
    """The layer of a path under src/ ("core/array.cpp", "backend/cpu/gemm.cpp", ...)."""
    parts = rel.split("/")
    if parts[0] != "backend":
        return parts[0]
    if len(parts) == 2:
        return "seam"
    return "common" if parts[1] == "common" else "backend"


def layer_of_public(rel):
    for key, layer in PUBLIC.items():
        if rel == key or (key.endswith("/") and rel.startswith(key)):
            return layer
    return None


def file_layer(path):
    if path.startswith("include/tessera/"):
        return layer_of_public(path[len("include/tessera/"):])
    if path.startswith("src/"):
        return layer_of_src(path[len("src/"):])
    if path.startswith("python/src/"):
        return "bindings"
    if path.startswith("tools/"):
        return "tools"
    return None


def sources(root):
    """The C++ files the check reads, as paths relative to root."""
    for top in ("include/tessera", "src", "python/src", "tools"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith((".h", ".cpp")):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def include_error(root, path, src, header):
    """What is wrong with `path` (of layer src) including `header`; None when it may."""
    if header.startswith("tessera/"):
        target = layer_of_public(header[len("tessera/"):])
        if target is None:
            return f'"{header}" is no public header this check knows: add it to PUBLIC in ' \
                   "tools/check_layers.py"
    elif os.path.exists(os.path.join(root, "src", header)):
        target = layer_of_src(header)
        if src in ("bindings", "tools") and not (target == "distributed" and src == "tools"):
            target = "internal " + target
    else:
        return None  # a header beside the file (python/src, tools/tessera)
    if target == "umbrella" and src not in ("bindings", "tools"):
        return f'"{header}" (the umbrella header) inside the library: include what the file uses'
    if target in (src, "umbrella") or target in ALLOWED[src] or (path, header) in EXCEPTIONS:
        return None
    may = ", ".join(sorted(ALLOWED[src])) or "nothing else"
    return f'"{header}" ({src} -> {target}); {src} may include {may}'


def check(root):
    errors = []
    for path in sources(root):
        src = file_layer(path)
        if src is None:
            errors.append(f"{path}: a public header this check does not know: add it to "
                          "PUBLIC in tools/check_layers.py")
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                error = m and include_error(root, path, src, m.group(1))
                if error:
                    errors.append(f"{path}:{number}: {error}")
                code = line.split("//", 1)[0]
                if src != "backend" and BACKEND_NAME.search(code):
                    errors.append(f"{path}:{number}: names the CPU back end ({src} -> "
                                  "backend): reach a device through src/backend/*.h")
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    errors = check(os.path.abspath(root))
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} wrong-way include(s) or call(s); the layers are in docs/architecture.md")
        return 1
    print("layers: every include goes the allowed way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
