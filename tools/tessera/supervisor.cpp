// Process supervision for `tessera launch` (see supervisor.h). A single poll loop owns every
// pipe and child; signal handlers only record the signal number.
#include "supervisor.h"

#include <fcntl.h>
#include <sched.h>
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

#include "distributed/shm/segments.h"
#include "rank_host.h"

namespace tessera::cli {

namespace {

std::atomic<int> g_pending_signal{0};
int g_wake_fd = -1;  // write end of the self-pipe that wakes the poll loop

void wake() {
  if (g_wake_fd >= 0) {
    char b = 1;
    [[maybe_unused]] ssize_t w = ::write(g_wake_fd, &b, 1);  // full pipe: a wake-up is pending
  }
}
void on_signal(int sig) {
  g_pending_signal.store(sig);
  wake();
}
void on_child(int) { wake(); }

// "exited with status 3" / "was killed by SIGSEGV (signal 11)".
std::string describe_exit(int code) {
  if (code <= 128) return "exited with status " + std::to_string(code);
  const int sig = code - 128;
  const char* abbrev = ::sigabbrev_np(sig);
  return "was killed by " + (abbrev ? "SIG" + std::string(abbrev) : std::string("a signal")) +
         " (signal " + std::to_string(sig) + ")";
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Owns a pipe end; closes it on destruction.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    reset();
    fd = o.fd;
    o.fd = -1;
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // our own stdout is gone; nothing useful to do
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Splits a stream into lines and writes each with the rank's prefix; keeps the last few lines
// for the launcher's closing report.
struct LineRelay {
  static constexpr size_t kKept = 5;
  int out_fd;
  std::string prefix;
  std::string partial;
  std::vector<std::string> last;  // the last kKept lines, oldest first
  bool expect_marker = false;     // a remote rank: its first line is the agent's kAgentReady
  bool saw_marker = false;
  // One write per line, so lines of different ranks never interleave mid-line.
  void write_line(const char* p, size_t n) {
    if (expect_marker) {
      expect_marker = false;
      if (std::string(p, n) == kAgentReady) {
        saw_marker = true;
        return;
      }
    }
    std::string line;
    line.reserve(prefix.size() + n);
    line.append(prefix);
    line.append(p, n);
    write_all(out_fd, line.data(), line.size());
    if (last.size() == kKept) last.erase(last.begin());
    last.emplace_back(p, n);
  }
  void feed(const char* data, size_t n) {
    partial.append(data, n);
    size_t start = 0;
    for (;;) {
      size_t nl = partial.find('\n', start);
      if (nl == std::string::npos) break;
      write_line(partial.data() + start, nl - start + 1);
      start = nl + 1;
    }
    partial.erase(0, start);
  }
  void finish() {
    if (partial.empty()) return;
    partial.push_back('\n');
    write_line(partial.data(), partial.size());
    partial.clear();
  }
};

struct Rank {
  const RankSpec* spec = nullptr;
  pid_t pid = -1;
  bool running = false;
  int status_code = 0;  // exit code, or 128 + signal
  bool by_signal = false;  // the process itself (for a remote rank: its ssh) died of a signal
  std::vector<int> sent;   // signals the launcher sent it
  Fd out, err, in;
  LineRelay out_relay, err_relay;
  std::string pending_in;  // stdin bytes not yet written to this rank
  bool close_in_when_drained = false;
};

int status_to_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("[launch] pipe failed: ") + std::strerror(errno));
  }
}

