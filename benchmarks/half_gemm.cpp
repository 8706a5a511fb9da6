// Prefill's products (`make bench-llm`, first table): x @ W.T for the 111 M and 1 B models'
// weights with a 512-token prompt, in bfloat16 (by the kernel gemm.h's hgemm_kernel picks here:
// AMX tiles, vdpbf16ps pairs or widened to float32), float16 (widened to float32 as packed) and
// float32, against the peak of the instruction each uses: a loop of independent tdpbf16ps /
// vdpbf16ps / vfmadd231ps on registers only, one per core of the pool. The "bf16 through f32
// copies" column is the path bf16 products took before (astype, float32 product, astype back).
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm.h"
#include "bench_util.h"
#include "core/thread_pool.h"
#include "tessera/tessera.h"

namespace mx = tessera;
using bench::median;
using bench::time_it;

namespace {

constexpr long kPeakIters = 50'000'000;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float t = 0;
  for (float x : lanes) t += x;
  return t;
}

// One instruction on each of 12 accumulators (named operands a0..a11).
#define TESSERA_X12(INS)                                                                      \
  INS " %[x], %[y], %[a0]\n\t" INS " %[x], %[y], %[a1]\n\t" INS " %[x], %[y], %[a2]\n\t"         \
  INS " %[x], %[y], %[a3]\n\t" INS " %[x], %[y], %[a4]\n\t" INS " %[x], %[y], %[a5]\n\t"       \
  INS " %[x], %[y], %[a6]\n\t" INS " %[x], %[y], %[a7]\n\t" INS " %[x], %[y], %[a8]\n\t"       \
  INS " %[x], %[y], %[a9]\n\t" INS " %[x], %[y], %[a10]\n\t" INS " %[x], %[y], %[a11]\n\t"

// 12 independent accumulators kept in registers (written out in assembly: a compiler may keep an
// array of them in memory), enough to cover the instruction's latency at full throughput.
#define TESSERA_PEAK_LOOP(NAME, TARGET, INS)                                                \
  __attribute__((target(TARGET))) float NAME(long iters, int xbits, int ybits) {           \
    const __m512 x = _mm512_castsi512_ps(_mm512_set1_epi32(xbits)),                         \
                 y = _mm512_castsi512_ps(_mm512_set1_epi32(ybits));                         \
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, \
           a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;                                   \
    for (long i = 0; i < iters; ++i) {                                                      \
      __asm__ volatile(TESSERA_X12(INS)                                                     \
                       : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3),        \
                         [a4] "+v"(a4), [a5] "+v"(a5), [a6] "+v"(a6), [a7] "+v"(a7),        \
                         [a8] "+v"(a8), [a9] "+v"(a9), [a10] "+v"(a10), [a11] "+v"(a11)     \
                       : [x] "v"(x), [y] "v"(y));                                           \
    }                                                                                       \
    float t = 0;                                                                            \
    for (__m512 v : {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11}) t += lane_sum(v);   \
    return t;                                                                               \
  }
TESSERA_PEAK_LOOP(dpbf16_loop, "avx512f,avx512bf16", "vdpbf16ps")
TESSERA_PEAK_LOOP(fma_loop, "avx512f", "vfmadd231ps")
#undef TESSERA_PEAK_LOOP
#undef TESSERA_X12

// Four independent tdpbf16ps (a 2 x 2 block of result tiles) per iteration, tiles only.
float tile_loop(long iters) {
  mx::cpu::TileScope scope;
  alignas(64) static uint16_t ones[16 * 32];
  alignas(64) static float out[16 * 16];
  std::fill(std::begin(ones), std::end(ones), uint16_t{0x3c00});  // 2^-7: the sums stay finite
  TESSERA_TILE_LOAD(4, ones, 64);
  TESSERA_TILE_LOAD(5, ones, 64);
  TESSERA_TILE_LOAD(6, ones, 64);
  TESSERA_TILE_LOAD(7, ones, 64);
  TESSERA_TILE_ZERO(0);
  TESSERA_TILE_ZERO(1);
  TESSERA_TILE_ZERO(2);
  TESSERA_TILE_ZERO(3);
  for (long i = 0; i < iters; ++i) {
    TESSERA_TILE_DP(0, 4, 6);
    TESSERA_TILE_DP(1, 4, 7);
    TESSERA_TILE_DP(2, 5, 6);
    TESSERA_TILE_DP(3, 5, 7);
  }
  TESSERA_TILE_STORE(0, out, 64);
  return out[0];
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
  const mx::cpu::HalfKernel kernel = mx::cpu::hgemm_kernel<mx::bfloat16_t>();
  // Operands that keep the sums finite: bf16 pairs of 1.0 and 2^-7; floats 1.0 and 2^-20.
  const double fma_peak = peak([](long n) { return fma_loop(n, 0x3f800000, 0x35800000); }, 12 * 32.0, threads);
  const double bf16_peak =
      kernel == mx::cpu::HalfKernel::Tiles
          ? peak([](long n) { return tile_loop(n / 16); }, 4 * 16 * 16 * 32 * 2 / 16.0, threads)
      : kernel == mx::cpu::HalfKernel::Pairs
          ? peak([](long n) { return dpbf16_loop(n, 0x3f803f80, 0x3c003c00); }, 12 * 64.0, threads)
          : fma_peak;
  const char* bf16_how = kernel == mx::cpu::HalfKernel::Tiles   ? "tdpbf16ps"
                         : kernel == mx::cpu::HalfKernel::Pairs ? "vdpbf16ps"
                                                                : "widened, vfmadd231ps";
  std::printf("\n### Prefill products, x @ W.T with a 512-token prompt, %d threads (GFLOP/s, median of 5; "
              "%% of the instruction's peak)\n\n", threads);
  std::printf("register-only peak, %d threads: bf16's %s %.0f GFLOP/s, vfmadd231ps (zmm) %.0f GFLOP/s\n\n",
              threads, bf16_how, bf16_peak, fma_peak);
  std::printf("| product (m x k -> n) | bf16 (%s) | bf16 through f32 copies | f16 (widened) | f32 |\n", bf16_how);
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
                s.m, s.k, s.n, b, 100 * b / bf16_peak, bc, h, 100 * h / fma_peak, f,
                100 * f / fma_peak);
  }
#else
  std::printf("bench_half_gemm: x86-64 only\n");
#endif
  return 0;
}
