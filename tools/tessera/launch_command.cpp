// `tessera launch`: runs the ranks of a job for the ring backend, on this host and on others
// over ssh — reads MLX's hostfiles or --hosts, picks ports, builds the ring hostfile, gives
// every rank its rank, the hostfile and a fresh job token, then supervises them
// (supervisor.h). A remote rank runs under `tessera _rank-agent` (rank_agent.cpp).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "distributed/hostfile.h"
#include "distributed/ring/socket.h"
#include "rank_host.h"
#include "supervisor.h"
#include "tessera/config.h"

extern char** environ;

namespace tessera::cli {

namespace {

namespace dd = distributed::detail;

const char* kLaunchUsage =
    "usage: tessera launch [--hosts H1,H2,... | --hostfile FILE] [-n N] [--backend ring|mpi]\n"
    "                      [--env K=V]... [-p/--starting-port P] [--connections-per-ip C]\n"
    "                      [--cwd DIR] [--python PY] [--print-python] [--cpu-bind auto|none]\n"
    "                      [--verbose] [--no-prefix] [--grace S] [--max-restarts N] [--mlx]\n"
    "                      [--trace DIR]\n"
    "                      [--mpi-arg ARG]...\n"
    "                      [--] program [args...] | -m module [args...]\n"
    "Runs `program` as the ranks of one job: N ranks (-n, default 1) on each host of --hosts\n"
    "(default 127.0.0.1), or one on each host of an MLX launcher hostfile. Hosts that name this\n"
    "machine run here; the others are reached with `ssh -o BatchMode=yes` (never a prompt) and\n"
    "run `tessera _rank-agent` from this command's own path, which must exist there too.\n"
    "A program ending in .py runs with --python, else $TESSERA_PYTHON (default python3; the\n"
    "command of the Python package sets its own interpreter), as does -m module; with --mlx\n"
    "these and any other Python program (a console script such as mlx_lm.generate, found\n"
    "among the interpreter's scripts or on PATH, on each host) run through\n"
    "`python -m tessera.mlx`, so `import mlx.core` gives Tessera.\n"
    "Each rank gets TESSERA_RANK / MLX_RANK, TESSERA_HOSTFILE / MLX_HOSTFILE,\n"
    "TESSERA_WORLD_SIZE, a fresh TESSERA_JOB_TOKEN, the hostfile's envs and --env; remote ranks\n"
    "also get this shell's TESSERA_* and MLX_* settings. Ports: free ones for a job on this\n"
    "host only, else from -p (default 32323), one per rank, address and connection. Output\n"
    "lines are prefixed with \"[rank] \"; stdin goes to every rank. When a rank fails the\n"
    "others get SIGTERM, then SIGKILL after --grace seconds (default 5), and the exit status\n"
    "is the first failure's. --max-restarts N (or TESSERA_MAX_RESTARTS) then starts the whole\n"
    "job again, up to N times, with fresh ports and token and TESSERA_RESTART_COUNT set to the\n"
    "attempt (0 first); a job stopped by SIGINT/SIGTERM is never restarted, and stdin is not\n"
    "replayed. A remote rank stops when its ssh connection ends or when this\n"
    "launcher has been silent for TESSERA_LAUNCH_HEARTBEAT seconds.\n"
    "--cpu-bind auto (the default) gives each rank its own share of its host's CPUs (contiguous\n"
    "groups; with more ranks than CPUs, one CPU each in turn); none leaves placement to the\n"
    "kernel. --trace DIR (ranks on this host only) records a timeline of every kernel and\n"
    "collective: DIR/rank<r>.json per rank and DIR/trace.json with one process per rank on a\n"
    "common clock (Chrome trace / Perfetto).\n"
    "--backend mpi runs the job with mpirun instead ($TESSERA_MPIRUN, Open MPI's or MPICH's):\n"
    "the hosts become -H host:slots, the hostfile's envs, --env and this shell's TESSERA_* /\n"
    "MLX_* settings are passed with -x (-genv for MPICH), --mpi-arg values follow, and the\n"
    "exit status is mpirun's.\n";

constexpr int kDefaultStartingPort = 32323;  // mlx.launch's

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

// The launcher's own PATH, which execvp searches (from its environment block, as the ranks' is).
std::string launcher_path() {
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "PATH=", 5) == 0) return *e + 5;
  }
  return "/usr/bin:/bin";
}

