// `tessera config` on simulated hosts (tests/cluster/cluster.h): the management network is the
// cluster's bridge (ssh runs over it); the test wires point-to-point veth links between the
// hosts' namespaces, and the tool must find them by probing: the ring in a square with one
// diagonal, no ring when a link is missing, two parallel subnets (two addresses per host), a
// host whose ssh starts late, a probe that cannot listen, an unreachable host with and without --ignore-unreachable, and an unaddressed link that
// --auto-setup configures. Each written hostfile then runs a job (dist_worker join), and --dot
// output must parse as DOT (GraphViz's own parser).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../cluster/cluster.h"
#include "test_util.h"

using tessera::test_cluster::Cluster;
using tessera::test_cluster::Process;
using tessera::test_cluster::sh;
using tessera::test_cluster::SshHosts;
using tessera::test_util::count_of;

namespace {

const std::string kWorker = std::string(TESSERA_BIN_DIR) + "/dist_worker";

// Waits until the kernel reports interface `i` of host `h` as up (operstate follows the
// administrative state with a short delay).
void wait_up(Cluster& c, int h, const std::string& i) {
  ASSERT_EQ(sh("for k in $(seq 100); do ip -n " + c.ns(h) + " link show dev " + i +
               " | grep -q 'state UP' && exit 0; sleep 0.05; done; exit 1"), 0) << i;
}

// A veth link between hosts a and b (interfaces p<a><b> and p<b><a>), with /30 addresses
// 192.168.<net>.1 (a) and .2 (b), or none when net < 0.
void wire(Cluster& c, int a, int b, int net) {
  const std::string ia = "p" + std::to_string(a) + std::to_string(b), ib = "p" + std::to_string(b) + std::to_string(a);
  ASSERT_EQ(sh("ip link add " + ia + " netns " + c.ns(a) + " type veth peer name " + ib + " netns " + c.ns(b)), 0);
  for (auto [h, i, k] : {std::tuple{a, ia, 1}, std::tuple{b, ib, 2}}) {
    if (net >= 0) {
      ASSERT_EQ(sh("ip -n " + c.ns(h) + " addr add 192.168." + std::to_string(net) + "." + std::to_string(k) + "/30 dev " + i), 0);
    }
    ASSERT_EQ(sh("ip -n " + c.ns(h) + " link set " + i + " up"), 0);
  }
  for (auto [h, i] : {std::pair{a, ia}, std::pair{b, ib}}) wait_up(c, h, i);
}

std::string host_list(int n, const std::string& extra = "") {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + Cluster::ip(i);
  return s + extra;
}

// Runs `tessera ARGS` on host 0 (ssh wrapper on PATH), waits, returns the process.
Process& run_tessera(Cluster& c, const SshHosts& ssh, const std::string& args, double seconds = 60) {
  Process& p = c.start(0, ssh.path_env() + " TESSERA_DIST_CONNECT_TIMEOUT=20 timeout -s KILL 90 " +
                              std::string(TESSERA_CLI) + " " + args);
  p.wait(seconds);
  return p;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(f), {}));
}

// A job of every host in `hostfile`: each rank's all_sum of rank + 1 is n(n+1)/2.
void expect_job_runs(Cluster& c, const SshHosts& ssh, const std::string& hostfile, int n) {
  Process& l = run_tessera(c, ssh, "launch --hostfile " + hostfile + " -- " + kWorker + " join", 80);
  ASSERT_EQ(l.wait(1), 0) << l.output();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(count_of(l.output(), "rank " + std::to_string(r) + ": all_sum " + std::to_string(n * (n + 1) / 2)), 1)
        << l.output();
  }
}

std::string out_path(const Cluster& c, const std::string& name) { return "/tmp/" + c.prefix() + "-" + name; }

}  // namespace

