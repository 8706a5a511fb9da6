// Start-up without a hostfile (distributed/ring/rendezvous.h): ranks that Slurm, Open MPI's
// mpirun or a PMI launcher started know only their rank and the job's size; they meet at a
// coordinator. Processes are started by hand here with the environment those launchers set
// (test_cluster_launch.cpp runs the same over simulated hosts, and a real Slurm when present).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "distributed/ring/rendezvous.h"
#include "test_util.h"

using tessera::distributed::detail::expand_slurm_hostlist;
using tessera::distributed::detail::parse_registration;
using tessera::distributed::detail::parse_rendezvous_reply;
using tessera::distributed::detail::Registration;
using tessera::distributed::detail::RendezvousReply;
using tessera::distributed::detail::rendezvous_body_length;
using tessera::test_util::count_of;
using tessera::test_util::free_loopback_ports;

namespace {

using Names = std::vector<std::string>;

// `dist_worker join` as one rank under `env`, bounded in time; output with stderr.
class Proc {
 public:
  explicit Proc(const std::string& env) {
    const std::string cmd = "env -u MLX_RANK -u TESSERA_RANK -u MLX_HOSTFILE -u TESSERA_HOSTFILE "
                            "TESSERA_DIST_CONNECT_TIMEOUT=5 TESSERA_DIST_TIMEOUT=10 " + env +
                            " timeout -s KILL 60 " + TESSERA_BIN_DIR + "/dist_worker join 2>&1";
    p_ = popen(cmd.c_str(), "r");
  }
  int finish(std::string& out) {
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p_)) > 0) out.append(buf, got);
    const int status = pclose(p_);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  FILE* p_;
};

struct Job {
  std::vector<int> codes;
  std::vector<std::string> outs;
};

// Starts one process per entry of `envs` at once and waits for all.
Job run(const std::vector<std::string>& envs) {
  std::vector<std::unique_ptr<Proc>> procs;
  for (const auto& e : envs) procs.push_back(std::make_unique<Proc>(e));
  Job j;
  for (auto& p : procs) {
    j.outs.emplace_back();
    j.codes.push_back(p->finish(j.outs.back()));
  }
  return j;
}

int random_job_id() {
  std::random_device rd;
  return static_cast<int>(rd() % 1000000);
}

}  // namespace