// A regular file this user may execute.
bool executable_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// Whether execvp would find the name `program` (no slash) on `path_env`.
bool on_path(const std::string& program, const std::string& path_env) {
  for (size_t start = 0; start <= path_env.size();) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    const std::string dir = path_env.substr(start, end - start);
    if (executable_file(std::filesystem::path(dir.empty() ? "." : dir) / program)) return true;
    start = end + 1;
  }
  return false;
}

// Where execvp would find `program` (PATH is searched for a name without a slash), checked
// before any rank starts, so a typo is one clear error instead of N failed ranks.
void check_program(const std::string& program, const std::string& path_env) {
  if (program.find('/') != std::string::npos) {
    std::error_code ec;
    if (!std::filesystem::exists(program, ec)) {
      throw std::invalid_argument("[launch] program '" + program + "' does not exist");
    }
    if (!executable_file(program)) {
      throw std::invalid_argument("[launch] program '" + program +
                                  "' is not an executable file (chmod +x it?)");
    }
    return;
  }
  if (!on_path(program, path_env)) {
    throw std::invalid_argument("[launch] program '" + program +
                                "' was not found on PATH; give its path (e.g. ./" + program + ")");
  }
}

// One host of the job, as the launcher will reach it.
struct Place {
  std::string ssh;               // ssh destination (remote hosts)
  std::vector<std::string> ips;  // the ring addresses of its ranks
  bool local = false;            // this machine: no ssh
};

std::vector<Place> place_hosts(const dd::JobHostfile& job) {
  const std::string me = dd::this_host_name();
  std::vector<Place> out;
  for (size_t i = 0; i < job.hosts.size(); ++i) {
    const auto& h = job.hosts[i];
    Place p;
    p.ssh = h.ssh;
    p.ips = h.ips;
    const bool has_user = h.ssh.find('@') != std::string::npos;
    const std::string name = has_user ? h.ssh.substr(h.ssh.find('@') + 1) : h.ssh;
    if (p.ips.empty()) p.ips.push_back(dd::resolve_ip(name, "[launch] host " + std::to_string(i) + " ('" + h.ssh + "')"));
    // Another user's login is never "this machine": that rank must run as that user.
    p.local = !has_user && (name == "localhost" || name == me || dd::is_local_address(dd::ip_address(name, 1)) ||
                            dd::is_local_address(dd::ip_address(p.ips[0], 1)));
    if (!out.empty() && p.ips.size() != out[0].ips.size()) {
      throw std::invalid_argument("[launch] host " + std::to_string(i) + " ('" + h.ssh + "') has " +
                                  std::to_string(p.ips.size()) + " addresses but host 0 has " +
                                  std::to_string(out[0].ips.size()) +
                                  "; every host needs the same number (one ring connection each)");
    }
    out.push_back(std::move(p));
  }
  return out;
}

