"""MLX peer of `make bench-dist` (benchmarks/collectives.cpp starts it with mlx.launch and a
loopback hostfile; not part of the library). One rank of MLX's ring backend (CPU build).

Times, for float32 messages:
  all_sum      --mode inplace: `x = mx.distributed.all_sum(x)` (MLX donates x's buffer);
               --mode oop:     `y = mx.distributed.all_sum(x)` (a fresh result every call; the
               driver runs this under GLIBC_TUNABLES=glibc.malloc.hugetlb=1, BENCHMARKING.md)
  all_gather   `y = all_gather(x)`
  sum_scatter  `y = sum_scatter(x)` (MLX's ring has none: the line says `unsupported`)
  sendrecv     ping-pong between rank pairs (2k, 2k+1) (ring neighbours) with send / recv_like

  mlx_collectives.py --out PREFIX [--mode inplace|oop] [--ops a,b] [--max-bytes N]
      [--target-ms T] [--max-iters M]

Writes PREFIX.<rank>: one line per (op, size): `op nominal_bytes total_bytes iters seconds`,
seconds = this rank's time per op (the driver takes the maximum over ranks).
"""

import argparse
import time

import mlx.core as mx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--mode", choices=["inplace", "oop"], default="oop")
    p.add_argument("--ops", default="all_sum,all_gather,sum_scatter,sendrecv")
    p.add_argument("--max-bytes", type=int, default=256 << 20)
    p.add_argument("--target-ms", type=float, default=30.0)
    p.add_argument("--max-iters", type=int, default=1000)
    a = p.parse_args()

    mx.set_default_device(mx.cpu)
    g = mx.distributed.init(strict=True, backend="ring")
    rank, n = g.rank(), g.size()
    dist = mx.distributed

    def barrier():
        mx.eval(dist.all_sum(mx.array(1.0), group=g))

    def max_over_ranks(t):
        # Every rank contributes its value in its own slot (exact: x + 0), then max locally.
        v = mx.zeros((n,), dtype=mx.float32)
        v[rank] = t
        return float(mx.max(dist.all_sum(v, group=g)).item())

    f = open(f"{a.out}.{rank}", "w")
    ops = a.ops.split(",")
    sizes = []
    b = 4
    while b <= a.max_bytes:
        sizes.append(b)
        b *= 4

    for op in ops:
        for nbytes in sizes:
            block = max(4, nbytes // n // 4 * 4)
            total = block * n if op in ("all_gather", "sum_scatter") else nbytes
            # all_gather / sum_scatter: nbytes is the full buffer; skip uneven splits.
            if total != nbytes or total > a.max_bytes:
                continue
            state = {}
            if op == "all_sum":
                state["x"] = mx.ones((nbytes // 4,), dtype=mx.float32)
                if a.mode == "inplace":
                    def once():
                        state["x"] = dist.all_sum(state["x"], group=g)
                        mx.eval(state["x"])
                else:
                    def once():
                        y = dist.all_sum(state["x"], group=g)
                        mx.eval(y)
            elif op == "all_gather":
                state["x"] = mx.ones((block // 4,), dtype=mx.float32)

                def once():
                    mx.eval(dist.all_gather(state["x"], group=g))
            elif op == "sum_scatter":
                state["x"] = mx.ones((total // 4,), dtype=mx.float32)

                def once():
                    mx.eval(dist.sum_scatter(state["x"], group=g))
            elif op == "sendrecv":
                state["x"] = mx.ones((nbytes // 4,), dtype=mx.float32)
                peer = rank ^ 1

                def once():
                    if peer >= n:
                        return
                    if rank % 2 == 0:
                        mx.eval(dist.send(state["x"], peer, group=g))
                        mx.eval(dist.recv_like(state["x"], peer, group=g))
                    else:
                        y = dist.recv_like(state["x"], peer, group=g)
                        mx.eval(y)
                        mx.eval(dist.send(y, peer, group=g))
            else:
                raise SystemExit(f"mlx_collectives: unknown op {op}")
            mx.eval(state["x"])
            try:
                once()  # warm-up
            except Exception as e:  # noqa: BLE001 - MLX raises for what its ring lacks
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                f.write(f"{op} {nbytes} {total} 0 unsupported {msg}\n")
                f.flush()
                break
            iters = 1
            if nbytes < (4 << 20):
                best = 1e30
                for _ in range(3):
                    barrier()
                    t0 = time.perf_counter()
                    once()
                    best = min(best, time.perf_counter() - t0)
                t = max_over_ranks(best)
                want = min((4 << 20) // nbytes, a.target_ms / 1e3 / max(t, 1e-7))
                iters = int(max(1, min(want, a.max_iters)))
            barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                once()
            per_op = (time.perf_counter() - t0) / iters
            if op == "sendrecv":
                per_op /= 2  # a round trip carries the message twice
            f.write(f"{op} {nbytes} {total} {iters} {per_op:.9e}\n")
            f.flush()
            del state
    barrier()
    f.close()


if __name__ == "__main__":
    main()
