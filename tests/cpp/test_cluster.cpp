// Ranks on separate simulated hosts (network namespaces on a bridge, tests/cluster/cluster.h),
// started by hand with MLX_HOSTFILE / MLX_RANK, TCP between them: a killed rank and a
// partitioned rank are named by every survivor, strangers cannot crowd out the ranks, and a job
// without a token on real addresses warns. Every namespace and process is removed afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "test_util.h"

using tessera::test_util::count_of;

#include "../cluster/cluster.h"

using tessera::test_cluster::Cluster;
using tessera::test_cluster::Process;

namespace {

const std::string kWorker = std::string(TESSERA_BIN_DIR) + "/dist_worker";
constexpr int kPort = 5000;

// The command for rank r of a job over `hostfile`.
std::string rank_cmd(const std::string& hostfile, int r, const std::string& mode,
                     const std::string& env = "") {
  return "env MLX_HOSTFILE=" + hostfile + " MLX_RANK=" + std::to_string(r) +
         " TESSERA_DIST_CONNECT_TIMEOUT=20 " + env + " timeout -s KILL 120 " + kWorker + " " + mode;
}

// Starts rank r of `mode` on host r for every r < n, and waits until each printed "ready".
std::vector<Process*> start_looping_ranks(Cluster& c, int n, const std::string& env = "") {
  auto hf = c.hostfile(n, kPort);
  std::vector<Process*> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(&c.start(r, rank_cmd(hf, r, "loop", env)));
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(ranks[r]->wait_for_output("ready", 60)) << ranks[r]->output();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // into the loop of all_sums
  return ranks;
}

#define REQUIRE_CLUSTER()                                                          \
  if (!Cluster::available()) GTEST_SKIP() << "needs root and network namespaces"

}  // namespace

TEST(Cluster, RanksOnSeparateHostsComputeAndWarnWithoutAToken) {
  REQUIRE_CLUSTER();
  Cluster c(3);
  auto hf = c.hostfile(3, kPort);
  std::vector<Process*> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(&c.start(r, rank_cmd(hf, r, "join")));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ranks[r]->wait(60), 0) << ranks[r]->output();
    const std::string out = ranks[r]->output();
    EXPECT_EQ(count_of(out, "all_sum 6"), 1) << out;  // 1 + 2 + 3
    EXPECT_EQ(count_of(out, "without TESSERA_JOB_TOKEN"), 1) << out;
  }
}

TEST(Cluster, WithATokenThereIsNoWarning) {
  REQUIRE_CLUSTER();
  Cluster c(2);
  auto hf = c.hostfile(2, kPort);
  Process& a = c.start(0, rank_cmd(hf, 0, "join", "TESSERA_JOB_TOKEN=s3cret"));
  Process& b = c.start(1, rank_cmd(hf, 1, "join", "TESSERA_JOB_TOKEN=s3cret"));
  EXPECT_EQ(a.wait(60), 0) << a.output();
  EXPECT_EQ(b.wait(60), 0) << b.output();
  EXPECT_EQ(count_of(a.output() + b.output(), "without TESSERA_JOB_TOKEN"), 0);
}

// kill -9 of rank 1 in the middle of a loop of all_sums: every survivor names rank 1 and its
// address within a second, the rank two hops away too.
TEST(Cluster, KilledRankIsNamedByEverySurvivor) {
  REQUIRE_CLUSTER();
  Cluster c(4);
  auto ranks = start_looping_ranks(c, 4);
  auto t0 = std::chrono::steady_clock::now();
  ranks[1]->kill(SIGKILL);
  for (int r : {0, 2, 3}) {
    EXPECT_EQ(ranks[r]->wait(10), 3) << ranks[r]->output();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 1.0) << "rank " << r;
    EXPECT_NE(ranks[r]->output().find(": rank 1 (" + Cluster::ip(1) + ":"), std::string::npos)
        << ranks[r]->output();
  }
}

// Host 1 loses its link: no data, no reset. With TESSERA_DIST_TIMEOUT=3 every survivor raises
// within the timeout plus the wait for its neighbour's story, and names rank 1.
TEST(Cluster, PartitionedRankIsNamedByEverySurvivor) {
  REQUIRE_CLUSTER();
  Cluster c(4);
  auto ranks = start_looping_ranks(c, 4, "TESSERA_DIST_TIMEOUT=3");
  auto t0 = std::chrono::steady_clock::now();
  c.cut(1);
  for (int r : {0, 2, 3}) {
    EXPECT_EQ(ranks[r]->wait(15), 3) << ranks[r]->output();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 3.0 + 0.6 + 1.0) << "rank " << r;
    EXPECT_NE(ranks[r]->output().find("no data from rank 1 (" + Cluster::ip(1) + ":"),
              std::string::npos)
        << ranks[r]->output();
  }
}