// One ssh connection per remote host, which that host's ranks share (OpenSSH's connection
// multiplexing): the handshakes happen once per host, all hosts at once, and a host that cannot
// be reached is one error before any rank starts.
class SshMasters {
 public:
  SshMasters() = default;
  SshMasters(const SshMasters&) = delete;
  ~SshMasters() {
    for (auto& m : masters_) {
      if (m.pid > 0) ::kill(m.pid, SIGTERM);
    }
    for (auto& m : masters_) {
      if (m.pid > 0) ::waitpid(m.pid, nullptr, 0);
    }
  }
  // Connects to every host in `hosts` (ssh destinations); throws naming the first that fails.
  void open(const std::vector<std::string>& hosts, const std::filesystem::path& dir, bool verbose) {
    for (const auto& h : hosts) {
      Master m;
      m.host = h;
      m.socket = (dir / ("ssh" + std::to_string(masters_.size()))).string();
      m.errors = m.socket + ".err";
      std::vector<std::string> argv = {"ssh", "-M", "-N", "-T", "-S", m.socket, "-o", "ControlPersist=no"};
      argv.insert(argv.end(), ssh_options().begin(), ssh_options().end());
      argv.insert(argv.end(), {"--", h});
      m.pid = spawn(argv, m.errors);
      masters_.push_back(std::move(m));
    }
    const auto start = std::chrono::steady_clock::now();
    for (auto& m : masters_) {
      for (;;) {
        struct stat st {};
        if (::stat(m.socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) break;
        int status = 0;
        if (::waitpid(m.pid, &status, WNOHANG) == m.pid) {
          m.pid = -1;
          throw std::runtime_error("[launch] cannot reach host '" + m.host + "' over ssh (ssh exited with status " +
                                   std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 255) + "): " +
                                   last_words(m.errors) + "; no rank was started");
        }
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(15)) {
          throw std::runtime_error("[launch] host '" + m.host + "' did not complete the ssh login within 15 s; "
                                   "no rank was started");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (verbose) std::fprintf(stderr, "[launch] ssh connection to %s is up\n", m.host.c_str());
    }
  }
  const std::string& socket_of(const std::string& host) const {
    for (const auto& m : masters_)
      if (m.host == host) return m.socket;
    throw std::logic_error("no ssh connection to " + host);
  }

 private:
  struct Master {
    std::string host, socket, errors;
    pid_t pid = -1;
  };
  // Its own process group, so Ctrl-C reaches the ranks through the launcher, not the connection.
  static pid_t spawn(const std::vector<std::string>& args, const std::string& errors) {
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    const int err = ::open(errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    pid_t pid = -1;
    try {
      pid = spawn_child(args, nullptr, {}, "", null, null, err >= 0 ? err : null);
    } catch (...) {
      ::close(null);
      if (err >= 0) ::close(err);
      throw;
    }
    ::close(null);
    if (err >= 0) ::close(err);
    return pid;
  }
  static std::string last_words(const std::string& path) {
    std::ifstream f(path);
    std::string text, line;
    while (std::getline(f, line)) {
      if (!line.empty()) text += (text.empty() ? "" : " ") + line;
    }
    return text.empty() ? "no message" : text;
  }
  std::vector<Master> masters_;
};

// --backend mpi: mpirun starts the ranks (MPI gives them their rank), with the hosts as
// `-H host:slots` in first-seen order, the environment with -x (Open MPI) or -genv (MPICH's
// Hydra), this shell's TESSERA_* / MLX_* settings forwarded, then --mpi-arg. mpirun replaces
// this process, so its exit status is the job's and signals reach it directly.
int launch_mpi(const dd::JobHostfile& job, int repeat, const std::vector<std::string>& program,
               const std::vector<std::string>& job_env, const std::vector<std::string>& mpi_args,
               const std::string& cwd, bool verbose) {
  const std::string mpirun = config::get_string("TESSERA_MPIRUN").value_or("mpirun");
  FILE* p = ::popen((shell_quote(mpirun) + " --version 2>&1").c_str(), "r");
  std::string version;
  if (p) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) version += buf;
  }
  const int status = p ? ::pclose(p) : -1;
  if (status != 0 && version.find("Version") == std::string::npos) {
    throw std::invalid_argument("[launch] --backend mpi needs mpirun, but '" + mpirun + " --version' " +
                                (status == 127 * 256 || version.find("not found") != std::string::npos
                                     ? std::string("was not found (install openmpi-bin or mpich, or set TESSERA_MPIRUN)")
                                     : "failed: " + version));
  }
  const bool open_mpi = version.find("Open MPI") != std::string::npos || version.find("OpenRTE") != std::string::npos;
  const bool hydra = version.find("HYDRA") != std::string::npos;
  if (!open_mpi && !hydra) {
    throw std::invalid_argument("[launch] '" + mpirun + "' is neither Open MPI's nor MPICH's (Hydra) mpirun: " +
                                version.substr(0, version.find('\n')));
  }
  std::vector<std::pair<std::string, int>> slots;  // ssh name -> ranks, first-seen order
  for (const auto& h : job.hosts) {
    auto it = std::find_if(slots.begin(), slots.end(), [&](const auto& e) { return e.first == h.ssh; });
    if (it == slots.end()) slots.emplace_back(h.ssh, repeat);
    else it->second += repeat;
  }
  std::string hosts;
  int n = 0;
  for (const auto& [h, k] : slots) {
    hosts += (hosts.empty() ? "" : ",") + h + ":" + std::to_string(k);
    n += k;
  }
  std::vector<std::string> argv = {mpirun, "-n", std::to_string(n), open_mpi ? "-H" : "-hosts", hosts};
  if (!cwd.empty()) argv.insert(argv.end(), {"-wdir", cwd});
  auto add_env = [&](const std::string& kv) {
    if (open_mpi) {
      argv.insert(argv.end(), {"-x", kv});
    } else {
      const size_t eq = kv.find('=');
      argv.insert(argv.end(), {"-genv", kv.substr(0, eq), kv.substr(eq + 1)});
    }
  };
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string k = kv.substr(0, kv.find('='));
    if (is_launcher_variable(k)) continue;
    if (k.rfind("TESSERA_", 0) == 0 || k.rfind("MLX_", 0) == 0) add_env(kv);
  }
  for (const auto& kv : job_env) add_env(kv);
  argv.insert(argv.end(), mpi_args.begin(), mpi_args.end());
  if (open_mpi) argv.push_back("--");  // Hydra takes the program at the first non-option
  argv.insert(argv.end(), program.begin(), program.end());
  if (verbose) {
    std::string line;
    for (const auto& a : argv) line += (line.empty() ? "" : " ") + shell_quote(a);
    std::fprintf(stderr, "[launch] %s\n", line.c_str());
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execvp(cargv[0], cargv.data());
  throw std::runtime_error("[launch] cannot run " + mpirun + ": " + std::strerror(errno));
}

}  // namespace

