// `tessera launch`: run N ranks of a program on this host for the ring backend — picks ports,
// writes the hostfile, gives every rank its rank, the hostfile and a fresh job token, then
// supervises them (supervisor.h).
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "supervisor.h"
#include "tessera/config.h"

extern char** environ;

namespace tessera::cli {

namespace {

const char* kLaunchUsage =
    "usage: tessera launch -n N [--backend ring] [--env K=V]... [--starting-port P]\n"
    "                      [--connections-per-ip C] [--cpu-bind auto|none] [--verbose]\n"
    "                      [--no-prefix] [--grace S] [--mlx] [--trace DIR] [--] program [args...]\n"
    "Runs N ranks of `program` on this host. A program ending in .py runs with $TESSERA_PYTHON\n"
    "(default python3; the command of the Python package sets its own interpreter); with --mlx\n"
    "it runs through `python -m tessera.mlx`, so `import mlx.core` gives Tessera.\n"
    "Each rank gets TESSERA_RANK / MLX_RANK, TESSERA_HOSTFILE / MLX_HOSTFILE,\n"
    "TESSERA_WORLD_SIZE and a fresh TESSERA_JOB_TOKEN. Output lines are prefixed with\n"
    "\"[rank] \"; stdin goes to every rank. When a rank fails the others get SIGTERM, then\n"
    "SIGKILL after --grace seconds (default 5), and the exit status is the first failure's.\n"
    "--cpu-bind auto (the default) gives each rank its own share of the CPUs this launcher may\n"
    "use (N contiguous groups; with more ranks than CPUs, CPU rank mod count), so the kernel\n"
    "cannot stack communicating ranks on one CPU; --cpu-bind none leaves placement to it.\n"
    "--trace DIR records a timeline of every kernel and collective: DIR/rank<r>.json per rank\n"
    "and DIR/trace.json with one process per rank on a common clock (Chrome trace / Perfetto).\n";

// The CPUs this process may run on, ascending.
std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// Rank r's CPUs out of `cpus` for n ranks: contiguous, nearly equal groups when n <= count,
// else the single CPU r mod count.
std::vector<int> cpus_for_rank(const std::vector<int>& cpus, int n, int r) {
  const int m = static_cast<int>(cpus.size());
  if (m == 0) return {};
  if (n > m) return {cpus[static_cast<size_t>(r % m)]};
  const int lo = r * m / n, hi = (r + 1) * m / n;
  return std::vector<int>(cpus.begin() + lo, cpus.begin() + hi);
}

int parse_int(const std::string& flag, const std::string& v, int lo, int hi) {
  size_t pos = 0;
  long x = 0;
  try {
    x = std::stol(v, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos != v.size() || v.empty() || x < lo || x > hi) {
    throw std::invalid_argument(flag + " expects an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "], got '" + v + "'");
  }
  return static_cast<int>(x);
}

// Ports that are free on 127.0.0.1 now: all sockets stay bound until every port is known, so
// the list has no duplicates.
std::vector<int> free_ports(int count) {
  std::vector<int> fds, ports;
  for (int i = 0; i < count; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(std::string("[launch] socket: ") + std::strerror(errno));
    fds.push_back(fd);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      for (int f : fds) ::close(f);
      throw std::runtime_error(std::string("[launch] cannot find a free port: ") +
                               std::strerror(errno));
    }
    ports.push_back(ntohs(a.sin_port));
  }
  for (int f : fds) ::close(f);
  return ports;
}

std::string random_token() {
  unsigned char bytes[32];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::read(fd, bytes, sizeof bytes) != static_cast<ssize_t>(sizeof bytes)) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("[launch] cannot read /dev/urandom for the job token");
  }
  ::close(fd);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char b : bytes) s += hex[b >> 4], s += hex[b & 15];
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A POSIX environment variable name: a letter or underscore, then letters, digits, underscores.
bool valid_env_name(const std::string& k) {
  if (k.empty() || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Where execvp would find `program` (PATH is searched for a name without a slash), checked
// before any rank starts, so a typo is one clear error instead of N failed ranks.
void check_program(const std::string& program, const std::string& path_env) {
  auto usable = [](const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    std::error_code ec;
    if (!std::filesystem::exists(program, ec)) {
      throw std::invalid_argument("[launch] program '" + program + "' does not exist");
    }
    if (!usable(program)) {
      throw std::invalid_argument("[launch] program '" + program +
                                  "' is not an executable file (chmod +x it?)");
    }
    return;
  }
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    std::string dir = path_env.substr(start, end - start);
    if (usable(std::filesystem::path(dir.empty() ? "." : dir) / program)) return;
    start = end + 1;
  }
  throw std::invalid_argument("[launch] program '" + program +
                              "' was not found on PATH; give its path (e.g. ./" + program + ")");
}

size_t physical_memory_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

}  // namespace

