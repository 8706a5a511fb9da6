// The simulated multi-host harness: N "hosts" as network namespaces on one bridge (10.77.0.0/24,
// host i at 10.77.0.(10 + i)), processes started inside them, and partitions by taking a host's
// link down. Everything it creates (namespaces, their links, the processes it started) is
// removed by the destructor; namespaces left by a crashed test run are swept at the next start.
// Needs root (CI and the development machines run as root); Cluster::available() says whether
// it can work here. SshHosts adds a real OpenSSH server per namespace for the launcher tests.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "distributed/hostfile.h"

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
  pid_t pid() const { return pid_; }
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
    // Every host resolves the names node0, node1, ...: `ip netns exec` mounts
    // /etc/netns/<namespace>/hosts over /etc/hosts for what it starts.
    std::string table = "127.0.0.1 localhost\n";
    for (int i = 0; i < hosts; ++i) table += ip(i) + " " + name(i) + "\n";
    for (int i = 0; i < hosts; ++i) {
      std::filesystem::create_directories("/etc/netns/" + ns(i));
      std::ofstream("/etc/netns/" + ns(i) + "/hosts") << table;
    }
  }
  ~Cluster() {
    procs_.clear();  // kills what was started
    // ... and whatever those left in the hosts in other process groups (an sshd's sessions).
    for (int i = 0; i < hosts_; ++i) sh("ip netns pids " + ns(i) + " | xargs -r kill -9");
    for (int i = 0; i < hosts_; ++i) {
      sh("ip netns del " + ns(i));
      std::error_code ec;
      std::filesystem::remove_all("/etc/netns/" + ns(i), ec);  // SshHosts' name table
    }
    sh("ip netns del " + sw());
    std::remove(("/tmp/" + prefix_ + "-hostfile.json").c_str());
  }
  Cluster(const Cluster&) = delete;

  std::string ns(int i) const { return prefix_ + "h" + std::to_string(i); }
  static std::string ip(int i) { return "10.77.0." + std::to_string(10 + i); }
  static std::string name(int i) { return "node" + std::to_string(i); }

  // Starts `cmd` (a shell command line without single quotes) inside host i; the Cluster keeps
  // it and kills it at the end at the latest.
  Process& start(int i, const std::string& cmd) {
    std::string log = "/tmp/" + prefix_ + "-p" + std::to_string(procs_.size()) + ".log";
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::setpgid(0, 0);
      std::string full = "exec " + in_host(i, cmd) + " > " + log + " 2>&1";
      ::execl("/bin/bash", "bash", "-c", full.c_str(), nullptr);
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    procs_.emplace_back(pid, log);
    return procs_.back();
  }

  // The log-file prefix and scratch names of this cluster ("/tmp/<prefix>-...").
  const std::string& prefix() const { return prefix_; }
  int hosts() const { return hosts_; }

  // The shell command that runs `cmd` (without single quotes) inside host i: its network
  // namespace, and its own host name (node<i>, in a UTS namespace), so that what tells hosts
  // apart by name (Open MPI, ssh sessions, messages) sees separate machines.
  std::string in_host(int i, const std::string& cmd) const {
    return "ip netns exec " + ns(i) + " unshare --uts bash -c 'hostname " + name(i) + "; " + cmd + "'";
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
    distributed::detail::Hostfile hf;
    for (const auto& [host, port] : at) {
      distributed::detail::HostAddress a;
      a.host = ip(host);
      a.port = port;
      hf.ranks.push_back({a});
    }
    std::string path = "/tmp/" + prefix_ + "-hostfile.json";
    std::ofstream(path) << hf.to_json() << "\n";
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
    for (const auto& n : stale) {
      sh("ip netns pids " + n + " | xargs -r kill -9");
      sh("ip netns del " + n);
      std::error_code ec;
      std::filesystem::remove_all("/etc/netns/" + n, ec);
    }
  }

  std::string prefix_;
  int hosts_ = 0;
  std::deque<Process> procs_;  // a deque: references returned by start() stay valid
};

// The processes whose command line contains `marker`, with the rank each one was given
// (TESSERA_RANK in its environment; -1 when it has none, e.g. an ssh client). Every namespace
// shares this machine's process table, so one scan sees every "host".
inline std::map<pid_t, int> processes_with(const std::string& marker) {
  std::map<pid_t, int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::atoi(name.c_str());
    if (pid == ::getpid()) continue;
    auto read = [&](const char* what) {
      std::ifstream f(entry.path() / what);
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    };
    std::string cmd = read("cmdline");
    for (char& ch : cmd) ch = ch == '\0' ? ' ' : ch;
    if (cmd.find(marker) == std::string::npos) continue;
    int rank = -1;
    const std::string env = read("environ");
    for (size_t at = 0; at < env.size();) {
      const size_t end = env.find('\0', at);
      const std::string kv = env.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (kv.rfind("TESSERA_RANK=", 0) == 0) rank = std::atoi(kv.c_str() + 13);
      if (end == std::string::npos) break;
      at = end + 1;
    }
    out[pid] = rank;
  }
  return out;
}

// The processes descended from `root` (itself excluded), from /proc's parent links.
inline std::vector<pid_t> descendants_of(pid_t root) {
  std::map<pid_t, pid_t> parent;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(entry.path() / "stat");
    std::string stat;
    std::getline(f, stat);
    const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parent[std::atoi(name.c_str())] = ppid;
  }
  std::vector<pid_t> out;
  for (auto [pid, ppid] : parent) {
    for (pid_t p = ppid; p > 1; p = parent.count(p) ? parent[p] : 0) {
      if (p == root) {
        out.push_back(pid);
        break;
      }
    }
  }
  return out;
}

