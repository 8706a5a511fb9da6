// The simulated-host harness (tests/cluster/cluster.h) as a command, for pytest, make targets and
// shell sessions:
//
//   simhosts N [--cpus C0,C1,...] -- command [args...]
//
// creates N hosts (network namespaces node0..node<N-1> on one bridge, 10.77.0.10 + i, an OpenSSH
// server each that trusts a key made for the run), runs `command` on node0 with the ssh wrapper
// first on PATH and SIMHOSTS="node0,node1,..." in its environment (so `tessera launch --hosts
// $SIMHOSTS ...` reaches the others over ssh), then removes everything it made and exits with
// the command's status. --cpus pins host i's sshd (and what runs through it) to CPUs C<i>
// ("0", "1-3"). Root only; the command inherits this one's output and working directory.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "../cluster/cluster.h"

namespace {

using tessera::test_cluster::Cluster;
using tessera::test_cluster::SshHosts;

// One shell word: single-quoted, with embedded single quotes closed and escaped.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= s.size();) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

int usage() {
  std::fprintf(stderr,
               "usage: simhosts N [--cpus C0,C1,...] -- command [args...]\n"
               "runs command on node0 of N simulated hosts (root only), then removes them\n");
  return 2;
}

volatile sig_atomic_t g_stop = 0;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return usage();
  const int hosts = std::atoi(argv[1]);
  if (hosts < 1 || hosts > 16) {
    std::fprintf(stderr, "simhosts: N must be 1..16, got '%s'\n", argv[1]);
    return 2;
  }
  std::vector<std::string> cpus;
  int at = 2;
  if (std::string(argv[at]) == "--cpus" && at + 1 < argc) {
    cpus = split(argv[at + 1], ',');
    at += 2;
  }
  if (at >= argc || std::string(argv[at]) != "--" || at + 1 >= argc) return usage();
  if (!Cluster::available()) {
    std::fprintf(stderr, "simhosts: needs root and `ip netns` (network namespaces)\n");
    return 2;
  }
  if (!SshHosts::available()) {
    std::fprintf(stderr, "simhosts: needs OpenSSH's sshd, ssh and ssh-keygen (openssh-server)\n");
    return 2;
  }
  // SIGINT / SIGTERM end the command; the harness is then removed as on a normal exit.
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = 1; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  try {
    Cluster cluster(hosts);
    SshHosts ssh(cluster, {}, cpus);
    std::string names;
    for (int i = 0; i < hosts; ++i) names += (i ? "," : "") + Cluster::name(i);
    // The command as a script file: any quoting survives `ip netns exec ... bash -c '...'`.
    const std::string script = "/tmp/" + cluster.prefix() + "-command.sh";
    {
      std::ofstream f(script);
      char cwd[4096];
      f << "cd " << quoted(::getcwd(cwd, sizeof cwd) ? cwd : "/") << " || exit 1\n"
        << "export " << ssh.path_env() << " SIMHOSTS=" << names << "\nexec";
      for (int i = at + 1; i < argc; ++i) f << " " << quoted(argv[i]);
      f << "\n";
    }
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::setpgid(0, 0);
      const std::string cmd = cluster.in_host(0, "exec bash " + script);
      ::execl("/bin/bash", "bash", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    int status = 0;
    bool signalled = false;
    while (::waitpid(pid, &status, 0) < 0) {
      if (g_stop && !signalled) {
        ::kill(-pid, SIGTERM);
        signalled = true;
      }
    }
    std::remove(script.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "simhosts: %s\n", e.what());
    return 1;
  }
}
