// The timeline trace: a Chrome-trace JSON file with a slice per kernel (name, output dtype and
// shape, bytes), pool chunks on the pool threads' tracks, compile's markers, and clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "test_util.h"
#include "tessera/compile.h"
#include "tessera/config.h"
#include "tessera/trace.h"

namespace tessera {
namespace {

using nlohmann::json;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tessera-trace-" + std::to_string(getpid()) + "-" + name))
      .string();
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

std::vector<json> events(const json& t, const std::string& cat) {
  std::vector<json> out;
  for (auto& e : t["traceEvents"]) {
    if (e.value("cat", "") == cat) out.push_back(e);
  }
  return out;
}

TEST(Trace, KernelsPoolChunksAndCompileMarkers) {
  config::set_override("TESSERA_COMPILE_CACHE_DIR", temp_path("cache"));
  const std::string path = temp_path("run.json");
  start_trace(path);
  EXPECT_TRUE(is_tracing());
  array x = ones({1 << 20});
  array y = x * 2.0f + 1.0f;
  eval(y);
  // More big elementwise kernels for the pool's tracks below: a pool thread that gets its core
  // late leaves its share to the caller (parallel_for), so on a loaded machine one kernel may
  // show no pool chunk at all.
  for (int i = 0; i < 50; ++i) eval(x * 3.0f);
  array z = compile([](const std::vector<array>& in) {
    return std::vector<array>{exp(in[0]) * 3.0f - in[0]};
  })({array({1.0f, 2.0f, 3.0f})})[0];
  eval(z);
  EXPECT_EQ(stop_trace(), path);
  EXPECT_FALSE(is_tracing());
  EXPECT_EQ(stop_trace(), "");  // nothing recorded any more

  const json t = read_json(path);
  auto kernels = events(t, "kernel");
  int adds = 0;
  for (auto& k : kernels) {
    EXPECT_EQ(k["ph"], "X");
    EXPECT_GE(k["dur"].get<double>(), 0.0);
    if (k["name"] == "Add") {
      ++adds;
      EXPECT_EQ(k["args"]["bytes"], (1 << 20) * 4);
      EXPECT_EQ(k["args"]["outputs"][0], "float32(1048576)");
    }
  }
  EXPECT_EQ(adds, 1);
  bool compiled = false;
  for (auto& k : kernels) compiled = compiled || k["name"].get<std::string>().rfind("Compiled(", 0) == 0;
  EXPECT_TRUE(compiled);
  std::set<std::string> markers;
  for (auto& e : events(t, "compile")) markers.insert(e["name"].get<std::string>());
  EXPECT_TRUE(markers.count("compile: trace (cache miss)"));
  EXPECT_TRUE(markers.count("compile: compiler run") || markers.count("compile: kernel from the disk cache"));
  // Big elementwise kernels split over the pool: chunks named after their kernel on pool tracks.
  if (detail::num_threads() > 1) {
    auto chunks = events(t, "pool");
    ASSERT_FALSE(chunks.empty());
    std::set<int> pool_tids;
    for (auto& e : t["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "thread_name" &&
          e["args"]["name"].get<std::string>().rfind("pool", 0) == 0) {
        pool_tids.insert(e["tid"].get<int>());
      }
    }
    for (auto& c : chunks) EXPECT_TRUE(pool_tids.count(c["tid"].get<int>())) << c.dump();
  }
  std::filesystem::remove(path);
  std::filesystem::remove_all(temp_path("cache"));
  config::set_override("TESSERA_COMPILE_CACHE_DIR", std::nullopt);
}

TEST(Trace, StartingTwiceOrAnUnwritablePathIsAnError) {
  const std::string path = temp_path("twice.json");
  start_trace(path);
  EXPECT_THROW(start_trace(path), std::invalid_argument);
  stop_trace();
  std::filesystem::remove(path);
  start_trace("/nonexistent-dir/x.json");
  try {
    stop_trace();
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.json"), std::string::npos);
  }
  EXPECT_FALSE(is_tracing());
}

TEST(Trace, TesseraTraceRecordsAWholeRunWrittenAtExit) {
  const std::string path = temp_path("env.json");
  const std::string cmd = "TESSERA_TRACE=" + path + " " + std::string(TESSERA_BIN_DIR) +
                          "/test_trace --gtest_filter=Trace.Nothing 2>&1";
  auto r = test_util::run_command(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  const json t = read_json(path);
  std::vector<json> adds;  // the child's ones(4) + 1.0f: one Add (after Full and Broadcast)
  for (auto& k : events(t, "kernel")) {
    if (k["name"] == "Add") adds.push_back(k);
  }
  ASSERT_EQ(adds.size(), 1u) << t.dump();
  EXPECT_EQ(adds[0]["args"]["outputs"][0], "float32(4)");
  EXPECT_EQ(adds[0]["args"]["bytes"], 16);
  std::filesystem::remove(path);
}

// Runs one op (the child process of the test above).
TEST(Trace, Nothing) { eval(ones({4}) + 1.0f); }

}  // namespace
}  // namespace tessera
