// Per-host rank defaults and the agent frames (see rank_host.h).
#include "rank_host.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <stdexcept>

namespace tessera::cli {

namespace {

void put_u32(std::string& f, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>((v >> shift) & 0xff);
}

}  // namespace

uint32_t read_u32(const char* p) {
  uint32_t v = 0;
  for (int k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(p[k]);
  return v;
}

namespace {

[[noreturn]] void bad_frame(size_t at, char type, const char* stream) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(type));
  throw std::runtime_error(std::string("unreadable ") + stream + " stream at byte " +
                           std::to_string(at) + ": frame type " + hex + " is not one of its own");
}

// The u32 length at p, checked against kMaxFramePayload.
uint32_t payload_length(const char* p, size_t at, const char* stream) {
  const uint32_t n = read_u32(p);
  if (n > kMaxFramePayload) {
    throw std::runtime_error(std::string("unreadable ") + stream + " stream at byte " +
                             std::to_string(at) + ": a frame of " + std::to_string(n) +
                             " bytes (at most " + std::to_string(kMaxFramePayload) + ")");
  }
  return n;
}

}  // namespace

size_t decode_launcher_frames(std::string_view buf, const std::function<void(const Frame&)>& on_frame) {
  static const char* kStream = "launcher -> agent";
  size_t at = 0;
  while (at < buf.size()) {
    Frame f;
    f.type = buf[at];
    size_t len = 1;
    if (f.type == 'D') {
      if (buf.size() - at < 5) break;
      const uint32_t n = payload_length(buf.data() + at + 1, at, kStream);
      if (buf.size() - at - 5 < n) break;
      f.data = buf.substr(at + 5, n);
      len = 5 + n;
    } else if (f.type == 'S') {
      if (buf.size() - at < 2) break;
      f.value = static_cast<unsigned char>(buf[at + 1]);
      len = 2;
    } else if (f.type != 'E' && f.type != 'H') {
      bad_frame(at, f.type, kStream);
    }
    on_frame(f);
    at += len;
  }
  return at;
}

size_t decode_agent_frames(std::string_view buf, const std::function<void(const Frame&)>& on_frame) {
  static const char* kStream = "agent -> launcher";
  size_t at = 0;
  while (at < buf.size()) {
    Frame f;
    f.type = buf[at];
    if (f.type != 'O' && f.type != 'R' && f.type != 'X') bad_frame(at, f.type, kStream);
    if (buf.size() - at < 9) break;
    f.rank = read_u32(buf.data() + at + 1);
    size_t len = 9;
    if (f.type == 'X') {
      f.value = read_u32(buf.data() + at + 5);
    } else {
      const uint32_t n = payload_length(buf.data() + at + 5, at, kStream);
      if (buf.size() - at - 9 < n) break;
      f.data = buf.substr(at + 9, n);
      len += n;
    }
    on_frame(f);
    at += len;
  }
  return at;
}

std::string frame_data(const char* data, size_t n) {
  std::string f = "D";
  put_u32(f, static_cast<uint32_t>(n));
  f.append(data, n);
  return f;
}

std::string frame_output(char type, int rank, const char* data, size_t n) {
  std::string f(1, type);
  put_u32(f, static_cast<uint32_t>(rank));
  put_u32(f, static_cast<uint32_t>(n));
  f.append(data, n);
  return f;
}

std::string frame_exit(int rank, int status) {
  std::string f = "X";
  put_u32(f, static_cast<uint32_t>(rank));
  put_u32(f, static_cast<uint32_t>(status));
  return f;
}

std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

std::vector<int> cpus_for_rank(const std::vector<int>& cpus, int n, int i) {
  const int m = static_cast<int>(cpus.size());
  if (m == 0 || n <= 0) return {};
  if (n > m) return {cpus[static_cast<size_t>(i % m)]};
  const int lo = i * m / n, hi = (i + 1) * m / n;
  return std::vector<int>(cpus.begin() + lo, cpus.begin() + hi);
}

std::string memory_share_entry(int ranks_on_host) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0 || ranks_on_host <= 0) return "";
  const double bytes = static_cast<double>(pages) * static_cast<double>(page);
  const size_t share_mb = std::max<size_t>(1, static_cast<size_t>(0.8 * bytes / ranks_on_host) >> 20);
  return "TESSERA_MEMORY_LIMIT_MB=" + std::to_string(share_mb);
}

bool is_launcher_variable(const std::string& name) {
  for (const char* k : {"TESSERA_RANK", "MLX_RANK", "TESSERA_HOSTFILE", "MLX_HOSTFILE",
                        "TESSERA_WORLD_SIZE", "MLX_WORLD_SIZE", "TESSERA_JOB_TOKEN",
                        "TESSERA_RING_VERBOSE", "TESSERA_TRACE", "TESSERA_HOST_CPUS",
                        "TESSERA_LAUNCH_TTY", "TESSERA_RESTART_COUNT"}) {
    if (name == k) return true;
  }
  return false;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string self_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find this command's path (/proc/self/exe)");
  return p.string();
}

const std::vector<std::string>& ssh_options() {
  static const std::vector<std::string> o = {"-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                                             "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                                             "-o", "LogLevel=ERROR"};
  return o;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Fd::reset() {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
}

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      pollfd pf{fd, POLLOUT, 0};
      ::poll(&pf, 1, 100);
      continue;
    }
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

pid_t spawn_child(const std::vector<std::string>& args, const std::vector<std::string>* env,
                  const std::vector<int>& cpus, const std::string& cwd, int in, int out, int err) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  if (env) {
    for (const auto& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  sigset_t block, saved;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&block, sig);
  ::sigprocmask(SIG_BLOCK, &block, &saved);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::sigprocmask(SIG_SETMASK, &saved, nullptr);
    throw std::runtime_error(std::string("[launch] fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(137);  // the parent died before prctl took effect
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpus) CPU_SET(c, &set);
      ::sched_setaffinity(0, sizeof(set), &set);  // best effort: an error leaves it unbound
    }
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) ::signal(sig, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &saved, nullptr);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
      const std::string msg = "[launch] cannot change to the directory '" + cwd + "': " + std::strerror(errno) + "\n";
      write_all(2, msg);
      ::_exit(1);
    }
    if (env) ::execvpe(argv[0], argv.data(), envp.data());
    else ::execvp(argv[0], argv.data());
    const std::string msg = "[launch] cannot execute '" + args[0] + "': " + std::strerror(errno) + "\n";
    write_all(2, msg);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, to avoid racing the child
  ::sigprocmask(SIG_SETMASK, &saved, nullptr);
  return pid;
}

}  // namespace tessera::cli