// Waits up to `seconds` until no process's command line contains `marker`; returns whether.
inline bool none_left(const std::string& marker, double seconds) {
  for (auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);;) {
    if (processes_with(marker).empty()) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// A real OpenSSH server on every host of a Cluster, started by the test on that host's address
// with keys the test generates, and a client set-up (an `ssh` wrapper that path_env() puts first
// on PATH) that trusts them: `tessera launch` then reaches every host with BatchMode and no
// prompt. A host can instead present a key the client does not know, or accept only passwords,
// to test the errors.
// Its files are removed by the destructor; the servers and their sessions go with the Cluster.
class SshHosts {
 public:
  enum class Host { kTrusted, kUnknownKey, kPasswordOnly };

  static bool available() {
    return ::access("/usr/sbin/sshd", X_OK) == 0 && ::access("/usr/bin/ssh-keygen", X_OK) == 0 &&
           ::access("/usr/bin/ssh", X_OK) == 0;
  }

  // `cpus` (optional): host i's sshd, and so every process started through it, runs on the CPUs
  // cpus[i] names ("0", "1-3"), as a host with those CPUs of its own would.
  explicit SshHosts(Cluster& c, std::vector<Host> kinds = {}, std::vector<std::string> cpus = {})
      : dir_("/tmp/" + c.prefix() + "-ssh"), cpus_(std::move(cpus)) {
    try {
      set_up(c, std::move(kinds));
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      throw;
    }
  }
  ~SshHosts() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  SshHosts(const SshHosts&) = delete;

  // "PATH=<the ssh wrapper's directory>:$PATH", for the command that runs the launcher.
  std::string path_env() const { return "PATH=" + dir_ + "/bin:$PATH"; }
  const std::string& dir() const { return dir_; }

 private:
  void set_up(Cluster& c, std::vector<Host> kinds) {
    kinds.resize(static_cast<size_t>(c.hosts()), Host::kTrusted);
    std::filesystem::create_directories(dir_ + "/bin");
    std::filesystem::create_directories("/run/sshd");  // sshd's privilege separation directory
    run("ssh-keygen -q -t ed25519 -N \"\" -f " + dir_ + "/client");
    std::filesystem::copy_file(dir_ + "/client.pub", dir_ + "/authorized_keys");
    std::ofstream known(dir_ + "/known_hosts");
    for (int i = 0; i < c.hosts(); ++i) {
      const std::string key = dir_ + "/host" + std::to_string(i);
      run("ssh-keygen -q -t ed25519 -N \"\" -f " + key);
      if (kinds[i] != Host::kUnknownKey) {
        std::ifstream pub(key + ".pub");
        std::string type, blob;
        pub >> type >> blob;
        known << Cluster::ip(i) << "," << Cluster::name(i) << " " << type << " " << blob << "\n";
      }
      const std::string conf = dir_ + "/sshd" + std::to_string(i) + ".conf";
      std::ofstream(conf) << "ListenAddress " << Cluster::ip(i) << "\nPort 22\nHostKey " << key
                          << "\nPidFile " << dir_ << "/sshd" << i << ".pid\nAuthorizedKeysFile "
                          << (kinds[i] == Host::kPasswordOnly ? "/nonexistent" : dir_ + "/authorized_keys")
                          << "\nStrictModes no\nUsePAM no\nPermitRootLogin yes\n"
                          << "PasswordAuthentication " << (kinds[i] == Host::kPasswordOnly ? "yes" : "no")
                          << "\nKbdInteractiveAuthentication no\nLogLevel ERROR\n"
                          << "ClientAliveInterval 2\nClientAliveCountMax 3\n";
      const std::string pin = static_cast<size_t>(i) < cpus_.size() ? "taskset -c " + cpus_[i] + " " : "";
      c.start(i, "exec " + pin + "/usr/sbin/sshd -D -e -f " + conf);
    }
    known.close();
    std::ofstream(dir_ + "/ssh_config") << "Host *\n  IdentityFile " << dir_ << "/client\n"
                                        << "  IdentitiesOnly yes\n  UserKnownHostsFile " << dir_
                                        << "/known_hosts\n  GlobalKnownHostsFile /dev/null\n";
    const std::string wrapper = dir_ + "/bin/ssh";
    std::ofstream(wrapper) << "#!/bin/sh\nexec /usr/bin/ssh -F " << dir_ << "/ssh_config \"$@\"\n";
    std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
    for (int i = 0; i < c.hosts(); ++i) {  // every server listening, seen from host 0
      const std::string probe = "ip netns exec " + c.ns(0) + " bash -c \"for k in {1..200}; do (: < /dev/tcp/" +
                                Cluster::ip(i) + "/22) 2>/dev/null && exit 0; sleep 0.02; done; exit 1\"";
      run(probe);
    }
  }
  static void run(const std::string& cmd) {
    if (sh(cmd) != 0) throw std::runtime_error("ssh set-up failed: " + cmd);
  }
  std::string dir_;
  std::vector<std::string> cpus_;
};

}  // namespace tessera::test_cluster

// In a test: skips it where the simulated hosts cannot be made (Cluster and SshHosts in scope).
#define REQUIRE_SSH_CLUSTER()                                                                    \
  if (!Cluster::available()) GTEST_SKIP() << "needs root and network namespaces";               \
  if (!SshHosts::available()) GTEST_SKIP() << "needs openssh-server (make test installs it)"