TEST(Rendezvous, SlurmHostListsExpand) {
  EXPECT_EQ(expand_slurm_hostlist("node1"), (Names{"node1"}));
  EXPECT_EQ(expand_slurm_hostlist("node[01-03,7],gpu1"), (Names{"node01", "node02", "node03", "node7", "gpu1"}));
  EXPECT_EQ(expand_slurm_hostlist("r[1-2]-n[8-9]"), (Names{"r1-n8", "r1-n9", "r2-n8", "r2-n9"}));
  EXPECT_EQ(expand_slurm_hostlist("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  for (const char* bad : {"", "node[1-", "node[3-1]", "a,,b", "x]", "n[a-b]", "n[]"}) {
    EXPECT_THROW(expand_slurm_hostlist(bad), std::invalid_argument) << bad;
  }
}

// `srun -n 4` on one node: the coordinator is the step's first node ("localhost" here) and a
// port derived from the job and step ids; every rank gets 1 + 2 + 3 + 4.
// The messages a stranger can send the coordinator: a wrong type, a bad address or a length
// beyond the limit is a documented error (the coordinator then ignores that connection), never
// another exception that would end the job.
TEST(Rendezvous, MessagesParseOrSayWhatIsWrong) {
  const Registration r = parse_registration(
      R"({"tessera_rendezvous": 1, "rank": 2, "size": 4, "address": "10.0.0.3:4000",
          "host": "n3", "nonce": "ab"})");
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.size, 4);
  EXPECT_EQ(r.address, "10.0.0.3:4000");
  EXPECT_EQ(r.host, "n3");
  EXPECT_EQ(r.nonce, "ab");
  const std::string ok_rest = R"("size": 4, "address": "10.0.0.3:4000", "host": "n3", "nonce": "ab"})";
  EXPECT_THROW(parse_registration(R"({"tessera_rendezvous": 1, "rank": "2", )" + ok_rest),
               std::invalid_argument);
  EXPECT_THROW(parse_registration(R"({"tessera_rendezvous": 2, "rank": 2, )" + ok_rest),
               std::invalid_argument);
  EXPECT_THROW(parse_registration(R"({"tessera_rendezvous": 1, "rank": 2, "size": 4,
      "address": "nowhere", "host": "n3", "nonce": "ab"})"), std::invalid_argument);
  EXPECT_THROW(parse_registration("[1, 2]"), std::invalid_argument);
  EXPECT_THROW(parse_registration("{not json"), std::invalid_argument);
  const unsigned char big[4] = {0, 0x10, 0, 1};  // 1 MiB + 1
  EXPECT_THROW(rendezvous_body_length(big, 1 << 20), std::invalid_argument);
  const unsigned char small[4] = {0, 0, 1, 2};
  EXPECT_EQ(rendezvous_body_length(small, 1 << 20), 258u);

  const RendezvousReply a = parse_rendezvous_reply(
      R"({"ok": true, "table": [["10.0.0.1:1"], ["10.0.0.2:2"]]})", "the table");
  ASSERT_TRUE(a.ok);
  ASSERT_EQ(a.table.size(), 2);
  EXPECT_EQ(a.table.ranks[1][0].port, 2);
  const RendezvousReply b = parse_rendezvous_reply(R"({"ok": false, "error": "why"})", "t");
  EXPECT_FALSE(b.ok);
  EXPECT_EQ(b.error, "why");
  EXPECT_THROW(parse_rendezvous_reply(R"({"ok": "yes"})", "t"), std::invalid_argument);
  EXPECT_THROW(parse_rendezvous_reply(R"({"ok": true, "table": [["x"]]})", "t"), std::invalid_argument);
}

TEST(Rendezvous, SlurmStepWithoutAHostfile) {
  const std::string common = "SLURM_NTASKS=4 SLURM_STEP_NODELIST=localhost SLURM_JOB_ID=" +
                             std::to_string(random_job_id()) + " SLURM_STEP_ID=0 TESSERA_JOB_TOKEN=t0k";
  std::vector<std::string> envs;
  for (int r = 0; r < 4; ++r) envs.push_back(common + " SLURM_PROCID=" + std::to_string(r) + " SLURM_LOCALID=" + std::to_string(r));
  Job j = run(envs);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(j.codes[r], 0) << j.outs[r];
    EXPECT_EQ(count_of(j.outs[r], "rank " + std::to_string(r) + ": all_sum 10"), 1) << j.outs[r];
  }
  // Slurm's batch shell looks like rank 0 of 4 but has no step: not a rank waiting for three
  // others (init(strict) says to use srun; a plain init() is a group of one).
  j = run({"SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_JOB_ID=5 SLURM_JOB_NODELIST=localhost"});
  EXPECT_EQ(count_of(j.outs[0], "Slurm's batch shell"), 1) << j.outs[0];
}

// Open MPI's and PMI's variables with TESSERA_COORDINATOR; without it, a clear error on every
// rank (never a quiet group of one).
TEST(Rendezvous, MpirunAndPmiNeedACoordinator) {
  const std::string coord = "TESSERA_COORDINATOR=127.0.0.1:" + std::to_string(free_loopback_ports(1)[0]);
  Job j = run({coord + " OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=3",
               coord + " OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=3",
               coord + " OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=3"});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(count_of(j.outs[r], ": all_sum 6"), 1) << j.outs[r];
  const std::string coord2 = "TESSERA_COORDINATOR=localhost:" + std::to_string(free_loopback_ports(1)[0]);
  j = run({coord2 + " PMI_RANK=1 PMI_SIZE=2", coord2 + " PMI_RANK=0 PMI_SIZE=2"});
  for (int r = 0; r < 2; ++r) EXPECT_EQ(count_of(j.outs[r], ": all_sum 3"), 1) << j.outs[r];
  j = run({"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2"});
  EXPECT_EQ(j.codes[0], 1);
  EXPECT_EQ(count_of(j.outs[0], "started by Open MPI"), 1) << j.outs[0];
  EXPECT_EQ(count_of(j.outs[0], "set TESSERA_COORDINATOR=host:port"), 1) << j.outs[0];
  j = run({"PMI_RANK=2 PMI_SIZE=2"});
  EXPECT_EQ(count_of(j.outs[0], "PMI_RANK=2 is out of range for PMI_SIZE=2"), 1) << j.outs[0];
}

