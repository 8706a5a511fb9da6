"""Renders a Tessera timeline trace (Chrome-trace JSON, e.g. the trace.json of
`tessera launch --trace DIR`) to an image: one band per process (rank), one row per thread,
a box per kernel / pool chunk / collective, coloured by category; a collective's waiting part is
hatched. Needs matplotlib.

    python scripts/plot_trace.py DIR/trace.json out.png [--from-ms A --to-ms B]
"""

import argparse
import json

COLOURS = {"kernel": "#4c72b0", "pool": "#8fb0e0", "collective": "#dd8452", "compile": "#55a868"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--from-ms", type=float, default=None)
    ap.add_argument("--to-ms", type=float, default=None)
    args = ap.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    events = json.load(open(args.trace))["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    slices = [e for e in events if e.get("ph") == "X"]
    lo = args.from_ms * 1e3 if args.from_ms is not None else min(e["ts"] for e in slices)
    hi = args.to_ms * 1e3 if args.to_ms is not None else max(e["ts"] + e["dur"] for e in slices)
    slices = [e for e in slices if e["ts"] + e["dur"] >= lo and e["ts"] <= hi]
    used = sorted({(e["pid"], e["tid"]) for e in slices})
    row = {key: i for i, key in enumerate(used)}

    fig, ax = plt.subplots(figsize=(12, 0.45 * len(used) + 1.5))
    # Collectives run inside their kernel's slice: drawn last, as a narrower bar on top.
    order = {"kernel": 0, "pool": 1, "compile": 2, "collective": 3}
    for e in sorted(slices, key=lambda e: order.get(e.get("cat"), 0)):
        y = row[(e["pid"], e["tid"])]
        x0, w = (e["ts"] - lo) / 1e3, e["dur"] / 1e3
        h = 0.5 if e.get("cat") == "collective" else 0.8
        ax.barh(y, w, left=x0, height=h, color=COLOURS.get(e.get("cat"), "#999999"),
                edgecolor="black", linewidth=0.2)
        wait = e.get("args", {}).get("wait_us")
        if e.get("cat") == "collective" and wait:
            ax.barh(y, wait / 1e3, left=x0, height=0.5, color="none", hatch="///",
                    edgecolor="#7f3f00", linewidth=0)
    labels = [f"{procs.get(p, p)}: {threads.get((p, t), t)}" for p, t in used]
    ax.set_yticks(range(len(used)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_xlim(0, (hi - lo) / 1e3)
    handles = [Patch(color=c, label=k) for k, c in COLOURS.items()]
    handles.append(Patch(facecolor="white", hatch="///", edgecolor="#7f3f00", label="waiting for a peer"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=len(handles),
              fontsize="small", frameon=False)
    ax.set_title("Tessera timeline trace")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
