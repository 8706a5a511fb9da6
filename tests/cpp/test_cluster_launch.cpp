// `tessera launch` across simulated hosts (tests/cluster/cluster.h): network namespaces on a
// bridge, each with a real OpenSSH server. The launcher runs on host 0 (its ranks there run
// without ssh) and reaches the others over ssh. Results are checked against the closed form;
// faults (a killed remote rank, a killed ssh connection, a partition, Ctrl-C) must stop every
// rank on every host; ssh problems (unknown host key, a password-only host, an unreachable
// address) must be one clear error naming the host within 10 s.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "../cluster/cluster.h"
#include "test_util.h"

using tessera::test_cluster::Cluster;
using tessera::test_cluster::descendants_of;
using tessera::test_cluster::none_left;
using tessera::test_cluster::Process;
using tessera::test_cluster::processes_with;
using tessera::test_cluster::SshHosts;
using tessera::test_util::count_of;

namespace {

const std::string kWorker = std::string(TESSERA_BIN_DIR) + "/dist_worker";

// "10.77.0.10,10.77.0.11,..." for the first n hosts.
std::string host_list(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + Cluster::ip(i);
  return s;
}

// Starts `tessera launch ARGS` on host 0 with the ssh wrapper on PATH.
Process& launch(Cluster& c, const SshHosts& ssh, const std::string& args, const std::string& env = "") {
  return c.start(0, ssh.path_env() + " TESSERA_DIST_CONNECT_TIMEOUT=20 " + env + " timeout -s KILL 120 " +
                        TESSERA_CLI + " launch " + args);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether every one of `ranks` ranks of the launcher's job said it is in its loop of all_sums.
bool all_ready(const Process& l, int ranks) {
  for (int r = 0; r < ranks; ++r) {
    if (!l.wait_for_output("rank " + std::to_string(r) + " ready", 60)) return false;
  }
  return true;
}

// The tag on the command line of this cluster's job processes.
std::string job_marker(const Cluster& c) { return c.prefix() + "-job"; }

// `tessera launch ARGS -- dist_worker loop <marker>` on host 0: a loop of all_sums.
Process& start_loop(Cluster& c, const SshHosts& ssh, const std::string& args,
                    const std::string& env = "TESSERA_DIST_TIMEOUT=20") {
  return launch(c, ssh, args + " -- " + kWorker + " loop " + job_marker(c), env);
}

// The pid of the job's rank `rank` (its command line holds `marker`), or -1.
pid_t pid_of_rank(const std::string& marker, int rank) {
  for (auto [pid, r] : processes_with(marker)) {
    if (r == rank) return pid;
  }
  return -1;
}

// kill -9 of rank `victim` (on host `host`) in a loop job of `ranks` ranks over `args`: the
// launcher names it as the first failure, and no process of the job is left on any host.
void expect_killed_rank_named(Cluster& c, const SshHosts& ssh, const std::string& args, int ranks,
                              int victim, int host) {
  Process& l = start_loop(c, ssh, args);
  ASSERT_TRUE(all_ready(l, ranks)) << l.output();
  const pid_t pid = pid_of_rank(job_marker(c), victim);
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGKILL);
  EXPECT_NE(l.wait(30), 0) << l.output();
  const std::string out = l.output();
  EXPECT_NE(out.find("[launch] rank " + std::to_string(victim) + " (host " + Cluster::ip(host) +
                     ") failed first: it was killed by SIGKILL"),
            std::string::npos) << out;
  EXPECT_TRUE(none_left(job_marker(c), 10)) << out;
}

}  // namespace

// 3 hosts x 2 ranks from --hosts: every rank gets the same all_sum (1 + ... + 6), nobody warns
// about a missing token (the launcher sent one over ssh), and no process is left.
TEST(ClusterLaunch, HostsAcrossThreeHostsTwoRanksEach) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(3);
  SshHosts ssh(c);
  const std::string marker = job_marker(c);
  Process& l = launch(c, ssh, "--hosts " + host_list(3) + " -n 2 -- " + kWorker + " join " + marker);
  ASSERT_EQ(l.wait(90), 0) << l.output();
  const std::string out = l.output();
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(count_of(out, "[" + std::to_string(r) + "] rank " + std::to_string(r) + ": all_sum 21"), 1) << out;
  }
  EXPECT_EQ(count_of(out, "without TESSERA_JOB_TOKEN"), 0) << out;
  EXPECT_TRUE(none_left(marker, 5));
}

