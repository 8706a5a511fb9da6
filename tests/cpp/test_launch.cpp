// `tessera launch` for local jobs: environment of each rank, output prefixes, stdin broadcast,
// exit codes, fail-fast shutdown and signal forwarding. Real processes, 127.0.0.1 only.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Result {
  int code;
  std::string out;
};

// Runs `tessera launch ARGS` through the shell with a time limit; returns exit code and stdout
// (with the launcher's and ranks' stderr too when `with_stderr`).
Result launch(const std::string& args, const std::string& input = "", int limit_s = 60,
              bool with_stderr = false) {
  std::string cmd = "printf '" + input + "' | timeout -s KILL " + std::to_string(limit_s) +
                    " " + TESSERA_CLI + " launch " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::set<std::string> lines(const std::string& s) {
  std::set<std::string> out;
  std::istringstream is(s);
  for (std::string l; std::getline(is, l);) out.insert(l);
  return out;
}

// "0-2,5" (the kernel's list format) -> {0, 1, 2, 5}.
std::set<int> parse_cpu_list(const std::string& text) {
  std::set<int> out;
  std::istringstream is(text);
  for (std::string part; std::getline(is, part, ',');) {
    size_t dash = part.find('-');
    int lo = std::stoi(part.substr(0, dash));
    int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) out.insert(c);
  }
  return out;
}

// Rank -> the CPUs it may run on, read by each rank from /proc/self/status.
std::map<int, std::set<int>> cpus_by_rank(const std::string& out) {
  std::map<int, std::set<int>> m;
  std::istringstream is(out);
  for (std::string l; std::getline(is, l);) {
    size_t close = l.find("] ");
    size_t tab = l.find('\t');
    if (l.empty() || l[0] != '[' || close == std::string::npos || tab == std::string::npos) continue;
    m[std::stoi(l.substr(1, close - 1))] = parse_cpu_list(l.substr(tab + 1));
  }
  return m;
}

}  // namespace

TEST(Launch, CpuBindGivesEachRankItsShareOfTheCpus) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> mine;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) mine.push_back(c);
  const int m = static_cast<int>(mine.size());
  const std::string show = " -- bash -c 'grep Cpus_allowed_list /proc/self/status'";
  for (int n : {1, m, 2 * m + 1}) {
    auto r = launch("-n " + std::to_string(n) + show);
    ASSERT_EQ(r.code, 0) << r.out;
    auto got = cpus_by_rank(r.out);
    ASSERT_EQ(static_cast<int>(got.size()), n) << r.out;
    std::multiset<int> used;
    for (int rank = 0; rank < n; ++rank) {
      const auto& cpus = got[rank];
      if (n <= m) {
        // Disjoint groups that together cover every CPU, sizes differing by at most one.
        EXPECT_GE(static_cast<int>(cpus.size()), m / n) << r.out;
        EXPECT_LE(static_cast<int>(cpus.size()), (m + n - 1) / n) << r.out;
      } else {
        EXPECT_EQ(cpus, std::set<int>{mine[static_cast<size_t>(rank % m)]}) << r.out;
      }
      used.insert(cpus.begin(), cpus.end());
    }
    if (n <= m) {
      EXPECT_EQ(used, std::multiset<int>(mine.begin(), mine.end())) << r.out;
    }
  }
  auto r = launch("-n 2 --cpu-bind none" + show);
  ASSERT_EQ(r.code, 0) << r.out;
  for (auto& [rank, cpus] : cpus_by_rank(r.out)) {
    EXPECT_EQ(cpus, std::set<int>(mine.begin(), mine.end())) << r.out;
  }
  EXPECT_EQ(launch("-n 2 --cpu-bind cores true").code, 2);
}

