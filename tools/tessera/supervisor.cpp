// Process supervision for `tessera launch` (see supervisor.h). A single poll loop owns every
// pipe and child; signal handlers only record the signal number.
#include "supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
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

// Splits a stream into lines and writes each with the rank's prefix; keeps the last few lines
// for the launcher's closing report. Text ended by a lone carriage return (a progress line that
// redraws itself) is passed on at once, prefixed, and not kept; "\r\n" ends a line.
struct LineRelay {
  static constexpr size_t kKept = 5;
  int out_fd;
  std::string prefix;
  std::string partial;
  std::vector<std::string> last;  // the last kKept lines, oldest first
  bool after_cr = false;          // the last byte passed on was a carriage return
  // One write per line, so lines of different ranks never interleave mid-line.
  void write_line(const char* p, size_t n, bool keep) {
    std::string line;
    line.reserve(prefix.size() + n);
    line.append(prefix);
    line.append(p, n);
    write_all(out_fd, line.data(), line.size());
    if (!keep) return;
    if (last.size() == kKept) last.erase(last.begin());
    last.emplace_back(p, n);
  }
  void feed(const char* data, size_t n) {
    partial.append(data, n);
    size_t start = 0;
    if (after_cr && !partial.empty()) {
      after_cr = false;
      if (partial[0] == '\n') {  // the "\r\n" of a line whose "\r" came in the last read
        write_all(out_fd, "\n", 1);
        start = 1;
      }
    }
    for (;;) {
      size_t end = partial.find_first_of("\r\n", start);
      if (end == std::string::npos) break;
      if (partial[end] == '\r' && end + 1 < partial.size() && partial[end + 1] == '\n') ++end;
      const bool redraw = partial[end] == '\r';
      write_line(partial.data() + start, end - start + 1, !redraw);
      after_cr = redraw && end + 1 == partial.size();
      start = end + 1;
    }
    partial.erase(0, start);
  }
  void finish() {
    if (after_cr) write_all(out_fd, "\n", 1);  // keep the last redrawn line on the screen
    after_cr = false;
    if (partial.empty()) return;
    partial.push_back('\n');
    write_line(partial.data(), partial.size(), true);
    partial.clear();
  }
};

int status_to_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// A process the launcher started: a local rank, or one remote host's ssh session.
struct Proc {
  pid_t pid = -1;
  bool running = false;
  int status_code = 0;     // exit code, or 128 + signal
  bool by_signal = false;  // it (for a host: its ssh) died of a signal
  std::vector<int> sent;   // signals the launcher sent it
  Fd out, err, in;
  std::string pending_in;  // stdin bytes (a host: frames) not yet written
  bool close_in_when_drained = false;
  int rank = -1;                 // a local rank: which
  const HostSpec* host = nullptr;  // a remote host
  std::string frames;            // a host: its stdout not yet decoded
  bool saw_marker = false;       // a host: its agent started
  LineRelay messages;            // a host: what ssh and the agent say themselves
};

struct Rank {
  int proc = -1;
  bool running = true;
  int status_code = 0;
  bool lost = false;  // its host's ssh session ended before the rank's own exit was reported
  LineRelay out_relay, err_relay;
};

std::string prefix_for(bool on, int rank) {
  std::string p;
  if (on) {  // built step by step: g++ 12 warns falsely on "lit" + std::string&&
    p += '[';
    p += std::to_string(rank);
    p += "] ";
  }
  return p;
}

// "rank 3" or "rank 3 (host node2)".
std::string rank_name(int i, const Proc& p) {
  std::string s = "rank " + std::to_string(i);
  if (p.host) s += " (host " + p.host->host + ")";
  return s;
}

