// The ring hostfile parser: MLX's format, IPv4/IPv6, and every broken case with its message.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "distributed/hostfile.h"

using namespace tessera::distributed::detail;

namespace {

// Expects `parse(json)` to throw std::invalid_argument whose message contains every fragment.
template <typename Parse>
void expect_parse_error(Parse parse, const std::string& json, std::initializer_list<const char*> fragments) {
  try {
    parse(json);
    ADD_FAILURE() << "no error for " << json;
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    for (const char* f : fragments) {
      EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg << "\nmissing: " << f;
    }
  }
}

void expect_error(const std::string& json, std::initializer_list<const char*> fragments) {
  expect_parse_error([](const std::string& j) { return parse_hostfile(j, "test.json"); }, json, fragments);
}

void expect_job_error(const std::string& json, std::initializer_list<const char*> fragments) {
  expect_parse_error([](const std::string& j) { return parse_job_hostfile(j, "hosts.json"); }, json, fragments);
}

}  // namespace

TEST(Hostfile, ParsesMlxFormatWithSeveralConnections) {
  auto hf = parse_hostfile(
      R"([["10.0.0.1:5000","10.0.0.2:5000"],["10.0.1.1:5001","10.0.1.2:5001"],)"
      R"(["10.0.2.1:6000","10.0.2.2:6000"]])");
  ASSERT_EQ(hf.size(), 3);
  EXPECT_EQ(hf.connections(), 2);
  EXPECT_EQ(hf.ranks[1][1].host, "10.0.1.2");
  EXPECT_EQ(hf.ranks[1][1].port, 5001);
  EXPECT_FALSE(hf.ranks[1][1].ipv6);
  EXPECT_EQ(hf.ranks[2][0].text(), "10.0.2.1:6000");
}

TEST(Hostfile, ParsesIpv6AndHostNames) {
  auto hf = parse_hostfile(R"([["[::1]:5000"],["[fe80::1]:65535"],["node-3.cluster:1"]])");
  EXPECT_TRUE(hf.ranks[0][0].ipv6);
  EXPECT_EQ(hf.ranks[0][0].host, "::1");
  EXPECT_EQ(hf.ranks[0][0].text(), "[::1]:5000");
  EXPECT_EQ(hf.ranks[1][0].port, 65535);
  EXPECT_EQ(hf.ranks[2][0].host, "node-3.cluster");
  EXPECT_EQ(hf.ranks[2][0].port, 1);
}

TEST(Hostfile, RoundTripsThroughJson) {
  auto hf = parse_hostfile(R"([["127.0.0.1:5000"],["[::1]:5001"]])");
  auto again = parse_hostfile(hf.to_json());
  EXPECT_EQ(again.ranks[1][0].text(), "[::1]:5001");
  EXPECT_EQ(again.size(), 2);
}

TEST(Hostfile, InvalidJsonNamesTheFile) {
  expect_error("[[\"127.0.0.1:5000\"", {"test.json", "not valid JSON"});
}

TEST(Hostfile, TopLevelMustBeANonEmptyList) {
  expect_error(R"({"a": 1})", {"test.json", "top level is a JSON object", "one entry per rank"});
  expect_error("[]", {"list of ranks is empty"});
}

TEST(Hostfile, RankEntryMustBeAList) {
  expect_error(R"([["127.0.0.1:5000"], "127.0.0.1:5001"])",
               {"rank 1", "expected a list", "JSON string", "127.0.0.1:5001"});
  expect_error(R"([["127.0.0.1:5000"], []])", {"rank 1", "list of addresses is empty"});
}

TEST(Hostfile, AddressMustBeAString) {
  expect_error(R"([["127.0.0.1:5000"], ["127.0.0.1:5001", 5002]])",
               {"rank 1, entry 1", "expected an \"ip:port\" string", "number", "5002"});
}

TEST(Hostfile, MissingPort) {
  expect_error(R"([["127.0.0.1"]])", {"rank 0, entry 0", "\"127.0.0.1\"", "expected \"ip:port\""});
  expect_error(R"([["127.0.0.1:"]])", {"rank 0, entry 0", "port ''", "1-65535"});
}

TEST(Hostfile, PortOutOfRangeOrNotANumber) {
  expect_error(R"([["127.0.0.1:5000"], ["127.0.0.1:70000"]])",
               {"rank 1, entry 0", "port 70000 is out of range 1-65535"});
  expect_error(R"([["127.0.0.1:0"]])", {"rank 0, entry 0", "port 0 is out of range"});
  expect_error(R"([["127.0.0.1:50a0"]])", {"rank 0, entry 0", "port '50a0'"});
  expect_error(R"([["127.0.0.1:-5"]])", {"rank 0, entry 0", "port '-5'"});
}