// Rank 0 names the ranks that never registered; a process with another job's token is not let
// in (and does not end the job: rank 0 reports it missing); two processes claiming one rank,
// or a different job size, are named.
TEST(Rendezvous, MissingWrongAndDuplicateRanksAreNamed) {
  auto coord = [] { return "TESSERA_COORDINATOR=127.0.0.1:" + std::to_string(free_loopback_ports(1)[0]); };
  std::string c = coord();
  Job j = run({c + " PMI_RANK=0 PMI_SIZE=3", c + " PMI_RANK=1 PMI_SIZE=3"});
  EXPECT_EQ(j.codes[0], 1);
  EXPECT_EQ(count_of(j.outs[0], "ranks 2 of 3 did not register within 5 s"), 1) << j.outs[0];
  EXPECT_EQ(j.codes[1], 1);
  EXPECT_EQ(count_of(j.outs[1], "ranks 2 of 3 did not register"), 1) << j.outs[1];  // told by rank 0
  c = coord();
  j = run({c + " TESSERA_JOB_TOKEN=right PMI_RANK=0 PMI_SIZE=2", c + " TESSERA_JOB_TOKEN=wrong PMI_RANK=1 PMI_SIZE=2"});
  EXPECT_EQ(j.codes[0], 1);
  EXPECT_EQ(count_of(j.outs[0], "ranks 1 of 2 did not register"), 1) << j.outs[0];
  EXPECT_EQ(j.codes[1], 1) << j.outs[1];
  c = coord();
  j = run({c + " PMI_RANK=0 PMI_SIZE=3", c + " PMI_RANK=1 PMI_SIZE=3", c + " PMI_RANK=1 PMI_SIZE=3"});
  EXPECT_EQ(count_of(j.outs[0], "registered as rank 1"), 1) << j.outs[0];
  for (int r = 0; r < 3; ++r) EXPECT_EQ(j.codes[r], 1) << j.outs[r];
  c = coord();
  j = run({c + " PMI_RANK=0 PMI_SIZE=2", c + " PMI_RANK=1 PMI_SIZE=3"});
  EXPECT_EQ(count_of(j.outs[0], "registered as rank 1 of 3 ranks, but this job has 2"), 1) << j.outs[0];
}

// A real Open MPI `mpirun -n 3` of a ring job: no hostfile, TESSERA_COORDINATOR passed with -x.
TEST(Rendezvous, RealMpirunWithACoordinator) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "needs Open MPI's mpirun (make test installs it)";
  const std::string port = std::to_string(free_loopback_ports(1)[0]);
  const std::string cmd = "env -u MLX_RANK -u TESSERA_RANK -u MLX_HOSTFILE -u TESSERA_HOSTFILE "
                          "TESSERA_COORDINATOR=127.0.0.1:" + port + " TESSERA_JOB_TOKEN=t0k "
                          "TESSERA_DIST_CONNECT_TIMEOUT=20 timeout -s KILL 60 mpirun --allow-run-as-root "
                          "--oversubscribe --mca btl self,tcp --mca oob_tcp_if_include lo -n 3 "
                          "-x TESSERA_COORDINATOR -x TESSERA_JOB_TOKEN -x TESSERA_DIST_CONNECT_TIMEOUT " +
                          std::string(TESSERA_BIN_DIR) + "/dist_worker join 2>&1";
  auto r = tessera::test_util::run_command(cmd);
  EXPECT_EQ(r.code, 0) << r.out;
  for (int k = 0; k < 3; ++k) EXPECT_EQ(count_of(r.out, "rank " + std::to_string(k) + ": all_sum 6"), 1) << r.out;
}