// The peer a failed rank's last lines blame, or -1: the ring's errors start "[ring] rank R: " and
// name the peer next ("rank 2 (pid 9) exited during all_sum", "rank 2 (10.0.0.2:5000) closed the
// connection while ...", "no data from rank 2 ...": src/distributed/ring/socket.cpp and
// shm/shm_transport.cpp), also inside a Python traceback's last line.
int blamed_peer(const Rank& rk, int self, int size) {
  static const std::string kRing = "[ring] rank ";
  for (const auto* lines : {&rk.err_relay.last, &rk.out_relay.last}) {
    for (auto it = lines->rbegin(); it != lines->rend(); ++it) {
      const std::string& line = *it;
      size_t at = line.find(kRing);
      if (at != std::string::npos) at = line.find(": ", at);
      while (at != std::string::npos && (at = line.find("rank ", at)) != std::string::npos) {
        at += 5;
        size_t end = at;
        while (end < line.size() && end - at < 6 && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
        if (end == at) continue;
        const int peer = std::stoi(line.substr(at, end - at));
        if (peer != self && peer < size) return peer;
      }
    }
  }
  return -1;
}

void signal_all(std::vector<Proc>& procs, int sig) {
  for (auto& p : procs) {
    if (!p.running) continue;
    p.sent.push_back(sig);
    if (p.host && sig != SIGKILL) {  // the agent signals the ranks; SIGKILL ends the session
      p.pending_in += frame_signal(sig);
      continue;
    }
    ::kill(-p.pid, sig);
    if (sig == SIGTERM || sig == SIGINT) ::kill(-p.pid, SIGCONT);  // a stopped rank must see it
  }
}

}  // namespace

