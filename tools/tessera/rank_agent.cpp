// `tessera _rank-agent`: the remote end of one host of a job that `tessera launch` starts over
// ssh. It reads the job of every rank on its host (one JSON line) and then the launcher's frames
// from stdin (rank_host.h), runs each rank in its own process group, sends their output and
// exits back as frames on stdout, and stops them when the launcher asks, when the connection
// ends, or when the launcher has been silent for the heartbeat limit — so no rank outlives its
// launcher on any host. It exits once every rank has.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "distributed/ring/socket.h"
#include "distributed/shm/segments.h"
#include "rank_host.h"
#include "tessera/config.h"

extern char** environ;

namespace tessera::cli {

namespace {

std::atomic<int> g_signal{0};
int g_wake_fd = -1;

void wake() {
  char b = 1;
  [[maybe_unused]] ssize_t w = ::write(g_wake_fd, &b, 1);
}
void on_signal(int sig) {
  g_signal.store(sig);
  wake();
}
void on_child(int) { wake(); }

void say(const std::string& msg) {
  std::string line = msg + "\n";
  [[maybe_unused]] ssize_t w = ::write(2, line.data(), line.size());
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

struct RankJob {
  int rank = 0;
  std::vector<std::string> env;  // the job's entries for this rank
  pid_t pid = -1;
  int in = -1, out = -1, err = -1;
  std::string pending_in;
  bool running = false;
};

struct Job {
  std::vector<std::string> argv;
  std::string cwd, fallback_cwd, ring_hostfile;
  double grace = 5, heartbeat = 10;
  bool cpu_bind = true, verbose = false;
  std::vector<RankJob> ranks;
};

Job parse_job(const std::string& line) {
  const auto j = nlohmann::json::parse(line);
  Job job;
  job.argv = j.at("argv").get<std::vector<std::string>>();
  job.cwd = j.value("cwd", "");
  job.fallback_cwd = j.value("fallback_cwd", "");
  job.ring_hostfile = j.at("ring_hostfile").get<std::string>();
  job.grace = j.value("grace", 5.0);
  job.heartbeat = j.value("heartbeat", 10.0);
  job.cpu_bind = j.value("cpu_bind", true);
  job.verbose = j.value("verbose", false);
  for (const auto& r : j.at("ranks")) {
    RankJob rj;
    rj.rank = r.at("rank").get<int>();
    rj.env = r.at("env").get<std::vector<std::string>>();
    job.ranks.push_back(std::move(rj));
  }
  if (job.argv.empty() || job.ranks.empty()) throw std::runtime_error("the job has no program or no rank");
  return job;
}

// Starts one rank: its own process group, killed with the agent, its CPUs, pipes to us.
void start_rank(RankJob& rj, const std::vector<std::string>& argv, const std::vector<std::string>& env,
                const std::vector<int>& cpus, const std::string& who) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error(who + ": pipe failed: " + std::strerror(errno));
  }
  rj.pid = spawn_child(argv, &env, cpus, "", in[0], out[1], err[1]);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  rj.in = in[1];
  rj.out = out[0];
  rj.err = err[0];
  rj.running = true;
  ::fcntl(rj.in, F_SETFL, O_NONBLOCK);
}

}  // namespace