// A stranger on its own host holds 16 silent connections to rank 1's port before the job forms
// (as many as the listener authenticates at once): the ranks still connect at once, and the
// stranger is told the listener is full.
TEST(Cluster, StrangersCannotCrowdOutTheRanks) {
  REQUIRE_CLUSTER();
  Cluster c(3);  // hosts 0 and 1 run the ranks, host 2 the stranger
  auto hf = c.hostfile(2, kPort);
  Process& r1 = c.start(1, rank_cmd(hf, 1, "join"));
  const std::string target = "/dev/tcp/" + Cluster::ip(1) + "/" + std::to_string(kPort);
  Process& stranger = c.start(2, "for i in $(seq 400); do (: < " + target +
                                     ") 2>/dev/null && break; sleep 0.05; done; "
                                     "for i in $(seq 16); do exec {fd}<>" + target +
                                     "; done; echo connected; sleep 60");
  ASSERT_TRUE(stranger.wait_for_output("connected", 30)) << stranger.output() << r1.output();
  auto t0 = std::chrono::steady_clock::now();
  Process& r0 = c.start(0, rank_cmd(hf, 0, "join"));
  EXPECT_EQ(r0.wait(30), 0) << r0.output();
  EXPECT_EQ(r1.wait(30), 0) << r1.output();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0) << r1.output();  // not after the strangers' 10 s handshake deadline
  EXPECT_NE(r1.output().find("the listener is full"), std::string::npos) << r1.output();
}

// Without a token, a process on another host that claims a rank the hostfile places on the
// target's own host is refused (a local rank always connects from a local address), and the
// real rank still joins.
TEST(Cluster, AStrangerClaimingALocalRankIsRefused) {
  REQUIRE_CLUSTER();
  Cluster c(2);  // host 0 runs both ranks, host 1 the impostor
  auto hf = c.hostfile({{0, kPort}, {0, kPort + 1}});
  Process& r1 = c.start(0, rank_cmd(hf, 1, "join"));
  Process& impostor = c.start(1, "env MLX_HOSTFILE=" + hf + " timeout -s KILL 60 " + kWorker +
                                     " impersonate 0 1");
  EXPECT_EQ(impostor.wait(40), 0) << impostor.output() << r1.output();
  EXPECT_NE(impostor.output().find("the hostfile places rank 0 on rank 1's host"),
            std::string::npos) << impostor.output();
  EXPECT_NE(r1.output().find("connection comes from " + Cluster::ip(1) + ", another host"),
            std::string::npos) << r1.output();
  Process& r0 = c.start(0, rank_cmd(hf, 0, "join"));
  EXPECT_EQ(r0.wait(30), 0) << r0.output();
  EXPECT_EQ(r1.wait(30), 0) << r1.output();
  EXPECT_EQ(count_of(r0.output() + r1.output(), "all_sum 3"), 2) << r0.output() << r1.output();
}

// 2 hosts x 2 ranks (hierarchical: shared memory inside each host, TCP across), started by hand:
// when rank 3 is killed, its host-mate and its counterpart on the other host raise, each naming
// the sub-group it was in and how that group's ranks map to the job's.
TEST(Cluster, KilledRankOfAHierarchicalJobIsNamedInTheJobsNumbering) {
  REQUIRE_CLUSTER();
  Cluster c(2);
  auto hf = c.hostfile({{0, kPort}, {0, kPort + 1}, {1, kPort}, {1, kPort + 1}});
  std::vector<Process*> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(&c.start(r / 2, rank_cmd(hf, r, "loop", "TESSERA_DIST_TIMEOUT=20")));
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(ranks[r]->wait_for_output("ready", 60)) << ranks[r]->output();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ranks[3]->kill(SIGKILL);
  for (int r : {1, 2}) EXPECT_EQ(ranks[r]->wait(30), 3) << ranks[r]->output();
  EXPECT_NE(ranks[2]->output().find("in the shared-memory group of its host (its ranks 0 = 2, 1 = 3 of the job)"),
            std::string::npos) << ranks[2]->output();
  EXPECT_NE(ranks[1]->output().find("in the group across hosts (its ranks 0 = 1, 1 = 3 of the job)"),
            std::string::npos) << ranks[1]->output();
  EXPECT_EQ(ranks[0]->wait(30), 3) << ranks[0]->output();
}