// An MLX hostfile in its object form, with host names (resolved by the launcher): its envs
// reach every rank, stdin is broadcast to remote ranks, --cwd holds remotely, lines carry the
// rank prefix, and the token never appears on a command line.
TEST(ClusterLaunch, HostfileWithNamesEnvsStdinAndCwd) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(3);
  SshHosts ssh(c);
  const std::string work = ssh.dir() + "/work", hostfile = ssh.dir() + "/hosts.json";
  std::filesystem::create_directories(work);
  std::ofstream(hostfile) << R"({"backend": "ring", "envs": ["GREETING=hello there"], "hosts": [)"
                          << R"({"ssh": "node0"}, {"ssh": "node1"}, {"ssh": "node2", "ips": [")"
                          << Cluster::ip(2) << R"("]}]})";
  const std::string script = ssh.dir() + "/rank.sh";
  std::ofstream(script) << "#!/bin/bash\nread -r line\necho \"rank $TESSERA_RANK of $TESSERA_WORLD_SIZE in "
                           "$(pwd) says $GREETING, read $line\"\n"
                           "for p in $(pgrep -f tessera); do tr '\\0' ' ' < /proc/$p/cmdline; echo; done "
                           "| grep -c $TESSERA_JOB_TOKEN | sed 's/^/token on command lines: /'\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  std::ofstream(ssh.dir() + "/input") << "a line of stdin\n";
  Process& l = launch(c, ssh, "--hostfile " + hostfile + " --cwd " + work + " -- " + script + " < " +
                                  ssh.dir() + "/input");
  ASSERT_EQ(l.wait(60), 0) << l.output();
  const std::string out = l.output();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(count_of(out, "[" + std::to_string(r) + "] rank " + std::to_string(r) + " of 3 in " + work +
                                " says hello there, read a line of stdin"),
              1)
        << out;
  }
  EXPECT_EQ(count_of(out, "token on command lines: 0"), 3) << out;
}

// kill -9 of a remote rank in the middle of a loop of all_sums: the launcher names that rank and
// its host, and no process of the job is left on any host. (The survivors are stopped by the
// launcher, often before they notice; test_cluster.cpp shows that each raises by itself.)
TEST(ClusterLaunch, KilledRemoteRankStopsTheJobEverywhere) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(3);
  SshHosts ssh(c);
  expect_killed_rank_named(c, ssh, "--hosts " + host_list(3), 3, 2, 2);
}

// The ssh connection of a remote rank dies (its client is killed): the agent on that host stops
// the rank, the launcher says which connection died, and nothing of the job is left.
TEST(ClusterLaunch, KilledSshConnectionStopsTheJobEverywhere) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(3);
  SshHosts ssh(c);
  const std::string marker = job_marker(c);
  Process& l = start_loop(c, ssh, "--hosts " + host_list(3));
  ASSERT_TRUE(all_ready(l, 3)) << l.output();
  // This launcher's ssh session to host 1 (not its connection master, nor another test's ssh).
  pid_t client = -1;
  for (pid_t pid : descendants_of(l.pid())) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (char& ch : cmd) ch = ch == '\0' ? ' ' : ch;
    if (cmd.rfind("/usr/bin/ssh ", 0) == 0 && cmd.find(" -M ") == std::string::npos &&
        cmd.find(" " + Cluster::ip(1) + " ") != std::string::npos) {
      client = pid;
    }
  }
  ASSERT_GT(client, 0);
  ::kill(client, SIGKILL);
  EXPECT_NE(l.wait(30), 0) << l.output();
  EXPECT_NE(l.output().find("rank 1 (host " + Cluster::ip(1) + ") failed first: its ssh client was killed"),
            std::string::npos) << l.output();
  EXPECT_TRUE(none_left(marker, 10)) << l.output();
}

// Ctrl-C of the launcher: every rank on every host stops, and the launcher exits promptly.
TEST(ClusterLaunch, CtrlCOfTheLauncherStopsEveryRank) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(3);
  SshHosts ssh(c);
  const std::string marker = job_marker(c);
  Process& l = start_loop(c, ssh, "--grace 2 --hosts " + host_list(3), "");
  ASSERT_TRUE(all_ready(l, 3)) << l.output();
  const auto t0 = std::chrono::steady_clock::now();
  l.kill(SIGINT);
  EXPECT_NE(l.wait(15), Process::kRunning) << l.output();
  EXPECT_LT(seconds_since(t0), 10.0);
  EXPECT_TRUE(none_left(marker, 10)) << l.output();
}

