// init() with ranks started by hand (MLX_HOSTFILE + MLX_RANK, no launcher): every way the job can
// fail to form raises an exception whose text names the cause, on every rank, and the process
// exits by itself with its own status (never std::terminate's abort). 127.0.0.1 only.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using tessera::test_util::free_loopback_ports;

// Writes an MLX-style hostfile (one list of "ip:port" per rank) and returns its path.
std::string write_hostfile(const std::string& name, const std::vector<int>& ports) {
  std::string path = std::string(TESSERA_BIN_DIR) + "/" + name + "_" + std::to_string(getpid()) +
                     ".json";
  std::ofstream f(path);
  f << "[";
  for (size_t i = 0; i < ports.size(); ++i) {
    f << (i ? ", " : "") << "[\"127.0.0.1:" << ports[i] << "\"]";
  }
  f << "]\n";
  return path;
}

// One rank started by hand: `dist_worker join` under the given environment, bounded in time.
class Rank {
 public:
  Rank(int rank, const std::string& hostfile, const std::string& env) {
    std::string cmd = "env MLX_HOSTFILE=" + hostfile + " MLX_RANK=" + std::to_string(rank) +
                      " TESSERA_DIST_CONNECT_TIMEOUT=3 TESSERA_DIST_TIMEOUT=10 " + env +
                      " timeout -s KILL 60 " + TESSERA_BIN_DIR + "/dist_worker join 2>&1";
    p_ = popen(cmd.c_str(), "r");
  }
  // Waits for the exit; returns the exit code (-1 for a signal) and fills `out`.
  int finish(std::string& out) {
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p_)) > 0) out.append(buf, got);
    int status = pclose(p_);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  FILE* p_;
};

struct Outcome {
  int code[2];
  std::string out[2];
};

Outcome run_pair(const std::string& hf0, const std::string& hf1, const std::string& env0,
                 const std::string& env1) {
  Rank r0(0, hf0, env0), r1(1, hf1, env1);
  Outcome o;
  o.code[0] = r0.finish(o.out[0]);
  o.code[1] = r1.finish(o.out[1]);
  return o;
}

bool has(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// Both ranks raised (exit 1 from dist_worker's handler, not 134 from an abort) with `needle`.
void expect_both_raise(const Outcome& o, const std::string& needle) {
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(o.code[r], 1) << "rank " << r << ":\n" << o.out[r];
    EXPECT_TRUE(has(o.out[r], "unexpected error")) << "rank " << r << ":\n" << o.out[r];
    EXPECT_TRUE(has(o.out[r], needle)) << "rank " << r << " should mention '" << needle
                                       << "':\n" << o.out[r];
    EXPECT_FALSE(has(o.out[r], "terminate called")) << o.out[r];
  }
}

}  // namespace

TEST(InitErrors, RanksStartedByHandJoin) {
  auto hf = write_hostfile("join_ok", free_loopback_ports(2));
  auto o = run_pair(hf, hf, "", "");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(o.code[r], 0) << o.out[r];
    EXPECT_TRUE(has(o.out[r], "all_sum 3")) << o.out[r];
  }
  std::remove(hf.c_str());
}

TEST(InitErrors, DifferentJobTokensRaiseNamingTheToken) {
  auto hf = write_hostfile("token", free_loopback_ports(2));
  auto o = run_pair(hf, hf, "TESSERA_JOB_TOKEN=first-secret", "TESSERA_JOB_TOKEN=second-secret");
  expect_both_raise(o, "TESSERA_JOB_TOKEN");
  std::remove(hf.c_str());
}

TEST(InitErrors, TokenOnOneRankOnlyRaisesNamingTheToken) {
  auto hf = write_hostfile("token1", free_loopback_ports(2));
  auto o = run_pair(hf, hf, "TESSERA_JOB_TOKEN=only-here", "");
  expect_both_raise(o, "TESSERA_JOB_TOKEN");
  std::remove(hf.c_str());
}

