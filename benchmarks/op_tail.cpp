// `make bench` (second table): the op families of the op tail, side by side with PyTorch (CPU)
// and MLX (CPU) run in the same session (interleaved rounds). Rows so far: a ResNet-style 3x3
// convolution (batch 32, 56x56, 64 -> 64 channels, padding 1), forward, and forward + both
// gradients; a 4-bit (group 64) quantized 4096 x 4096 weight times a vector and times 32
// columns, and the same in mxfp4, also against Tessera's own dequantize-then-matmul; FFT of 2^20 complex points and of
// the prime 1048573 (NumPy's pocketfft; SciPy's with workers = cores); svd and solve of 512 x 512
// float32 (SciPy's LAPACK). Prints medians and ratios; --json FILE writes every sample.
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/thread_pool.h"
#include "tessera/tessera.h"

namespace mx = tessera;
using mx::array;
using json = nlohmann::json;

int main(int argc, char** argv) {
  std::string json_path, python = "python3";
  int rounds = 3, reps = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--rounds" && i + 1 < argc) rounds = std::stoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--peer-python" && i + 1 < argc) python = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_op_tail [--json FILE] [--rounds R] [--reps N] "
                           "[--peer-python PYTHON]\n");
      return 2;
    }
  }
  auto [k1, k2] = mx::random::split(mx::random::key(0));
  auto k3 = mx::random::key(3);
  array x = mx::random::normal({32, 56, 56, 64}, mx::float32, k1);
  array w = mx::multiply(mx::random::normal({64, 3, 3, 64}, mx::float32, k2), mx::array(0.05f));
  array dy = mx::random::normal({32, 56, 56, 64}, mx::float32, k3);
  mx::eval(x, w, dy);
  auto conv = [](const array& a, const array& b) { return mx::conv2d(a, b, {1, 1}, {1, 1}); };
  auto kq = mx::random::key(4);
  auto q = mx::quantize(mx::random::normal({4096, 4096}, mx::float32, kq), 64, 4);
  auto fq = mx::quantize(mx::random::normal({4096, 4096}, mx::float32, mx::random::key(11)),
                         std::nullopt, std::nullopt, "mxfp4");
  array xv = mx::random::normal({1, 4096}, mx::float32, mx::random::key(5));
  array x32 = mx::random::normal({32, 4096}, mx::float32, mx::random::key(6));
  mx::eval(q[0], q[1], q[2], fq[0], fq[1], xv, x32);
  auto qmm = [&](const array& xx) { return mx::quantized_matmul(xx, q[0], q[1], q[2], true, 64, 4); };
  auto dq_mm = [&](const array& xx) {
    return mx::matmul(xx, mx::transpose(mx::dequantize(q[0], q[1], q[2], 64, 4)));
  };
  auto fp_qmm = [&](const array& xx) {
    return mx::quantized_matmul(xx, fq[0], fq[1], std::nullopt, true, std::nullopt, std::nullopt,
                                "mxfp4");
  };
  auto fp_dq_mm = [&](const array& xx) {
    return mx::matmul(xx, mx::transpose(mx::dequantize(fq[0], fq[1], std::nullopt, std::nullopt,
                                                       std::nullopt, "mxfp4", std::nullopt,
                                                       mx::float32)));
  };
  array sig = mx::astype(mx::random::normal({1 << 20}, mx::float32, mx::random::key(7)), mx::complex64);
  array sig_p = mx::astype(mx::random::normal({1048573}, mx::float32, mx::random::key(8)), mx::complex64);
  array m512 = mx::random::normal({512, 512}, mx::float32, mx::random::key(9));
  array rhs = mx::random::normal({512, 1}, mx::float32, mx::random::key(10));
  mx::eval(sig, sig_p, m512, rhs);
  // Tessera's own dequantize-then-matmul, timed as a peer column.
  std::vector<std::pair<std::string, std::function<void()>>> baselines = {
      {"qmm_4bit_vec", [&] { mx::eval(dq_mm(xv)); }},
      {"qmm_4bit_32", [&] { mx::eval(dq_mm(x32)); }},
      {"qmm_mxfp4_vec", [&] { mx::eval(fp_dq_mm(xv)); }},
      {"qmm_mxfp4_32", [&] { mx::eval(fp_dq_mm(x32)); }},
  };
  std::vector<std::pair<std::string, std::function<void()>>> ours = {
      {"conv2d_fwd", [&] { mx::eval(conv(x, w)); }},
      {"conv2d_fwd_bwd",
       [&] {
         auto [outs, g] = mx::vjp(
             [&](const std::vector<array>& in) { return std::vector<array>{conv(in[0], in[1])}; },
             std::vector<array>{x, w}, std::vector<array>{dy});
         mx::eval(outs[0], g[0], g[1]);
       }},
      {"qmm_4bit_vec", [&] { mx::eval(qmm(xv)); }},
      {"qmm_4bit_32", [&] { mx::eval(qmm(x32)); }},
      {"qmm_mxfp4_vec", [&] { mx::eval(fp_qmm(xv)); }},
      {"qmm_mxfp4_32", [&] { mx::eval(fp_qmm(x32)); }},
      {"fft_2^20", [&] { mx::eval(mx::fft::fft(sig)); }},
      {"fft_prime", [&] { mx::eval(mx::fft::fft(sig_p)); }},
      {"svd_512", [&] {
         auto usv = mx::linalg::svd(m512);
         mx::eval(usv[0], usv[1], usv[2]);
       }},
      {"solve_512", [&] { mx::eval(mx::linalg::solve(m512, rhs)); }},
  };
  const std::vector<std::string> peers = {"dequant", "numpy", "scipy", "torch", "mlx"};
  std::map<std::string, std::map<std::string, std::vector<double>>> samples;  // fw -> op -> s
  for (int r = 0; r < rounds; ++r) {
    std::fprintf(stderr, "[bench] round %d/%d\n", r + 1, rounds);
    for (auto& [name, f] : ours) {
      auto t = bench::time_it(f, reps);
      samples["tessera"][name].insert(samples["tessera"][name].end(), t.begin(), t.end());
    }
    for (auto& [name, f] : baselines) {
      auto t = bench::time_it(f, reps);
      samples["dequant"][name].insert(samples["dequant"][name].end(), t.begin(), t.end());
    }
    for (const auto& peer : {"numpy", "scipy", "torch", "mlx"}) {
      json j = bench::run_peer(python, std::string(TESSERA_BENCH_DIR) + "/peers/op_tail_peers.py",
                               std::string("--peer ") + peer + " --reps " + std::to_string(reps));
      samples[peer];
      if (j.contains("unavailable")) continue;
      for (auto& [op, arr] : j.items()) {
        for (auto& s : arr) samples[peer][op].push_back(s.get<double>());
      }
    }
  }
  std::printf("\nOp tail, float32 on %d threads; medians of %d rounds x %d reps (ratio > 1: "
              "Tessera faster)\n",
              mx::detail::num_threads(), rounds, reps);
  std::printf("%-16s %9s", "op", "ours ms");
  for (const auto& peer : peers) std::printf(" %10s", (peer + " ms").c_str());
  for (const auto& peer : peers) std::printf(" %11s", (peer + "/ours").c_str());
  std::printf("\n");
  json out;
  for (auto& [name, f] : ours) {
    const double t = bench::median(samples["tessera"][name]);
    std::printf("%-16s %9.2f", name.c_str(), t * 1e3);
    std::string ratios;
    for (const auto& peer : peers) {
      auto it = samples[peer].find(name);
      if (it == samples[peer].end()) {
        std::printf(" %10s", "-");
        ratios += "           -";
        continue;
      }
      const double p = bench::median(it->second);
      std::printf(" %10.2f", p * 1e3);
      char buf[32];
      std::snprintf(buf, sizeof buf, " %10.2fx", p / t);
      ratios += buf;
    }
    std::printf("%s\n", ratios.c_str());
    out[name]["tessera_s"] = samples["tessera"][name];
    for (const auto& peer : peers) out[name][peer + "_s"] = samples[peer][name];
  }
  std::printf("(dequant: Tessera's dequantize, then matmul with the dense matrix)\n");
  for (const auto& peer : {"numpy", "scipy", "torch", "mlx"}) {
    if (samples[peer].empty()) std::printf("%s: not installed for %s, column empty\n", peer, python.c_str());
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << out.dump(2) << "\n";
    std::printf("samples written to %s\n", json_path.c_str());
  }
  return 0;
}
