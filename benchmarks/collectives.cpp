// `make bench-dist`: Tessera's collectives (lazy ops, ring backend over TCP and with same-host
// shared memory) side by side with Gloo, Open MPI and MLX's ring backend, 2 and 4 ranks on this
// host, float32 messages of 4 B .. 256 MiB (powers of 4).
//
// One program, two roles:
//  - started by `tessera launch` (TESSERA_RANK set) it is one rank of the Tessera job and writes
//    its own per-op times to a file (the same protocol as the peers in benchmarks/peers/);
//  - otherwise it is the driver: it builds the peers (g++ / mpicc into <build>/peers/), then for
//    every rank count runs every contender once per round, the contenders interleaved round by
//    round (the order rotates each round), and prints one table per (op, ranks).
//
//   bench_collectives [--quick] [--json FILE] [--ranks 2,4] [--rounds R] [--max-bytes N]
//                     [--ops all_sum,all_gather,sum_scatter,sendrecv] [--peers gloo,mpi,mlx]
//                     [--target-ms T] [--max-iters M] [--timeout S] [--keep] [--hosts H]
//
// --hosts H (H >= 2, root): the job spans H simulated hosts — network namespaces on a bridge
// with veth links and an sshd each (tests/cluster/cluster.h) — with ranks / H ranks per host,
// placed host by host, each host on its own share of this machine's CPUs (taskset: 1 CPU each
// for 2 hosts on 2 CPUs), as separate machines would be. Ours: `tessera launch --hostfile` over
// ssh, hierarchical (shared memory inside each host, TCP across; the "ours-shm" column) and TCP
// only (TESSERA_RING_SHM=0);
// Open MPI: mpirun over the same ssh, default transports (shared memory inside, TCP across;
// compared with our hierarchy) and TCP only; Gloo: each rank started in its host's namespace.
// It also times `tessera launch` against `mpirun` from start to exit (a job of `true`), 4
// ranks on one host and 2 hosts x 2 over ssh.
//
// Method (BENCHMARKING.md, CONVENTIONS.md "Benchmarks"): each sample is the slowest rank's time
// per op (every rank times the same batch after a barrier; the driver takes the maximum);
// messages under 4 MiB are timed in batches of back-to-back ops (as many as fit in --target-ms,
// at most 4 MiB / size and --max-iters, sized from the fastest of three probe ops), larger ones
// one op per sample, after a warm-up op. One sample per round; the table shows the median over
// rounds and min-max. algbw = bytes / time, busbw = algbw x 2(n-1)/n (all_sum), x (n-1)/n
// (all_gather, sum_scatter; bytes = the full gathered output / the full scattered input), x 1
// (sendrecv: ping-pong between ranks 2k and 2k+1, time = half a round trip).
//
// Peers, each configured as BENCHMARKING.md says:
//   gloo      AllreduceRingChunked / AllgatherRing / ReduceScatterHalvingDoubling / unbound-buffer
//             send+recv, TCP transport bound to 127.0.0.1, file-store rendezvous
//   mpi-shm   Open MPI, default transports (ob1 + vader shared memory + self); all_sum in
//             place (MPI_IN_PLACE), the call our donated x = all_sum(x) makes
//   ours-mpi-shm / ours-mpi-tcp  Tessera's ops on its MPI backend, same Open MPI, same mpirun
//             line as mpi-shm / mpi-tcp (a table of the backend's overhead over raw MPI follows)
//   mpi-tcp   Open MPI, --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
//             (both: mpirun --allow-run-as-root --oversubscribe inside `unshare --net` with only
//             `lo` up, so nothing listens beyond loopback)
//   mlx-ip    MLX's ring backend (mlx.launch, loopback hostfile), in place: x = all_sum(x)
//   mlx-oop   MLX's ring backend, out of place: y = all_sum(x) (and all_gather, sum_scatter, send
//             / recv_like)
// Every peer runs under GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (fresh 4 KiB pages are slow on
// these VMs; this only helps the peers). Tessera runs as shipped; all_sum is timed as
// `x = all_sum(x); eval(x)` (the input is donated: no copy, no allocation).
// Ratio columns: peer time / our time for the same op and size in the same run (> 1: ours is
// faster), against our ring over TCP for the TCP peers (gloo, mpi-tcp, mlx) and against our
// shared-memory path for mpi-shm.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../tests/cluster/cluster.h"
#include "tessera/tessera.h"

namespace dist = tessera::distributed;
using tessera::array;
using json = nlohmann::json;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

const std::vector<std::string> kAllOps = {"all_sum", "all_gather", "sum_scatter", "sendrecv"};

// ------------------------------------------------------------------------------------------
// Rank role: one rank of the Tessera job (started by `tessera launch`).
// ------------------------------------------------------------------------------------------

struct RankArgs {
  std::string out;
  std::vector<std::string> ops = kAllOps;
  size_t max_bytes = size_t(256) << 20;
  double target_s = 0.03;
  int max_iters = 100000;
};

RankArgs parse_rank_args(int argc, char** argv) {
  RankArgs a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--out") a.out = v;
    else if (k == "--ops") a.ops = split(v, ',');
    else if (k == "--max-bytes") a.max_bytes = std::stoull(v);
    else if (k == "--target-ms") a.target_s = std::stod(v) / 1e3;
    else if (k == "--max-iters") a.max_iters = std::stoi(v);
    else throw std::invalid_argument("bench_collectives (rank): unknown option " + k);
  }
  if (a.out.empty()) throw std::invalid_argument("bench_collectives (rank): --out is required");
  return a;
}

