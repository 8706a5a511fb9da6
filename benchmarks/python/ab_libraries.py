"""An A/B of two builds of Tessera on Tessera's own rows of `make bench` (bench_ops, bench_op_tail)
and `make bench-compile`: the two builds alternate, round by round (the order swapped every
round), and each row prints the new build's speed over the old one's (old time / new time, of
the medians) with the old build's min-max, so a slowdown shows beside this machine's noise. The
redesign issues ask for it: "each row's median new/old >= 0.97 or inside the old build's
min-max".

    python ab_libraries.py --old-lib DIR --new-lib DIR --old-py DIR --new-py DIR \
        --bench-bin DIR [--rounds 5]

--old-lib / --new-lib: folders holding each build's libtessera.so (the bench binaries in
--bench-bin load it through LD_LIBRARY_PATH); --old-py / --new-py: folders holding each build's
installed `tessera` package with the `scipy_openblas32` beside it that its library loads (put
first on PYTHONPATH for bench_compile.py, run by this Python, which must import from there).
Peers are not run: only Tessera's rows are compared.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
UNITS = {"ms": 1e-3, "us": 1e-6}


def run_cpp(binary, lib, reps):
    """{row: median seconds} of one round of a C++ bench on the library in `lib`."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        env = dict(os.environ, LD_LIBRARY_PATH=lib)
        subprocess.run([binary, "--rounds", "1", "--reps", str(reps), "--peer-python", "false",
                        "--json", f.name], env=env, check=True, capture_output=True, timeout=1200)
        data = json.load(open(f.name))
    rows = data.get("ops", data)  # bench_ops keeps its rows under "ops"
    return {name: statistics.median(r["tessera_s"]) for name, r in rows.items()
            if isinstance(r, dict) and r.get("tessera_s")}


def run_compile(py_dir, reps):
    """{row: median seconds} of Tessera's column of one bench_compile.py run."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([py_dir, HERE]))
    where = subprocess.run([sys.executable, "-c", "import tessera.core as m; print(m.__file__)"],
                           env=env, check=True, capture_output=True, text=True).stdout
    if not where.startswith(os.path.abspath(py_dir)):
        sys.exit(f"tessera.core came from {where.strip()}, not {py_dir}")
    out = subprocess.run([sys.executable, os.path.join(HERE, "bench_compile.py"), "--repeat",
                          str(reps)], env=env, check=True, capture_output=True, text=True,
                         timeout=1800).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = len(cells) > 1 and re.match(r"([\d.]+) (ms|us) \[", cells[1])
        if m:
            rows["compile: " + cells[0]] = float(m.group(1)) * UNITS[m.group(2)]
        m = re.search(r"first call .*: cold cache ([\d.]+) (ms|us).*warm cache ([\d.]+) (ms|us)",
                      line)
        if m:
            rows["compile: first call, cold cache"] = float(m.group(1)) * UNITS[m.group(2)]
            rows["compile: first call, warm cache"] = float(m.group(3)) * UNITS[m.group(4)]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--old-lib", "--new-lib", "--old-py", "--new-py", "--bench-bin"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    builds = {"old": (args.old_lib, args.old_py), "new": (args.new_lib, args.new_py)}
    samples = {"old": {}, "new": {}}  # build -> row -> [seconds per round]
    for r in range(args.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for build in order:
            lib, py = builds[build]
            print(f"[ab] round {r + 1}/{args.rounds}: {build}", file=sys.stderr, flush=True)
            rows = {}
            for b in ("bench_ops", "bench_op_tail"):
                rows.update(run_cpp(os.path.join(args.bench_bin, b), lib, args.reps))
            rows.update(run_compile(py, args.reps))
            for name, t in rows.items():
                samples[build].setdefault(name, []).append(t)
    print(f"A/B over {args.rounds} alternated rounds (medians of each round's medians, ms)")
    print("| row | old | old min-max | new | speed new/old | verdict |")
    print("|---|---|---|---|---|---|")
    worst = []
    for name in samples["old"]:
        old, new = samples["old"][name], samples["new"].get(name)
        if not new:
            continue
        mo, mn = statistics.median(old), statistics.median(new)
        speed = mo / mn  # > 1: the new build is faster
        inside = min(old) <= mn <= max(old)
        ok = speed >= 0.97 or inside
        worst.append((speed, name))
        print(f"| {name} | {mo * 1e3:.3f} | {min(old) * 1e3:.3f}-{max(old) * 1e3:.3f} | "
              f"{mn * 1e3:.3f} | {speed:.3f} | {'ok' if ok else 'SLOWER'} |")
    worst.sort()
    print("slowest rows (old/new time):", ", ".join(f"{n} {s:.3f}" for s, n in worst[:3]))


if __name__ == "__main__":
    main()