// Host 2 loses its link mid-job: with TESSERA_DIST_TIMEOUT=3 the survivors raise naming the
// silent rank, the launcher's status is a failure, and rank 2 (which cannot be reached to be
// told) stops by itself: nothing of the job is left anywhere.
TEST(ClusterLaunch, PartitionedHostStopsTheJobEverywhere) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(3);
  SshHosts ssh(c);
  const std::string marker = job_marker(c);
  Process& l = start_loop(c, ssh, "--grace 2 --hosts " + host_list(3),
                          "TESSERA_DIST_TIMEOUT=3 TESSERA_LAUNCH_HEARTBEAT=6");
  ASSERT_TRUE(all_ready(l, 3)) << l.output();
  c.cut(2);
  EXPECT_NE(l.wait(30), 0) << l.output();
  EXPECT_NE(l.output().find("no data from rank"), std::string::npos) << l.output();
  EXPECT_TRUE(none_left(marker, 15)) << l.output();
}

// Hosts that would prompt (an unknown host key, a password-only server) and an address nobody
// answers: each is an error within 10 s that names the host and ssh's reason, before any rank
// starts (the launcher opens one ssh connection per host first).
TEST(ClusterLaunch, SshProblemsAreNamedWithinTenSeconds) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(3);
  SshHosts ssh(c, {SshHosts::Host::kTrusted, SshHosts::Host::kUnknownKey, SshHosts::Host::kPasswordOnly});
  const std::string unreachable = "10.77.0.99";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Cluster::ip(1), "Host key verification failed"},
      {Cluster::ip(2), "Permission denied"},
      {unreachable, unreachable}};
  for (const auto& [host, reason] : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    Process& l = launch(c, ssh, "--hosts " + Cluster::ip(0) + "," + host + " -- " + kWorker + " join");
    EXPECT_NE(l.wait(12), 0) << l.output();
    EXPECT_LT(seconds_since(t0), 10.0) << host;
    const std::string out = l.output();
    EXPECT_NE(out.find("cannot reach host '" + host + "' over ssh"), std::string::npos) << out;
    EXPECT_NE(out.find("no rank was started"), std::string::npos) << out;
    EXPECT_NE(out.find(reason), std::string::npos) << out;
  }
}

// Ranks that Slurm started on three hosts (its environment, set by hand here): no hostfile, the
// coordinator is the first node of SLURM_STEP_NODELIST, and each rank registers the address of
// its interface that reaches it.
TEST(ClusterLaunch, SlurmEnvironmentAcrossHostsWithoutAHostfile) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(3);
  std::vector<Process*> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(&c.start(r, "env SLURM_PROCID=" + std::to_string(r) +
                                    " SLURM_NTASKS=3 SLURM_STEP_NODELIST=\"node[0-2]\" SLURM_JOB_ID=77 "
                                    "SLURM_STEP_ID=0 TESSERA_JOB_TOKEN=s3cret TESSERA_RING_VERBOSE=1 "
                                    "TESSERA_DIST_CONNECT_TIMEOUT=20 timeout -s KILL 60 " + kWorker + " join"));
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ranks[r]->wait(60), 0) << ranks[r]->output();
    const std::string out = ranks[r]->output();
    EXPECT_EQ(count_of(out, "rank " + std::to_string(r) + ": all_sum 6"), 1) << out;
    EXPECT_EQ(count_of(out, "listening on " + Cluster::ip(r) + ":"), 1) << out;
    EXPECT_EQ(count_of(out, "coordinator " + Cluster::ip(0) + ":" + std::to_string(20000 + 77 * 16)), 1) << out;
  }
}

// 2 hosts x 2 ranks, placed alternately (ranks 0 and 2 on host 0) and host by host: collectives
// are hierarchical (shared memory inside each host, TCP across), and every op, dtype and length
// of the collectives check, plus 300 random collectives, agree with the closed-form reference.
// (A large all_gather takes a different path in each placement: a reorder, or straight copies.)
TEST(ClusterLaunch, TwoHostsTwoRanksEachShareMemoryInsideEachHost) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  const std::string hostfile = ssh.dir() + "/hosts.json";
  std::ofstream(hostfile) << R"([{"ssh": "node0"}, {"ssh": "node1"}, {"ssh": "node0"}, {"ssh": "node1"}])";
  Process& l = launch(c, ssh, "--verbose --hostfile " + hostfile + " -- " + kWorker + " collectives");
  ASSERT_EQ(l.wait(120), 0) << l.output();
  EXPECT_EQ(count_of(l.output(), "2 hosts x 2 ranks: shared memory inside the host"), 4) << l.output();
  EXPECT_EQ(count_of(l.output(), "cases, 0 failures"), 4) << l.output();
  Process& m = launch(c, ssh, "--hostfile " + hostfile + " -- " + kWorker + " mixed 300");
  ASSERT_EQ(m.wait(120), 0) << m.output();
  const std::string in_order = ssh.dir() + "/hosts_in_order.json";
  std::ofstream(in_order) << R"([{"ssh": "node0"}, {"ssh": "node0"}, {"ssh": "node1"}, {"ssh": "node1"}])";
  Process& o = launch(c, ssh, "--verbose --hostfile " + in_order + " -- " + kWorker + " collectives");
  ASSERT_EQ(o.wait(120), 0) << o.output();
  EXPECT_EQ(count_of(o.output(), "2 hosts x 2 ranks: shared memory inside the host"), 4) << o.output();
  EXPECT_EQ(count_of(o.output(), "cases, 0 failures"), 4) << o.output();
}

