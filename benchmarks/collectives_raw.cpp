// Raw-buffer benchmark of the ring backend (RingGroup, no lazy ops): forks 2 or 4 ranks over
// 127.0.0.1 and prints all_reduce / all_gather / reduce_scatter time, algorithm and bus
// bandwidth (nccl-tests definitions, see CONVENTIONS.md) for float32 messages, TCP and shm.
//   bench_collectives_raw [--ranks 2,4] [--shm both|on|off] [--min-bytes N] [--max-bytes N]
//                         [--samples S]
//                         [--op all_reduce|all_gather|reduce_scatter]
// With TESSERA_BENCH_RUSAGE=1 every rank also prints its CPU time and context switches.
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "distributed/ring/ring_group.h"

using namespace tessera;
using namespace tessera::distributed::detail;

namespace {

Hostfile free_hostfile(int n) {
  std::vector<int> fds;
  Hostfile hf;
  for (int r = 0; r < n; ++r) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) std::abort();
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    fds.push_back(fd);
    hf.ranks.push_back({HostAddress{"127.0.0.1", ntohs(a.sin_port), false}});
  }
  for (int fd : fds) ::close(fd);
  return hf;
}

// Large, reused, pre-faulted buffer on transparent huge pages (fresh pages are slow here).
char* big_buffer(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 1, bytes);
  return static_cast<char*>(p);
}

struct Args {
  std::vector<int> ranks = {2, 4};
  std::vector<bool> shm = {false, true};
  size_t max_bytes = size_t(256) << 20;
  size_t min_bytes = 4;
  int samples = 5;
  std::string only_op;  // empty: all three
};

void run_rank(int rank, const Hostfile& hf, bool shm, const Args& args) {
  RingOptions opt = RingOptions::from_config();
  opt.shm = shm;
  RingGroup g(rank, hf, opt);
  const int n = g.size();
  char* in = big_buffer(args.max_bytes);
  char* out = big_buffer(args.max_bytes);
  std::vector<size_t> sizes;
  for (size_t b = 4; b <= args.max_bytes; b *= 4) {
    if (b >= args.min_bytes) sizes.push_back(b);
  }
  if (std::find(sizes.begin(), sizes.end(), args.max_bytes) == sizes.end()) {
    sizes.push_back(args.max_bytes);
  }
  const char* ops[] = {"all_reduce", "all_gather", "reduce_scatter"};
  for (const char* op : ops) {
    if (!args.only_op.empty() && args.only_op != op) continue;
    for (size_t bytes : sizes) {
      size_t per_rank = std::max<size_t>(4, bytes / static_cast<size_t>(n) / 4 * 4);
      size_t total = std::string(op) == "all_reduce" ? bytes : per_rank * static_cast<size_t>(n);
      if (total > args.max_bytes) continue;
      auto once = [&] {
        if (op == ops[0]) {
          g.all_reduce(in, out, bytes / 4, float32, ReduceOp::sum);
        } else if (op == ops[1]) {
          g.all_gather(in, out, per_rank);
        } else {
          g.reduce_scatter(in, out, per_rank / 4, float32, ReduceOp::sum);
        }
      };
      int iters = static_cast<int>(std::clamp<size_t>((size_t(4) << 20) / total, 1, 2000));
      once();  // warm up
      std::vector<double> t;
      for (int s = 0; s < args.samples; ++s) {
        g.barrier();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) once();
        double mine =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
        double slowest = 0;
        g.all_reduce(&mine, &slowest, 1, float64, ReduceOp::max);
        t.push_back(slowest);
      }
      std::sort(t.begin(), t.end());
      double med = t[t.size() / 2];
      double algbw = static_cast<double>(total) / med / 1e9;
      double factor = op == ops[0] ? 2.0 * (n - 1) / n : double(n - 1) / n;
      if (rank == 0) {
        std::printf("| %-14s | %d | %-3s | %10zu | %10.1f | %8.1f-%-8.1f | %7.2f | %7.2f |\n", op, n,
                    shm ? "shm" : "tcp", total, med * 1e6, t.front() * 1e6, t.back() * 1e6, algbw,
                    algbw * factor);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ranks") {
      args.ranks.clear();
      std::string v = next();
      for (size_t p = 0; p < v.size();) {
        size_t q = v.find(',', p);
        args.ranks.push_back(std::stoi(v.substr(p, q - p)));
        p = q == std::string::npos ? v.size() : q + 1;
      }
    } else if (a == "--shm") {
      std::string v = next();
      args.shm = v == "on" ? std::vector<bool>{true}
                 : v == "off" ? std::vector<bool>{false}
                              : std::vector<bool>{false, true};
    } else if (a == "--max-bytes") {
      args.max_bytes = std::stoull(next());
    } else if (a == "--min-bytes") {
      args.min_bytes = std::stoull(next());
    } else if (a == "--op") {
      args.only_op = next();
    } else if (a == "--samples") {
      args.samples = std::stoi(next());
    } else {
      std::fprintf(stderr,
                   "usage: %s [--ranks 2,4] [--shm both|on|off] [--min-bytes N] [--max-bytes N] [--samples S] [--op all_reduce|all_gather|reduce_scatter]\n",
                   argv[0]);
      return 2;
    }
  }
  std::printf("| op             | n | via | bytes      | time (us)  | min-max (us)      | algbw   | busbw   |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  int status = 0;
  for (int n : args.ranks) {
    for (bool shm : args.shm) {
      Hostfile hf = free_hostfile(n);
      std::vector<pid_t> pids;
      for (int r = 0; r < n; ++r) {
        pid_t pid = fork();
        if (pid == 0) {
          try {
            run_rank(r, hf, shm, args);
            if (std::getenv("TESSERA_BENCH_RUSAGE")) {
              rusage ru{};
              getrusage(RUSAGE_SELF, &ru);
              std::fprintf(stderr, "rank %d: user %.2f s, sys %.2f s, %ld voluntary / %ld involuntary switches\n",
                           r, static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec * 1e-6,
                           static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec * 1e-6,
                           ru.ru_nvcsw, ru.ru_nivcsw);
            }
          } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: %s\n", r, e.what());
            _exit(1);
          }
          _exit(0);
        }
        pids.push_back(pid);
      }
      for (pid_t p : pids) {
        int st = 0;
        waitpid(p, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) status = 1;
      }
    }
  }
  return status;
}
