// The distributed layer end to end: real processes started through `tessera launch`, 127.0.0.1
// only, each run bounded in time. The rank program is tests/distributed/dist_worker.cpp.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <dirent.h>
#include <sys/wait.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "test_util.h"

using tessera::test_util::count_of;
#include <vector>

#include "tessera/distributed.h"

namespace {

struct Run {
  int code;
  std::string out;
  double seconds;
};

Run launch(int n, const std::string& mode, const std::string& extra = "", int limit_s = 240) {
  std::string cmd = "timeout -s KILL " + std::to_string(limit_s) + " " + TESSERA_CLI +
                    " launch -n " + std::to_string(n) + " " + extra + " -- " + TESSERA_BIN_DIR +
                    "/dist_worker " + mode + " 2>&1";
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  int status = pclose(p);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, s};
}

// The lines the ranks printed ("[r] ..."), without the launcher's own report (which repeats the
// first failure's last lines).
std::string rank_lines(const std::string& s) {
  std::string out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    if (end > start + 1 && s[start] == '[' && std::isdigit(static_cast<unsigned char>(s[start + 1]))) {
      out.append(s, start, end - start + 1);
    }
    start = end + 1;
  }
  return out;
}

}  // namespace

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, EveryOpDtypeAndLengthMatchesTheLocalReference) {
  int n = GetParam();
  auto r = launch(n, "collectives");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, " 0 failures"), n) << r.out;
}

TEST_P(Collectives, EveryOpWithSharedMemoryOff) {
  int n = GetParam();
  auto r = launch(n, "collectives", "--env TESSERA_RING_SHM=0");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, " 0 failures"), n) << r.out;
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Collectives, ::testing::Values(2, 3, 4, 5));

TEST(Distributed, ThousandMixedCollectivesWithoutHang) {
  auto r = launch(3, "mixed");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "collectives), 0 failures"), 3) << r.out;
}

// The same with waits that sleep at once (no busy-poll) and ranks left unbound, over TCP and
// over shared memory: the paths a loaded machine takes.
TEST(Distributed, MixedCollectivesWithSleepingWaitsAndUnboundRanks) {
  for (const char* shm : {"0", "1"}) {
    auto r = launch(3, "mixed",
                    std::string("--cpu-bind none --env TESSERA_DIST_SPIN_US=0 --env TESSERA_RING_SHM=") +
                        shm);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "collectives), 0 failures"), 3) << "shm " << shm << ":\n" << r.out;
  }
}

// init() after clear_backends() builds a new group on the same ports while a peer may still be
// tearing down its old one: the new connection must not be taken (or refused) by the old group.
TEST(Distributed, RepeatedInitAndTeardownOnTheSamePorts) {
  auto r = launch(4, "cycles 50");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "50 init/teardown cycles"), 4) << r.out;
}