// A square 0-1-2-3-0 with the diagonal 0-2: not a full mesh, one ring (0 1 2 3); each host's
// address in the hostfile is its end of the link from its left neighbour; the job runs on it;
// --dot parses, has 4 nodes and 5 edges, 4 of them bold (the ring).
TEST(ConfigTool, FindsTheRingOfASquareWithADiagonal) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(4);
  SshHosts ssh(c);
  wire(c, 0, 1, 10);
  wire(c, 1, 2, 11);
  wire(c, 2, 3, 12);
  wire(c, 3, 0, 13);
  wire(c, 0, 2, 14);
  const std::string hf = out_path(c, "ring.json");
  Process& p = run_tessera(c, ssh, "config --hosts " + host_list(4) + " --over 192.168.0.0/16 --output " + hf);
  ASSERT_EQ(p.wait(1), 0) << p.output();
  EXPECT_NE(p.output().find("4 hosts, 5 links; not a full mesh"), std::string::npos) << p.output();
  auto j = read_json(hf);
  ASSERT_EQ(j["hosts"].size(), 4u) << j.dump();
  std::vector<std::string> order, ips;
  for (const auto& h : j["hosts"]) {
    order.push_back(h["ssh"]);
    ASSERT_EQ(h["ips"].size(), 1u) << j.dump();
    ips.push_back(h["ips"][0]);
  }
  EXPECT_EQ(order, (std::vector<std::string>{Cluster::ip(0), Cluster::ip(1), Cluster::ip(2), Cluster::ip(3)}));
  // Host r listens where r-1 connects: 0 on link 3-0 (.2 side), 1 on 0-1, 2 on 1-2, 3 on 2-3.
  EXPECT_EQ(ips, (std::vector<std::string>{"192.168.13.2", "192.168.10.2", "192.168.11.2", "192.168.12.2"}));
  EXPECT_EQ(j["backend"], "ring");
  EXPECT_EQ(j["envs"], (nlohmann::json{"TESSERA_RING_DIRECT=0"}));  // 1 and 3 cannot reach each other
  expect_job_runs(c, ssh, hf, 4);

  Process& d = run_tessera(c, ssh, "config --hosts " + host_list(4) + " --over 192.168.0.0/16 --dot");
  ASSERT_EQ(d.wait(1), 0) << d.output();
  const std::string dot = out_path(c, "topo.dot");
  std::ofstream(dot) << d.output().substr(d.output().find("graph tessera"));
  if (std::system("command -v dot >/dev/null 2>&1") != 0) GTEST_SKIP() << "needs GraphViz's dot (make test installs graphviz)";
  auto plain = tessera::test_util::run_command("dot -Tplain " + dot + " 2>&1");
  EXPECT_EQ(plain.code, 0) << plain.out;
  EXPECT_EQ(count_of(plain.out, "\nnode "), 4) << plain.out;
  EXPECT_EQ(count_of(plain.out, "\nedge "), 5) << plain.out;
  EXPECT_EQ(count_of(plain.out, " bold "), 4) << plain.out;
  std::remove(dot.c_str());
  std::remove(hf.c_str());
}

// A path 0-1-2 without the link 2-0: no ring, and the error names the missing pair.
TEST(ConfigTool, AMissingLinkMeansNoRing) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(3);
  SshHosts ssh(c);
  wire(c, 0, 1, 20);
  wire(c, 1, 2, 21);
  Process& p = run_tessera(c, ssh, "config --hosts " + host_list(3) + " --over 192.168.0.0/16");
  EXPECT_EQ(p.wait(1), 1) << p.output();
  EXPECT_NE(p.output().find("no ring through all 3 hosts (pairs without a link: " + Cluster::ip(0) + "-" +
                            Cluster::ip(2) + ")"),
            std::string::npos) << p.output();
}

// Two hosts joined by two links on two subnets: both addresses go into the hostfile (two ring
// connections per host), and the job runs over them.
TEST(ConfigTool, TwoSubnetsGiveTwoAddressesPerHost) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  wire(c, 0, 1, 30);
  ASSERT_EQ(sh("ip link add q01 netns " + c.ns(0) + " type veth peer name q10 netns " + c.ns(1)), 0);
  ASSERT_EQ(sh("ip -n " + c.ns(0) + " addr add 192.168.31.1/30 dev q01 && ip -n " + c.ns(0) + " link set q01 up"), 0);
  ASSERT_EQ(sh("ip -n " + c.ns(1) + " addr add 192.168.31.2/30 dev q10 && ip -n " + c.ns(1) + " link set q10 up"), 0);
  wait_up(c, 0, "q01");
  wait_up(c, 1, "q10");
  const std::string hf = out_path(c, "two.json");
  Process& p = run_tessera(c, ssh, "config --hosts " + host_list(2) + " --over 192.168.0.0/16 --output " + hf);
  ASSERT_EQ(p.wait(1), 0) << p.output();
  auto j = read_json(hf);
  ASSERT_EQ(j["hosts"].size(), 2u);
  EXPECT_EQ(j["hosts"][0]["ips"], (nlohmann::json{"192.168.30.1", "192.168.31.1"})) << j.dump();
  EXPECT_EQ(j["hosts"][1]["ips"], (nlohmann::json{"192.168.30.2", "192.168.31.2"})) << j.dump();
  expect_job_runs(c, ssh, hf, 2);
  std::remove(hf.c_str());
}

// A host whose ssh session starts 8 s after the other's (a loaded machine; the probes used to
// give up after 6 s): every host listens before any connects, so both links are still found.
TEST(ConfigTool, AHostThatStartsLateIsStillProbed) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  wire(c, 0, 1, 32);
  const std::string slow = "/tmp/" + c.prefix() + "-slow";
  std::filesystem::create_directories(slow);
  {
    std::ofstream w(slow + "/ssh");
    w << "#!/bin/sh\ncase \"$*\" in *\" " << Cluster::ip(1) << " \"*_probe*) sleep 8;; esac\nexec " << ssh.dir()
      << "/bin/ssh \"$@\"\n";
  }
  std::filesystem::permissions(slow + "/ssh", std::filesystem::perms::owner_all);
  const std::string hf = out_path(c, "late.json");
  Process& p = c.start(0, "PATH=" + slow + ":" + ssh.dir() + "/bin:$PATH timeout -s KILL 90 " + std::string(TESSERA_CLI) +
                              " config --hosts " + host_list(2) + " --over 192.168.0.0/16 --output " + hf);
  ASSERT_EQ(p.wait(60), 0) << p.output();
  auto j = read_json(hf);
  ASSERT_EQ(j["hosts"].size(), 2u) << j.dump();
  EXPECT_EQ(j["hosts"][0]["ips"], (nlohmann::json{"192.168.32.1"})) << j.dump();
  EXPECT_EQ(j["hosts"][1]["ips"], (nlohmann::json{"192.168.32.2"})) << j.dump();
  std::filesystem::remove_all(slow);
  std::remove(hf.c_str());
}