int rank_main(int argc, char** argv) {
  RankArgs args = parse_rank_args(argc, argv);
  // Under mpirun (the ours-mpi-* contenders) the MPI backend, else the ring.
  dist::Group g = dist::init(/*strict=*/true, std::getenv("OMPI_COMM_WORLD_RANK") ? "mpi" : "ring");
  const int rank = g.rank();
  const int n = g.size();
  FILE* f = std::fopen((args.out + "." + std::to_string(rank)).c_str(), "w");
  if (!f) {
    std::perror("bench_collectives: open output");
    return 1;
  }
  auto barrier = [&] { dist::barrier(g); };
  auto max_over_ranks = [&](double t) {
    array m = dist::all_max(array(static_cast<float>(t)), g);
    tessera::eval(m);
    return static_cast<double>(m.item<float>());
  };

  for (const std::string& op : args.ops) {
    for (size_t bytes = 4; bytes <= args.max_bytes; bytes *= 4) {
      size_t block = std::max<size_t>(4, bytes / static_cast<size_t>(n) / 4 * 4);
      size_t total = (op == "all_gather" || op == "sum_scatter") ? block * n : bytes;
      if (total != bytes || total > args.max_bytes) continue;
      const int elems = static_cast<int>(bytes / 4);
      const int block_elems = static_cast<int>(block / 4);
      std::function<void()> once;
      array x = tessera::contiguous(tessera::full({op == "all_gather" ? block_elems : elems},
                                                  1.0f, tessera::float32));
      tessera::eval(x);
      if (op == "all_sum") {
        once = [&] {
          x = dist::all_sum(x, g);
          tessera::eval(x);
        };
      } else if (op == "all_gather") {
        once = [&] { tessera::eval(dist::all_gather(x, g)); };
      } else if (op == "sum_scatter") {
        once = [&] { tessera::eval(dist::sum_scatter(x, g)); };
      } else if (op == "sendrecv") {
        const int peer = rank ^ 1;
        once = [&, peer] {
          if (peer >= n) return;
          if (rank % 2 == 0) {
            tessera::eval(dist::send(x, peer, g));
            tessera::eval(dist::recv_like(x, peer, g));
          } else {
            array y = dist::recv_like(x, peer, g);
            tessera::eval(y);
            tessera::eval(dist::send(y, peer, g));
          }
        };
      } else {
        throw std::invalid_argument("bench_collectives (rank): unknown op " + op);
      }
      once();  // warm-up: first touch of the buffers, the allocator's cache
      int iters = 1;
      if (bytes < (size_t(4) << 20)) {
        double best = 1e30;
        for (int k = 0; k < 3; ++k) {
          barrier();
          double t0 = now();
          once();
          best = std::min(best, now() - t0);
        }
        double t = max_over_ranks(best);
        double want = std::min(double((size_t(4) << 20) / bytes),
                               args.target_s / std::max(t, 1e-7));
        iters = static_cast<int>(std::clamp(want, 1.0, double(args.max_iters)));
      }
      barrier();
      double t0 = now();
      for (int i = 0; i < iters; ++i) once();
      double per_op = (now() - t0) / iters;
      if (op == "sendrecv") per_op /= 2;  // a round trip carries the message twice
      std::fprintf(f, "%s %zu %zu %d %.9e\n", op.c_str(), bytes, total, iters, per_op);
      std::fflush(f);
    }
  }
  barrier();
  std::fclose(f);
  return 0;
}

// ------------------------------------------------------------------------------------------
// Driver role.
// ------------------------------------------------------------------------------------------

std::string q(const std::string& s) {  // single-quote for /bin/sh
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

bool file_exists(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0;
}

double mtime(const std::string& p) {
  struct stat st{};
  if (::stat(p.c_str(), &st) != 0) return -1;
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
}

std::string read_tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) all.push_back(l);
  }
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += (out.empty() ? "" : " | ") + all[i];
  }
  return out;
}

volatile sig_atomic_t g_child_pgid = 0;

void on_signal(int sig) {
  if (g_child_pgid > 0) ::kill(-g_child_pgid, SIGKILL);
  std::signal(sig, SIG_DFL);
  ::raise(sig);
}

struct RunResult {
  int status = -1;  // exit status, 128+n for a signal, 124 for our timeout
  double seconds = 0;
};