TEST(Hostfile, BadAddresses) {
  expect_error(R"([["300.1.2.3:5000"]])", {"rank 0, entry 0", "'300.1.2.3' is not a valid IPv4"});
  expect_error(R"([[":5000"]])", {"rank 0, entry 0", "address before ':' is empty"});
  expect_error(R"([["::1:5000"]])", {"rank 0, entry 0", "IPv6 address needs brackets"});
  expect_error(R"([["[::1:5000"]])", {"rank 0, entry 0", "missing ']'"});
  expect_error(R"([["[::1]5000"]])", {"rank 0, entry 0", "missing ':port'"});
  expect_error(R"([["[::g]:5000"]])", {"rank 0, entry 0", "'::g' is not a valid IPv6"});
  expect_error(R"([["bad host:5000"]])", {"rank 0, entry 0", "not a valid IPv4 address or host"});
}

TEST(Hostfile, UnequalConnectionCounts) {
  expect_error(R"([["127.0.0.1:5000","127.0.0.1:5001"],["127.0.0.1:5002"]])",
               {"rank 1 lists 1 addresses but rank 0 lists 2", "same number"});
}

TEST(Hostfile, DuplicateAddresses) {
  expect_error(R"([["127.0.0.1:5000"],["127.0.0.1:5001"],["127.0.0.1:5000"]])",
               {"rank 2, entry 0", "duplicate of rank 0, entry 0"});
  expect_error(R"([["[::1]:5000","[::1]:5000"]])", {"rank 0, entry 1", "duplicate of rank 0, entry 0"});
}

TEST(Hostfile, LoadNamesUnreadablePath) {
  try {
    load_hostfile("/nonexistent/dir/hosts.json");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/hosts.json"), std::string::npos);
  }
  std::string path = ::testing::TempDir() + "tessera_hostfile_test.json";
  {
    std::ofstream f(path);
    f << R"([["127.0.0.1:5000"],["127.0.0.1:99999"]])";
  }
  try {
    load_hostfile(path);
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 1, entry 0"), std::string::npos) << msg;
  }
  std::remove(path.c_str());
}

// The launcher's hostfile (MLX's mlx.launch format) in both forms.
TEST(JobHostfile, ParsesTheListAndTheObjectForm) {
  auto a = parse_job_hostfile(R"([{"ssh": "node1", "ips": ["10.0.0.1", "fe80::1"]}, {"ssh": "me@node2"}])");
  ASSERT_EQ(a.hosts.size(), 2u);
  EXPECT_EQ(a.backend, "");
  EXPECT_EQ(a.hosts[0].ssh, "node1");
  EXPECT_EQ(a.hosts[0].ips, (std::vector<std::string>{"10.0.0.1", "fe80::1"}));
  EXPECT_EQ(a.hosts[1].ssh, "me@node2");
  EXPECT_TRUE(a.hosts[1].ips.empty());
  auto b = parse_job_hostfile(R"({"backend": "jaccl", "envs": ["X=1", "Y=a=b"], "hosts": [
      {"ssh": "h1", "ips": ["10.0.0.1"], "rdma": [null, "rdma_en2", ["a", "b"]]},
      {"ssh": "h2", "ips": ["10.0.0.2"], "rdma": ["rdma_en2", null, null]},
      {"ssh": "h3", "ips": ["10.0.0.3"]}]})");
  EXPECT_EQ(b.backend, "jaccl");
  EXPECT_EQ(b.envs, (std::vector<std::string>{"X=1", "Y=a=b"}));
  ASSERT_EQ(b.hosts[0].rdma.size(), 3u);
  EXPECT_TRUE(b.hosts[0].rdma[0].names.empty());
  EXPECT_EQ(b.hosts[0].rdma[2].names, (std::vector<std::string>{"a", "b"}));
  // to_json writes the object form, and it reads back to the same hosts.
  auto c = parse_job_hostfile(b.to_json());
  EXPECT_EQ(c.to_json(), b.to_json());
  EXPECT_EQ(c.hosts[2].ssh, "h3");
  EXPECT_EQ(c.hosts[0].rdma[1].names, (std::vector<std::string>{"rdma_en2"}));
  EXPECT_FALSE(c.hosts[0].rdma[1].is_list);
}

TEST(JobHostfile, EveryMistakeIsNamed) {
  expect_job_error("{", {"hosts.json", "not valid JSON"});
  expect_job_error("[]", {"empty"});
  expect_job_error("5", {"number"});
  expect_job_error(R"([{"ips": ["10.0.0.1"]}])", {"host 0", "\"ssh\" is missing"});
  expect_job_error(R"([{"ssh": "a"}, {"ssh": 3}])", {"host 1", "must be a string"});
  expect_job_error(R"([{"ssh": "-oProxyCommand=x"}])", {"host 0", "-oProxyCommand=x"});
  expect_job_error(R"([{"ssh": "a", "ips": ["node7"]}])", {"host 0, ips entry 0", "not an IP address"});
  expect_job_error(R"([{"ssh": "a", "ips": "10.0.0.1"}])", {"host 0", "list of IP addresses"});
  expect_job_error(R"([{"ssh": "a", "port": 5}])", {"host 0", "unknown key \"port\""});
  expect_job_error(R"([{"ssh": "a", "rdma": [5]}])", {"host 0, rdma entry 0"});
  expect_job_error(R"({"backend": "gloo", "hosts": [{"ssh": "a"}]})", {"\"gloo\"", "ring, mpi"});
  expect_job_error(R"({"envs": ["1X=2"], "hosts": [{"ssh": "a"}]})", {"envs entry 0"});
  expect_job_error(R"({"env": [], "hosts": [{"ssh": "a"}]})", {"unknown key \"env\""});
  expect_job_error(R"({"backend": "ring"})", {"\"hosts\" is missing"});
}

TEST(JobHostfile, HostsListGivesIpsToAddressesOnly) {
  auto h = job_hosts_from_list("10.0.0.1, node2,root@10.0.0.3");
  ASSERT_EQ(h.hosts.size(), 3u);
  EXPECT_EQ(h.hosts[0].ips, (std::vector<std::string>{"10.0.0.1"}));
  EXPECT_EQ(h.hosts[1].ssh, "node2");
  EXPECT_TRUE(h.hosts[1].ips.empty());
  EXPECT_EQ(h.hosts[2].ips, (std::vector<std::string>{"10.0.0.3"}));
  EXPECT_THROW(job_hosts_from_list("a,,b"), std::invalid_argument);
  EXPECT_THROW(job_hosts_from_list(""), std::invalid_argument);
  EXPECT_THROW(job_hosts_from_list("a b"), std::invalid_argument);
}