int launch_command(const std::vector<std::string>& args) {
  int n = 0, connections = 1, starting_port = 0;
  double grace = 5.0;
  bool verbose = false, prefix = true, bind = true, mlx = false;
  std::string backend = "ring", trace_dir;
  std::vector<std::string> extra_env, program;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) -> const std::string& {
      if (i + 1 >= args.size()) throw std::invalid_argument(flag + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kLaunchUsage, stdout);
      return 0;
    } else if (a == "-n" || a == "--nproc") {
      n = parse_int("-n", value(a), 1, 4096);
    } else if (a == "--backend") {
      backend = value(a);
      if (backend != "ring") {
        throw std::invalid_argument("--backend '" + backend +
                                    "' is not supported by local launches yet; use ring");
      }
    } else if (a == "--env") {
      const std::string& kv = value(a);
      if (kv.find('=') == std::string::npos || !valid_env_name(kv.substr(0, kv.find('=')))) {
        throw std::invalid_argument("--env expects NAME=VALUE with NAME of letters, digits and "
                                    "underscores (not starting with a digit), got '" + kv + "'");
      }
      extra_env.push_back(kv);
    } else if (a == "--starting-port") {
      starting_port = parse_int("--starting-port", value(a), 1, 65535);
    } else if (a == "--connections-per-ip") {
      connections = parse_int("--connections-per-ip", value(a), 1, 64);
    } else if (a == "--grace") {
      grace = parse_int("--grace", value(a), 0, 3600);
    } else if (a == "--cpu-bind") {
      const std::string& v = value(a);
      if (v != "auto" && v != "none") {
        throw std::invalid_argument("--cpu-bind expects auto or none, got '" + v + "'");
      }
      bind = v == "auto";
    } else if (a == "--verbose" || a == "-v") {
      verbose = true;
    } else if (a == "--no-prefix") {
      prefix = false;
    } else if (a == "--mlx") {
      mlx = true;
    } else if (a == "--trace") {
      trace_dir = value(a);
    } else if (a == "--") {
      program.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    } else if (!a.empty() && a[0] == '-') {
      throw std::invalid_argument("unknown option '" + a + "'\n" + kLaunchUsage);
    } else {
      program.assign(args.begin() + static_cast<long>(i), args.end());
      break;
    }
  }
  if (n <= 0) throw std::invalid_argument(std::string("-n N is required\n") + kLaunchUsage);
  if (program.empty()) throw std::invalid_argument(std::string("no program given\n") + kLaunchUsage);
  if (ends_with(program[0], ".py")) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(program[0], ec)) {
      throw std::invalid_argument("[launch] script '" + program[0] + "' does not exist");
    }
    const std::string python = config::get_string("TESSERA_PYTHON").value_or("python3");
    if (mlx) {
      program.insert(program.begin(), {python, "-m", "tessera.mlx"});
    } else {
      program.insert(program.begin(), python);
    }
  } else if (mlx) {
    throw std::invalid_argument("[launch] --mlx runs a Python script (a program ending in .py), "
                                "not '" + program[0] + "'");
  }

  if (starting_port > 0 && starting_port + n * connections - 1 > 65535) {
    throw std::invalid_argument("--starting-port " + std::to_string(starting_port) + " with " +
                                std::to_string(n * connections) + " ports passes 65535");
  }

  std::vector<std::string> base_env;
  const std::vector<std::string> ours = {"TESSERA_RANK",      "MLX_RANK",           "TESSERA_HOSTFILE",
                                         "MLX_HOSTFILE",      "TESSERA_WORLD_SIZE", "MLX_WORLD_SIZE",
                                         "TESSERA_JOB_TOKEN", "TESSERA_RING_VERBOSE", "TESSERA_TRACE"};
  bool memory_limit_given = false;
  std::string path_env = "/usr/bin:/bin";
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string k = kv.substr(0, kv.find('='));
    if (std::find(ours.begin(), ours.end(), k) == ours.end()) base_env.push_back(kv);
    memory_limit_given |= k == "TESSERA_MEMORY_LIMIT_MB";
    if (k == "PATH") path_env = kv.substr(5);  // execvp searches the launcher's own PATH
  }
  check_program(program[0], path_env);
  if (!trace_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(trace_dir, ec);
    if (ec) {
      throw std::invalid_argument("[launch] --trace: cannot create the directory '" + trace_dir +
                                  "': " + ec.message());
    }
    trace_dir = std::filesystem::absolute(trace_dir).string();
  }
  for (const auto& kv : extra_env) memory_limit_given |= kv.rfind("TESSERA_MEMORY_LIMIT_MB=", 0) == 0;
  // Every local rank would default to 0.8 x RAM, so n of them could together ask for 0.8 n x RAM
  // and meet the kernel's OOM killer instead of our clear error: each gets its share instead.
  if (!memory_limit_given && physical_memory_bytes() > 0) {
    const size_t share_mb = std::max<size_t>(
        1, static_cast<size_t>(0.8 * static_cast<double>(physical_memory_bytes()) / n) >> 20);
    base_env.push_back("TESSERA_MEMORY_LIMIT_MB=" + std::to_string(share_mb));
    if (verbose) std::fprintf(stderr, "[launch] memory limit per rank: %zu MiB\n", share_mb);
  }
  std::vector<int> ports;
  if (starting_port > 0) {
    for (int i = 0; i < n * connections; ++i) ports.push_back(starting_port + i);
  } else {
    ports = free_ports(n * connections);
  }
  std::string hostfile_json = "[";
  for (int r = 0; r < n; ++r) {
    hostfile_json += r ? ", [" : "[";
    for (int c = 0; c < connections; ++c) {
      hostfile_json += (c ? ", " : "") + std::string("\"127.0.0.1:") +
                       std::to_string(ports[r * connections + c]) + "\"";
    }
    hostfile_json += "]";
  }
  hostfile_json += "]\n";

  char dir_template[] = "/tmp/tessera-launch-XXXXXX";
  if (!::mkdtemp(dir_template)) {
    throw std::runtime_error(std::string("[launch] mkdtemp: ") + std::strerror(errno));
  }
  std::filesystem::path dir(dir_template);
  std::filesystem::path hostfile = dir / "hostfile.json";
  std::ofstream(hostfile) << hostfile_json;
  if (verbose) std::fprintf(stderr, "[launch] hostfile %s: %s", hostfile.c_str(), hostfile_json.c_str());

  const std::string token = random_token();
  std::vector<RankSpec> specs(n);
  const std::vector<int> cpus = bind ? allowed_cpus() : std::vector<int>{};
  for (int r = 0; r < n; ++r) {
    specs[r].argv = program;
    specs[r].env = base_env;
    for (const char* k : {"TESSERA_RANK=", "MLX_RANK="}) specs[r].env.push_back(k + std::to_string(r));
    for (const char* k : {"TESSERA_HOSTFILE=", "MLX_HOSTFILE="}) specs[r].env.push_back(k + hostfile.string());
    for (const char* k : {"TESSERA_WORLD_SIZE=", "MLX_WORLD_SIZE="}) specs[r].env.push_back(k + std::to_string(n));
    specs[r].env.push_back("TESSERA_JOB_TOKEN=" + token);
    if (verbose) specs[r].env.push_back("TESSERA_RING_VERBOSE=1");
    for (auto& kv : extra_env) specs[r].env.push_back(kv);
    if (!trace_dir.empty()) {
      specs[r].env.push_back("TESSERA_TRACE=" + trace_dir + "/rank" + std::to_string(r) + ".json");
    }
    specs[r].cpus = cpus_for_rank(cpus, n, r);
    if (verbose && !specs[r].cpus.empty()) {
      std::string list;
      for (int c : specs[r].cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
      std::fprintf(stderr, "[launch] rank %d runs on CPU %s\n", r, list.c_str());
    }
  }
  SuperviseOptions opt;
  opt.prefix = prefix;
  opt.grace_seconds = grace;
  opt.verbose = verbose;
  int code = supervise(specs, opt);
  if (!trace_dir.empty()) {
    std::fprintf(stderr, "[launch] trace: %s\n", merge_rank_traces(trace_dir, n).c_str());
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return code;
}

}  // namespace tessera::cli
