// `tessera _rank-agent`: the remote end of a rank that `tessera launch` starts over ssh. It reads
// the rank's job (one JSON line) and the launcher's frames from stdin (rank_host.h), runs the
// rank in its own process group with stdout and stderr going straight back through ssh, and
// stops it when the launcher asks, when the connection ends, or when the launcher has been
// silent for the heartbeat limit — so no rank outlives its launcher on any host. It exits with
// the rank's status (a death by signal n as 128 + n).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "distributed/shm/segments.h"
#include "rank_host.h"

extern char** environ;

namespace tessera::cli {

namespace {

std::atomic<int> g_signal{0};
int g_wake_fd = -1;

void on_signal(int sig) {
  g_signal.store(sig);
  char b = 1;
  [[maybe_unused]] ssize_t w = ::write(g_wake_fd, &b, 1);
}
void on_child(int) {
  char b = 1;
  [[maybe_unused]] ssize_t w = ::write(g_wake_fd, &b, 1);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void say(const std::string& msg) {
  std::string line = msg + "\n";
  [[maybe_unused]] ssize_t w = ::write(2, line.data(), line.size());
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// The first line of stdin, read byte by byte so that nothing after it is consumed.
std::string read_job_line() {
  std::string line;
  for (;;) {
    char c = 0;
    ssize_t r = ::read(0, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw std::runtime_error("the launcher closed the connection before sending the job");
    if (c == '\n') return line;
    line += c;
    if (line.size() > (64u << 20)) throw std::runtime_error("the job description is too long");
  }
}

struct Job {
  int rank = 0;
  std::vector<std::string> argv, env;
  std::string cwd, fallback_cwd, ring_hostfile;
  double grace = 5, heartbeat = 10;
  int local_index = 0, local_count = 1;
  bool cpu_bind = true, verbose = false;
};

Job parse_job(const std::string& line) {
  const auto j = nlohmann::json::parse(line);
  Job job;
  job.rank = j.at("rank").get<int>();
  job.argv = j.at("argv").get<std::vector<std::string>>();
  job.env = j.at("env").get<std::vector<std::string>>();
  job.cwd = j.value("cwd", "");
  job.fallback_cwd = j.value("fallback_cwd", "");
  job.ring_hostfile = j.at("ring_hostfile").get<std::string>();
  job.grace = j.value("grace", 5.0);
  job.heartbeat = j.value("heartbeat", 10.0);
  job.local_index = j.value("local_index", 0);
  job.local_count = j.value("local_count", 1);
  job.cpu_bind = j.value("cpu_bind", true);
  job.verbose = j.value("verbose", false);
  if (job.argv.empty()) throw std::runtime_error("the job has no program");
  return job;
}

}  // namespace

int rank_agent_command(const std::vector<std::string>&) {
  const std::string where = "on host " + host_name();
  Job job;
  try {
    job = parse_job(read_job_line());
  } catch (const std::exception& e) {
    say("[launch] rank agent " + where + ": " + e.what());
    return 1;
  }
  const std::string who = "[launch] rank " + std::to_string(job.rank) + " " + where;
  [[maybe_unused]] ssize_t w = ::write(1, kAgentReady, std::strlen(kAgentReady));

  if (!job.cwd.empty()) {
    if (::chdir(job.cwd.c_str()) != 0) {
      say(who + ": cannot change to the directory '" + job.cwd + "' (--cwd): " + std::strerror(errno));
      return 1;
    }
  } else if (!job.fallback_cwd.empty() && ::chdir(job.fallback_cwd.c_str()) != 0 && job.verbose) {
    say(who + ": the launcher's directory '" + job.fallback_cwd + "' does not exist here; the rank "
        "runs in " + (std::getenv("HOME") ? std::getenv("HOME") : "the login directory"));
  }

  char path[] = "/tmp/tessera-rank-XXXXXX.json";
  int hf = ::mkstemps(path, 5);
  if (hf < 0) {
    say(who + ": cannot create the ring hostfile in /tmp: " + std::strerror(errno));
    return 1;
  }
  const std::string hostfile = path;
  const std::string content = job.ring_hostfile + "\n";
  const bool wrote = ::write(hf, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(hf);
  if (!wrote) {
    ::unlink(hostfile.c_str());
    say(who + ": cannot write the ring hostfile " + hostfile);
    return 1;
  }

  // The environment: this login's, less what the launcher sets, plus the job's entries.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (!is_launcher_variable(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  bool memory_given = false;
  for (const auto& kv : job.env) memory_given |= kv.rfind("TESSERA_MEMORY_LIMIT_MB=", 0) == 0;
  for (const auto& kv : env) memory_given |= kv.rfind("TESSERA_MEMORY_LIMIT_MB=", 0) == 0;
  if (!memory_given) {
    if (std::string m = memory_share_entry(job.local_count); !m.empty()) env.push_back(m);
  }
  env.insert(env.end(), job.env.begin(), job.env.end());
  for (const char* k : {"TESSERA_HOSTFILE=", "MLX_HOSTFILE="}) env.push_back(k + hostfile);
  const std::vector<int> cpus =
      job.cpu_bind ? cpus_for_rank(allowed_cpus(), job.local_count, job.local_index) : std::vector<int>{};

  int wake[2], in[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0 || ::pipe2(in, O_CLOEXEC) != 0) {
    ::unlink(hostfile.c_str());
    say(who + ": pipe failed: " + std::strerror(errno));
    return 1;
  }
  g_wake_fd = wake[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  struct sigaction sc {};
  sc.sa_handler = on_child;
  sigemptyset(&sc.sa_mask);
  sc.sa_flags = SA_NOCLDSTOP;
  ::sigaction(SIGCHLD, &sc, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  std::vector<char*> argv, envp;
  for (auto& a : job.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  sigset_t block, saved;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&block, sig);
  ::sigprocmask(SIG_BLOCK, &block, &saved);
  const pid_t agent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the agent killed outright takes the rank with it
    if (::getppid() != agent) ::_exit(137);
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpus) CPU_SET(c, &set);
      ::sched_setaffinity(0, sizeof(set), &set);
    }
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) ::signal(sig, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &saved, nullptr);
    ::dup2(in[0], 0);
    ::execvpe(argv[0], argv.data(), envp.data());
    say(who + ": cannot execute '" + job.argv[0] + "': " + std::strerror(errno));
    ::_exit(127);
  }
  if (pid < 0) {
    ::unlink(hostfile.c_str());
    say(who + ": fork failed: " + std::strerror(errno));
    return 1;
  }
  ::setpgid(pid, pid);
  ::sigprocmask(SIG_SETMASK, &saved, nullptr);
  ::close(in[0]);
  int child_in = in[1];
  ::fcntl(child_in, F_SETFL, O_NONBLOCK);

  std::string frames, pending_in;
  bool stdin_open = true, close_child_in = false, signalled = false;
  double last_heard = now_s(), kill_at = 0;
  auto stop = [&](bool at_once) {
    if (at_once) {
      ::kill(-pid, SIGKILL);
      return;
    }
    ::kill(-pid, SIGTERM);
    ::kill(-pid, SIGCONT);
    if (kill_at == 0) kill_at = now_s() + job.grace;
  };
  int code = -1;
  char buf[65536];
  while (code < 0) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
      break;
    }
    if (int sig = g_signal.exchange(0)) {  // the agent itself is told to stop
      (void)sig;
      stop(false);
    }
    const double t = now_s();
    if (kill_at > 0 && t > kill_at) {
      stop(true);
      kill_at = t + 3600;
    }
    if (stdin_open && job.heartbeat > 0 && t - last_heard > job.heartbeat) {
      if (job.verbose) say(who + ": no word from the launcher for " + std::to_string(job.heartbeat) + " s; stopping the rank");
      stdin_open = false;
      stop(false);
    }
    std::vector<pollfd> fds = {{wake[0], POLLIN, 0}};
    if (stdin_open) fds.push_back({0, POLLIN, 0});
    if (child_in >= 0 && !pending_in.empty()) fds.push_back({child_in, POLLOUT, 0});
    int rc = ::poll(fds.data(), fds.size(), 100);
    if (rc < 0 && errno != EINTR) break;
    for (const auto& f : fds) {
      if (!f.revents) continue;
      if (f.fd == wake[0]) {
        while (::read(wake[0], buf, sizeof buf) > 0) {
        }
      } else if (f.fd == 0) {
        ssize_t got = ::read(0, buf, sizeof buf);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) {  // the connection to the launcher is gone
          stdin_open = false;
          stop(signalled);
          continue;
        }
        last_heard = now_s();
        frames.append(buf, static_cast<size_t>(got));
        size_t at = 0;
        while (at < frames.size()) {
          const char type = frames[at];
          if (type == 'D') {
            if (frames.size() - at < 5) break;
            uint32_t len = 0;
            for (int k = 1; k <= 4; ++k) len = (len << 8) | static_cast<unsigned char>(frames[at + k]);
            if (frames.size() - at - 5 < len) break;
            if (child_in >= 0) pending_in.append(frames, at + 5, len);
            at += 5 + len;
          } else if (type == 'S') {
            if (frames.size() - at < 2) break;
            const int sig = static_cast<unsigned char>(frames[at + 1]);
            ::kill(-pid, sig);
            if (sig == SIGTERM || sig == SIGINT) ::kill(-pid, SIGCONT);
            signalled = true;
            at += 2;
          } else {
            if (type == 'E') close_child_in = true;
            at += 1;  // 'H' and anything unknown: nothing to do
          }
        }
        frames.erase(0, at);
      } else if (f.fd == child_in) {
        ssize_t n = ::write(child_in, pending_in.data(), pending_in.size());
        if (n > 0) pending_in.erase(0, static_cast<size_t>(n));
        else if (n < 0 && errno != EAGAIN && errno != EINTR) ::close(child_in), child_in = -1, pending_in.clear();
      }
    }
    if (close_child_in && pending_in.empty() && child_in >= 0) ::close(child_in), child_in = -1;
  }
  ::kill(-pid, SIGKILL);  // whatever the rank left in its process group
  ::unlink(hostfile.c_str());
  distributed::detail::remove_shm_segments_of(pid);
  return code < 0 ? 1 : code;
}

}  // namespace tessera::cli