TEST(Launch, EveryRankGetsRankWorldSizeHostfileAndToken) {
  auto r = launch(
      "-n 3 -- bash -c 'echo rank=$TESSERA_RANK mlx=$MLX_RANK size=$TESSERA_WORLD_SIZE "
      "tok=${#TESSERA_JOB_TOKEN} hf=$TESSERA_HOSTFILE'");
  ASSERT_EQ(r.code, 0) << r.out;
  auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 3u) << r.out;
  for (int i = 0; i < 3; ++i) {
    bool found = false;
    for (auto& l : ls) {
      if (l.rfind("[" + std::to_string(i) + "] rank=" + std::to_string(i) + " mlx=" +
                      std::to_string(i) + " size=3 tok=64 hf=/tmp/tessera-launch-", 0) == 0)
        found = true;
    }
    EXPECT_TRUE(found) << "rank " << i << " in:\n" << r.out;
  }
}

TEST(Launch, HostfileListsOneLoopbackEntryPerRankWithDistinctPorts) {
  auto r = launch("-n 4 --connections-per-ip 2 --no-prefix -- bash -c "
                  "'[ $TESSERA_RANK = 0 ] && cat $TESSERA_HOSTFILE; true'");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 4u);
  std::set<std::string> seen;
  for (auto& rank : j) {
    ASSERT_EQ(rank.size(), 2u);
    for (auto& a : rank) {
      std::string s = a.get<std::string>();
      EXPECT_EQ(s.rfind("127.0.0.1:", 0), 0u) << s;
      seen.insert(s);
    }
  }
  EXPECT_EQ(seen.size(), 8u);
}

TEST(Launch, StartingPortGivesConsecutivePorts) {
  auto r = launch("-n 2 --starting-port 40100 --no-prefix -- bash -c "
                  "'[ $TESSERA_RANK = 1 ] && cat $TESSERA_HOSTFILE; true'");
  ASSERT_EQ(r.code, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j[0][0], "127.0.0.1:40100");
  EXPECT_EQ(j[1][0], "127.0.0.1:40101");
}

TEST(Launch, StdinIsBroadcastToEveryRank) {
  auto r = launch("-n 3 -- bash -c 'read x; echo got $x'", "hello\\n");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(lines(r.out), (std::set<std::string>{"[0] got hello", "[1] got hello", "[2] got hello"}));
}

TEST(Launch, ExitCodeIsTheFirstFailingRanksAndOthersAreStopped) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = launch("-n 3 -- bash -c 'if [ $TESSERA_RANK = 2 ]; then exit 7; fi; sleep 30'");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 7);
  EXPECT_LT(s, 10.0);  // the sleepers got SIGTERM
}

TEST(Launch, RankKilledBySignalNineGives137) {
  auto r = launch("-n 2 -- bash -c 'if [ $TESSERA_RANK = 0 ]; then kill -9 $$; fi; sleep 30'");
  EXPECT_EQ(r.code, 137);
}

TEST(Launch, RankIgnoringSigtermIsKilledAfterGrace) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = launch("-n 2 --grace 1 -- bash -c "
                  "'if [ $TESSERA_RANK = 0 ]; then sleep 0.3; exit 3; fi; trap \"\" TERM; "
                  "for i in $(seq 300); do sleep 0.1; done'");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 3);
  EXPECT_LT(s, 8.0);
}

TEST(Launch, PythonProgramsRunWithPython3) {
  char path[] = "/tmp/tessera-launch-test-XXXXXX.py";
  int fd = mkstemps(path, 3);
  ASSERT_GE(fd, 0);
  std::string src = "import os\nprint('py', os.environ['TESSERA_RANK'])\n";
  ASSERT_EQ(write(fd, src.data(), src.size()), static_cast<ssize_t>(src.size()));
  close(fd);
  auto r = launch("-n 2 " + std::string(path));
  unlink(path);
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(lines(r.out), (std::set<std::string>{"[0] py 0", "[1] py 1"}));
}

TEST(Launch, SigtermToTheLauncherIsForwarded) {
  std::string cmd = std::string(TESSERA_CLI) + " launch -n 2 -- sleep 30";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(), nullptr);
    _exit(127);
  }
  usleep(500 * 1000);
  auto t0 = std::chrono::steady_clock::now();
  kill(pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; ++i) usleep(100 * 1000);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(status)) << "launcher did not exit";
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_LT(s, 5.0);
}