TEST(InitErrors, DifferentHostfilesRaiseNamingTheHostfile) {
  auto ports = free_loopback_ports(3);
  auto two = write_hostfile("hf2", {ports[0], ports[1]});
  auto three = write_hostfile("hf3", ports);
  auto o = run_pair(three, two, "", "");
  expect_both_raise(o, "hostfile");
  std::remove(two.c_str());
  std::remove(three.c_str());
}

TEST(InitErrors, SharedMemorySettingThatDiffersRaisesNamingIt) {
  auto hf = write_hostfile("shm", free_loopback_ports(2));
  auto o = run_pair(hf, hf, "TESSERA_RING_SHM=1", "TESSERA_RING_SHM=0");
  expect_both_raise(o, "TESSERA_RING_SHM");
  std::remove(hf.c_str());
}

// A stray client (a port scanner, a browser) talks HTTP to rank 1's port, and rank 0 never
// starts: rank 1 raises the real error (its peer did not connect) instead of aborting while
// the stray connection's handshake thread is still around.
TEST(InitErrors, StrayClientThenTimeoutRaisesInsteadOfAborting) {
  auto ports = free_loopback_ports(2);
  auto hf = write_hostfile("stray", ports);
  Rank r1(1, hf, "");
  bool sent = false;
  for (int attempt = 0; attempt < 200 && !sent; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(ports[1]));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      const char req[] = "GET / HTTP/1.0\r\n\r\n";
      sent = ::send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) > 0;
    }
    ::close(fd);
    if (!sent) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(sent);
  std::string out;
  int code = r1.finish(out);
  EXPECT_EQ(code, 1) << out;
  EXPECT_TRUE(has(out, "not a Tessera ring handshake")) << out;
  EXPECT_TRUE(has(out, "could not connect to rank 0")) << out;
  EXPECT_FALSE(has(out, "terminate called")) << out;
  std::remove(hf.c_str());
}

namespace {

// dist_worker MODE alone, with only `env` set among the distributed variables.
tessera::test_util::CommandResult run_alone(const std::string& mode, const std::string& env) {
  return tessera::test_util::run_command(
      "env -u MLX_HOSTFILE -u MLX_RANK -u TESSERA_HOSTFILE -u TESSERA_RANK " + env +
      " timeout -s KILL 60 " + TESSERA_BIN_DIR + "/dist_worker " + mode + " 2>&1");
}

}  // namespace

// Half a configuration is a mistake, not a request for a singleton group: even init() without
// strict raises, naming the variable the user set and the one missing.
TEST(InitErrors, HalfAConfigurationRaisesEvenWithoutStrict) {
  auto hf = write_hostfile("half", free_loopback_ports(2));
  auto a = run_alone("lenient", "MLX_HOSTFILE=" + hf);
  EXPECT_EQ(a.code, 1) << a.out;
  EXPECT_TRUE(has(a.out, "MLX_HOSTFILE=" + hf + " is set but no rank is")) << a.out;
  a = run_alone("lenient", "MLX_RANK=1");
  EXPECT_EQ(a.code, 1) << a.out;
  EXPECT_TRUE(has(a.out, "MLX_RANK=1 is set but no hostfile is")) << a.out;
  a = run_alone("lenient", "MLX_HOSTFILE= MLX_RANK=0");
  EXPECT_EQ(a.code, 1) << a.out;
  EXPECT_TRUE(has(a.out, "MLX_HOSTFILE is set but empty")) << a.out;
  // Nothing configured: a singleton group without strict, as MLX.
  a = run_alone("lenient", "");
  EXPECT_EQ(a.code, 0) << a.out;
  EXPECT_TRUE(has(a.out, "lenient init: size 1")) << a.out;
  std::remove(hf.c_str());
}

TEST(InitErrors, StrictInitWithNothingConfiguredSaysWhatItTried) {
  auto a = run_alone("join", "");
  EXPECT_EQ(a.code, 1) << a.out;
  for (const char* needle : {"Couldn't initialize any backend", "nccl", "TESSERA_HOSTFILE",
                             "MLX_RANK", "mpi", "tessera launch"}) {
    EXPECT_TRUE(has(a.out, needle)) << needle << " in:\n" << a.out;
  }
}