// Runs `cmd` with /bin/sh in its own process group, stdin from /dev/null, stdout+stderr to
// `log`; kills the whole group after `timeout_s`.
RunResult run_shell(const std::string& cmd, const std::string& log, double timeout_s) {
  RunResult r;
  double t0 = now();
  pid_t pid = ::fork();
  if (pid < 0) return r;
  if (pid == 0) {
    ::setpgid(0, 0);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  g_child_pgid = pid;
  int st = 0;
  bool killed = false;
  double term_at = -1;
  while (true) {
    pid_t w = ::waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    double t = now() - t0;
    if (!killed && t > timeout_s) {
      ::kill(-pid, SIGTERM);
      killed = true;
      term_at = t;
    } else if (killed && t > term_at + 3) {
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Stragglers of the group (ranks of a launcher that died): none may outlive the run.
  ::kill(-pid, SIGKILL);
  g_child_pgid = 0;
  r.seconds = now() - t0;
  if (killed) r.status = 124;
  else if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
  else if (WIFSIGNALED(st)) r.status = 128 + WTERMSIG(st);
  return r;
}

bool run_quiet(const std::string& cmd, double timeout_s = 120) {
  return run_shell(cmd, "/dev/null", timeout_s).status == 0;
}

// A base port p with p .. p+count-1 free on 127.0.0.1 (for mlx.launch's --starting-port).
int free_port_range(int count) {
  static std::mt19937 rng(static_cast<unsigned>(::getpid()) * 7919u + 17u);
  for (int attempt = 0; attempt < 200; ++attempt) {
    int base = 20000 + static_cast<int>(rng() % 30000);
    bool ok = true;
    for (int i = 0; i < count && ok; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(base + i));
      ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      ::close(fd);
    }
    if (ok) return base;
  }
  return 32323;
}

struct DriverArgs {
  bool quick = false;
  std::string json_path;
  std::vector<int> ranks = {2, 4};
  int rounds = 3;
  size_t max_bytes = size_t(256) << 20;
  std::vector<std::string> ops = kAllOps;
  std::vector<std::string> peers = {"gloo", "mpi", "mlx"};
  double target_ms = 10;
  int max_iters = 100000;
  double timeout_s = 300;
  bool keep = false;
  int hosts = 0;  // >= 2: simulated hosts (network namespaces)
};

struct Contender {
  std::string name;       // column name
  std::string transport;  // "tcp" or "shm": which of ours it is compared with
  bool ours = false;
  std::vector<std::string> ops;          // ops it runs
  std::function<std::string(int n, const std::string& out_prefix)> command;
  std::string unavailable;               // non-empty: why the column is empty
  int failures = 0;                      // consecutive failed runs (3: give up)
};

struct Cell {
  std::vector<double> samples;  // seconds per op, slowest rank, one per round
  std::vector<int> iters;
  size_t total = 0;
  std::string unsupported;
};

// results[n][op][size][contender]
using Results = std::map<int, std::map<std::string, std::map<size_t, std::map<std::string, Cell>>>>;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size();
  if (m == 0) return NAN;
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

double bus_factor(const std::string& op, int n) {
  if (op == "all_sum") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "sum_scatter") return double(n - 1) / n;
  return 1.0;
}

std::string size_label(size_t b) {
  char buf[32];
  if (b >= (size_t(1) << 20)) std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  else std::snprintf(buf, sizeof buf, "%zu B", b);
  return buf;
}

std::string fmt_us(double s) {
  char buf[32];
  double us = s * 1e6;
  if (us < 10) std::snprintf(buf, sizeof buf, "%.2f", us);
  else if (us < 1000) std::snprintf(buf, sizeof buf, "%.1f", us);
  else std::snprintf(buf, sizeof buf, "%.0f", us);
  return buf;
}

std::string fmt_bw(double gbps) {
  char buf[32];
  if (gbps >= 10) std::snprintf(buf, sizeof buf, "%.1f", gbps);
  else if (gbps >= 0.01) std::snprintf(buf, sizeof buf, "%.2f", gbps);
  else std::snprintf(buf, sizeof buf, "%.2g", gbps);
  return buf;
}

std::string fmt_ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, r >= 100 ? "%.0fx" : r >= 10 ? "%.1fx" : "%.2fx", r);
  return buf;
}

// Reads PREFIX.0 .. PREFIX.{n-1}; adds one sample per (op, size) found on every rank.
bool collect(const std::string& prefix, int n, const std::string& who, int ranks,
             Results& res) {
  std::map<std::pair<std::string, size_t>, std::vector<double>> per_rank;
  std::map<std::pair<std::string, size_t>, std::pair<size_t, int>> meta;
  std::map<std::pair<std::string, size_t>, std::string> unsupported;
  for (int r = 0; r < n; ++r) {
    std::ifstream in(prefix + "." + std::to_string(r));
    if (!in) return false;
    for (std::string line; std::getline(in, line);) {
      std::istringstream ls(line);
      std::string op, tval;
      size_t bytes = 0, total = 0;
      int iters = 0;
      if (!(ls >> op >> bytes >> total >> iters >> tval)) continue;
      auto key = std::make_pair(op, bytes);
      if (tval == "unsupported") {
        std::string rest;
        std::getline(ls, rest);
        unsupported[key] = rest.empty() ? "unsupported" : rest.substr(rest.find_first_not_of(' '));
        continue;
      }
      per_rank[key].push_back(std::stod(tval));
      meta[key] = {total, iters};
    }
  }
  bool any = false;
  for (auto& [key, ts] : per_rank) {
    if (static_cast<int>(ts.size()) != n) continue;
    Cell& c = res[ranks][key.first][key.second][who];
    c.samples.push_back(*std::max_element(ts.begin(), ts.end()));
    c.total = meta[key].first;
    c.iters.push_back(meta[key].second);
    any = true;
  }
  for (auto& [key, why] : unsupported) {
    res[ranks][key.first][key.second][who].unsupported = why;
    any = true;
  }
  return any;
}

std::string exe_dir() {
  char buf[4096];
  ssize_t len = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (len <= 0) return ".";
  std::string p(buf, static_cast<size_t>(len));
  return p.substr(0, p.find_last_of('/'));
}