int rank_agent_command(const std::vector<std::string>&) {
  const std::string where = "on host " + distributed::detail::this_host_name();
  Job job;
  try {
    job = parse_job(read_job_line());
  } catch (const std::exception& e) {
    say("[launch] rank agent " + where + ": " + e.what());
    return 1;
  }
  const std::string who = "[launch] agent " + where;
  write_all(1, kAgentReady);
  if (!job.cwd.empty()) {
    if (::chdir(job.cwd.c_str()) != 0) {
      say(who + ": cannot change to the directory '" + job.cwd + "' (--cwd): " + std::strerror(errno));
      return 1;
    }
  } else if (!job.fallback_cwd.empty() && ::chdir(job.fallback_cwd.c_str()) != 0 && job.verbose) {
    say(who + ": the launcher's directory '" + job.fallback_cwd + "' does not exist here; the ranks "
        "run in " + config::get_string("HOME").value_or("the login directory"));
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

  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
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

  // The environment: this login's, less what the launcher sets, plus each rank's entries.
  std::vector<std::string> base;
  bool memory_given = false;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (is_launcher_variable(kv.substr(0, kv.find('=')))) continue;
    base.push_back(kv);
    memory_given |= kv.rfind("TESSERA_MEMORY_LIMIT_MB=", 0) == 0;
  }
  for (const auto& kv : job.ranks[0].env) memory_given |= kv.rfind("TESSERA_MEMORY_LIMIT_MB=", 0) == 0;
  const int n = static_cast<int>(job.ranks.size());
  if (!memory_given) {
    if (std::string m = memory_share_entry(n); !m.empty()) base.push_back(m);
  }
  for (const char* k : {"TESSERA_HOSTFILE=", "MLX_HOSTFILE="}) base.push_back(k + hostfile);
  const std::vector<int> cpus = job.cpu_bind ? allowed_cpus() : std::vector<int>{};
  if (!cpus.empty()) base.push_back("TESSERA_HOST_CPUS=" + std::to_string(cpus.size()));
  int running = 0;
  for (int i = 0; i < n; ++i) {
    RankJob& rj = job.ranks[static_cast<size_t>(i)];
    std::vector<std::string> env = base;
    env.insert(env.end(), rj.env.begin(), rj.env.end());
    try {
      start_rank(rj, job.argv, env, cpus_for_rank(cpus, n, i),
                 "[launch] rank " + std::to_string(rj.rank) + " " + where);
      ++running;
    } catch (const std::exception& e) {
      say(e.what());
      write_all(1, frame_exit(rj.rank, 1));
    }
  }

  std::string frames;
  bool stdin_open = true, close_inputs = false, signalled = false;
  double last_heard = now_s(), kill_at = 0;
  auto signal_ranks = [&](int sig) {
    for (auto& rj : job.ranks) {
      if (!rj.running) continue;
      ::kill(-rj.pid, sig);
      if (sig == SIGTERM || sig == SIGINT) ::kill(-rj.pid, SIGCONT);
    }
  };
  auto stop = [&](bool at_once) {
    if (at_once) return signal_ranks(SIGKILL);
    signal_ranks(SIGTERM);
    if (kill_at == 0) kill_at = now_s() + job.grace;
  };
  // A rank's output so far, as frames; true while its pipe is open.
  auto relay = [&](RankJob& rj, int& fd, char type) {
    char buf[65536];
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got > 0) {
      write_all(1, frame_output(type, rj.rank, buf, static_cast<size_t>(got)));
      return;
    }
    if (got == 0 || (errno != EINTR && errno != EAGAIN)) ::close(fd), fd = -1;
  };
  char buf[65536];
  while (running > 0) {
    for (auto& rj : job.ranks) {
      int status = 0;
      if (!rj.running || ::waitpid(rj.pid, &status, WNOHANG) != rj.pid) continue;
      rj.running = false;
      --running;
      // Its last output first, then its exit: the launcher reports both in that order.
      for (int* fd : {&rj.out, &rj.err}) {
        if (*fd < 0) continue;
        ::fcntl(*fd, F_SETFL, O_NONBLOCK);
        while (*fd >= 0) {
          ssize_t got = ::read(*fd, buf, sizeof buf);
          if (got <= 0) {
            ::close(*fd);
            *fd = -1;
            break;
          }
          write_all(1, frame_output(fd == &rj.out ? 'O' : 'R', rj.rank, buf, static_cast<size_t>(got)));
        }
      }
      ::kill(-rj.pid, SIGKILL);  // whatever the rank left in its process group
      distributed::detail::remove_shm_segments_of(rj.pid);
      if (rj.in >= 0) ::close(rj.in), rj.in = -1;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
      write_all(1, frame_exit(rj.rank, code));
    }
    if (running == 0) break;
    if (g_signal.exchange(0)) stop(false);  // the agent itself is told to stop
    const double t = now_s();
    if (kill_at > 0 && t > kill_at) {
      stop(true);
      kill_at = t + 3600;
    }
    if (stdin_open && job.heartbeat > 0 && t - last_heard > job.heartbeat) {
      if (job.verbose) say(who + ": no word from the launcher for " + std::to_string(job.heartbeat) + " s; stopping the ranks");
      stdin_open = false;
      stop(false);
    }
    std::vector<pollfd> fds = {{wake[0], POLLIN, 0}};
    if (stdin_open) fds.push_back({0, POLLIN, 0});
    for (auto& rj : job.ranks) {
      if (rj.out >= 0) fds.push_back({rj.out, POLLIN, 0});
      if (rj.err >= 0) fds.push_back({rj.err, POLLIN, 0});
      if (rj.in >= 0 && !rj.pending_in.empty()) fds.push_back({rj.in, POLLOUT, 0});
    }
    int rc = ::poll(fds.data(), fds.size(), 100);
    if (rc < 0 && errno != EINTR) break;
    for (const auto& f : fds) {
      if (!f.revents) continue;
      if (f.fd == wake[0]) {
        while (::read(wake[0], buf, sizeof buf) > 0) {
        }
        continue;
      }
      if (f.fd == 0) {
        ssize_t got = ::read(0, buf, sizeof buf);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) {  // the connection to the launcher is gone
          stdin_open = false;
          stop(signalled);
          continue;
        }
        last_heard = now_s();
        frames.append(buf, static_cast<size_t>(got));
        size_t used = 0;
        try {
          used = decode_launcher_frames(frames, [&](const Frame& fr) {
            if (fr.type == 'D') {
              for (auto& rj : job.ranks) {
                if (rj.in >= 0) rj.pending_in.append(fr.data);
              }
            } else if (fr.type == 'S') {
              signal_ranks(static_cast<int>(fr.value));
              signalled = true;
            } else if (fr.type == 'E') {
              close_inputs = true;
            }  // 'H': heard from the launcher, which is all it says
          });
        } catch (const std::runtime_error& e) {  // as good as a lost connection
          std::fprintf(stderr, "[agent] %s; stopping the ranks\n", e.what());
          stdin_open = false;
          stop(signalled);
          continue;
        }
        frames.erase(0, used);
        continue;
      }
      for (auto& rj : job.ranks) {
        if (f.fd == rj.out) {
          relay(rj, rj.out, 'O');
        } else if (f.fd == rj.err) {
          relay(rj, rj.err, 'R');
        } else if (f.fd == rj.in) {
          ssize_t w = ::write(rj.in, rj.pending_in.data(), rj.pending_in.size());
          if (w > 0) rj.pending_in.erase(0, static_cast<size_t>(w));
          else if (w < 0 && errno != EAGAIN && errno != EINTR) ::close(rj.in), rj.in = -1, rj.pending_in.clear();
        } else {
          continue;
        }
        break;
      }
    }
    if (close_inputs) {
      for (auto& rj : job.ranks) {
        if (rj.in >= 0 && rj.pending_in.empty()) ::close(rj.in), rj.in = -1;
      }
    }
  }
  ::unlink(hostfile.c_str());
  return 0;
}

}  // namespace tessera::cli
