"""The timeline trace from Python: mx.start_trace / stop_trace, and a 2-rank job under
`tessera launch --trace DIR` whose merged file is valid Chrome-trace JSON with one process per
rank and every collective of the run."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import tessera.core as mx

TESSERA = os.path.join(os.path.dirname(sys.executable), "tessera")


def test_start_and_stop_trace(tmp_path):
    path = tmp_path / "t.json"
    mx.start_trace(str(path))
    assert mx.is_tracing()
    mx.eval(mx.ones((64, 64)) @ mx.ones((64, 64)))
    assert mx.stop_trace() == str(path)
    t = json.loads(path.read_text())
    names = [e["name"] for e in t["traceEvents"] if e.get("cat") == "kernel"]
    assert "Matmul" in names, names


def test_two_rank_job_trace_has_every_collective(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import tessera.core as mx
        g = mx.distributed.init()
        x = mx.ones(1000) * (g.rank() + 1)
        for _ in range(3):
            x = mx.distributed.all_sum(x) / 3
            mx.eval(x)
        y = mx.distributed.all_gather(mx.ones(10))
        if g.rank() == 0:
            z = mx.distributed.send(mx.arange(5.0), 1)
        else:
            z = mx.distributed.recv((5,), mx.float32, 0)
        mx.eval(y, z)
        print("done")
    """))
    out = tmp_path / "trace"
    r = subprocess.run([TESSERA, "launch", "-n", "2", "--trace", str(out), str(script)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out)) == ["rank0.json", "rank1.json", "trace.json"]
    t = json.loads((out / "trace.json").read_text())
    procs = {e["pid"]: e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "process_name"}
    assert procs == {0: "rank 0", 1: "rank 1"}
    coll = [e for e in t["traceEvents"] if e.get("cat") == "collective"]
    for rank in (0, 1):
        mine = [e for e in coll if e["pid"] == rank]
        ops = sorted(e["name"] for e in mine)
        p2p = "send" if rank == 0 else "recv"
        assert ops == sorted(["all_sum"] * 3 + ["all_gather", p2p]), ops
        for e in mine:
            a = e["args"]
            assert a["wait_us"] + a["move_us"] <= e["dur"] + 2
            assert a["rank"] == rank and a["group_size"] == 2
        sums = [e for e in mine if e["name"] == "all_sum"]
        assert all(e["args"]["bytes"] == 4000 for e in sums)
        (pt,) = [e for e in mine if e["name"] == p2p]
        assert pt["args"]["peer"] == 1 - rank and pt["args"]["bytes"] == 20
    assert min(e["ts"] for e in t["traceEvents"] if "ts" in e) == 0


def test_export_to_dot_writes_the_lazy_graph(tmp_path):
    import io

    a = mx.array(1.0) + mx.array(2.0)
    b = mx.exp(a) * 3
    f = io.StringIO()
    mx.export_to_dot(f, b, named=a)
    dot = f.getvalue()
    assert dot.startswith("digraph {") and dot.rstrip().endswith("}")
    for label in ('label="Add"', 'label="Exp"', 'label="Multiply"', '"named"'):
        assert label in dot, label
    path = tmp_path / "g.dot"
    mx.export_to_dot(str(path), b)
    assert path.read_text().count("shape=rectangle") == 3
    mx.eval(b)
    f = io.StringIO()
    mx.export_to_dot(f, b)  # evaluated: a source only
    assert "shape=rectangle" not in f.getvalue()
    with pytest.raises(ValueError, match="path or an object with write"):
        mx.export_to_dot(3, b)
