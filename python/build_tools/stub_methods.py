"""Writes the stubs of the array methods that are module functions (python/src/array_methods.cpp).

nanobind's stubgen shows such a method as ``sum: instancemethod = ...`` (it is the module function
bound as a method); this replaces each with the module function's own stub (signature, overloads
and docstring) as a method, its first parameter becoming ``self``. Run on tessera/core/__init__.pyi
after stubgen: python stub_methods.py PATH.
"""

import re
import sys


def function_stubs(lines):
    """{name: [block of lines, ...]} for the module-level defs (one block per overload)."""
    blocks = {}
    i = 0
    while i < len(lines):
        m = re.match(r"def (\w+)\(", lines[i])
        if not m:
            i += 1
            continue
        start = i
        while start > 0 and lines[start - 1].startswith("@"):
            start -= 1
        j = i + 1
        while j < len(lines) and (lines[j] == "" or lines[j][0].isspace()):
            j += 1
        end = j
        while end > i and lines[end - 1] == "":
            end -= 1
        blocks.setdefault(m.group(1), []).append(lines[start:end])
        i = j
    return blocks


def as_method(def_line):
    """`def f(first: T, rest...)` -> `def f(self, rest...)` (T may hold brackets and commas)."""
    open_at = def_line.index("(") + 1
    depth, k = 0, open_at
    while k < len(def_line):
        c = def_line[k]
        if c in "[(":
            depth += 1
        elif c in "])":
            if depth == 0:
                break
            depth -= 1
        elif c == "," and depth == 0:
            break
        k += 1
    return def_line[:open_at] + "self" + def_line[k:]


def main(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    functions = function_stubs(lines)
    out, replaced = [], 0
    for line in lines:
        m = re.fullmatch(r"(\s+)(\w+): instancemethod = \.\.\.", line)
        if not m:
            out.append(line)
            continue
        indent, name = m.groups()
        if name not in functions:
            sys.exit(f"stub_methods: array.{name} is a module function, but {path} has no "
                     f"def {name}")
        for k, block in enumerate(functions[name]):
            if k:
                out.append("")
            for b in block:
                if b.startswith("def "):
                    b = as_method(b)
                out.append(indent + b if b else b)
        replaced += 1
    if replaced == 0:
        sys.exit(f"stub_methods: no method of the form 'name: instancemethod' in {path}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
