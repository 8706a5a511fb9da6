// Shared by the C++ benchmarks: timing, medians, and running a Python peer script that prints
// JSON ({op: [seconds, ...]} or {"unavailable": why}).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bench {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// `reps` timings of f after one warm-up call (allocator cache, first touch of pages).
inline std::vector<double> time_it(const std::function<void()>& f, int reps) {
  f();
  std::vector<double> out;
  for (int i = 0; i < reps; ++i) {
    double t = now();
    f();
    out.push_back(now() - t);
  }
  return out;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs `python script args` and parses its JSON. The peers run with OpenBLAS's kernel choice
// left to OpenBLAS: some machines here force OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for older
// OpenBLAS builds, which slows a current NumPy (the machine notes say to unset both for it).
inline nlohmann::json run_peer(const std::string& python, const std::string& script,
                               const std::string& args) {
  std::string cmd = "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE " + python + " " + script + " " +
                    args + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return nlohmann::json{{"unavailable", "popen failed"}};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
  try {
    return nlohmann::json::parse(out);
  } catch (...) {
    return nlohmann::json{{"unavailable", "no output from " + script}};
  }
}

}  // namespace bench