TEST(Launch, BadArgumentsAreUsageErrors) {
  EXPECT_EQ(launch("").code, 2);                              // no program
  EXPECT_EQ(launch("-n 0 true").code, 2);                     // out of range
  EXPECT_EQ(launch("-n 2 --backend nccl true").code, 2);      // not launchable in this build
  EXPECT_EQ(launch("--backend gloo true").code, 2);           // not a backend
  EXPECT_EQ(launch("--mpi-arg -x true").code, 2);             // only for mpi
  EXPECT_EQ(launch("--hosts 127.0.0.1,,127.0.0.1 true").code, 2);  // an empty host
  EXPECT_EQ(launch("--hosts -oProxyCommand=x true").code, 2);      // not a host: an ssh option
  EXPECT_EQ(launch("--hosts no-such-host.invalid true").code, 2);  // cannot be resolved
  EXPECT_EQ(launch("--hostfile /nonexistent.json true").code, 2);
  EXPECT_EQ(launch("--hostfile /dev/null --hosts 127.0.0.1 true").code, 2);  // both list hosts
  EXPECT_EQ(launch("--cwd /nonexistent -n 2 true").code, 2);
  EXPECT_EQ(launch("-n 2 --env NOEQUALS true").code, 2);
  EXPECT_EQ(launch("-n 2 --starting-port 65535 true").code, 2);
  EXPECT_EQ(launch("-n 2 --env 9LIVES=1 true").code, 2);       // not a variable name
  EXPECT_EQ(launch("-n 2 --env A-B=1 true").code, 2);
}

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A program that cannot run is one clear error before any rank starts, not N failed ranks.
TEST(Launch, MissingOrNonExecutableProgramIsRejectedBeforeStarting) {
  auto r = launch("-n 2 /nonexistent/program", "", 60, true);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.out, "'/nonexistent/program' does not exist")) << r.out;
  EXPECT_FALSE(has(r.out, "[0]")) << r.out;
  r = launch("-n 2 no-such-program-anywhere", "", 60, true);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.out, "not found on PATH")) << r.out;
  char path[] = "/tmp/tessera-launch-noexec-XXXXXX";  // a file without execute permission
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  chmod(path, 0644);
  r = launch("-n 2 " + std::string(path), "", 60, true);
  unlink(path);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.out, "not an executable file")) << r.out;
  r = launch("-n 2 /nonexistent/script.py", "", 60, true);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.out, "does not exist")) << r.out;
}

// The launcher names the signal that killed a rank, and repeats the first failing rank's own
// last lines at the end, after the other ranks' reactions to being stopped.
TEST(Launch, FirstFailureIsReportedWithItsSignalAndItsOwnLastLines) {
  auto r = launch("-n 3 -- bash -c 'if [ $TESSERA_RANK = 1 ]; then echo \"rank one: disk on fire\" >&2; "
                  "kill -SEGV $$; fi; sleep 30'", "", 60, true);
  EXPECT_EQ(r.code, 128 + SIGSEGV);
  EXPECT_TRUE(has(r.out, "rank 1 was killed by SIGSEGV (signal 11)")) << r.out;
  const size_t report = r.out.find("[launch] rank 1 failed first");
  ASSERT_NE(report, std::string::npos) << r.out;
  EXPECT_TRUE(has(r.out.substr(report), "rank one: disk on fire")) << r.out;
  r = launch("-n 2 -- bash -c 'if [ $TESSERA_RANK = 0 ]; then echo bad input; exit 4; fi; sleep 30'",
             "", 60, true);
  EXPECT_EQ(r.code, 4);
  EXPECT_TRUE(has(r.out, "rank 0 failed first: it exited with status 4. Its last lines:\n  bad input"))
      << r.out;
}