pid_t spawn(const RankSpec& spec, int in_r, int out_w, int err_w) {
  std::vector<char*> argv, envp;
  for (auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // Signals stay blocked across fork until the child has its default handlers: a SIGTERM for
  // the job that arrived in between would otherwise run the launcher's handler in the child and
  // be lost there (the rank would then run until --grace ends and SIGKILL).
  sigset_t block, saved;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&block, sig);
  ::sigprocmask(SIG_BLOCK, &block, &saved);
  const pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::sigprocmask(SIG_SETMASK, &saved, nullptr);
    throw std::runtime_error(std::string("[launch] fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // own process group: signals reach the rank's whole process tree
    // A launcher killed outright takes its ranks with it (a remote rank: its ssh, whose agent
    // then stops the rank).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher) ::_exit(137);
    if (!spec.cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : spec.cpus) CPU_SET(c, &set);
      ::sched_setaffinity(0, sizeof(set), &set);  // best effort: an error leaves it unbound
    }
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGCHLD, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &saved, nullptr);
    ::dup2(in_r, 0);
    ::dup2(out_w, 1);
    ::dup2(err_w, 2);
    if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) {
      std::string msg = "[launch] cannot change to the directory '" + spec.cwd + "': " + std::strerror(errno) + "\n";
      write_all(2, msg.data(), msg.size());
      ::_exit(1);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    std::string msg = "[launch] cannot execute '" + spec.argv[0] + "': " + std::strerror(errno) + "\n";
    write_all(2, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, to avoid racing the child
  ::sigprocmask(SIG_SETMASK, &saved, nullptr);
  return pid;
}

// "rank 3" or "rank 3 (host node2)".
std::string rank_name(int i, const RankSpec& spec) {
  std::string s = "rank " + std::to_string(i);
  if (!spec.host.empty()) s += " (host " + spec.host + ")";
  return s;
}

void signal_all(std::vector<Rank>& ranks, int sig) {
  for (auto& r : ranks) {
    if (!r.running) continue;
    r.sent.push_back(sig);
    if (r.spec->remote && sig != SIGKILL) {  // the agent signals the rank; SIGKILL ends its ssh
      r.pending_in += frame_signal(sig);
      continue;
    }
    ::kill(-r.pid, sig);
    if (sig == SIGTERM || sig == SIGINT) ::kill(-r.pid, SIGCONT);  // a stopped rank must see it
  }
}

}  // namespace