int driver_main(int argc, char** argv) {
  DriverArgs a;
  bool rounds_set = false, max_set = false, target_set = false, iters_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_collectives: missing value after %s\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--quick") a.quick = true;
    else if (k == "--keep") a.keep = true;
    else if (k == "--json") a.json_path = next();
    else if (k == "--ranks") {
      a.ranks.clear();
      for (auto& s : split(next(), ',')) a.ranks.push_back(std::stoi(s));
    } else if (k == "--rounds") a.rounds = std::stoi(next()), rounds_set = true;
    else if (k == "--max-bytes") a.max_bytes = std::stoull(next()), max_set = true;
    else if (k == "--ops") a.ops = split(next(), ',');
    else if (k == "--peers") {
      std::string v = next();
      a.peers = v == "none" ? std::vector<std::string>{} : split(v, ',');
    } else if (k == "--target-ms") a.target_ms = std::stod(next()), target_set = true;
    else if (k == "--max-iters") a.max_iters = std::stoi(next()), iters_set = true;
    else if (k == "--timeout") a.timeout_s = std::stod(next());
    else if (k == "--hosts") a.hosts = std::stoi(next());
    else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--json FILE] [--ranks 2,4] [--rounds R] [--max-bytes N]\n"
                   "          [--ops all_sum,all_gather,sum_scatter,sendrecv] [--peers gloo,mpi,mlx|none]\n"
                   "          [--target-ms T] [--max-iters M] [--timeout S] [--keep] [--hosts H]\n",
                   argv[0]);
      return 2;
    }
  }
  if (a.quick) {
    if (!rounds_set) a.rounds = 2;
    if (!max_set) a.max_bytes = size_t(4) << 20;
    if (!target_set) a.target_ms = 8;
    if (!iters_set) a.max_iters = 200;
    a.timeout_s = std::min(a.timeout_s, 120.0);
  }
  for (auto& op : a.ops) {
    if (std::find(kAllOps.begin(), kAllOps.end(), op) == kAllOps.end()) {
      std::fprintf(stderr, "bench_collectives: unknown op %s\n", op.c_str());
      return 2;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  namespace tc = tessera::test_cluster;
  std::unique_ptr<tc::Cluster> cluster;
  std::unique_ptr<tc::SshHosts> ssh;
  std::vector<std::string> host_cpus;  // taskset lists, by simulated host
  if (a.hosts >= 2) {
    if (!tc::Cluster::available() || !tc::SshHosts::available()) {
      std::fprintf(stderr, "bench_collectives: --hosts needs root, network namespaces and "
                           "openssh-server\n");
      return 2;
    }
    for (int n : a.ranks) {
      if (n % a.hosts != 0) {
        std::fprintf(stderr, "bench_collectives: %d ranks do not split over %d hosts\n", n, a.hosts);
        return 2;
      }
    }
    a.peers.erase(std::remove(a.peers.begin(), a.peers.end(), "mlx"), a.peers.end());
    cluster = std::make_unique<tc::Cluster>(a.hosts);
    // The simulated hosts share this machine: each gets its own share of the CPUs, as separate
    // machines would have, so that every implementation sees how many CPUs its ranks share
    // (Tessera's ranks poll or yield by it; Open MPI is told to yield, see below).
    const int ncpu = static_cast<int>(std::thread::hardware_concurrency());
    if (ncpu >= a.hosts) {
      const int k = ncpu / a.hosts;
      for (int h = 0; h < a.hosts; ++h) {
        host_cpus.push_back(k == 1 ? std::to_string(h) : std::to_string(h * k) + "-" + std::to_string(h * k + k - 1));
      }
    } else {
      std::fprintf(stderr, "bench_collectives: fewer CPUs than simulated hosts: they share every CPU\n");
    }
    ssh = std::make_unique<tc::SshHosts>(*cluster, std::vector<tc::SshHosts::Host>{}, host_cpus);
  }
  // Runs `cmd` on host h's CPUs (everything, without simulated hosts).
  auto pinned = [&](int h, const std::string& cmd) {
    return host_cpus.empty() ? cmd : "taskset -c " + host_cpus[static_cast<size_t>(h)] + " " + cmd;
  };
  // A command run on host 0 (the launching host), with the test's ssh set-up first on PATH.
  auto on_host0 = [&](const std::string& cmd) {
    if (!cluster) return cmd;
    return "ip netns exec " + cluster->ns(0) + " unshare --uts " + pinned(0, "env ") +
           ssh->path_env() + " sh -c " + q("hostname " + tc::Cluster::name(0) + "; " + cmd);
  };
  auto host_of_rank = [&](int r, int n) { return r / (n / a.hosts); };

  const std::string bin = exe_dir();
  const std::string self = bin + "/bench_collectives";
  const std::string cli = bin + "/tessera";
  const std::string src = TESSERA_BENCH_DIR;
  const std::string peer_bin = bin + "/peers";
  ::mkdir(peer_bin.c_str(), 0755);
  char tmpl[] = "/tmp/tessera-bench-dist.XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::perror("bench_collectives: mkdtemp");
    return 1;
  }
  const std::string work = tmpl;
  std::vector<std::string> notes;
  auto note = [&](const std::string& s) {
    notes.push_back(s);
    std::fprintf(stderr, "[bench-dist] %s\n", s.c_str());
  };
  const std::string tunable = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1";
  auto common = [&](const std::string& out, const std::vector<std::string>& ops) {
    std::string o;
    for (auto& op : ops) o += (o.empty() ? "" : ",") + op;
    char buf[256];
    std::snprintf(buf, sizeof buf, " --ops %s --max-bytes %zu --target-ms %g --max-iters %d",
                  o.c_str(), a.max_bytes, a.target_ms, a.max_iters);
    return " --out " + q(out) + buf;
  };
  auto want_peer = [&](const std::string& p) {
    return std::find(a.peers.begin(), a.peers.end(), p) != a.peers.end();
  };
  auto ops_of = [&](std::vector<std::string> wanted) {
    std::vector<std::string> out;
    for (auto& op : a.ops) {
      if (std::find(wanted.begin(), wanted.end(), op) != wanted.end()) out.push_back(op);
    }
    return out;
  };

  std::vector<Contender> cs;
  if (!file_exists(cli)) {
    std::fprintf(stderr, "bench_collectives: %s not found (build the tessera_cli target)\n",
                 cli.c_str());
    return 1;
  }
  for (const char* t : {"tcp", "shm"}) {
    Contender c;
    c.name = std::string("ours-") + t;
    c.transport = t;
    c.ours = true;
    c.ops = a.ops;
    bool shm = std::string(t) == "shm";
    c.command = [&, shm, ops = c.ops](int n, const std::string& out) {
      std::string where = " -n " + std::to_string(n);
      if (cluster) {
        json hf = json::array();
        for (int r = 0; r < n; ++r) hf.push_back({{"ssh", tc::Cluster::name(host_of_rank(r, n))}});
        std::ofstream(out + ".hosts.json") << hf.dump();
        where = " --hostfile " + q(out + ".hosts.json");
      }
      return on_host0(q(cli) + " launch" + where + " --no-prefix" +
                      (shm ? " --env TESSERA_RING_SHM=1" : " --env TESSERA_RING_SHM=0") + " -- " +
                      q(self) + common(out, ops));
    };
    cs.push_back(c);
  }

  // Gloo: compiled here against Debian's libgloo-dev.
  if (want_peer("gloo")) {
    Contender c;
    c.name = "gloo";
    c.transport = "tcp";
    c.ops = a.ops;
    const std::string exe = peer_bin + "/gloo_collectives";
    const std::string s = src + "/peers/gloo_collectives.cpp";
    if (!file_exists("/usr/include/gloo/allreduce_ring_chunked.h")) {
      c.unavailable = "Gloo is not installed (libgloo-dev; scripts/bench_dist_deps.sh)";
    } else if (mtime(exe) < mtime(s) &&
               !run_quiet("g++ -O2 -std=c++17 -o " + q(exe) + " " + q(s) + " -lgloo -pthread")) {
      c.unavailable = "Gloo peer does not compile (g++ ... -lgloo)";
    }
    c.command = [&, exe, ops = c.ops](int n, const std::string& out) {
      std::string store = out + ".store";
      std::string cmd = "mkdir -p " + q(store) + "; export " + tunable + "; pids=;";
      for (int r = 0; r < n; ++r) {
        std::string in_ns, host;
        if (cluster) {
          in_ns = "ip netns exec " + cluster->ns(host_of_rank(r, n)) + " unshare --uts " +
                  pinned(host_of_rank(r, n), "env ");
          host = " GLOO_HOSTNAME=" + tc::Cluster::ip(host_of_rank(r, n));
        }
        cmd += " " + in_ns + "GLOO_RANK=" + std::to_string(r) + " GLOO_SIZE=" + std::to_string(n) +
               host + " GLOO_STORE=" + q(store) + " " + q(exe) + common(out, ops) + " & pids=\"$pids $!\";";
      }
      cmd += " rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc";
      return cmd;
    };
    cs.push_back(c);
  }

  // Open MPI: compiled with mpicc; default transports and TCP, in a private network namespace.
  if (want_peer("mpi")) {
    const std::string exe = peer_bin + "/mpi_collectives";
    const std::string s = src + "/peers/mpi_collectives.c";
    std::string why;
    if (!run_quiet("command -v mpicc && command -v mpirun")) {
      why = "Open MPI is not installed (openmpi-bin, libopenmpi-dev; scripts/bench_dist_deps.sh)";
    } else if (mtime(exe) < mtime(s) &&
               !run_quiet("mpicc -O2 -o " + q(exe) + " " + q(s))) {
      why = "Open MPI peer does not compile (mpicc)";
    }
    std::string ns_prefix;  // wraps the mpirun line
    if (why.empty() && !cluster) {
      if (run_quiet("unshare --net sh -c 'ip link set lo up'", 30)) {
        ns_prefix = "unshare --net sh -c ";
      } else if (run_quiet("unshare -rn sh -c 'ip link set lo up'", 30)) {
        ns_prefix = "unshare -rn sh -c ";
      } else {
        note("no private network namespace (unshare --net fails): Open MPI runs in the host "
             "namespace with btl/oob restricted to lo");
      }
    }
    // mpi-*: MPI's own calls (the C peer); ours-mpi-*: Tessera's ops on its MPI backend, the
    // same Open MPI under the same mpirun line.
    for (const char* t : {"shm", "tcp"}) for (bool mine : {false, true}) {
      Contender c;
      c.name = std::string(mine ? "ours-mpi-" : "mpi-") + t;
      c.transport = t;
      c.ops = a.ops;
      c.unavailable = why;
      bool tcp = std::string(t) == "tcp";
      // The C peer's all_sum in place, as ours (x = all_sum(x) donates x): the same MPI call.
      const std::string inplace = mine ? "" : " --inplace 1";
      c.command = [&, exe = mine ? self : exe, tcp, ns_prefix, inplace, ops = c.ops](int n, const std::string& out) {
        if (cluster) {  // over the simulated hosts' ssh, their eth0 for both channels
          std::string hosts;
          for (int h = 0; h < a.hosts; ++h) {
            hosts += (h ? "," : "") + tc::Cluster::name(h) + ":" + std::to_string(n / a.hosts);
          }
          // Each simulated host has fewer CPUs than ranks: Open MPI's advice for that is to
          // yield while idle (it cannot tell from the slots; Tessera's ranks see their CPUs).
          return on_host0("export " + tunable + "; mpirun --allow-run-as-root --oversubscribe "
                          "--mca mpi_yield_when_idle 1 "
                          "-x GLIBC_TUNABLES --host " + hosts + " --mca plm_rsh_agent " +
                          q(ssh->dir() + "/bin/ssh") +
                          " --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0" +
                          (tcp ? " --mca pml ob1 --mca btl tcp,self" : "") + " " + q(exe) +
                          common(out, ops) + inplace);
        }
        std::string run = "mpirun --allow-run-as-root --oversubscribe -x GLIBC_TUNABLES -np " +
                          std::to_string(n) +
                          (tcp ? " --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo" : "") +
                          (ns_prefix.empty() ? " --mca oob_tcp_if_include lo" : "") + " " +
                          q(exe) + common(out, ops) + inplace;
        if (ns_prefix.empty()) return "export " + tunable + "; " + run;
        return "export " + tunable + "; " + ns_prefix + q("ip link set lo up && exec " + run);
      };
      cs.push_back(c);
    }
  }

  // MLX's ring backend through mlx.launch (same python3 as on PATH).
  if (want_peer("mlx")) {
    std::string why;
    if (!run_quiet("python3 -c 'import mlx.core, mlx._distributed_utils.launch'", 120)) {
      why = "MLX is not installed (pip install \"mlx[cpu]\"; scripts/bench_dist_deps.sh)";
    }
    const std::string script = src + "/peers/mlx_collectives.py";
    for (const char* mode : {"inplace", "oop"}) {
      Contender c;
      bool inplace = std::string(mode) == "inplace";
      c.name = inplace ? "mlx-ip" : "mlx-oop";
      c.transport = "tcp";
      c.ops = inplace ? ops_of({"all_sum"}) : a.ops;
      c.unavailable = why;
      if (c.ops.empty()) continue;
      c.command = [&, script, mode = std::string(mode), ops = c.ops](int n, const std::string& out) {
        std::string hosts = out + ".hosts.json";
        json hf = {{"backend", "ring"}, {"hosts", json::array()}};
        for (int r = 0; r < n; ++r) {
          hf["hosts"].push_back({{"ssh", "127.0.0.1"}, {"ips", {"127.0.0.1"}}});
        }
        std::ofstream(hosts) << hf.dump();
        return "export " + tunable + "; python3 -c " +
               q("import sys; from mlx._distributed_utils.launch import main; "
                 "sys.argv[0] = 'mlx.launch'; main()") +
               " --hostfile " + q(hosts) + " --backend ring --starting-port " +
               std::to_string(free_port_range(n)) + " --env " + tunable +
               " -- \"$(command -v python3)\" " + q(script) + " --mode " + mode +
               common(out, ops);
      };
      cs.push_back(c);
    }
  }
  for (auto& c : cs) {
    if (!c.unavailable.empty()) note(c.name + ": " + c.unavailable + "; its column is empty");
  }

  std::fprintf(stderr,
               "[bench-dist] ranks %s, %d rounds, 4 B .. %s, contenders interleaved; work dir %s\n",
               [&] {
                 std::string s;
                 for (int n : a.ranks) s += (s.empty() ? "" : ",") + std::to_string(n);
                 return s;
               }().c_str(),
               a.rounds, size_label(a.max_bytes).c_str(), work.c_str());
  Results res;
  double t_start = now();
  int run_id = 0;
  for (int n : a.ranks) {
    for (auto& c : cs) c.failures = 0;
    for (int round = 0; round < a.rounds; ++round) {
      std::string line = "[bench-dist] " + std::to_string(n) + " ranks, round " +
                         std::to_string(round + 1) + "/" + std::to_string(a.rounds) + ":";
      const size_t k = cs.size();
      for (size_t j = 0; j < k; ++j) {
        Contender& c = cs[(j + static_cast<size_t>(round)) % k];
        if (!c.unavailable.empty() || c.failures >= 3) continue;
        std::string out = work + "/run" + std::to_string(run_id++) + "-" + c.name;
        std::string log = out + ".log";
        RunResult r = run_shell(c.command(n, out), log, a.timeout_s);
        bool got = collect(out, n, c.name, n, res);
        if (r.status != 0 && r.seconds < 10 && !got) {
          // A start-up failure (e.g. a binary being relinked in the shared build dir): retry once.
          std::this_thread::sleep_for(std::chrono::seconds(2));
          out += "-retry";
          log = out + ".log";
          r = run_shell(c.command(n, out), log, a.timeout_s);
          got = collect(out, n, c.name, n, res);
        }
        char buf[96];
        std::snprintf(buf, sizeof buf, " %s %.1fs", c.name.c_str(), r.seconds);
        line += buf;
        if (r.status != 0 || !got) {
          ++c.failures;
          std::string why = r.status == 124 ? "timed out after " + std::to_string(int(a.timeout_s)) + " s"
                                            : "exit status " + std::to_string(r.status);
          note(c.name + " (" + std::to_string(n) + " ranks, round " + std::to_string(round + 1) +
               ") failed: " + why + (got ? " (partial results kept)" : "") + ": " +
               read_tail(log, 3));
          if (c.failures >= 3) note(c.name + ": giving up for " + std::to_string(n) + " ranks");
        } else {
          c.failures = 0;
        }
      }
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
  // ---- launch: start to exit of a job of `true`, ours and mpirun interleaved ----
  struct LaunchRow {
    std::string job, ours_cmd, mpi_cmd;
    std::vector<double> ours, mpi;
  };
  std::vector<LaunchRow> launch_rows;
  if (cluster) {
    const bool have_mpi = run_quiet("command -v mpirun");
    std::string names, slots;
    for (int h = 0; h < a.hosts; ++h) {
      names += (h ? "," : "") + tc::Cluster::name(h);
      slots += (h ? "," : "") + tc::Cluster::name(h) + ":2";
    }
    const std::string mpirun = "mpirun --allow-run-as-root --oversubscribe --mca oob_tcp_if_include eth0 ";
    launch_rows.push_back({"4 ranks on one host", q(cli) + " launch -n 4 true", mpirun + "-np 4 true", {}, {}});
    launch_rows.push_back({std::to_string(a.hosts) + " hosts x 2 ranks over ssh",
                           q(cli) + " launch --hosts " + names + " -n 2 true",
                           mpirun + "--host " + slots + " --mca plm_rsh_agent " + q(ssh->dir() + "/bin/ssh") + " true",
                           {}, {}});
    for (int k = 0; k < 7; ++k) {
      for (auto& row : launch_rows) {
        for (int side = 0; side < 2; ++side) {
          const bool ours = (side + k) % 2 == 0;
          if (!ours && !have_mpi) continue;
          RunResult r = run_shell(on_host0(ours ? row.ours_cmd : row.mpi_cmd), "/dev/null", 60);
          if (r.status == 0) (ours ? row.ours : row.mpi).push_back(r.seconds);
        }
      }
    }
    if (!have_mpi) note("mpirun is not installed: the launch table has no mpirun column");
  }
  double elapsed = now() - t_start;

  // ---- tables ----
  std::vector<std::string> names;
  std::map<std::string, const Contender*> by_name;
  for (auto& c : cs) {
    names.push_back(c.name);
    by_name[c.name] = &c;
  }
  std::vector<std::string> peers;
  for (auto& c : cs) {
    if (!c.ours) peers.push_back(c.name);
  }
  json jres = json::array();
  if (cluster) {
    std::printf("\n# Collectives across %d simulated hosts (namespaces, veth), %s: Tessera "
                "hierarchical (ours-shm: shared memory inside each host, TCP across) and TCP only "
                "(ours-tcp) vs peers, float32\n", a.hosts, "ranks placed host by host");
  } else {
    std::printf("\n# Collectives: Tessera (ring over TCP / shared memory) vs peers, float32\n");
  }
  std::printf("time = slowest rank per op, median of %d interleaved rounds [min-max], us; "
              "algbw/busbw GB/s (nccl-tests); xPEER = PEER time / our time (>1: ours faster; "
              "ours-tcp for gloo, mpi-tcp, mlx-*; ours-shm for mpi-shm).\n",
              a.rounds);
  for (int n : a.ranks) {
    for (const std::string& op : a.ops) {
      auto& sizes = res[n][op];
      if (sizes.empty()) continue;
      std::printf("\n## %s, %d ranks (busbw = algbw x %s)\n\n", op.c_str(), n,
                  op == "all_sum" ? "2(n-1)/n" : op == "sendrecv" ? "1" : "(n-1)/n");
      std::string head = "| size | ours-tcp us | algbw | busbw | ours-shm us | algbw | busbw |";
      std::string rule = "|---:|---:|---:|---:|---:|---:|---:|";
      std::vector<std::string> shown;
      for (auto& p : peers) {
        if (std::find(by_name[p]->ops.begin(), by_name[p]->ops.end(), op) ==
            by_name[p]->ops.end()) {
          continue;
        }
        shown.push_back(p);
        head += " " + p + " us | busbw | x" + p + " |";
        rule += "---:|---:|---:|";
      }
      std::printf("%s\n%s\n", head.c_str(), rule.c_str());
      for (auto& [size, cells] : sizes) {
        std::string row = "| " + size_label(size) + " |";
        auto stat = [&](const std::string& who, double& med, size_t& total) -> const Cell* {
          auto it = cells.find(who);
          if (it == cells.end() || it->second.samples.empty()) return nullptr;
          med = median(it->second.samples);
          total = it->second.total;
          return &it->second;
        };
        double ours_med[2] = {NAN, NAN};
        for (int t = 0; t < 2; ++t) {
          std::string who = t == 0 ? "ours-tcp" : "ours-shm";
          double med = NAN;
          size_t total = 0;
          const Cell* c = stat(who, med, total);
          if (!c) {
            row += " - | - | - |";
            continue;
          }
          ours_med[t] = med;
          double lo = *std::min_element(c->samples.begin(), c->samples.end());
          double hi = *std::max_element(c->samples.begin(), c->samples.end());
          double alg = total / med / 1e9;
          row += " " + fmt_us(med) + " [" + fmt_us(lo) + "-" + fmt_us(hi) + "] | " + fmt_bw(alg) +
                 " | " + fmt_bw(alg * bus_factor(op, n)) + " |";
        }
        for (auto& p : shown) {
          double med = NAN;
          size_t total = 0;
          const Cell* c = stat(p, med, total);
          auto it = cells.find(p);
          if (!c) {
            bool unsup = it != cells.end() && !it->second.unsupported.empty();
            row += unsup ? " n/a | n/a | n/a |" : " - | - | - |";
            continue;
          }
          double lo = *std::min_element(c->samples.begin(), c->samples.end());
          double hi = *std::max_element(c->samples.begin(), c->samples.end());
          double alg = total / med / 1e9;
          double ours = by_name[p]->transport == "shm" ? ours_med[1] : ours_med[0];
          row += " " + fmt_us(med) + " [" + fmt_us(lo) + "-" + fmt_us(hi) + "] | " +
                 fmt_bw(alg * bus_factor(op, n)) + " | " +
                 (std::isnan(ours) ? std::string("-") : fmt_ratio(med / ours)) + " |";
        }
        std::printf("%s\n", row.c_str());
        // JSON: every contender, every sample.
        for (auto& [who, c] : cells) {
          json e = {{"ranks", n}, {"op", op}, {"size", size}, {"impl", who},
                    {"transport", by_name.count(who) ? by_name[who]->transport : ""}};
          if (!c.unsupported.empty()) e["unsupported"] = c.unsupported;
          if (!c.samples.empty()) {
            double med = median(c.samples);
            double alg = c.total / med / 1e9;
            e["bytes"] = c.total;
            e["samples_s"] = c.samples;
            e["iters"] = c.iters;
            e["median_s"] = med;
            e["min_s"] = *std::min_element(c.samples.begin(), c.samples.end());
            e["max_s"] = *std::max_element(c.samples.begin(), c.samples.end());
            e["algbw_GBps"] = alg;
            e["busbw_GBps"] = alg * bus_factor(op, n);
            if (by_name.count(who) && !by_name[who]->ours) {
              double ours = by_name[who]->transport == "shm" ? ours_med[1] : ours_med[0];
              if (!std::isnan(ours)) e["ratio_peer_over_ours"] = med / ours;
            }
          }
          jres.push_back(e);
        }
      }
      for (auto& p : shown) {
        auto& c = *by_name[p];
        if (!c.unavailable.empty()) std::printf("\n%s: empty column: %s\n", p.c_str(), c.unavailable.c_str());
      }
      for (auto& [size, cells] : sizes) {
        bool printed = false;
        for (auto& [who, c] : cells) {
          if (!c.unsupported.empty() && !printed) {
            std::printf("\n%s: n/a: %s has no %s (%s)\n", who.c_str(), who.c_str(), op.c_str(),
                        c.unsupported.c_str());
            printed = true;
          }
        }
        if (printed) break;
      }
    }
  }

  // The MPI backend's cost over MPI's own calls: the same Open MPI, the same mpirun line.
  bool overhead_header = false;
  for (int n : a.ranks) {
    for (const std::string& op : a.ops) {
      for (auto& [size, cells] : res[n][op]) {
        for (const char* t : {"shm", "tcp"}) {
          auto raw = cells.find(std::string("mpi-") + t), ours = cells.find(std::string("ours-mpi-") + t);
          if (raw == cells.end() || ours == cells.end() || raw->second.samples.empty() ||
              ours->second.samples.empty()) {
            continue;
          }
          if (!overhead_header) {
            std::printf("\n## The MPI backend over raw MPI calls (ours-mpi-X: Tessera's op + eval on "
                        "its MPI backend; mpi-X: MPI_* in C; same Open MPI, same mpirun line; median "
                        "us; overhead = ours / raw - 1)\n\n| op | ranks | size | transport | raw MPI us "
                        "| ours-mpi us | overhead | difference us |\n|---|---:|---:|---|---:|---:|---:|---:|\n");
            overhead_header = true;
          }
          const double r = median(raw->second.samples), o = median(ours->second.samples);
          std::printf("| %s | %d | %s | %s | %s | %s | %+.1f%% | %+.2f |\n", op.c_str(), n,
                      size_label(size).c_str(), t, fmt_us(r).c_str(), fmt_us(o).c_str(),
                      (o / r - 1) * 100, (o - r) * 1e6);
        }
      }
    }
  }

  if (!launch_rows.empty()) {
    std::printf("\n## Start to exit: tessera launch vs mpirun, a job of `true` (median of 7 "
                "interleaved runs [min-max], ms; x = mpirun / ours)\n\n");
    std::printf("| job | tessera launch ms | mpirun ms | x mpirun |\n|---|---:|---:|---:|\n");
    for (auto& row : launch_rows) {
      auto cell = [](const std::vector<double>& v) -> std::string {
        if (v.empty()) return "-";
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.0f [%.0f-%.0f]", median(v) * 1e3,
                      *std::min_element(v.begin(), v.end()) * 1e3, *std::max_element(v.begin(), v.end()) * 1e3);
        return buf;
      };
      std::string ratio = row.ours.empty() || row.mpi.empty() ? "-" : fmt_ratio(median(row.mpi) / median(row.ours));
      std::printf("| %s | %s | %s | %s |\n", row.job.c_str(), cell(row.ours).c_str(), cell(row.mpi).c_str(),
                  ratio.c_str());
      jres.push_back({{"launch", row.job}, {"tessera_s", row.ours}, {"mpirun_s", row.mpi}});
    }
  }

  // ---- headline ----
  std::printf("\n## Headline (medians): all_sum 64 MiB busbw GB/s and 4 B latency us\n\n");
  std::printf("| ranks | impl | 64 MiB busbw | x vs ours | 4 B us | x vs ours |\n|---:|---|---:|---:|---:|---:|\n");
  for (int n : a.ranks) {
    auto& sizes = res[n]["all_sum"];
    for (auto& name : names) {
      auto get = [&](size_t sz, const std::string& who) -> double {
        auto it = sizes.find(sz);
        if (it == sizes.end()) return NAN;
        auto jt = it->second.find(who);
        if (jt == it->second.end() || jt->second.samples.empty()) return NAN;
        return median(jt->second.samples);
      };
      const Contender& c = *by_name[name];
      std::string ours = c.transport == "shm" ? "ours-shm" : "ours-tcp";
      double big = get(size_t(64) << 20, name), small = get(4, name);
      double big_o = get(size_t(64) << 20, ours), small_o = get(4, ours);
      if (std::isnan(big) && std::isnan(small)) {
        std::printf("| %d | %s | - | - | - | - |\n", n, name.c_str());
        continue;
      }
      std::string bw = std::isnan(big) ? "-" : fmt_bw((size_t(64) << 20) / big / 1e9 * bus_factor("all_sum", n));
      std::string r1 = c.ours || std::isnan(big) || std::isnan(big_o) ? "" : fmt_ratio(big / big_o);
      std::string lat = std::isnan(small) ? "-" : fmt_us(small);
      std::string r2 = c.ours || std::isnan(small) || std::isnan(small_o) ? "" : fmt_ratio(small / small_o);
      std::printf("| %d | %s | %s | %s | %s | %s |\n", n, name.c_str(), bw.c_str(), r1.c_str(),
                  lat.c_str(), r2.c_str());
    }
  }
  if (!notes.empty()) {
    std::printf("\nNotes:\n");
    for (auto& s : notes) std::printf("- %s\n", s.c_str());
  }
  std::printf("\n(%d rounds, %.0f s; peers under %s; Tessera as shipped)\n", a.rounds, elapsed,
              tunable.c_str());
  std::fflush(stdout);

  if (!a.json_path.empty()) {
    json doc = {{"benchmark", "collectives"},
                {"ranks", a.ranks},
                {"rounds", a.rounds},
                {"max_bytes", a.max_bytes},
                {"target_ms", a.target_ms},
                {"max_iters", a.max_iters},
                {"quick", a.quick},
                {"elapsed_s", elapsed},
                {"peer_env", tunable},
                {"notes", notes},
                {"results", jres}};
    std::ofstream(a.json_path) << doc.dump(1) << "\n";
    std::fprintf(stderr, "[bench-dist] wrote %s\n", a.json_path.c_str());
  }
  if (!a.keep) run_quiet("rm -rf " + q(work));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (std::getenv("TESSERA_RANK") || std::getenv("OMPI_COMM_WORLD_RANK")) return rank_main(argc, argv);
    return driver_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_collectives: %s\n", e.what());
    return 1;
  }
}