TEST(Distributed, InitSemanticsUnderTheLauncher) {
  auto r = launch(2, "init");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(Distributed, GradientsOfCollectivesAsMlx) {
  auto r = launch(3, "grad");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(DistributedFaults, KilledRankMakesSurvivorsRaiseWithinTwoSeconds) {
  auto r = launch(3, "kill");
  EXPECT_EQ(r.code, 137) << r.out;
  EXPECT_EQ(count_of(rank_lines(r.out), "raised after"), 2) << r.out;
  EXPECT_LT(r.seconds, 30.0);
  // Each survivor's own exit status says whether it raised within 2 s; a late one exits 1,
  // which would not change the launcher's 137 — so check the printed times too.
  for (size_t p = r.out.find("raised after "); p != std::string::npos;
       p = r.out.find("raised after ", p + 1)) {
    double t = std::stod(r.out.substr(p + 13));
    EXPECT_LT(t, 2.0) << r.out;
  }
}

// Over TCP too every survivor names the rank that died, also the rank not adjacent to it (which
// only sees its live neighbours give up): the first witness's failure notice reaches it.
TEST(DistributedFaults, SurvivorsOverTcpAllNameTheRankThatDied) {
  auto r = launch(4, "kill", "--env TESSERA_RING_SHM=0");
  EXPECT_EQ(r.code, 137) << r.out;
  const std::string lines = rank_lines(r.out);
  EXPECT_EQ(count_of(lines, "raised after"), 3) << r.out;
  EXPECT_EQ(count_of(lines, ": rank 1 (127.0.0.1:"), 3) << r.out;
  for (int r2 : {0, 2, 3}) {
    const std::string mine = "[ring] rank " + std::to_string(r2) + ": rank 1 (";
    EXPECT_EQ(count_of(lines, mine), 1) << mine << "\n" << r.out;
  }
}

// A silent rank (stopped) over TCP: its neighbours time out at about the same moment as the
// ranks behind them, yet every survivor names the silent rank, not the neighbour it waited on.
TEST(DistributedFaults, SilentRankOverTcpIsNamedByEverySurvivor) {
  auto r = launch(4, "stop", "--env TESSERA_RING_SHM=0 --env TESSERA_DIST_TIMEOUT=3 --grace 1");
  const std::string lines = rank_lines(r.out);
  EXPECT_EQ(count_of(lines, "raised after"), 3) << r.out;
  EXPECT_EQ(count_of(lines, "no data from rank 1 (127.0.0.1:"), 3) << r.out;
  // Within the timeout plus the wait for a neighbour's story (min(1 s, 20% of the timeout)).
  for (size_t p = lines.find("raised after "); p != std::string::npos;
       p = lines.find("raised after ", p + 1)) {
    EXPECT_LT(std::stod(lines.substr(p + 13)), 3.0 + 0.6 + 0.5) << r.out;
  }
}

// Shared-memory segments are unlinked as soon as every rank has mapped them: after kill -9 of
// every rank nothing of the job is left in /dev/shm.
namespace {

// The pids that the ranks printed as "rank R pid P".
std::vector<std::string> printed_pids(const std::string& out) {
  std::vector<std::string> pids;
  const std::string lines = rank_lines(out);
  for (size_t p = lines.find(" pid "); p != std::string::npos; p = lines.find(" pid ", p + 1)) {
    pids.push_back(std::to_string(std::atoi(lines.c_str() + p + 5)));
  }
  return pids;
}

std::vector<std::string> shm_segments_of(const std::vector<std::string>& pids) {
  std::vector<std::string> found;
  DIR* d = opendir("/dev/shm");
  if (!d) return found;
  while (dirent* e = readdir(d)) {
    for (const auto& pid : pids) {
      if (std::string(e->d_name).rfind("tessera-" + pid + "-", 0) == 0) found.push_back(e->d_name);
    }
  }
  closedir(d);
  return found;
}

}  // namespace

TEST(DistributedFaults, KillingEveryRankLeavesNothingInDevShm) {
  auto r = launch(4, "selfkill");
  EXPECT_EQ(r.code, 137) << r.out;
  const auto pids = printed_pids(r.out);
  EXPECT_EQ(pids.size(), 4u) << r.out;
  EXPECT_EQ(shm_segments_of(pids), std::vector<std::string>{}) << r.out;
}

// A rank killed during set-up, before its peers mapped its segment, cannot unlink it: the
// launcher removes what its dead ranks left.
TEST(DistributedFaults, TheLauncherRemovesTheSegmentOfARankKilledDuringSetup) {
  auto r = launch(2, "setupkill");
  EXPECT_EQ(r.code, 137) << r.out;
  const auto pids = printed_pids(r.out);
  EXPECT_EQ(pids.size(), 2u) << r.out;
  EXPECT_EQ(shm_segments_of(pids), std::vector<std::string>{}) << r.out;
}

// Every survivor of a shared-memory job names the rank that died and its pid, the same one on
// each (not a neighbour that gave up after it, nor "a ring neighbour closed its connection").
TEST(DistributedFaults, SurvivorsOfASharedMemoryJobAllNameTheRankThatDied) {
  auto r = launch(4, "kill");
  EXPECT_EQ(r.code, 137) << r.out;
  const std::string lines = rank_lines(r.out);
  EXPECT_EQ(count_of(lines, "raised after"), 3) << r.out;
  EXPECT_EQ(count_of(lines, ": rank 1 (pid "), 3) << r.out;
  EXPECT_EQ(count_of(lines, "exited during all_sum"), 3) << r.out;
  // The same pid in every message.
  const size_t first = lines.find(": rank 1 (pid ");
  ASSERT_NE(first, std::string::npos);
  const std::string pid = lines.substr(first, lines.find(')', first) - first);
  EXPECT_EQ(count_of(lines, pid), 3) << r.out;
}

TEST(DistributedFaults, StoppedRankMakesSurvivorsTimeOut) {
  auto r = launch(3, "stop", "--env TESSERA_DIST_TIMEOUT=3 --grace 1");
  EXPECT_EQ(count_of(rank_lines(r.out), "raised after"), 2) << r.out;
  for (size_t p = r.out.find("raised after "); p != std::string::npos;
       p = r.out.find("raised after ", p + 1)) {
    double t = std::stod(r.out.substr(p + 13));
    EXPECT_LT(t, 5.0) << r.out;
    EXPECT_GT(t, 2.5) << r.out;
  }
  EXPECT_LT(r.seconds, 30.0);
}

TEST(DistributedFaults, DifferentSizesRaiseOnBothRanks) {
  auto r = launch(2, "mismatch", "--env TESSERA_DIST_TIMEOUT=10");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "names both"), 2) << r.out;
}

