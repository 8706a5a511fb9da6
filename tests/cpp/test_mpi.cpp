// The MPI backend (distributed/mpi/mpi_group.h) under real launchers: Open MPI's mpirun and
// MPICH's Hydra (mpirun.mpich) start `dist_worker`, whose modes check every collective for
// every dtype against references computed from each rank's known input. Also: split, the
// mismatch check, a killed rank, a stalled peer (the watchdog), a missing libmpi, and
// `tessera launch --backend mpi` on this host and across simulated hosts.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "../cluster/cluster.h"
#include "distributed/mpi/mpi_group.h"
#include "tessera/distributed.h"
#include "test_util.h"

using tessera::test_util::count_of;
using tessera::test_util::run_command;

namespace {

const std::string kWorker = std::string(TESSERA_BIN_DIR) + "/dist_worker";

bool have(const char* program) {
  return std::system(("command -v " + std::string(program) + " >/dev/null 2>&1").c_str()) == 0;
}

// Open MPI refuses root unless told; these variables are its documented way. Under the
// sanitizers (make test-asan) the ranks keep every check but leak detection: Open MPI and MPICH
// leave their own allocations at MPI_Finalize, in frames LeakSanitizer cannot unwind.
const std::string kNoMpiLeakReports = "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 ";
const std::string kOpenMpiEnv = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                                "OMPI_MCA_rmaps_base_oversubscribe=1 " + kNoMpiLeakReports;

// Runs `dist_worker ARGS` as `n` ranks of Open MPI's mpirun (bounded in time), with `env`.
tessera::test_util::CommandResult open_mpi(int n, const std::string& args, const std::string& env = "") {
  return run_command("env -u TESSERA_RANK -u MLX_RANK -u TESSERA_HOSTFILE -u MLX_HOSTFILE " + kOpenMpiEnv + env +
                     " timeout -s KILL 120 mpirun -n " + std::to_string(n) + " " + kWorker + " " + args + " 2>&1");
}

tessera::test_util::CommandResult mpich(int n, const std::string& args, const std::string& env = "") {
  return run_command("env -u TESSERA_RANK -u MLX_RANK -u TESSERA_HOSTFILE -u MLX_HOSTFILE " + kNoMpiLeakReports + env +
                     " timeout -s KILL 120 mpirun.mpich -n " + std::to_string(n) + " " + kWorker + " " +
                     args + " 2>&1");
}

#define REQUIRE_OPEN_MPI() \
  if (!have("mpirun")) GTEST_SKIP() << "needs Open MPI's mpirun (make test installs openmpi-bin)"
#define REQUIRE_MPICH() \
  if (!have("mpirun.mpich")) GTEST_SKIP() << "needs MPICH's mpirun.mpich (make test installs mpich)"

void expect_every_rank(const tessera::test_util::CommandResult& r, int n, const std::string& says) {
  EXPECT_EQ(r.code, 0) << r.out;
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(count_of(r.out, "rank " + std::to_string(k) + ": " + says), 1) << r.out;
  }
}

}  // namespace

// Outside mpirun: the library loads (is_available), but init gives the singleton group, and
// a strict init says how to start the job, without running MPI_Init at all.
TEST(Mpi, OutsideMpirunIsASingletonAndStrictSaysWhy) {
  REQUIRE_OPEN_MPI();
  namespace dist = tessera::distributed;
  std::string why;
  EXPECT_TRUE(dist::detail::mpi_available(&why)) << why;
  EXPECT_TRUE(dist::is_available("mpi"));
  dist::clear_backends();
  EXPECT_EQ(dist::init(false, "mpi").size(), 1);
  dist::clear_backends();
  try {
    dist::init(true, "mpi");
    ADD_FAILURE() << "strict init('mpi') outside mpirun did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not started by mpirun"), std::string::npos) << e.what();
  }
  dist::clear_backends();
}

// Every collective x every dtype x lengths 0 .. 2^20+3 under Open MPI, 2 to 5 ranks; then 300
// random collectives through the default init(), which picks MPI under mpirun (the ring has no
// hostfile or coordinator there).
TEST(Mpi, CollectivesEveryDtypeOpenMpi) {
  REQUIRE_OPEN_MPI();
  for (int n : {2, 3, 4, 5}) expect_every_rank(open_mpi(n, "--backend mpi collectives"), n, "59 dtype/length cases, 0 failures");
  expect_every_rank(open_mpi(2, "mixed 300"), 2, "mixed done (300 collectives), 0 failures");
}

TEST(Mpi, CollectivesEveryDtypeMpich) {
  REQUIRE_MPICH();
  expect_every_rank(mpich(3, "--backend mpi collectives"), 3, "59 dtype/length cases, 0 failures");
}

// split(color = rank % 2, key reversing the order) through MPI_Comm_split, in both MPIs.
TEST(Mpi, SplitOpenMpiAndMpich) {
  REQUIRE_OPEN_MPI();
  expect_every_rank(open_mpi(5, "split"), 5, "split ok");
  if (have("mpirun.mpich")) expect_every_rank(mpich(3, "split"), 3, "split ok");
}

// clear_backends() and init again (three times): no second MPI_Init, a working group each time.
TEST(Mpi, ReinitAfterClearBackends) {
  REQUIRE_OPEN_MPI();
  expect_every_rank(open_mpi(3, "--backend mpi reinit"), 3, "reinit ok, 0 failures");
}

