// Gloo peer of `make bench-dist` (benchmarks/collectives.cpp runs it; not part of the library).
// One rank of a Gloo job: TCP transport bound to 127.0.0.1, file-store rendezvous. Times, for
// float32 messages, AllreduceRingChunked (all_sum), AllgatherRing (all_gather),
// ReduceScatterHalvingDoubling (sum_scatter: Gloo has no ring reduce-scatter) and a ping-pong
// between rank pairs (2k, 2k+1) with unbound buffers (sendrecv).
//
//   GLOO_RANK=r GLOO_SIZE=n GLOO_STORE=dir gloo_collectives --out PREFIX [--ops a,b]
//       [--max-bytes N] [--target-ms T] [--max-iters M]
//
// Writes PREFIX.<rank>: one line per (op, size): `op nominal_bytes total_bytes iters seconds`,
// seconds = this rank's time per op (the driver takes the maximum over ranks). The algorithm
// objects are built once per size and run repeatedly (how Gloo is meant to be used), so their
// scratch buffers are allocated outside the timed loop.
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Args {
  std::string out;
  std::vector<std::string> ops = {"all_sum", "all_gather", "sum_scatter", "sendrecv"};
  size_t max_bytes = size_t(256) << 20;
  double target_s = 0.03;
  int max_iters = 1000;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gloo_collectives: missing value after %s\n", k.c_str());
      std::exit(2);
    }
    std::string v = argv[++i];
    if (k == "--out") {
      a.out = v;
    } else if (k == "--ops") {
      a.ops.clear();
      std::stringstream ss(v);
      for (std::string op; std::getline(ss, op, ',');) a.ops.push_back(op);
    } else if (k == "--max-bytes") {
      a.max_bytes = std::stoull(v);
    } else if (k == "--target-ms") {
      a.target_s = std::stod(v) / 1e3;
    } else if (k == "--max-iters") {
      a.max_iters = std::stoi(v);
    } else {
      std::fprintf(stderr, "gloo_collectives: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.out.empty()) {
    std::fprintf(stderr, "gloo_collectives: --out is required\n");
    std::exit(2);
  }
  return a;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) {
    std::fprintf(stderr, "gloo_collectives: %s is not set\n", name);
    std::exit(2);
  }
  return std::atoi(v);
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  const int rank = env_int("GLOO_RANK");
  const int n = env_int("GLOO_SIZE");
  const char* store_dir = std::getenv("GLOO_STORE");
  if (!store_dir) {
    std::fprintf(stderr, "gloo_collectives: GLOO_STORE is not set\n");
    return 2;
  }

  gloo::transport::tcp::attr attr;
  const char* host = std::getenv("GLOO_HOSTNAME");  // this rank's address (simulated hosts)
  attr.hostname = host ? host : "127.0.0.1";
  attr.ai_family = AF_INET;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(300));
  ctx->connectFullMesh(store, dev);

  // Buffers: plain malloc, filled (first touch outside the timing). The driver runs this under
  // GLIBC_TUNABLES=glibc.malloc.hugetlb=1, so large blocks get transparent huge pages.
  const size_t max_elems = args.max_bytes / 4;
  std::vector<float> in(max_elems, 1.0f), out(max_elems, 0.0f);

  FILE* f = std::fopen((args.out + "." + std::to_string(rank)).c_str(), "w");
  if (!f) {
    std::perror("gloo_collectives: open output");
    return 1;
  }

  gloo::BarrierAllToAll barrier(ctx);
  auto max_over_ranks = [&](double t) {
    double v = t;
    gloo::AllreduceRing<double> ar(ctx, {&v}, 1, gloo::ReductionFunction<double>::max);
    ar.run();
    return v;
  };

  std::vector<size_t> sizes;
  for (size_t b = 4; b <= args.max_bytes; b *= 4) sizes.push_back(b);

  for (const std::string& op : args.ops) {
    for (size_t bytes : sizes) {
      size_t block = std::max<size_t>(4, bytes / static_cast<size_t>(n) / 4 * 4);
      size_t total = (op == "all_gather" || op == "sum_scatter") ? block * n : bytes;
      // all_gather / sum_scatter: `bytes` is the full buffer; skip sizes that do not split evenly.
      if (total != bytes || total > args.max_bytes) continue;
      std::function<void()> once;
      std::unique_ptr<gloo::Algorithm> algo;
      std::unique_ptr<gloo::transport::UnboundBuffer> sbuf, rbuf;
      if (op == "all_sum") {
        algo = std::make_unique<gloo::AllreduceRingChunked<float>>(
            ctx, std::vector<float*>{in.data()}, static_cast<int>(bytes / 4));
        once = [&] { algo->run(); };
      } else if (op == "all_gather") {
        algo = std::make_unique<gloo::AllgatherRing<float>>(
            ctx, std::vector<const float*>{in.data()}, out.data(), static_cast<int>(block / 4));
        once = [&] { algo->run(); };
      } else if (op == "sum_scatter") {
        std::vector<int> recv_elems(n, static_cast<int>(block / 4));
        algo = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
            ctx, std::vector<float*>{in.data()}, static_cast<int>(total / 4), recv_elems);
        once = [&] { algo->run(); };
      } else if (op == "sendrecv") {
        const int peer = rank ^ 1;
        const bool active = peer < n;
        sbuf = ctx->createUnboundBuffer(in.data(), bytes);
        rbuf = ctx->createUnboundBuffer(out.data(), bytes);
        const uint64_t slot = 0x5e4d;
        once = [&, peer, active] {
          if (!active) return;
          if (rank % 2 == 0) {
            sbuf->send(peer, slot);
            sbuf->waitSend();
            rbuf->recv(peer, slot);
            rbuf->waitRecv();
          } else {
            rbuf->recv(peer, slot);
            rbuf->waitRecv();
            sbuf->send(peer, slot);
            sbuf->waitSend();
          }
        };
      } else {
        std::fprintf(stderr, "gloo_collectives: unknown op %s\n", op.c_str());
        return 2;
      }
      // Warm up, then size the batch from the fastest of three timed ops (slowest rank).
      once();
      int iters = 1;
      if (bytes < (size_t(4) << 20)) {
        double best = 1e30;
        for (int k = 0; k < 3; ++k) {
          barrier.run();
          double t0 = now();
          once();
          best = std::min(best, now() - t0);
        }
        double t = max_over_ranks(best);
        double want = std::min(double((size_t(4) << 20) / bytes), args.target_s / std::max(t, 1e-7));
        iters = static_cast<int>(std::clamp(want, 1.0, double(args.max_iters)));
      }
      barrier.run();
      double t0 = now();
      for (int i = 0; i < iters; ++i) once();
      double per_op = (now() - t0) / iters;
      if (op == "sendrecv") per_op /= 2;  // a round trip carries the message twice
      std::fprintf(f, "%s %zu %zu %d %.9e\n", op.c_str(), bytes, total, iters, per_op);
      std::fflush(f);
    }
  }
  barrier.run();
  std::fclose(f);
  return 0;
}