int supervise(const std::vector<RankSpec>& specs, const SuperviseOptions& opt) {
  const int n = static_cast<int>(specs.size());
  std::vector<Rank> ranks(n);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {}, old_term {};
  // The loop sleeps in poll() until a pipe has data, a signal or a child's exit arrives
  // (SIGCHLD writes to this self-pipe), or a deadline passes: no polling tick.
  int wake_pipe[2];
  make_pipe(wake_pipe);
  Fd wake_r(wake_pipe[0]), wake_w(wake_pipe[1]);
  ::fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK);
  ::fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK);
  g_wake_fd = wake_pipe[1];
  struct sigaction sc {}, old_chld {};
  sc.sa_handler = on_child;
  sigemptyset(&sc.sa_mask);
  sc.sa_flags = SA_NOCLDSTOP;
  ::sigaction(SIGCHLD, &sc, &old_chld);
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  ::signal(SIGPIPE, SIG_IGN);  // a rank that closed its stdin must not kill the launcher

  for (int i = 0; i < n; ++i) {
    int in[2], out[2], err[2];
    make_pipe(in);
    make_pipe(out);
    make_pipe(err);
    ranks[i].spec = &specs[i];
    ranks[i].pending_in = specs[i].preamble;
    ranks[i].pid = spawn(specs[i], in[0], out[1], err[1]);
    ranks[i].running = true;
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    ranks[i].in = Fd(in[1]);
    ranks[i].out = Fd(out[0]);
    ranks[i].err = Fd(err[0]);
    ::fcntl(in[1], F_SETFL, O_NONBLOCK);
    std::string p;
    if (opt.prefix) {  // built step by step: g++ 12 warns falsely on "lit" + std::string&&
      p += '[';
      p += std::to_string(i);
      p += "] ";
    }
    ranks[i].out_relay = LineRelay{1, p, {}, {}};
    ranks[i].err_relay = LineRelay{2, p, {}, {}};
    ranks[i].out_relay.expect_marker = specs[i].remote;
  }
  const bool any_remote = std::any_of(specs.begin(), specs.end(), [](const RankSpec& s) { return s.remote; });
  const double heartbeat_every = std::max(0.05, opt.heartbeat_seconds / 4);
  double next_heartbeat = any_remote ? now_s() + heartbeat_every : 0;

  bool stdin_open = ::fcntl(0, F_GETFD) != -1;
  int first_failure = -1;  // index of the first rank that failed
  std::vector<int> exit_order;  // ranks in the order their exits were seen
  double kill_deadline = 0;
  int running = n;
  double drain_deadline = 0;  // once every rank exited, pipes get 2 s to drain
  char buf[65536];
  while (running > 0 || std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) {
           return r.out.fd >= 0 || r.err.fd >= 0;
         })) {
    if (running == 0) {
      if (drain_deadline == 0) drain_deadline = now_s() + 2.0;
      if (now_s() > drain_deadline) break;  // a leftover grandchild holds a pipe: stop waiting
    }
    if (int sig = g_pending_signal.exchange(0)) {
      if (opt.verbose) std::fprintf(stderr, "[launch] forwarding signal %d to every rank\n", sig);
      signal_all(ranks, sig);
      if (kill_deadline == 0) kill_deadline = now_s() + opt.grace_seconds;
    }
    // Reap.
    for (int i = 0; i < n; ++i) {
      auto& r = ranks[i];
      if (!r.running) continue;
      int status = 0;
      pid_t w = ::waitpid(r.pid, &status, WNOHANG);
      if (w == r.pid) {
        r.running = false;
        --running;
        r.status_code = status_to_code(status);
        r.by_signal = WIFSIGNALED(status);
        exit_order.push_back(i);
        // A rank killed while setting up shared memory leaves its segment: nobody else can.
        distributed::detail::remove_shm_segments_of(r.pid);
        if (r.status_code != 0 && first_failure < 0) {
          first_failure = i;
          if (running > 0) {
            std::fprintf(stderr, "[launch] %s %s; stopping the other ranks\n",
                         rank_name(i, *r.spec).c_str(), describe_exit(r.status_code).c_str());
            signal_all(ranks, SIGTERM);
            kill_deadline = now_s() + opt.grace_seconds;
          }
        }
        if (r.in.fd >= 0) r.in.reset();
      }
    }
    if (kill_deadline > 0 && now_s() > kill_deadline && running > 0) {
      signal_all(ranks, SIGKILL);
      kill_deadline = now_s() + 3600;  // once
    }
    if (next_heartbeat > 0 && now_s() >= next_heartbeat) {
      for (auto& r : ranks) {
        if (r.running && r.spec->remote && r.in.fd >= 0 && r.pending_in.size() < 4096) {
          r.pending_in += frame_heartbeat();
        }
      }
      next_heartbeat = now_s() + heartbeat_every;
    }
    // Poll pipes.
    std::vector<pollfd> fds;
    std::vector<std::pair<int, int>> who;  // (rank, 0 out / 1 err / 2 in / -1 stdin)
    for (int i = 0; i < n; ++i) {
      if (ranks[i].out.fd >= 0) fds.push_back({ranks[i].out.fd, POLLIN, 0}), who.push_back({i, 0});
      if (ranks[i].err.fd >= 0) fds.push_back({ranks[i].err.fd, POLLIN, 0}), who.push_back({i, 1});
      if (ranks[i].in.fd >= 0 && !ranks[i].pending_in.empty()) {
        fds.push_back({ranks[i].in.fd, POLLOUT, 0});
        who.push_back({i, 2});
      }
    }
    bool any_pending = std::any_of(ranks.begin(), ranks.end(),
                                   [](const Rank& r) { return !r.pending_in.empty(); });
    if (stdin_open && !any_pending && running > 0) {
      fds.push_back({0, POLLIN, 0});
      who.push_back({-1, -1});
    }
    fds.push_back({wake_r.fd, POLLIN, 0});
    who.push_back({-2, -2});
    // Sleep until the nearest deadline (the kill after SIGTERM, the drain after the last exit).
    double until = 0;
    for (double d : {kill_deadline, drain_deadline, next_heartbeat}) {
      if (d > 0 && (until == 0 || d < until)) until = d;
    }
    // At most kBackstopMs even so: a backstop, not the mechanism (every wake-up comes through
    // the self-pipe). A rare lost wake-up I could not explain left one test waiting out --grace.
    constexpr int kBackstopMs = 100;
    int timeout_ms = until == 0 ? kBackstopMs
                                : std::clamp(static_cast<int>((until - now_s()) * 1000) + 1, 0,
                                             kBackstopMs);
    int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) break;
    for (size_t k = 0; rc > 0 && k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      auto [i, kind] = who[k];
      if (i == -2) {  // drain the wake-ups; the next pass of the loop reaps and forwards
        while (::read(wake_r.fd, buf, sizeof buf) > 0) {
        }
        continue;
      }
      if (i < 0) {  // our stdin -> every rank
        ssize_t got = ::read(0, buf, sizeof buf);
        if (got <= 0) {
          stdin_open = false;
          for (auto& r : ranks) {
            if (r.spec->remote) r.pending_in += frame_stdin_end();  // its ssh stays open
            else r.close_in_when_drained = true;
          }
        } else {
          for (auto& r : ranks) {
            if (r.in.fd < 0) continue;
            if (r.spec->remote) r.pending_in += frame_data(buf, static_cast<size_t>(got));
            else r.pending_in.append(buf, static_cast<size_t>(got));
          }
        }
        continue;
      }
      auto& r = ranks[i];
      if (kind == 2) {
        ssize_t w = ::write(r.in.fd, r.pending_in.data(), r.pending_in.size());
        if (w > 0) r.pending_in.erase(0, static_cast<size_t>(w));
        else if (w < 0 && errno != EAGAIN && errno != EINTR) r.in.reset(), r.pending_in.clear();
        continue;
      }
      Fd& f = kind == 0 ? r.out : r.err;
      LineRelay& relay = kind == 0 ? r.out_relay : r.err_relay;
      ssize_t got = ::read(f.fd, buf, sizeof buf);
      if (got > 0) {
        relay.feed(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        relay.finish();
        f.reset();
      }
    }
    for (auto& r : ranks) {
      if (r.close_in_when_drained && r.pending_in.empty() && r.in.fd >= 0) r.in.reset();
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGCHLD, &old_chld, nullptr);
  g_wake_fd = -1;
  if (first_failure < 0) return 0;
  // The cause, when the first exit seen was a reaction: a rank that died of a signal the
  // launcher did not send failed in its own right (Tessera's ranks raise, never die of a
  // signal, when a peer fails), even if its survivors' errors arrived first — as they do when
  // a remote rank is killed and its neighbours see the closed connection before ssh reports.
  for (int i : exit_order) {
    const Rank& r = ranks[i];
    if (r.status_code > 128 &&
        std::find(r.sent.begin(), r.sent.end(), r.status_code - 128) == r.sent.end()) {
      first_failure = i;
      break;
    }
  }
  // The first failure's own last words, so the cause is not lost among the others' reactions.
  const Rank& f = ranks[first_failure];
  const auto& lines = !f.err_relay.last.empty() ? f.err_relay.last : f.out_relay.last;
  std::string report = "[launch] " + rank_name(first_failure, *f.spec) + " failed first: ";
  if (f.spec->remote && !f.out_relay.saw_marker) {
    report += "it could not be started over ssh (ssh " + describe_exit(f.status_code) + ")";
  } else if (f.spec->remote && f.by_signal) {
    report += "its ssh client " + describe_exit(f.status_code);
  } else if (f.spec->remote && f.status_code == 255) {
    report += "its ssh connection failed, or it exited with status 255";
  } else {
    report += "it " + describe_exit(f.status_code);
  }
  report += lines.empty() ? ", without output.\n" : ". Its last lines:\n";
  for (const auto& l : lines) report += "  " + l + (l.empty() || l.back() != '\n' ? "\n" : "");
  write_all(2, report.data(), report.size());
  return f.status_code;
}

}  // namespace tessera::cli