// Each local rank defaults to its share of 0.8 x RAM, not the whole of it; a limit the user set
// (environment or --env) is passed on unchanged.
TEST(Launch, EachRankGetsItsShareOfTheMemoryLimit) {
  const double ram_mb = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                        static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
  auto r = launch("-n 4 -- bash -c 'echo limit $TESSERA_MEMORY_LIMIT_MB'");
  ASSERT_EQ(r.code, 0);
  for (const auto& l : lines(r.out)) {
    const double mb = std::stod(l.substr(l.find("limit ") + 6));
    EXPECT_NEAR(mb, 0.8 * ram_mb / 4, 2.0) << l;
  }
  r = launch("-n 2 --env TESSERA_MEMORY_LIMIT_MB=123 -- bash -c 'echo limit $TESSERA_MEMORY_LIMIT_MB'");
  EXPECT_EQ(lines(r.out), (std::set<std::string>{"[0] limit 123", "[1] limit 123"}));
  // The ranks' allocator takes it as its default limit.
  r = launch("-n 2 --env TESSERA_MEMORY_LIMIT_MB=123 -- " + std::string(TESSERA_BIN_DIR) +
             "/dist_worker memlimit");
  EXPECT_EQ(lines(r.out), (std::set<std::string>{"[0] memory limit 123 MiB", "[1] memory limit 123 MiB"}));
}

// MLX's defaults: -n repeats each host of --hosts (default 127.0.0.1), so `launch prog` is one
// rank; names of this machine run here, with one ring port per rank, address and connection.
TEST(Launch, HostsRepeatEachHostAndThisMachineRunsLocally) {
  auto r = launch("prog-does-not-matter-here", "", 60, true);
  EXPECT_EQ(r.code, 2) << r.out;  // not on PATH: checked before starting, as with -n
  r = launch("--no-prefix -- bash -c 'echo $TESSERA_RANK/$TESSERA_WORLD_SIZE'");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "0/1\n");
  r = launch("--hosts 127.0.0.1,localhost -n 2 --connections-per-ip 2 --no-prefix -- bash -c "
             "'[ $TESSERA_RANK = 3 ] && cat $TESSERA_HOSTFILE; true'");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 4u);
  std::set<std::string> seen;
  for (auto& rank : j) {
    ASSERT_EQ(rank.size(), 2u);
    for (auto& a : rank) seen.insert(a.get<std::string>());
  }
  EXPECT_EQ(seen.size(), 8u);
}

// An MLX launcher hostfile (the list form) whose hosts are this machine: one rank per entry,
// its envs before --env (so --env wins), --cwd, and --python / --print-python.
TEST(Launch, LocalHostfileEnvsCwdAndPython) {
  char dir[] = "/tmp/tessera-launch-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string hf = std::string(dir) + "/hosts.json";
  std::ofstream(hf) << R"({"envs": ["A=from-file", "B=file"], "hosts": [{"ssh": "127.0.0.1"}, )"
                    << R"({"ssh": "localhost", "ips": ["127.0.0.1"]}, {"ssh": "127.0.0.1"}]})";
  auto r = launch("--hostfile " + hf + " --env B=cli --cwd " + dir +
                  " --no-prefix -- bash -c 'echo $TESSERA_RANK $A $B $(pwd)'");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string d = dir;
  EXPECT_EQ(lines(r.out), (std::set<std::string>{"0 from-file cli " + d, "1 from-file cli " + d,
                                                 "2 from-file cli " + d}));
  r = launch("--python /opt/py/bin/python --print-python");
  EXPECT_EQ(r.out, "/opt/py/bin/python\n");
  EXPECT_EQ(launch("-n 2 --hostfile " + hf + " true").code, 2);  // -n does not apply to a hostfile
  std::ofstream(hf) << R"([{"ssh": "127.0.0.1", "ips": ["127.0.0.1"]}, {"ssh": "127.0.0.1", "ips": []}])";
  r = launch("--hostfile " + hf + " true", "", 60, true);
  EXPECT_EQ(r.code, 0) << r.out;  // no ips: the launcher resolves the ssh name (MLX's ring refuses)
  std::filesystem::remove_all(dir);
}