// Hosts with different numbers of ranks (2 on node0, 1 on node1): still shared memory inside
// each host, the hosts' first ranks alone across, and every collective agrees with the
// reference (MLX and our earlier releases used TCP between every pair here).
TEST(ClusterLaunch, HostsWithDifferentRankCountsStillShareMemoryInside) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  const std::string hostfile = ssh.dir() + "/hosts.json";
  std::ofstream(hostfile) << R"([{"ssh": "node0"}, {"ssh": "node1"}, {"ssh": "node0"}])";
  Process& l = launch(c, ssh, "--verbose --hostfile " + hostfile + " -- " + kWorker + " collectives");
  ASSERT_EQ(l.wait(120), 0) << l.output();
  EXPECT_EQ(count_of(l.output(), "2 hosts of 2/1 ranks: shared memory inside the host"), 3)
      << l.output();
  EXPECT_EQ(count_of(l.output(), "cases, 0 failures"), 3) << l.output();
  Process& m = launch(c, ssh, "--hostfile " + hostfile + " -- " + kWorker + " mixed 200");
  ASSERT_EQ(m.wait(120), 0) << m.output();
}

// A rank of a hierarchical job dies: the launcher names it and nothing of the job is left
// (test_cluster.cpp checks what the survivors say).
TEST(ClusterLaunch, KilledRankOfAHierarchicalJobIsNamedEverywhere) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  expect_killed_rank_named(c, ssh, "--hosts " + host_list(2) + " -n 2", 4, 3, 1);
}

// A C++ user's install, `cmake --install BUILD --prefix P`, moved elsewhere afterwards: with no
// LD_LIBRARY_PATH anywhere, P/bin/tessera finds P's libtessera through an RPATH relative to
// itself, on host 0 and on the host it reaches over ssh (where the launcher runs P/bin/tessera
// again): a job across 2 hosts gives the closed-form all_sum, and `config --hosts`, which runs
// the command on every host too, writes a hostfile of both.
TEST(ClusterLaunch, PrefixInstallRunsOnEveryHostWithoutLdLibraryPath) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  const std::string installed = ssh.dir() + "/prefix", moved = ssh.dir() + "/moved";
  auto r = tessera::test_util::run_command("cmake --install " + std::string(TESSERA_BIN_DIR) +
                                           " --prefix " + installed + " 2>&1 && mv " + installed +
                                           " " + moved + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string cli = "env -u LD_LIBRARY_PATH " + moved + "/bin/tessera";
  const std::string hostfile = ssh.dir() + "/hosts.json", marker = job_marker(c);
  std::ofstream(hostfile) << "[{\"ssh\": \"" << Cluster::ip(0) << "\"}, {\"ssh\": \""
                          << Cluster::ip(1) << "\"}]";
  const std::string no_ld_path = "unset LD_LIBRARY_PATH; " + ssh.path_env();
  Process& l = c.start(0, no_ld_path + " TESSERA_DIST_CONNECT_TIMEOUT=20 timeout -s KILL 120 " +
                              cli + " launch --hostfile " + hostfile + " -- " + kWorker +
                              " join " + marker);
  ASSERT_EQ(l.wait(90), 0) << l.output();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(count_of(l.output(), "rank " + std::to_string(rank) + ": all_sum 3"), 1)
        << l.output();
  }
  EXPECT_TRUE(none_left(marker, 5));
  const std::string written = ssh.dir() + "/found.json";
  Process& p = c.start(0, no_ld_path + " timeout -s KILL 90 " + cli + " config --hosts " +
                              host_list(2) + " --output " + written);
  ASSERT_EQ(p.wait(60), 0) << p.output();
  std::ifstream f(written);
  const auto j = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(f), {}));
  ASSERT_EQ(j["hosts"].size(), 2u) << j.dump();
  EXPECT_EQ(j["hosts"][0]["ssh"], Cluster::ip(0));
  EXPECT_EQ(j["hosts"][1]["ssh"], Cluster::ip(1));
}