int launch_command(const std::vector<std::string>& args) {
  int repeat = 0, connections = 1, starting_port = 0, max_restarts = -1;
  double grace = 5.0;
  bool verbose = false, prefix = true, bind = true, mlx = false, print_python = false;
  std::string backend, trace_dir, hosts_arg, hostfile_path, cwd, python;
  std::vector<std::string> cli_env, mpi_args, program;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) -> const std::string& {
      if (i + 1 >= args.size()) throw std::invalid_argument(flag + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kLaunchUsage, stdout);
      return 0;
    } else if (a == "-n" || a == "--repeat-hosts" || a == "--nproc") {
      repeat = parse_int("-n", value(a), 1, 4096);
    } else if (a == "--hosts") {
      hosts_arg = value(a);
    } else if (a == "--hostfile") {
      hostfile_path = value(a);
    } else if (a == "--backend") {
      backend = value(a);
      if (!dd::is_known_backend(backend)) {
        throw std::invalid_argument("--backend '" + backend +
                                    "' is not one of ring, mpi, nccl, jaccl, jaccl-ring");
      }
    } else if (a == "--env") {
      const std::string& kv = value(a);
      if (kv.find('=') == std::string::npos || !valid_env_name(kv.substr(0, kv.find('=')))) {
        throw std::invalid_argument("--env expects NAME=VALUE with NAME of letters, digits and "
                                    "underscores (not starting with a digit), got '" + kv + "'");
      }
      cli_env.push_back(kv);
    } else if (a == "--mpi-arg") {
      mpi_args.push_back(value(a));
    } else if (a == "--starting-port" || a == "-p") {
      starting_port = parse_int("--starting-port", value(a), 1, 65535);
    } else if (a == "--connections-per-ip") {
      connections = parse_int("--connections-per-ip", value(a), 1, 64);
    } else if (a == "--cwd") {
      cwd = value(a);
    } else if (a == "--python") {
      python = value(a);
    } else if (a == "--print-python") {
      print_python = true;
    } else if (a == "--grace") {
      grace = parse_int("--grace", value(a), 0, 3600);
    } else if (a == "--max-restarts") {
      max_restarts = parse_int("--max-restarts", value(a), 0, 1000);
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
    } else if (a == "-m") {  // a module, as `python -m module args...`
      if (i + 1 >= args.size()) throw std::invalid_argument("-m needs a module name");
      program.assign(args.begin() + static_cast<long>(i), args.end());
      break;
    } else if (!a.empty() && a[0] == '-') {
      throw std::invalid_argument("unknown option '" + a + "'\n" + kLaunchUsage);
    } else {
      program.assign(args.begin() + static_cast<long>(i), args.end());
      break;
    }
  }
  if (python.empty()) python = config::get_string("TESSERA_PYTHON").value_or("python3");
  if (print_python) {
    std::printf("%s\n", python.c_str());
    return 0;
  }

  // The hosts, in rank order.
  dd::JobHostfile job;
  if (!hostfile_path.empty()) {
    if (!hosts_arg.empty()) {
      throw std::invalid_argument("--hosts and --hostfile both list the hosts; give one of them");
    }
    if (repeat > 0) {
      throw std::invalid_argument("-n repeats the entries of --hosts; a --hostfile runs one rank "
                                  "per entry, so list a host once per rank there");
    }
    job = dd::load_job_hostfile(hostfile_path);
  } else {
    job = dd::job_hosts_from_list(hosts_arg.empty() ? "127.0.0.1" : hosts_arg);
  }
  if (repeat == 0) repeat = 1;
  if (backend.empty()) backend = job.backend.empty() ? "ring" : job.backend;
  if (backend != "ring" && backend != "mpi") {
    throw std::invalid_argument("--backend " + backend + " cannot be launched by this build; "
                                "use ring (the default) or mpi");
  }
  if (backend != "mpi" && !mpi_args.empty()) throw std::invalid_argument("--mpi-arg is for --backend mpi");

  if (program.empty()) throw std::invalid_argument(std::string("no program given\n") + kLaunchUsage);
  if (program[0] == "-m") {
    program.insert(program.begin(), python);
    if (mlx) program.insert(program.begin() + 1, {"-m", "tessera.mlx"});
  } else if (ends_with(program[0], ".py")) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(program[0], ec)) {
      throw std::invalid_argument("[launch] script '" + program[0] + "' does not exist");
    }
    if (mlx) program.insert(program.begin(), {python, "-m", "tessera.mlx"});
    else program.insert(program.begin(), python);
  } else if (mlx) {
    // A console script (mlx_lm.generate) or a Python file without .py: tessera.mlx finds it on
    // each host's PATH and runs it.
    program.insert(program.begin(), {python, "-m", "tessera.mlx"});
  } else if (program[0].find('/') == std::string::npos && python.find('/') != std::string::npos &&
             !on_path(program[0], launcher_path())) {
    // A console script of the Python environment this command belongs to (mlx_lm.lora run by
    // venv/bin/tessera without the venv on PATH): that environment's copy, on every host.
    const std::filesystem::path script = std::filesystem::path(python).parent_path() / program[0];
    if (executable_file(script)) program[0] = script.string();
  }
  std::vector<std::string> job_env = job.envs;
  job_env.insert(job_env.end(), cli_env.begin(), cli_env.end());
  if (max_restarts < 0) max_restarts = static_cast<int>(config::get_int("TESSERA_MAX_RESTARTS"));
  if (backend == "mpi") {
    if (!trace_dir.empty()) throw std::invalid_argument("[launch] --trace is for the ring backend");
    if (max_restarts > 0) {
      throw std::invalid_argument("[launch] --max-restarts (or TESSERA_MAX_RESTARTS) is for the "
                                  "ring backend: with --backend mpi, mpirun runs the job and this "
                                  "launcher cannot restart it; run it again, or use the ring");
    }
    return launch_mpi(job, repeat, program, job_env, mpi_args, cwd, verbose);
  }

  const std::vector<Place> places = place_hosts(job);
  std::vector<int> host_of;  // rank -> index into places
  for (size_t h = 0; h < places.size(); ++h)
    for (int k = 0; k < repeat; ++k) host_of.push_back(static_cast<int>(h));
  const int n = static_cast<int>(host_of.size());
  if (n > 4096) throw std::invalid_argument("[launch] " + std::to_string(n) + " ranks: at most 4096");
  const bool all_local = std::all_of(places.begin(), places.end(), [](const Place& p) { return p.local; });

  // Each attempt: fresh ports, a fresh job token, every rank started again (--max-restarts).
  auto run_attempt = [&](int attempt) -> SuperviseResult {
    // Ports: one per rank, address and connection, in that order (as mlx.launch).
    const int per_rank = static_cast<int>(places[0].ips.size()) * connections;
    std::vector<int> ports;
    if (all_local && starting_port == 0) {
      ports = free_ports(n * per_rank);
    } else {
      int first = starting_port > 0 ? starting_port : kDefaultStartingPort;
      const int count = n * per_rank;
      if (first + count - 1 > 65535) {
        throw std::invalid_argument("--starting-port " + std::to_string(first) + " with " +
                                    std::to_string(count) + " ports passes 65535");
      }
      // A restart takes the next block when it fits: the last attempt's ports may linger.
      if (first + (attempt + 1) * count - 1 <= 65535) first += attempt * count;
      for (int i = 0; i < count; ++i) ports.push_back(first + i);
    }
    dd::Hostfile ring;
    for (int r = 0; r < n; ++r) {
      std::vector<dd::HostAddress> addrs;
      for (const auto& ip : places[static_cast<size_t>(host_of[r])].ips)
        for (int c = 0; c < connections; ++c) addrs.push_back(dd::ip_address(ip, ports[addrs.size() + static_cast<size_t>(r * per_rank)]));
      ring.ranks.push_back(std::move(addrs));
    }
    const std::string ring_json = ring.to_json();

    // Environment: a local rank inherits this one; a remote rank gets this one's Tessera and MLX
    // settings. Both get the hostfile's envs, then --env.
    std::vector<std::string> local_env, forwarded_env;
    bool memory_limit_given = false;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const std::string k = kv.substr(0, kv.find('='));
      if (is_launcher_variable(k)) continue;
      local_env.push_back(kv);
      if (k.rfind("TESSERA_", 0) == 0 || k.rfind("MLX_", 0) == 0) forwarded_env.push_back(kv);
      memory_limit_given |= k == "TESSERA_MEMORY_LIMIT_MB";
    }
    for (const auto& kv : job_env) memory_limit_given |= kv.rfind("TESSERA_MEMORY_LIMIT_MB=", 0) == 0;
    int local_ranks = 0;
    for (int r = 0; r < n; ++r) local_ranks += places[static_cast<size_t>(host_of[r])].local;
    if (local_ranks > 0) check_program(program[0], launcher_path());
    if (!memory_limit_given && local_ranks > 0) {
      if (std::string m = memory_share_entry(local_ranks); !m.empty()) {
        local_env.push_back(m);
        if (verbose) std::fprintf(stderr, "[launch] memory limit per rank here: %s MiB\n", m.substr(m.find('=') + 1).c_str());
      }
    }
    if (!cwd.empty() && local_ranks > 0 && !std::filesystem::is_directory(cwd)) {
      throw std::invalid_argument("[launch] --cwd '" + cwd + "' is not a directory on this host");
    }
    if (!trace_dir.empty()) {
      if (!all_local) {
        throw std::invalid_argument("[launch] --trace records ranks on this host only, and this "
                                    "job has ranks on other hosts");
      }
      std::error_code ec;
      std::filesystem::create_directories(trace_dir, ec);
      if (ec) {
        throw std::invalid_argument("[launch] --trace: cannot create the directory '" + trace_dir +
                                    "': " + ec.message());
      }
      trace_dir = std::filesystem::absolute(trace_dir).string();
    }

    char dir_template[] = "/tmp/tessera-launch-XXXXXX";
    if (!::mkdtemp(dir_template)) {
      throw std::runtime_error(std::string("[launch] mkdtemp: ") + std::strerror(errno));
    }
    std::filesystem::path dir(dir_template);
    std::filesystem::path hostfile = dir / "hostfile.json";
    std::ofstream(hostfile) << ring_json << "\n";
    if (verbose) std::fprintf(stderr, "[launch] ring hostfile %s: %s\n", hostfile.c_str(), ring_json.c_str());

    const std::string token = dd::random_hex(32);
    std::string agent_cmd, launcher_cwd;
    if (!all_local) {
      agent_cmd = shell_quote(self_path()) + " " + kAgentCommand;
      std::error_code ec;
      launcher_cwd = std::filesystem::current_path(ec).string();
    }
    const double heartbeat = static_cast<double>(config::get_int("TESSERA_LAUNCH_HEARTBEAT"));
    SshMasters masters;
    {
      std::vector<std::string> remote;
      for (const auto& p : places) {
        if (!p.local && std::find(remote.begin(), remote.end(), p.ssh) == remote.end()) remote.push_back(p.ssh);
      }
      try {
        masters.open(remote, dir, verbose);
      } catch (...) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
        throw;
      }
    }
    std::vector<RankSpec> local;
    std::vector<HostSpec> remote;
    std::vector<nlohmann::json> host_ranks;  // per entry of `remote`: its ranks' jobs
    const std::vector<int> cpus = bind ? allowed_cpus() : std::vector<int>{};
    int local_index = 0;
    const bool stdout_tty = ::isatty(STDOUT_FILENO) == 1;
    for (int r = 0; r < n; ++r) {
      const Place& place = places[static_cast<size_t>(host_of[r])];
      std::vector<std::string> rank_env;
      for (const char* k : {"TESSERA_RANK=", "MLX_RANK="}) rank_env.push_back(k + std::to_string(r));
      for (const char* k : {"TESSERA_WORLD_SIZE=", "MLX_WORLD_SIZE="}) rank_env.push_back(k + std::to_string(n));
      rank_env.push_back("TESSERA_JOB_TOKEN=" + token);
      rank_env.push_back("TESSERA_RESTART_COUNT=" + std::to_string(attempt));
      if (verbose) rank_env.push_back("TESSERA_RING_VERBOSE=1");
      if (stdout_tty) rank_env.push_back("TESSERA_LAUNCH_TTY=1");
      if (place.local) {
        RankSpec spec;
        spec.rank = r;
        spec.argv = program;
        spec.env = local_env;
        spec.env.insert(spec.env.end(), job_env.begin(), job_env.end());
        spec.env.insert(spec.env.end(), rank_env.begin(), rank_env.end());
        for (const char* k : {"TESSERA_HOSTFILE=", "MLX_HOSTFILE="}) spec.env.push_back(k + hostfile.string());
        if (!trace_dir.empty()) {
          spec.env.push_back("TESSERA_TRACE=" + trace_dir + "/rank" + std::to_string(r) + ".json");
        }
        spec.cpus = cpus_for_rank(cpus, local_ranks, local_index++);
        if (!cpus.empty()) spec.env.push_back("TESSERA_HOST_CPUS=" + std::to_string(cpus.size()));
        spec.cwd = cwd;
        if (verbose) {
          std::string list;
          for (int c : spec.cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
          std::fprintf(stderr, "[launch] rank %d: this host%s%s\n", r, list.empty() ? "" : ", CPUs ", list.c_str());
        }
        local.push_back(std::move(spec));
        continue;
      }
      // Ranks on a remote host: one ssh session to one agent that runs them all.
      size_t h = 0;
      while (h < remote.size() && remote[h].host != place.ssh) ++h;
      if (h == remote.size()) {
        HostSpec spec;
        spec.host = place.ssh;
        spec.argv = {"ssh", "-T", "-S", masters.socket_of(place.ssh), "-o", "ControlMaster=no"};
        spec.argv.insert(spec.argv.end(), ssh_options().begin(), ssh_options().end());
        spec.argv.insert(spec.argv.end(), {"--", place.ssh, agent_cmd});
        spec.env = local_env;  // ssh's own: HOME, SSH_AUTH_SOCK, ...
        remote.push_back(std::move(spec));
        host_ranks.push_back(nlohmann::json::array());
      }
      std::vector<std::string> env = forwarded_env;
      env.insert(env.end(), job_env.begin(), job_env.end());
      env.insert(env.end(), rank_env.begin(), rank_env.end());
      remote[h].ranks.push_back(r);
      host_ranks[h].push_back({{"rank", r}, {"env", env}});
      if (verbose) std::fprintf(stderr, "[launch] rank %d: ssh %s\n", r, place.ssh.c_str());
    }
    for (size_t h = 0; h < remote.size(); ++h) {
      const nlohmann::json desc = {{"argv", program},
                                   {"cwd", cwd},
                                   {"fallback_cwd", launcher_cwd},
                                   {"ring_hostfile", ring_json},
                                   {"grace", grace},
                                   {"heartbeat", heartbeat},
                                   {"cpu_bind", bind},
                                   {"verbose", verbose},
                                   {"ranks", host_ranks[h]}};
      remote[h].preamble = desc.dump() + "\n";
    }
    SuperviseOptions opt;
    opt.prefix = prefix;
    opt.grace_seconds = grace;
    opt.verbose = verbose;
    opt.heartbeat_seconds = heartbeat;
    SuperviseResult result = supervise(n, local, remote, opt);
    if (!trace_dir.empty()) {
      std::fprintf(stderr, "[launch] trace: %s\n", merge_rank_traces(trace_dir, n).c_str());
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return result;
  };
  for (int attempt = 0;; ++attempt) {
    const SuperviseResult result = run_attempt(attempt);
    if (result.code == 0 || result.interrupted || attempt >= max_restarts) return result.code;
    std::fprintf(stderr, "[launch] restart %d of %d after %s: starting every rank again\n",
                 attempt + 1, max_restarts, result.failure.c_str());
  }
}

}  // namespace tessera::cli
