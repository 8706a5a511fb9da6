// The simulated multi-host harness: N "hosts" as network namespaces on one bridge (10.77.0.0/24,
// host i at 10.77.0.(10 + i)), processes started inside them, and partitions by taking a host's
// link down. Everything it creates (namespaces, their links, the processes it started) is
// removed by the destructor; namespaces left by a crashed test run are swept at the next start.
// Needs root (CI and the development machines run as root); Cluster::available() says whether
// it can work here. The multi-host launcher tests extend it with an sshd per namespace.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tessera::test_cluster {

// Runs a shell command; returns its exit status.
inline int sh(const std::string& cmd) {
  int st = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// A process started in a host's namespace (its own process group), output to a file.
class Process {
 public:
  Process(pid_t pid, std::string log) : pid_(pid), log_(std::move(log)) {}
  Process(const Process&) = delete;
  ~Process() {
    kill(SIGKILL);
    wait(5);
    if (!log_.empty()) std::remove(log_.c_str());
  }
  void kill(int sig) {
    if (pid_ > 0 && code_ == kRunning) ::kill(-pid_, sig);
  }
  // Waits up to `seconds` for the exit; returns the exit status (128 + signal), or kRunning.
  int wait(double seconds) {
    for (auto end = Clock::now() + std::chrono::duration<double>(seconds);
         pid_ > 0 && code_ == kRunning;) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        ::kill(-pid_, SIGKILL);  // what it left behind in its group
        break;
      }
      if (Clock::now() > end) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return code_;
  }
  std::string output() const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // Waits up to `seconds` until the output contains `text`.
  bool wait_for_output(const std::string& text, double seconds) const {
    for (auto end = Clock::now() + std::chrono::duration<double>(seconds); Clock::now() < end;) {
      if (output().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  static constexpr int kRunning = -1000;

 private:
  using Clock = std::chrono::steady_clock;
  pid_t pid_;
  std::string log_;
  int code_ = kRunning;
};

class Cluster {
 public:
  // Root, and `ip netns` works.
  static bool available() {
    if (::geteuid() != 0) return false;
    std::string probe = "tsrprobe" + std::to_string(::getpid());
    bool ok = sh("ip netns add " + probe) == 0;
    if (ok) sh("ip netns del " + probe);
    return ok;
  }

  explicit Cluster(int hosts) : prefix_("tsr" + std::to_string(::getpid()) + "x" + std::to_string(serial()++)) {
    sweep_stale();
    run("ip netns add " + sw());
    run("ip -n " + sw() + " link add br0 type bridge");
    run("ip -n " + sw() + " link set br0 up");
    for (int i = 0; i < hosts; ++i) {
      run("ip netns add " + ns(i));
      run("ip -n " + sw() + " link add s" + std::to_string(i) + " type veth peer name eth0 netns " + ns(i));
      run("ip -n " + sw() + " link set s" + std::to_string(i) + " master br0 up");
      run("ip -n " + ns(i) + " addr add " + ip(i) + "/24 dev eth0");
      run("ip -n " + ns(i) + " link set eth0 up");
      run("ip -n " + ns(i) + " link set lo up");
      ++hosts_;
    }
  }
  ~Cluster() {
    procs_.clear();  // kills what was started
    for (int i = 0; i < hosts_; ++i) sh("ip netns del " + ns(i));
    sh("ip netns del " + sw());
  }
  Cluster(const Cluster&) = delete;

  std::string ns(int i) const { return prefix_ + "h" + std::to_string(i); }
  static std::string ip(int i) { return "10.77.0." + std::to_string(10 + i); }

  // Starts `cmd` (a shell command line without single quotes) inside host i; the Cluster keeps
  // it and kills it at the end at the latest.
  Process& start(int i, const std::string& cmd) {
    std::string log = "/tmp/" + prefix_ + "-p" + std::to_string(procs_.size()) + ".log";
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::setpgid(0, 0);
      std::string full = "exec ip netns exec " + ns(i) + " bash -c '" + cmd + "' > " + log + " 2>&1";
      ::execl("/bin/bash", "bash", "-c", full.c_str(), nullptr);
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    procs_.emplace_back(pid, log);
    return procs_.back();
  }

  // Host i loses its link (a partition).
  void cut(int i) { run("ip -n " + sw() + " link set s" + std::to_string(i) + " down"); }

  // An MLX-style hostfile listing host i's address and `port` for rank i, written to a file.
  std::string hostfile(int ranks, int port) const {
    std::vector<std::pair<int, int>> at;
    for (int r = 0; r < ranks; ++r) at.emplace_back(r, port);
    return hostfile(at);
  }
  // Rank r on host at[r].first, port at[r].second (several ranks may share a host).
  std::string hostfile(const std::vector<std::pair<int, int>>& at) const {
    std::string path = "/tmp/" + prefix_ + "-hostfile.json";
    std::ofstream f(path);
    f << "[";
    for (size_t r = 0; r < at.size(); ++r) {
      f << (r ? ", " : "") << "[\"" << ip(at[r].first) << ":" << at[r].second << "\"]";
    }
    f << "]\n";
    return path;
  }

 private:
  static int& serial() {
    static int n = 0;
    return n;
  }
  std::string sw() const { return prefix_ + "sw"; }
  static void run(const std::string& cmd) {
    if (sh(cmd) != 0) throw std::runtime_error("cluster set-up failed: " + cmd);
  }
  // Namespaces "tsr<pid>x..." whose test process no longer exists.
  static void sweep_stale() {
    FILE* p = ::popen("ip netns list 2>/dev/null", "r");
    if (!p) return;
    char line[256];
    std::vector<std::string> stale;
    while (std::fgets(line, sizeof line, p)) {
      std::string name = std::string(line).substr(0, std::string(line).find_first_of(" \n"));
      if (name.rfind("tsr", 0) != 0 || name.find('x') == std::string::npos) continue;
      const int pid = std::atoi(name.c_str() + 3);
      if (pid > 0 && ::kill(pid, 0) != 0) stale.push_back(name);
    }
    ::pclose(p);
    for (const auto& n : stale) sh("ip netns del " + n);
  }

  std::string prefix_;
  int hosts_ = 0;
  std::deque<Process> procs_;  // a deque: references returned by start() stay valid
};

}  // namespace tessera::test_cluster
