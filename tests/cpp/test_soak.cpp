// Soak runs a week-long job depends on (ctest label `long`, `make test-long` only): many
// collectives of random kinds and sizes with exact results, a long data-parallel training run
// whose memory stays flat, and init/teardown cycles that leak nothing. Real processes through
// `tessera launch`, 127.0.0.1 only, each bounded in time.
#include <gtest/gtest.h>
#include <string>

#include "test_util.h"

using tessera::test_util::count_of;

namespace {

tessera::test_util::CommandResult launch(const std::string& args, int limit_s) {
  return tessera::test_util::run_command("timeout -s KILL " + std::to_string(limit_s) + " " +
                                         TESSERA_CLI + " launch " + args + " 2>&1");
}

const std::string kWorker = std::string(TESSERA_BIN_DIR) + "/dist_worker";

}  // namespace

TEST(Soak, HundredThousandMixedCollectivesOnFourRanksSharedMemory) {
  auto r = launch("-n 4 -- " + kWorker + " mixed 100000", 1800);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "mixed done (100000 collectives), 0 failures"), 4) << r.out;
}

TEST(Soak, HundredThousandMixedCollectivesOnFourRanksTcp) {
  auto r = launch("-n 4 --env TESSERA_RING_SHM=0 -- " + kWorker + " mixed 100000", 1800);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "mixed done (100000 collectives), 0 failures"), 4) << r.out;
}

// Tolerance (checked by the example itself): from step 1000 to step 10000, get_active_memory()
// grows by at most 1 MiB and the resident set by at most 16 MiB on every rank.
TEST(Soak, TenThousandDataParallelStepsKeepMemoryFlat) {
  auto r = launch("-n 4 -- " + std::string(TESSERA_BIN_DIR) + "/data_parallel --steps 10000", 1800);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "10000 steps; memory from step 1000 to the end"), 4) << r.out;
  EXPECT_EQ(count_of(r.out, "(flat)"), 4) << r.out;
  EXPECT_EQ(count_of(r.out, "weights equal every rank's"), 4) << r.out;
}

// Descriptors (/proc/self/fd), threads (/proc/self/task) and shared-memory segments
// (/dev/shm/tessera-*) after 10 cycles and after 10000 must be the same.
TEST(Soak, TenThousandInitTeardownCyclesLeakNothing) {
  auto r = launch("-n 2 -- " + kWorker + " cycles 10000", 1800);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "10000 init/teardown cycles"), 2) << r.out;
}