// Different sizes (on both paths of the check), or different broadcast roots: every rank's
// error names every rank's call.
TEST(Mpi, MismatchedCallsNameEveryRank) {
  REQUIRE_OPEN_MPI();
  auto r = open_mpi(2, "mismatch");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "mismatch error (names both)"), 2) << r.out;
  EXPECT_EQ(count_of(r.out, "rank 0: all_sum of 1000 float32; rank 1: all_sum of 1200 float32"), 2) << r.out;
  // 3 floats travel inside the check's own MPI call, 1000 do not: still one matched call each.
  r = open_mpi(2, "mismatch_paths");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "rank 0: all_sum of 3 float32; rank 1: all_sum of 1000 float32"), 2) << r.out;
  r = open_mpi(2, "bcastroot");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "root mismatch error (names both)"), 2) << r.out;
}

// kill -9 of a rank in a loop of all_sums: mpirun fails the job and says which rank and why.
TEST(Mpi, KilledRankFailsTheJob) {
  REQUIRE_OPEN_MPI();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = open_mpi(3, "--backend mpi kill");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rank 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("signal 9"), std::string::npos) << r.out;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60);
}

// A peer that never joins: after TESSERA_DIST_TIMEOUT the waiting rank names the operation and
// exits, and mpirun stops the job (MPI calls cannot be interrupted; never a silent hang).
TEST(Mpi, StalledPeerEndsTheJobAfterTheTimeout) {
  REQUIRE_OPEN_MPI();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = open_mpi(2, "stall", "TESSERA_DIST_TIMEOUT=1");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "[mpi] rank 0: all_sum of 1 float32 has not finished after 1 s"), 1) << r.out;
  EXPECT_EQ(count_of(r.out, "returned without rank 1"), 0) << r.out;
  EXPECT_LT(took, 30) << r.out;
}

// libmpi missing under mpirun: a clear error naming what was tried, from init('mpi') and from
// the default init() alike (never a quiet singleton in a job of 2).
TEST(Mpi, MissingLibraryIsAClearError) {
  REQUIRE_OPEN_MPI();
  const std::string env = "TESSERA_MPI_LIBNAME=/nonexistent/libmpi.so";
  for (const char* args : {"--backend mpi join", "join"}) {
    auto r = open_mpi(2, args, env);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "no MPI library could be loaded; tried:"), 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("/nonexistent/libmpi.so: "), std::string::npos) << r.out;
  }
  auto r = run_command(env + " " + kWorker + " mpi_available 2>&1");
  EXPECT_NE(r.out.find("mpi available: no (is_available: 0); no MPI library could be loaded"), std::string::npos) << r.out;
}

// tessera launch --backend mpi: mpirun with -H host:slots, --env and the hostfile's envs passed,
// --mpi-arg appended; its exit status is the job's (0, or a failure's).
TEST(Mpi, LaunchBackendMpi) {
  REQUIRE_OPEN_MPI();
  const std::string base = "env -u TESSERA_RANK -u MLX_RANK " + kOpenMpiEnv + " timeout -s KILL 120 " +
                           TESSERA_CLI + " launch --backend mpi ";
  auto r = run_command(base + "-n 3 --verbose --mpi-arg --bind-to --mpi-arg none -- " + kWorker + " collectives 2>&1");
  expect_every_rank(r, 3, "59 dtype/length cases, 0 failures");
  EXPECT_NE(r.out.find("'-H' '127.0.0.1:3'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'--bind-to' 'none' '--'"), std::string::npos) << r.out;
  r = run_command(base + "-n 2 -- " + kWorker + " kill 2>&1");
  EXPECT_EQ(r.code, 137) << r.out;  // mpirun's: the killed rank's signal
  if (have("mpirun.mpich")) {
    r = run_command("env -u TESSERA_RANK " + kNoMpiLeakReports + "TESSERA_MPIRUN=mpirun.mpich timeout -s KILL 120 " +
                    std::string(TESSERA_CLI) +
                    " launch --backend mpi -n 2 -- " + kWorker + " split 2>&1");
    expect_every_rank(r, 2, "split ok");
  }
  r = run_command("TESSERA_MPIRUN=/nonexistent/mpirun " + std::string(TESSERA_CLI) + " launch --backend mpi -n 2 -- " +
                  kWorker + " split 2>&1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--backend mpi needs mpirun"), std::string::npos) << r.out;
}

// Across simulated hosts: mpirun (started by tessera launch on host 0) reaches host 1 over ssh
// and runs every collective across the two.
TEST(Mpi, LaunchBackendMpiAcrossTwoHosts) {
  REQUIRE_OPEN_MPI();
  using tessera::test_cluster::Cluster;
  using tessera::test_cluster::SshHosts;
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  auto& l = c.start(0, ssh.path_env() + " " + kOpenMpiEnv + " timeout -s KILL 120 " + TESSERA_CLI +
                           " launch --backend mpi --hosts " + Cluster::ip(0) + "," + Cluster::ip(1) +
                           " -n 2 --env OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 --env ASAN_OPTIONS=detect_leaks=0 --mpi-arg --mca "
                           "--mpi-arg oob_tcp_if_include --mpi-arg 10.77.0.0/24 -- " + kWorker + " collectives");
  ASSERT_EQ(l.wait(110), 0) << l.output();
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(count_of(l.output(), "rank " + std::to_string(k) + ": 59 dtype/length cases, 0 failures"), 1) << l.output();
  }
}