SuperviseResult supervise(int size, const std::vector<RankSpec>& local, const std::vector<HostSpec>& remote,
                          const SuperviseOptions& opt) {
  SuperviseResult result;
  std::vector<Rank> ranks(static_cast<size_t>(size));
  std::vector<Proc> procs(local.size() + remote.size());
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

  for (size_t k = 0; k < procs.size(); ++k) {
    Proc& p = procs[k];
    const bool is_host = k >= local.size();
    const RankSpec* rs = is_host ? nullptr : &local[k];
    p.host = is_host ? &remote[k - local.size()] : nullptr;
    int in[2], out[2], err[2];
    make_pipe(in);
    make_pipe(out);
    make_pipe(err);
    // A launcher killed outright takes its ranks with it (a remote host: its ssh, whose agent
    // then stops the ranks there).
    p.pid = is_host ? spawn_child(p.host->argv, &p.host->env, {}, "", in[0], out[1], err[1])
                    : spawn_child(rs->argv, &rs->env, rs->cpus, rs->cwd, in[0], out[1], err[1]);
    p.running = true;
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    p.in = Fd(in[1]);
    p.out = Fd(out[0]);
    p.err = Fd(err[0]);
    ::fcntl(in[1], F_SETFL, O_NONBLOCK);
    if (is_host) {
      p.pending_in = p.host->preamble;
      p.messages = LineRelay{2, "[launch] host " + p.host->host + ": ", {}, {}};
      for (int r : p.host->ranks) ranks[static_cast<size_t>(r)].proc = static_cast<int>(k);
    } else {
      p.rank = rs->rank;
      ranks[static_cast<size_t>(rs->rank)].proc = static_cast<int>(k);
    }
  }
  for (int r = 0; r < size; ++r) {
    ranks[r].out_relay = LineRelay{1, prefix_for(opt.prefix, r), {}, {}};
    ranks[r].err_relay = LineRelay{2, prefix_for(opt.prefix, r), {}, {}};
  }
  const double heartbeat_every = std::max(0.05, opt.heartbeat_seconds / 4);
  double next_heartbeat = remote.empty() ? 0 : now_s() + heartbeat_every;

  bool stdin_open = ::fcntl(0, F_GETFD) != -1;
  int first_failure = -1;       // the rank whose failure is the verdict
  // A failed rank that blames a peer still running is a reaction: its peer's own end decides the
  // verdict if it comes within --grace (under load a survivor's exit can be seen first).
  int awaited = -1, reaction = -1;
  double await_deadline = 0;
  std::vector<int> exit_order;  // ranks in the order their exits were seen
  double kill_deadline = 0;
  int running = size;
  double drain_deadline = 0;  // once every process exited, pipes get 2 s to drain
  char buf[65536];

  auto fail_first = [&](int r) {
    first_failure = r;
    if (running > 0) {
      const Rank& rk = ranks[static_cast<size_t>(r)];
      std::fprintf(stderr, "[launch] %s %s; stopping the other ranks\n",
                   rank_name(r, procs[static_cast<size_t>(rk.proc)]).c_str(),
                   describe_exit(rk.status_code).c_str());
      signal_all(procs, SIGTERM);
      kill_deadline = now_s() + opt.grace_seconds;
    }
  };
  auto rank_exited = [&](int r, int code, bool lost) {
    Rank& rk = ranks[static_cast<size_t>(r)];
    if (!rk.running) return;
    rk.running = false;
    rk.status_code = code;
    rk.lost = lost;
    --running;
    exit_order.push_back(r);
    rk.out_relay.finish();
    rk.err_relay.finish();
    if (first_failure >= 0) return;
    if (r == awaited) {
      awaited = -1;
      fail_first(code != 0 ? r : reaction);
      return;
    }
    if (code == 0) return;
    if (const int peer = blamed_peer(rk, r, size); peer >= 0) {  // a reaction
      if (awaited >= 0) return;  // the root is awaited already
      if (ranks[static_cast<size_t>(peer)].running && opt.grace_seconds > 0) {
        awaited = peer;
        reaction = r;
        await_deadline = now_s() + opt.grace_seconds;
        if (opt.verbose) std::fprintf(stderr, "[launch] rank %d blames rank %d; awaiting its end\n", r, peer);
        return;
      }
    }
    awaited = -1;  // a failure of its own, or a reaction to a peer that ended well: the verdict
    fail_first(r);
  };
  // Decodes a host's agent frames: output to the ranks' relays, exits to rank_exited.
  auto decode = [&](Proc& p) {
    if (!p.saw_marker) {
      const std::string marker = kAgentReady;
      if (p.frames.size() < marker.size()) return;
      if (p.frames.compare(0, marker.size(), marker) != 0) {  // not our agent: show it as is
        p.messages.feed(p.frames.data(), p.frames.size());
        p.frames.clear();
        return;
      }
      p.saw_marker = true;
      p.frames.erase(0, marker.size());
    }
    const int self = static_cast<int>(&p - procs.data());
    try {
      const size_t used = decode_agent_frames(p.frames, [&](const Frame& f) {
        const int r = static_cast<int>(f.rank);
        if (f.rank >= static_cast<uint32_t>(size) || ranks[static_cast<size_t>(r)].proc != self) return;
        Rank& rk = ranks[static_cast<size_t>(r)];
        if (f.type == 'X') rank_exited(r, static_cast<int>(f.value), false);
        else (f.type == 'O' ? rk.out_relay : rk.err_relay).feed(f.data.data(), f.data.size());
      });
      p.frames.erase(0, used);
    } catch (const std::runtime_error& e) {  // nothing after this can be trusted
      const std::string line = std::string(e.what()) + "\n";
      p.messages.feed(line.data(), line.size());
      p.frames.clear();
    }
  };

  auto any_open = [&] {
    return std::any_of(procs.begin(), procs.end(), [](const Proc& p) { return p.out.fd >= 0 || p.err.fd >= 0; });
  };
  auto procs_running = [&] {
    return std::any_of(procs.begin(), procs.end(), [](const Proc& p) { return p.running; });
  };
  while (procs_running() || any_open()) {
    if (!procs_running()) {
      if (drain_deadline == 0) drain_deadline = now_s() + 2.0;
      if (now_s() > drain_deadline) break;  // a leftover grandchild holds a pipe: stop waiting
    }
    if (int sig = g_pending_signal.exchange(0)) {
      result.interrupted = true;
      if (opt.verbose) std::fprintf(stderr, "[launch] forwarding signal %d to every rank\n", sig);
      signal_all(procs, sig);
      if (kill_deadline == 0) kill_deadline = now_s() + opt.grace_seconds;
    }
    // Reap.
    for (auto& p : procs) {
      if (!p.running) continue;
      int status = 0;
      if (::waitpid(p.pid, &status, WNOHANG) != p.pid) continue;
      p.running = false;
      p.status_code = status_to_code(status);
      p.by_signal = WIFSIGNALED(status);
      if (p.in.fd >= 0) p.in.reset();
      if (!p.host) {
        // A rank killed while setting up shared memory leaves its segment: nobody else can.
        distributed::detail::remove_shm_segments_of(p.pid);
        // Its last output is still in the pipes: read it before the exit counts.
        for (Fd* f : {&p.out, &p.err}) {
          if (f->fd < 0) continue;
          ::fcntl(f->fd, F_SETFL, O_NONBLOCK);
          for (ssize_t got; (got = ::read(f->fd, buf, sizeof buf)) > 0;) {
            Rank& rk = ranks[static_cast<size_t>(p.rank)];
            (f == &p.out ? rk.out_relay : rk.err_relay).feed(buf, static_cast<size_t>(got));
          }
        }
        rank_exited(p.rank, p.status_code, false);
      } else {
        for (Fd* f : {&p.out, &p.err}) {  // the agent's last frames
          if (f->fd < 0) continue;
          ::fcntl(f->fd, F_SETFL, O_NONBLOCK);
          for (ssize_t got; (got = ::read(f->fd, buf, sizeof buf)) > 0;) {
            if (f == &p.out) {
              p.frames.append(buf, static_cast<size_t>(got));
            } else {
              p.messages.feed(buf, static_cast<size_t>(got));
            }
          }
          if (f == &p.out) decode(p);
        }
        p.messages.finish();
        for (int r : p.host->ranks) rank_exited(r, p.status_code == 0 ? 255 : p.status_code, true);
      }
    }
    if (awaited >= 0 && now_s() > await_deadline) {  // the blamed peer did not end in time
      awaited = -1;
      fail_first(reaction);
    }
    if (kill_deadline > 0 && now_s() > kill_deadline && procs_running()) {
      signal_all(procs, SIGKILL);
      kill_deadline = now_s() + 3600;  // once
    }
    if (next_heartbeat > 0 && now_s() >= next_heartbeat) {
      for (auto& p : procs) {
        if (p.running && p.host && p.in.fd >= 0 && p.pending_in.size() < 4096) p.pending_in += frame_heartbeat();
      }
      next_heartbeat = now_s() + heartbeat_every;
    }
    // Poll pipes.
    std::vector<pollfd> fds;
    std::vector<std::pair<int, int>> who;  // (proc, 0 out / 1 err / 2 in / -1 stdin)
    for (size_t k = 0; k < procs.size(); ++k) {
      const int i = static_cast<int>(k);
      if (procs[k].out.fd >= 0) fds.push_back({procs[k].out.fd, POLLIN, 0}), who.push_back({i, 0});
      if (procs[k].err.fd >= 0) fds.push_back({procs[k].err.fd, POLLIN, 0}), who.push_back({i, 1});
      if (procs[k].in.fd >= 0 && !procs[k].pending_in.empty()) {
        fds.push_back({procs[k].in.fd, POLLOUT, 0});
        who.push_back({i, 2});
      }
    }
    const bool any_pending = std::any_of(procs.begin(), procs.end(), [](const Proc& p) {
      return !p.pending_in.empty() && !(p.host && p.pending_in.size() < 4096);
    });
    if (stdin_open && !any_pending && running > 0) {
      fds.push_back({0, POLLIN, 0});
      who.push_back({-1, -1});
    }
    fds.push_back({wake_r.fd, POLLIN, 0});
    who.push_back({-2, -2});
    // Sleep until the nearest deadline (the kill after SIGTERM, the drain, the heartbeat).
    double until = 0;
    for (double d : {kill_deadline, drain_deadline, next_heartbeat, awaited >= 0 ? await_deadline : 0.0}) {
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
      if (i < 0) {  // our stdin -> every rank (a host's agent passes it to each of its ranks)
        ssize_t got = ::read(0, buf, sizeof buf);
        if (got <= 0) {
          stdin_open = false;
          for (auto& p : procs) {
            if (p.host) p.pending_in += frame_stdin_end();  // its ssh stays open
            else p.close_in_when_drained = true;
          }
        } else {
          for (auto& p : procs) {
            if (p.in.fd < 0) continue;
            if (p.host) p.pending_in += frame_data(buf, static_cast<size_t>(got));
            else p.pending_in.append(buf, static_cast<size_t>(got));
          }
        }
        continue;
      }
      Proc& p = procs[static_cast<size_t>(i)];
      if (kind == 2) {
        ssize_t w = ::write(p.in.fd, p.pending_in.data(), p.pending_in.size());
        if (w > 0) p.pending_in.erase(0, static_cast<size_t>(w));
        else if (w < 0 && errno != EAGAIN && errno != EINTR) p.in.reset(), p.pending_in.clear();
        continue;
      }
      Fd& f = kind == 0 ? p.out : p.err;
      ssize_t got = ::read(f.fd, buf, sizeof buf);
      const bool ended = got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN);
      if (got > 0) {
        if (p.host && kind == 0) {
          p.frames.append(buf, static_cast<size_t>(got));
          decode(p);
        } else if (p.host) {
          p.messages.feed(buf, static_cast<size_t>(got));
        } else {
          Rank& rk = ranks[static_cast<size_t>(p.rank)];
          (kind == 0 ? rk.out_relay : rk.err_relay).feed(buf, static_cast<size_t>(got));
        }
      } else if (ended) {
        if (p.host) {
          if (kind == 1) p.messages.finish();
        } else {
          Rank& rk = ranks[static_cast<size_t>(p.rank)];
          (kind == 0 ? rk.out_relay : rk.err_relay).finish();
        }
        f.reset();
      }
    }
    for (auto& p : procs) {
      if (p.close_in_when_drained && p.pending_in.empty() && p.in.fd >= 0) p.in.reset();
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGCHLD, &old_chld, nullptr);
  g_wake_fd = -1;
  if (first_failure < 0) return result;
  // The cause, when the first exit seen was a reaction: a rank that died of a signal the
  // launcher did not send failed in its own right (Tessera's ranks raise, never die of a
  // signal, when a peer fails), even if its survivors' errors arrived first — as they do when
  // a remote rank is killed and its neighbours see the closed connection before ssh reports.
  for (int r : exit_order) {
    const Rank& rk = ranks[static_cast<size_t>(r)];
    const Proc& p = procs[static_cast<size_t>(rk.proc)];
    if (rk.status_code > 128 && std::find(p.sent.begin(), p.sent.end(), rk.status_code - 128) == p.sent.end()) {
      first_failure = r;
      break;
    }
  }
  // The first failure's own last words, so the cause is not lost among the others' reactions.
  const Rank& f = ranks[static_cast<size_t>(first_failure)];
  const Proc& fp = procs[static_cast<size_t>(f.proc)];
  const auto& lines = f.lost || f.err_relay.last.empty()
                          ? (f.lost ? fp.messages.last : f.out_relay.last)
                          : f.err_relay.last;
  std::string report = "[launch] " + rank_name(first_failure, fp) + " failed first: ";
  if (f.lost && !fp.saw_marker) {
    report += "it could not be started over ssh (ssh " + describe_exit(fp.status_code) + ")";
  } else if (f.lost && fp.by_signal) {
    report += "its ssh client " + describe_exit(fp.status_code);
  } else if (f.lost) {
    report += "its host's ssh session ended (ssh " + describe_exit(fp.status_code) + ")";
  } else {
    report += "it " + describe_exit(f.status_code);
  }
  report += lines.empty() ? ", without output.\n" : ". Its last lines:\n";
  for (const auto& l : lines) report += "  " + l + (l.empty() || l.back() != '\n' ? "\n" : "");
  write_all(2, report.data(), report.size());
  result.code = f.status_code;
  result.failure = rank_name(first_failure, fp) + " " +
                   (f.lost ? "lost its ssh session" : describe_exit(f.status_code));
  return result;
}

}  // namespace tessera::cli
