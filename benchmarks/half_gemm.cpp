// Prefill's products (`make bench-llm`, first table): x @ W.T for the 111 M and 1 B models'
// weights with a 512-token prompt, in bfloat16 (pairs through vdpbf16ps), float16 (widened to
// float32 as packed) and float32, against the peak of the instruction each uses: a loop of
// independent vdpbf16ps / vfmadd231ps on registers only, one per core of the pool. The "bf16
// through f32 copies" column is the path bf16 products took before (astype, float32 product,
// astype back).
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_features.h"
#include "bench_util.h"
#include "core/thread_pool.h"
#include "tessera/tessera.h"

namespace mx = tessera;
using bench::median;
using bench::time_it;

namespace {

constexpr long kPeakIters = 50'000'000;

#if defined(__x86_64__)
// 12 independent accumulators: enough to cover the instruction's latency at full throughput.
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_loop(long iters) {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512i x = _mm512_set1_epi32(0x3f803f80), y = _mm512_set1_epi32(0x3c003c00);
  for (long i = 0; i < iters; ++i) {
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, (__m512bh)x, (__m512bh)y);
    __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]), "+v"(acc[4]),
                     "+v"(acc[5]), "+v"(acc[6]), "+v"(acc[7]), "+v"(acc[8]), "+v"(acc[9]),
                     "+v"(acc[10]), "+v"(acc[11]));
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f"))) float fma_loop(long iters) {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
  for (long i = 0; i < iters; ++i) {
    for (auto& a : acc) a = _mm512_fmadd_ps(x, y, a);
    __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]), "+v"(acc[4]),
                     "+v"(acc[5]), "+v"(acc[6]), "+v"(acc[7]), "+v"(acc[8]), "+v"(acc[9]),
                     "+v"(acc[10]), "+v"(acc[11]));
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}
#endif

// GFLOP/s of `loop` (flop_per_iter per iteration) on `threads` threads at once, best of 3.
template <typename F>
double peak(F loop, double flop_per_iter, int threads) {
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::thread> ts;
    volatile float sink = 0;
    const double t = bench::now();
    for (int i = 0; i < threads; ++i) ts.emplace_back([&] { sink = loop(kPeakIters); });
    for (auto& th : ts) th.join();
    best = std::max(best, threads * kPeakIters * flop_per_iter / (bench::now() - t) / 1e9);
  }
  return best;
}

struct Shape {
  const char* what;
  int m, k, n;
};

}  // namespace

int main() {
#if defined(__x86_64__)
  if (!mx::cpu::cpu_has_avx512f()) {
    std::printf("bench_half_gemm: this CPU has no AVX-512; nothing to measure\n");
    return 0;
  }
  const int threads = static_cast<int>(mx::detail::num_threads());
  const bool bf16 = mx::cpu::cpu_has_avx512_bf16();
  const double fma_peak = peak(fma_loop, 12 * 32.0, threads);
  const double dp_peak = bf16 ? peak(dpbf16_loop, 12 * 64.0, threads) : 0;
  std::printf("\n### Prefill products, x @ W.T with a 512-token prompt, %d threads (GFLOP/s, median of 5; "
              "%% of the instruction's peak)\n\n", threads);
  std::printf("register-only peak, %d threads: vdpbf16ps %.0f GFLOP/s, vfmadd231ps (zmm) %.0f GFLOP/s\n\n",
              threads, dp_peak, fma_peak);
  std::printf("| product (m x k -> n) | bf16 (vdpbf16ps) | bf16 through f32 copies | f16 (widened) | f32 |\n");
  std::printf("|---|---|---|---|---|\n");
  const Shape shapes[] = {{"111M q / up", 512, 576, 1536},  {"111M down", 512, 1536, 576},
                          {"111M lm_head", 512, 576, 8192}, {"1B q / gate", 512, 2048, 2048},
                          {"1B up", 512, 2048, 8192},       {"1B down", 512, 8192, 2048}};
  for (const Shape& s : shapes) {
    const double flop = 2.0 * s.m * s.k * s.n;
    auto gflops = [&](mx::Dtype dt, bool via_f32) {
      mx::array x = mx::astype(mx::random::normal({s.m, s.k}, mx::float32, 0.0f, 1.0f), dt);
      mx::array w = mx::astype(mx::random::normal({s.n, s.k}, mx::float32, 0.0f, 1.0f), dt);
      mx::eval({x, w});
      auto t = time_it(
          [&] {
            if (via_f32) {
              mx::eval(mx::astype(mx::matmul(mx::astype(x, mx::float32), mx::transpose(mx::astype(w, mx::float32))), dt));
            } else {
              mx::eval(mx::matmul(x, mx::transpose(w)));
            }
          },
          5);
      return flop / median(t) / 1e9;
    };
    const double b = gflops(mx::bfloat16, false), bc = gflops(mx::bfloat16, true),
                 h = gflops(mx::float16, false), f = gflops(mx::float32, false);
    std::printf("| %s, %d x %d -> %d | %.0f (%.0f%%) | %.0f | %.0f (%.0f%%) | %.0f (%.0f%%) |\n", s.what,
                s.m, s.k, s.n, b, bf16 ? 100 * b / dp_peak : 0.0, bc, h, 100 * h / fma_peak, f,
                100 * f / fma_peak);
  }
#else
  std::printf("bench_half_gemm: x86-64 only\n");
#endif
  return 0;
}