TEST(DistributedFaults, SizesThatTakeDifferentPathsRaiseOnBothRanks) {
  for (const char* shm : {"1", "0"}) {
    auto r = launch(2, "mismatch_paths",
                    std::string("--env TESSERA_DIST_TIMEOUT=10 --env TESSERA_RING_SHM=") + shm);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "names both"), 2) << "shm " << shm << ":\n" << r.out;
    EXPECT_LT(r.seconds, 8.0) << r.out;  // found, not waited out
  }
}

TEST(DistributedFaults, DifferentBroadcastRootsRaiseOnBothRanks) {
  auto r = launch(2, "bcastroot", "--env TESSERA_DIST_TIMEOUT=10");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "names both"), 2) << r.out;
}

TEST(DistributedFaults, WrongTokenConnectionIsRejectedAndJobCompletes) {
  auto r = launch(2, "badtoken");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "badtoken ok"), 2) << r.out;
}

TEST(DistributedFaults, SilentConnectionDoesNotHoldUpTheJob) {
  auto r = launch(2, "silent");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "silent ok"), 2) << r.out;
  // Serial handshakes would wait out the silent connection's 10 s deadline first.
  for (size_t p = r.out.find("silent ok after "); p != std::string::npos;
       p = r.out.find("silent ok after ", p + 1)) {
    EXPECT_LT(std::stod(r.out.substr(p + 16)), 5.0) << r.out;
  }
}

TEST(DistributedSingleton, OpsWithoutConfiguration) {
  // This test process has no rank or hostfile: init gives the singleton group.
  auto g = tessera::distributed::init();
  EXPECT_EQ(g.size(), 1);
  EXPECT_EQ(g.rank(), 0);
  tessera::array x({1.0f, 2.0f});
  EXPECT_EQ(tessera::distributed::all_sum(x).id(), x.id());  // no new node, as MLX
  EXPECT_THROW(tessera::distributed::send(x, 0), std::invalid_argument);
  EXPECT_THROW(tessera::distributed::recv({2}, tessera::float32, 0), std::invalid_argument);
  EXPECT_THROW(tessera::distributed::init(true), std::runtime_error);
  EXPECT_THROW(tessera::distributed::init(false, "nope"), std::invalid_argument);
  EXPECT_THROW(g.split(0), std::runtime_error);
  EXPECT_TRUE(tessera::distributed::is_available());
  EXPECT_TRUE(tessera::distributed::is_available("ring"));
  // MPI: available exactly where an Open MPI or MPICH library loads (checked here directly).
  bool loads = false;
  for (const char* lib : {"libmpi.so.40", "libmpi.so", "libmpich.so.12", "libmpi.so.12"}) {
    // Kept loaded: unloading Open MPI loses what its constructors allocated (LeakSanitizer).
    loads = loads || dlopen(lib, RTLD_LAZY | RTLD_LOCAL) != nullptr;
  }
  EXPECT_EQ(tessera::distributed::is_available("mpi"), loads);
}
