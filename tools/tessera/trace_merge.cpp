// tessera launch --trace DIR: after the ranks exit, their trace files (DIR/rank<r>.json, written
// by each rank at exit through TESSERA_TRACE) are merged into DIR/trace.json with one process per
// rank, times made relative to the earliest event of the job (the ranks share CLOCK_REALTIME).
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"

namespace tessera::cli {

std::string merge_rank_traces(const std::string& dir, int n) {
  using nlohmann::json;
  json merged = json::array();
  double t_min = std::numeric_limits<double>::infinity();
  std::vector<json> ranks(n);
  for (int r = 0; r < n; ++r) {
    const std::string path = dir + "/rank" + std::to_string(r) + ".json";
    std::ifstream f(path);
    if (!f) {
      std::fprintf(stderr, "[launch] --trace: rank %d wrote no trace (%s)\n", r, path.c_str());
      continue;
    }
    try {
      ranks[r] = json::parse(f);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[launch] --trace: %s is not valid JSON (%s)\n", path.c_str(), e.what());
      continue;
    }
    for (auto& e : ranks[r]["traceEvents"]) {
      if (e.contains("ts")) t_min = std::min(t_min, e["ts"].get<double>());
    }
  }
  for (int r = 0; r < n; ++r) {
    if (ranks[r].is_null()) continue;
    merged.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    merged.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r},
                      {"args", {{"sort_index", r}}}});
    for (auto& e : ranks[r]["traceEvents"]) {
      if (e.value("name", "") == "process_name") continue;
      e["pid"] = r;
      if (e.contains("ts")) e["ts"] = e["ts"].get<double>() - t_min;
      merged.push_back(std::move(e));
    }
  }
  const std::string out = dir + "/trace.json";
  std::ofstream(out) << json{{"displayTimeUnit", "ms"}, {"traceEvents", merged}}.dump() << "\n";
  return out;
}

}  // namespace tessera::cli