// A probe that cannot start (its port is taken on host 1): the error names the host and why.
TEST(ConfigTool, AProbeThatCannotListenNamesTheHost) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  Process& busy = c.start(1, "python3 -c \"import socket,time; s=socket.socket(); s.bind((\\\"\\\", 47911)); "
                             "s.listen(); print(\\\"bound\\\", flush=True); time.sleep(60)\"");
  ASSERT_TRUE(busy.wait_for_output("bound", 10)) << busy.output();
  Process& p = run_tessera(c, ssh, "config --hosts " + host_list(2) + " --probe-port 47911");
  EXPECT_EQ(p.wait(1), 1) << p.output();
  EXPECT_NE(p.output().find("the probe on host '" + Cluster::ip(1) + "' failed: cannot listen on port 47911"),
            std::string::npos) << p.output();
}

// A host nobody can reach over ssh: an error naming it, or with --ignore-unreachable a hostfile
// of the others (over the bridge, a full mesh), on which a job runs.
TEST(ConfigTool, UnreachableHostWithAndWithoutIgnore) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  const std::string hosts = host_list(2, ",10.77.0.99");
  Process& p = run_tessera(c, ssh, "config --hosts " + hosts);
  EXPECT_EQ(p.wait(1), 1) << p.output();
  EXPECT_NE(p.output().find("cannot reach these hosts over ssh"), std::string::npos) << p.output();
  EXPECT_NE(p.output().find("10.77.0.99: "), std::string::npos) << p.output();
  const std::string hf = out_path(c, "kept.json");
  Process& q = run_tessera(c, ssh, "config --hosts " + hosts + " --ignore-unreachable --env FOO=1 --output " + hf);
  ASSERT_EQ(q.wait(1), 0) << q.output();
  EXPECT_NE(q.output().find("a full mesh"), std::string::npos) << q.output();
  auto j = read_json(hf);
  ASSERT_EQ(j["hosts"].size(), 2u) << j.dump();
  EXPECT_EQ(j["hosts"][1]["ips"], (nlohmann::json{Cluster::ip(1)})) << j.dump();
  EXPECT_EQ(j["envs"], (nlohmann::json{"FOO=1"}));
  expect_job_runs(c, ssh, hf, 2);
  std::remove(hf.c_str());
}

// An unaddressed point-to-point link: without --auto-setup the commands are printed (and no
// ring exists over 192.168/16); with it they run, and the job runs over the new addresses.
TEST(ConfigTool, AutoSetupAddressesAnUnconfiguredLink) {
  REQUIRE_SSH_CLUSTER();
  Cluster c(2);
  SshHosts ssh(c);
  wire(c, 0, 1, -1);
  // IPv6 link-local addresses leave "tentative" (duplicate address detection) within seconds.
  for (int h : {0, 1}) {
    ASSERT_EQ(sh("for k in $(seq 100); do ip -n " + c.ns(h) + " -6 addr show scope link | grep -q tentative || "
                 "exit 0; sleep 0.1; done; exit 1"), 0);
  }
  Process& p = run_tessera(c, ssh, "config --hosts " + host_list(2) + " --over 192.168.0.0/16");
  EXPECT_EQ(p.wait(1), 1) << p.output();
  EXPECT_NE(p.output().find(Cluster::ip(0) + ": ip addr add 192.168.0.1/30 dev p01"), std::string::npos) << p.output();
  EXPECT_NE(p.output().find(Cluster::ip(1) + ": ip addr add 192.168.0.2/30 dev p10"), std::string::npos) << p.output();
  const std::string hf = out_path(c, "auto.json");
  Process& q = run_tessera(c, ssh, "config --hosts " + host_list(2) + " --over 192.168.0.0/16 --auto-setup --output " + hf);
  ASSERT_EQ(q.wait(1), 0) << q.output();
  EXPECT_NE(q.output().find("[config] " + Cluster::ip(1) + ": ip addr add 192.168.0.2/30 dev p10"), std::string::npos)
      << q.output();
  auto j = read_json(hf);
  EXPECT_EQ(j["hosts"][0]["ips"], (nlohmann::json{"192.168.0.1"})) << j.dump();
  expect_job_runs(c, ssh, hf, 2);
  std::remove(hf.c_str());
}
