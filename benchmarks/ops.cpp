// `make bench`: Tessera's CPU ops on 16 Mi float32 elements and matmul, side by side with NumPy
// and MLX (CPU) run in the same session (interleaved rounds), OpenBLAS called directly, and a
// memcpy of the same size. Prints a table of medians and ratios; --json FILE writes every sample.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "core/scheduler.h"
#include "tessera/tessera.h"

namespace mx = tessera;
using bench::median;
using bench::time_it;
using mx::array;
using json = nlohmann::json;

namespace {

constexpr int kSide = 4096;  // 16 Mi elements
constexpr size_t kElems = size_t{kSide} * kSide;

// Bytes each op moves through memory (reads + writes), for the bandwidth column.
double moved_bytes(const std::string& op) {
  double one = static_cast<double>(kElems) * 4;
  if (op == "add" || op == "multiply") return 3 * one;
  if (op == "exp" || op == "tanh" || op == "transpose_copy" || op == "memcpy") return 2 * one;
  if (op.rfind("sum", 0) == 0 || op == "max_all") return one;
  if (op == "softmax") return 2 * one;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int rounds = 3, reps = 5;
  std::string sizes_arg = "512,1024,2048";
  std::string only;  // substring filter on op names
  std::string python = "python3";  // runs the peers
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--rounds" && i + 1 < argc) rounds = std::stoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--sizes" && i + 1 < argc) sizes_arg = argv[++i];
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--peer-python" && i + 1 < argc) python = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: bench_ops [--json FILE] [--rounds R] [--reps N] [--sizes 512,1024] "
                   "[--only SUBSTRING] [--peer-python PYTHON]\n");
      return 2;
    }
  }
  std::vector<int> sizes;
  for (size_t p = 0; p < sizes_arg.size();) {
    size_t q = sizes_arg.find(',', p);
    sizes.push_back(std::stoi(sizes_arg.substr(p, q - p)));
    p = q == std::string::npos ? sizes_arg.size() : q + 1;
  }

  auto key = mx::random::key(0);
  auto [k1, k2] = mx::random::split(key);
  array a = mx::random::normal({kSide, kSide}, mx::float32, k1);
  array b = mx::random::normal({kSide, kSide}, mx::float32, k2);
  mx::eval(a, b);
  auto run = [](std::function<array()> f) { return [f] { mx::eval(f()); }; };
  std::vector<std::pair<std::string, std::function<void()>>> ours = {
      {"add", run([&] { return a + b; })},
      {"multiply", run([&] { return a * b; })},
      {"exp", run([&] { return mx::exp(a); })},
      {"tanh", run([&] { return mx::tanh(a); })},
      {"sum_all", run([&] { return mx::sum(a); })},
      {"sum_axis0", run([&] { return mx::sum(a, 0); })},
      {"sum_axis1", run([&] { return mx::sum(a, 1); })},
      {"max_all", run([&] { return mx::max(a); })},
      {"transpose_copy", run([&] { return mx::contiguous(mx::transpose(a)); })},
      {"softmax", run([&] { return mx::softmax(a, std::vector<int>{-1}); })},
  };
  std::vector<std::unique_ptr<float[]>> mm_bufs;
  std::map<int, std::pair<array, array>> mm_inputs;
  for (int n : sizes) {
    auto [ka, kb] = mx::random::split(mx::random::key(n));
    auto x = mx::random::normal({n, n}, mx::float32, ka);
    auto y = mx::random::normal({n, n}, mx::float32, kb);
    mx::eval(x, y);
    mm_inputs.emplace(n, std::make_pair(x, y));
  }
  for (int n : sizes) {
    auto& [x, y] = mm_inputs.at(n);
    ours.push_back({"matmul_" + std::to_string(n), run([&x, &y] { return mx::matmul(x, y); })});
  }

  if (!only.empty()) {
    std::erase_if(ours, [&](const auto& op) { return op.first.find(only) == std::string::npos; });
  }

  // Baselines in this process: memcpy of one 64 MiB array, OpenBLAS sgemm called directly.
  std::vector<float> src(kElems, 1.0f), dst(kElems, 0.0f);
  std::map<std::string, std::vector<double>> base;
  std::map<std::string, std::map<std::string, std::vector<double>>> samples;  // fw -> op -> s
  for (int r = 0; r < rounds; ++r) {
    std::fprintf(stderr, "[bench] round %d/%d\n", r + 1, rounds);
    auto m = time_it([&] { std::memcpy(dst.data(), src.data(), kElems * 4); }, reps);
    base["memcpy1"].insert(base["memcpy1"].end(), m.begin(), m.end());
    // Two threads, each copying half: the baseline our 2-thread kernels are held to.
    auto m2 = time_it([&] {
      size_t half = kElems / 2;
      std::thread t([&] { std::memcpy(dst.data() + half, src.data() + half, half * 4); });
      std::memcpy(dst.data(), src.data(), half * 4);
      t.join();
    }, reps);
    base["memcpy"].insert(base["memcpy"].end(), m2.begin(), m2.end());
    // The baseline is OpenBLAS as it runs by default, on every core. Our matmuls set it to one
    // thread process-wide (they split rows over our pool), so set it back for each round.
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    if (!sizes.empty()) openblas_set_num_threads(cores);
    for (int n : sizes) {
      std::vector<float> c(size_t(n) * n);
      auto& [x, y] = mm_inputs.at(n);
      // Called on the stream's worker thread, the thread our matmul calls OpenBLAS from: OpenBLAS
      // (pthreads build) slows down ~10x at n=512 once two different threads have called it.
      auto t = time_it([&] {
        mx::scheduler::enqueue(mx::default_stream(mx::Device::cpu), [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, x.data<float>(), n,
                      y.data<float>(), n, 0.0f, c.data(), n);
        });
        mx::synchronize();
      }, reps);
      auto& v = base["matmul_" + std::to_string(n)];
      v.insert(v.end(), t.begin(), t.end());
    }
    // OpenBLAS's own threads busy-wait for 2^28 cycles (~0.1 s) after each call before they
    // sleep; timed meanwhile, our 2-thread kernels share the 2 cores with them (max over 16 Mi
    // float32 read 2.6 ms instead of 1.3). Ours run single-threaded OpenBLAS and never spin.
    if (!sizes.empty()) {
      openblas_set_num_threads(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
    }
    for (auto& [name, f] : ours) {
      auto t = time_it(f, reps);
      auto& v = samples["tessera"][name];
      v.insert(v.end(), t.begin(), t.end());
    }
    for (std::string peer : {"numpy", "mlx"}) {
      auto j = bench::run_peer(python, std::string(TESSERA_BENCH_DIR) + "/peers/ops_peers.py",
                               "--peer " + peer + " --reps " + std::to_string(reps) + " --sizes " +
                                   sizes_arg);
      if (j.contains("unavailable")) {
        samples[peer];  // present but empty
        continue;
      }
      for (auto& [op, arr] : j.items()) {
        auto& v = samples[peer][op];
        for (auto& s : arr) v.push_back(s.get<double>());
      }
    }
  }

  double memcpy_s = median(base["memcpy"]);
  double memcpy_bw = moved_bytes("memcpy") / memcpy_s / 1e9;
  std::printf("\nTessera CPU ops, float32, %d x %d (16 Mi elements); medians of %d rounds x %d reps\n",
              kSide, kSide, rounds, reps);
  double memcpy1_s = median(base["memcpy1"]);
  std::printf("memcpy 64 MiB: 1 thread %.2f ms (%.1f GB/s moved), 2 threads %.2f ms (%.1f GB/s "
              "moved, read + write); %%memcpy below is against 2 threads\n",
              memcpy1_s * 1e3, moved_bytes("memcpy") / memcpy1_s / 1e9, memcpy_s * 1e3, memcpy_bw);
  std::printf("%-16s %10s %10s %10s %10s %9s %9s %9s %9s\n", "op", "ours ms", "min-max", "numpy ms",
              "mlx ms", "np/ours", "mlx/ours", "GB/s", "%memcpy");
  json out;
  out["memcpy_2threads_s"] = base["memcpy"];
  out["memcpy_1thread_s"] = base["memcpy1"];
  for (auto& [name, f] : ours) {
    auto& v = samples["tessera"][name];
    double t = median(v);
    double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
    auto peer_med = [&](const std::string& p) {
      auto it = samples[p].find(name);
      return it == samples[p].end() ? 0.0 : median(it->second);
    };
    double np_t = peer_med("numpy"), mlx_t = peer_med("mlx");
    char np_r[16] = "-", mlx_r[16] = "-", bw[16] = "-", pct[16] = "-", np_s[16] = "-", mlx_s[16] = "-";
    if (np_t > 0) std::snprintf(np_r, sizeof np_r, "%.2fx", np_t / t), std::snprintf(np_s, sizeof np_s, "%.2f", np_t * 1e3);
    if (mlx_t > 0) std::snprintf(mlx_r, sizeof mlx_r, "%.2fx", mlx_t / t), std::snprintf(mlx_s, sizeof mlx_s, "%.2f", mlx_t * 1e3);
    if (moved_bytes(name) > 0) {
      double g = moved_bytes(name) / t / 1e9;
      std::snprintf(bw, sizeof bw, "%.1f", g);
      std::snprintf(pct, sizeof pct, "%.0f%%", 100 * g / memcpy_bw);
    }
    if (name.rfind("matmul_", 0) == 0) {
      double blas = median(base[name]);
      std::snprintf(pct, sizeof pct, "%.2fx", blas / t);  // OpenBLAS direct / ours
    }
    char range[32];
    std::snprintf(range, sizeof range, "%.1f-%.1f", lo * 1e3, hi * 1e3);
    std::printf("%-16s %10.2f %10s %10s %10s %9s %9s %9s %9s\n", name.c_str(), t * 1e3, range, np_s,
                mlx_s, np_r, mlx_r, bw, pct);
    out["ops"][name] = {{"tessera_s", v},
                        {"numpy_s", samples["numpy"][name]},
                        {"mlx_s", samples["mlx"][name]}};
    if (name.rfind("matmul_", 0) == 0) out["ops"][name]["openblas_direct_s"] = base[name];
  }
  std::printf("(matmul rows: last column is OpenBLAS-called-directly time / ours)\n");
  if (samples["mlx"].empty()) std::printf("MLX: not installed here, column empty\n");
  if (!json_path.empty()) {
    std::ofstream(json_path) << out.dump(2) << "\n";
    std::printf("samples written to %s\n", json_path.c_str());
  }
  return 0;
}
