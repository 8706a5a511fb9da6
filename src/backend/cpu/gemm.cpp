// Tessera's float32 GEMM (gemm.h has the arithmetic it promises). The loops, outside in:
//   column chunks of C (the packed right operand stays under kMaxPackedB floats);
//   tasks = blocks of rows x panels of C, shared out over the pool;
//   in a task, per K block: pack the panels of op(b) (NR columns, zero-padded) that no other task
//   has packed yet (they are shared, read-only once ready), pack the task's rows of op(a) into
//   MR-row micro-panels, then per panel (in L1) one register tile per MR rows.
// Tiles on the edges (fewer than MR rows or NR columns) run the same kernel into a scratch tile
// and are added into C by scalar fma: the same arithmetic, element for element.
#include "backend/cpu/gemm.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <memory>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/half_gemm.h"
#include "backend/cpu/scratch.h"
#include "core/thread_pool.h"
#include "tessera/allocator.h"

namespace tessera::cpu {

namespace {

constexpr int64_t kKc = kGemmKBlock;
constexpr int64_t kTileKBlock = 2048;
constexpr int64_t kMc = 96;                // rows of a's packed block (96 KiB: L2)
constexpr int64_t kMaxTaskColumns = 512;   // columns: a K block of them stays in L2 (512 KiB)
constexpr int64_t kMinTaskColumns = 128;
constexpr int64_t kMaxPackedB = int64_t{1} << 22;
constexpr int64_t kMaxPackedA = int64_t{1} << 22;  // elements of a packed once per call (16 MiB)

struct Update {
  float alpha, beta;
  bool first;  // the first K block: C is scaled by beta (or not read when beta == 0)
};

// c = the update of c by acc, one element (the scalar twin of the kernels' vector update).
inline float updated(float acc, float c, const Update& u) {
  if (!u.first) return std::fma(u.alpha, acc, c);
  if (u.beta == 0.0f) return u.alpha * acc;
  return std::fma(u.alpha, acc, u.beta * c);
}

#if defined(__x86_64__)

// C[R x 32] updated by a tile's sums (the update of `updated`, 16 lanes at a time), or the sums
// themselves with `raw`: the float32 and the bf16-pairs tiles share it.
template <int R>
[[gnu::always_inline]] __attribute__((target("avx512f"))) inline void store_tile_avx512(
    const __m512 (&acc)[R][2], float* c, int64_t ldc, const Update& u, bool raw) {
  const __m512 va = _mm512_set1_ps(u.alpha), vb = _mm512_set1_ps(u.beta);
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    for (int h = 0; h < 2; ++h) {
      float* p = c + i * ldc + 16 * h;
      __m512 r = acc[i][h];
      if (raw) {
      } else if (!u.first) {
        r = _mm512_fmadd_ps(va, r, _mm512_loadu_ps(p));
      } else if (u.beta == 0.0f) {
        r = _mm512_mul_ps(va, r);
      } else {
        r = _mm512_fmadd_ps(va, r, _mm512_mul_ps(vb, _mm512_loadu_ps(p)));
      }
      _mm512_storeu_ps(p, r);
    }
  }
}

// C[R x 32] (rows ldc apart) updated by the first R rows of pa (kc x 12, packed) @ pb (kc x 32,
// packed); with `raw`, the sums themselves are stored (a scratch tile for the edges). R = 12 is
// the tile; 4 and 8 serve the last rows of a block (a 256-row product ends with 4: a 12-row
// tile there did three times the work).
template <int R>
__attribute__((target("avx512f"))) void tile_avx512(int64_t kc, const float* pa, const float* pb,
                                                    float* c, int64_t ldc, const Update& u,
                                                    bool raw) {
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m512 b0 = _mm512_loadu_ps(pb + kk * 32), b1 = _mm512_loadu_ps(pb + kk * 32 + 16);
    const float* ak = pa + kk * 12;
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 x = _mm512_set1_ps(ak[i]);
      acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
    }
  }
  store_tile_avx512<R>(acc, c, ldc, u, raw);
}

// The AVX2 twin: C[6 x 16] from pa (kc x 6) and pb (kc x 16).
__attribute__((target("avx2,fma"))) void tile_avx2(int64_t kc, const float* pa, const float* pb,
                                                   float* c, int64_t ldc, const Update& u,
                                                   bool raw) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(pb + kk * 16), b1 = _mm256_loadu_ps(pb + kk * 16 + 8);
    const float* ak = pa + kk * 6;
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m256 x = _mm256_broadcast_ss(ak + i);
      acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
    }
  }
  const __m256 va = _mm256_set1_ps(u.alpha), vb = _mm256_set1_ps(u.beta);
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    for (int h = 0; h < 2; ++h) {
      float* p = c + i * ldc + 8 * h;
      __m256 r = acc[i][h];
      if (raw) {
      } else if (!u.first) {
        r = _mm256_fmadd_ps(va, r, _mm256_loadu_ps(p));
      } else if (u.beta == 0.0f) {
        r = _mm256_mul_ps(va, r);
      } else {
        r = _mm256_fmadd_ps(va, r, _mm256_mul_ps(vb, _mm256_loadu_ps(p)));
      }
      _mm256_storeu_ps(p, r);
    }
  }
}

// Two bfloat16 values along K in one 32-bit word, the even K index in the low half: what
// vdpbf16ps reads from each operand.
using Pair = uint32_t;

// The pairs twin of tile_avx512: C[R x 32] from pa (kc pairs x 12) and pb (kc pairs x 32).
template <int R>
__attribute__((target("avx512f,avx512bf16"))) void tile_pairs(int64_t kc, const Pair* pa,
                                                              const Pair* pb, float* c,
                                                              int64_t ldc, const Update& u,
                                                              bool raw) {
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m512i b0 = _mm512_loadu_si512(pb + kk * 32), b1 = _mm512_loadu_si512(pb + kk * 32 + 16);
    const Pair* ak = pa + kk * 12;
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512i x = _mm512_set1_epi32(static_cast<int>(ak[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], (__m512bh)x, (__m512bh)b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], (__m512bh)x, (__m512bh)b1);
    }
  }
  store_tile_avx512<R>(acc, c, ldc, u, raw);
}

#endif

bool cpu_has(GemmIsa isa) {
  return isa == GemmIsa::Avx512 ? cpu_has_avx512f() : cpu_has_avx2_fma();
}

#if !defined(__x86_64__)
using Pair = uint32_t;
#endif

// Pairs in AMX's layout (HalfKernel::Tiles): a type of its own so that packing and lengths
// follow the tiles. A tile row holds kTilePairs pairs (32 bfloat16 values of K: 64 bytes).
// B's panels are Pair panels (kTileNR columns of pairs per row of K pairs) whose length is
// rounded up to whole tiles with zero pairs; A's micro-panels hold, per step of kTilePairs pairs,
// kTileMR rows of kTilePairs pairs each (zero past the rows and K).
enum class TilePair : uint32_t {};
constexpr int64_t kTilePairs = 16;
constexpr int kTileMR = 32, kTileNR = 32;

// The K block of the kernel for E (the tiles sum straight into C, so theirs is not part of the
// result's definition).
template <typename E>
constexpr int64_t k_block() {
  return std::is_same_v<E, TilePair> ? kTileKBlock : kKc;
}

#if defined(__x86_64__)

// C[R x 32] (R = 16 or 32, rows ldc apart) and the products of pa (kp pairs of kTileMR rows, in
// steps) and pb (kp pairs x 32 columns), the tiles configured: with alpha == 1 they are added
// into C (gemm.h: Tiles); other alpha sums the block apart and updates C as the other kernels do.
template <int R>
void tile_amx(int64_t kp, const TilePair* pa, const TilePair* pb, float* c, int64_t ldc,
              const Update& u, bool) {
  static_assert(R == 16 || R == 32);
  alignas(64) float sums[R * kTileNR];
  const bool chain = u.alpha == 1.0f;
  if (chain && u.first && u.beta != 0.0f && u.beta != 1.0f) {
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < kTileNR; ++j) c[i * ldc + j] *= u.beta;
    }
  }
  tile_block<R / 16, 2>(2 * kp, reinterpret_cast<const bfloat16_t*>(pa), 2 * kTilePairs,
                        2 * kTilePairs * kTileMR, reinterpret_cast<const uint32_t*>(pb), kTileNR,
                        chain && !(u.first && u.beta == 0.0f), chain ? c : sums,
                        chain ? ldc : kTileNR);
  if (chain) return;
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < kTileNR; ++j) {
      c[i * ldc + j] = updated(sums[i * kTileNR + j], c[i * ldc + j], u);
    }
  }
}

#endif

// E: the packed element (float, or a Pair of bfloat16 values).
template <typename E>
using TileFn = void (*)(int64_t, const E*, const E*, float*, int64_t, const Update&, bool);
// The kernel for the last h < MR rows of a block and how many rows it computes (at least h).
template <typename E>
struct EdgeTile {
  TileFn<E> fn;
  int64_t rows;
};
template <typename E>
using EdgeFn = EdgeTile<E> (*)(int64_t h);

// Packed elements of a K range of kcl values.
template <typename E>
constexpr int64_t packed_len(int64_t kcl) {
  if constexpr (std::is_same_v<E, TilePair>) {
    return (kcl + 2 * kTilePairs - 1) / (2 * kTilePairs) * kTilePairs;
  }
  return std::is_same_v<E, Pair> ? (kcl + 1) / 2 : kcl;
}

// op(x)[r][kk] as E: a float (widened from a half value), or the pair (kk, kk + 1) with a zero
// past kcl. `at(r, kk)` reads one value as its bits or as a float.
template <typename E, typename In, typename At>
inline E packed_value(At at, int64_t r, int64_t kk, int64_t kcl) {
  if constexpr (std::is_same_v<E, Pair>) {
    const uint32_t lo = at(r, kk).bits, hi = kk + 1 < kcl ? at(r, kk + 1).bits : 0u;
    return lo | (hi << 16);
  } else {
    return static_cast<float>(at(r, kk));
  }
}

#if defined(__x86_64__)

// Packing transposes blocks of 8 x 8 in registers (a scalar copy moves one element per cycle
// at best, and the packs of a 256 x 512 x 512 product took ~20% of its time). Packing moves
// bytes only: the results are the same bits whichever way it runs.

// r[i] = row i of an 8 x 8 block in, column i out.
__attribute__((target("avx2"))) inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// dst[kk * ld + i] = src[i * lds + kk] for i < rows (a multiple of 4, at most 8 per call below)
// and kk < k8 (a multiple of 8): `rows` source rows, contiguous along kk, written as columns.
__attribute__((target("avx2"))) void transpose_rows(const float* src, int64_t lds, int rows,
                                                    int64_t k8, float* dst, int64_t ld) {
  for (int i0 = 0; i0 < rows; i0 += 8) {
    const float* s = src + i0 * lds;
    float* d = dst + i0;
    if (rows - i0 >= 8) {
      for (int64_t kk = 0; kk < k8; kk += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * lds + kk);
        transpose8(r);
        for (int j = 0; j < 8; ++j) _mm256_storeu_ps(d + (kk + j) * ld, r[j]);
      }
      continue;
    }
    for (int64_t kk = 0; kk < k8; kk += 8) {  // four rows: 4 x 8 -> 8 x 4
      const __m256 q0 = _mm256_loadu_ps(s + kk), q1 = _mm256_loadu_ps(s + lds + kk);
      const __m256 q2 = _mm256_loadu_ps(s + 2 * lds + kk), q3 = _mm256_loadu_ps(s + 3 * lds + kk);
      const __m256 t0 = _mm256_unpacklo_ps(q0, q1), t1 = _mm256_unpackhi_ps(q0, q1);
      const __m256 t2 = _mm256_unpacklo_ps(q2, q3), t3 = _mm256_unpackhi_ps(q2, q3);
      const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                           _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
      for (int j = 0; j < 4; ++j) {
        _mm_storeu_ps(d + (kk + j) * ld, _mm256_castps256_ps128(u[j]));
        _mm_storeu_ps(d + (kk + j + 4) * ld, _mm256_extractf128_ps(u[j], 1));
      }
    }
  }
}

#endif

// dst[kk * ld + i] = src[i * lds + kk] for i < rows, kk < kcl (a transposing copy of 32-bit
// elements: floats, or pairs of bfloat16 values; only bits move).
template <typename E>
inline void transpose_copy(const E* src, int64_t lds, int rows, int64_t kcl, E* dst, int64_t ld) {
  static_assert(sizeof(E) == sizeof(float));
  int64_t done = 0;
#if defined(__x86_64__)
  if (rows % 4 == 0 && cpu_has(GemmIsa::Avx2)) {
    done = kcl / 8 * 8;
    transpose_rows(reinterpret_cast<const float*>(src), lds, rows, done,
                   reinterpret_cast<float*>(dst), ld);
  }
#endif
  for (int i = 0; i < rows; ++i) {
    for (int64_t kk = done; kk < kcl; ++kk) dst[kk * ld + i] = src[i * lds + kk];
  }
}

// n half values widened to float32 (exact). bfloat16: its bits moved up 16 (the compiler
// vectorizes the loop); float16: F16C's vcvtph2ps where the CPU has it.
#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void widen_f16c(const float16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
#endif
template <typename In>
void widen(const In* src, int64_t n, float* dst) {
  if constexpr (std::is_same_v<In, bfloat16_t>) {
    for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t{src[i].bits} << 16);
  } else {
#if defined(__x86_64__)
    if (cpu_has_f16c() && cpu_has(GemmIsa::Avx2)) return widen_f16c(src, n, dst);
#endif
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  }
}

// dst[kk * ld + i] = float(src[i * lds + kk]) for i < rows, kk < kcl: the rows widened into a
// scratch block, then moved by transpose_copy's 8 x 8 register transposes (packed_value widens
// and places one element at a time).
template <typename In>
void widen_transpose(const In* src, int64_t lds, int rows, int64_t kcl, float* dst, int64_t ld) {
  Scratch<float> tmp(static_cast<size_t>(rows * kcl));
  for (int i = 0; i < rows; ++i) widen(src + i * lds, kcl, tmp.data() + i * kcl);
  transpose_copy(tmp.data(), kcl, rows, kcl, dst, ld);
}

#if defined(__x86_64__)
// vpermt2w's indices that interleave two rows of 32 16-bit values: (r0[j], r1[j]) for j < 16, then
// for 16 <= j < 32 (r1's values are indices 32 and up).
alignas(64) constexpr uint16_t kInterleave[64] = {
    0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
    11, 43, 12, 44, 13, 45, 14, 46, 15, 47, 16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53,
    22, 54, 23, 55, 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};

// dst[kq * 32 + j] = the pair (src[2 kq][j], src[2 kq + 1][j]) for j < 32, kq < kcl / 2: two rows
// of 32 bfloat16 values interleaved per instruction pair (vpermt2w), rows lds apart.
__attribute__((target("avx512f,avx512bw"))) void interleave_rows32(const bfloat16_t* src,
                                                                  int64_t lds, int64_t kcl,
                                                                  Pair* dst) {
  const __m512i ilo = _mm512_load_si512(kInterleave), ihi = _mm512_load_si512(kInterleave + 32);
  for (int64_t kq = 0; kq < kcl / 2; ++kq) {
    const __m512i r0 = _mm512_loadu_si512(src + 2 * kq * lds);
    const __m512i r1 = _mm512_loadu_si512(src + (2 * kq + 1) * lds);
    _mm512_storeu_si512(dst + kq * 32, _mm512_permutex2var_epi16(r0, ilo, r1));
    _mm512_storeu_si512(dst + kq * 32 + 16, _mm512_permutex2var_epi16(r0, ihi, r1));
  }
}

// The same for the first `h` <= 16 columns, into `width` <= 16 pairs per row of dst (ld apart):
// columns past h are zero pairs.
__attribute__((target("avx512f,avx512bw"))) void interleave_rows16(const bfloat16_t* src,
                                                                  int64_t lds, int64_t kcl, int h,
                                                                  int width, Pair* dst,
                                                                  int64_t ld) {
  const __m512i ilo = _mm512_load_si512(kInterleave);
  const __mmask32 in = static_cast<__mmask32>((1u << h) - 1);
  const __mmask16 out = static_cast<__mmask16>((1u << width) - 1);
  for (int64_t kq = 0; kq < kcl / 2; ++kq) {
    const __m512i r0 = _mm512_maskz_loadu_epi16(in, src + 2 * kq * lds);
    const __m512i r1 = _mm512_maskz_loadu_epi16(in, src + (2 * kq + 1) * lds);
    _mm512_mask_storeu_epi32(dst + kq * ld, out, _mm512_permutex2var_epi16(r0, ilo, r1));
  }
}
#endif

// Panel p (columns n0 + p * NR ...) of op(b) over K range [kb0, kb0 + kcl) into dst
// (packed_len(kcl) x NR), columns past the chunk's nc zeros.
template <int NR, typename E, typename In>
void pack_b_panel(bool tb, const In* b, int64_t ldb, int64_t n0, int64_t nc, int64_t p,
                  int64_t kb0, int64_t kcl, E* dst) {
  const int64_t j0 = n0 + p * NR, w = std::min<int64_t>(NR, n0 + nc - j0);
  const int64_t kp = packed_len<E>(kcl);
  if constexpr (std::is_same_v<E, float> && std::is_same_v<In, float>) {
    if (!tb) {
      if (w == NR) {  // a fixed-length copy the compiler keeps in registers (not a memmove call)
        for (int64_t kk = 0; kk < kcl; ++kk) {
          const float* src = b + (kb0 + kk) * ldb + j0;
          float* d = dst + kk * NR;
          for (int j = 0; j < NR; ++j) d[j] = src[j];
        }
        return;
      }
      for (int64_t kk = 0; kk < kcl; ++kk) {
        const float* src = b + (kb0 + kk) * ldb + j0;
        float* d = dst + kk * NR;
        std::copy(src, src + w, d);
        std::fill(d + w, d + NR, 0.0f);
      }
      return;
    }
  }
  if constexpr (std::is_same_v<E, float> && !std::is_same_v<In, float>) {
    if (tb) {  // rows of b widened and transposed; the last w % 4 columns below
      const int64_t wv = w / 4 * 4;
      widen_transpose(b + j0 * ldb + kb0, ldb, static_cast<int>(wv), kcl, dst, NR);
      for (int64_t kk = 0; kk < kcl; ++kk) {
        for (int64_t j = wv; j < NR; ++j) {
          dst[kk * NR + j] = j < w ? static_cast<float>(b[(j0 + j) * ldb + kb0 + kk]) : 0.0f;
        }
      }
      return;
    }
  }
  int64_t wv = 0;  // columns packed by transposing 32-bit elements
  if constexpr (std::is_same_v<E, In>) {
    if (tb) wv = w / 4 * 4;
  } else if constexpr (std::is_same_v<E, Pair>) {
    // A pair of op(b)'s column j is 32 contiguous bits of b's row j when rows and blocks start
    // on even elements of a 4-byte aligned array.
    if (tb && ldb % 2 == 0 && reinterpret_cast<uintptr_t>(b) % 4 == 0) wv = w / 4 * 4;
  }
#if defined(__x86_64__)
  if constexpr (std::is_same_v<E, Pair> && NR == 32) {
    // Row-major b: pairs from two rows, whole panels at once.
    if (!tb && w == NR && cpu_has_avx512_skx()) {
      interleave_rows32(b + kb0 * ldb + j0, ldb, kcl, dst);
      for (int64_t j = 0; j < NR && kcl % 2 != 0; ++j) {
        dst[(kp - 1) * NR + j] = b[(kb0 + kcl - 1) * ldb + j0 + j].bits;
      }
      return;
    }
  }
#endif
  if (wv > 0) {
    transpose_copy(reinterpret_cast<const E*>(b + j0 * ldb + kb0), ldb * int64_t{sizeof(In)} / 4,
                   static_cast<int>(wv), kcl / (std::is_same_v<E, Pair> ? 2 : 1), dst, NR);
    if constexpr (std::is_same_v<E, Pair>) {  // the last pair: one value and a zero
      for (int64_t j = 0; j < wv && kcl % 2 != 0; ++j) {
        dst[(kp - 1) * NR + j] = b[(j0 + j) * ldb + kb0 + kcl - 1].bits;
      }
    }
  }
  auto at = [&](int64_t j, int64_t kk) {
    return tb ? b[(j0 + j) * ldb + kb0 + kk] : b[(kb0 + kk) * ldb + j0 + j];
  };
  for (int64_t kq = 0; kq < kp; ++kq) {
    const int64_t kk = std::is_same_v<E, Pair> ? 2 * kq : kq;
    for (int64_t j = wv; j < NR; ++j) {
      dst[kq * NR + j] = j < w ? packed_value<E, In>(at, j, kk, kcl) : E{0};
    }
  }
}

// pack_a for the tiles (TilePair's layout): row by row, 32 values of K at a time.
template <int MR, typename In>
void pack_a_tiles(bool ta, const In* a, int64_t lda, int64_t i0, int64_t rows, int64_t kb0,
                  int64_t kcl, TilePair* out) {
  static_assert(MR == kTileMR);
  const int64_t kp = packed_len<TilePair>(kcl), step = 2 * kTilePairs;  // values of K per step
  for (int64_t r0 = 0; r0 < rows; r0 += MR) {
    In* dst = reinterpret_cast<In*>(out + (r0 / MR) * kp * MR);  // value kk of row r: see below
    const int64_t h = std::min<int64_t>(MR, rows - r0);
    if (h < MR || kcl % step != 0) std::fill(dst, dst + 2 * kp * MR, In{});
    for (int64_t r = 0; r < h; ++r) {
      const int64_t row = i0 + r0 + r;
      for (int64_t kk0 = 0; kk0 < kcl; kk0 += step) {
        In* d = dst + ((kk0 / step) * MR + r) * step;
        const int64_t len = std::min(step, kcl - kk0);
        if (!ta && len == step) {  // a constant size: moved in registers, not by a memcpy call
          std::memcpy(d, a + row * lda + kb0 + kk0, step * sizeof(In));
          continue;
        }
        if (!ta) {
          std::copy_n(a + row * lda + kb0 + kk0, len, d);
          continue;
        }
        for (int64_t t = 0; t < len; ++t) d[t] = a[(kb0 + kk0 + t) * lda + row];
      }
    }
  }
}

// Rows [i0, i0 + rows) and K range [kb0, kb0 + kcl) of op(a) as MR-row micro-panels of
// packed_len(kcl) x MR, rows past the block zeros.
template <int MR, typename E, typename In>
void pack_a(bool ta, const In* a, int64_t lda, int64_t i0, int64_t rows, int64_t kb0,
            int64_t kcl, E* out) {
  const int64_t kp = packed_len<E>(kcl);
  for (int64_t r0 = 0; r0 < rows; r0 += MR) {
    E* dst = out + (r0 / MR) * kp * MR;
    const int64_t h = std::min<int64_t>(MR, rows - r0);
    if constexpr (std::is_same_v<E, float> && std::is_same_v<In, float>) {
      if (ta) {
        for (int64_t kk = 0; kk < kcl; ++kk) {
          const float* src = a + (kb0 + kk) * lda + i0 + r0;
          float* d = dst + kk * MR;
          std::copy(src, src + h, d);
          std::fill(d + h, d + MR, 0.0f);
        }
        continue;
      }
    }
#if defined(__x86_64__)
    if constexpr (std::is_same_v<E, Pair> && MR <= 16) {
      // Transposed a: pairs from two rows of a, a micro-panel at once.
      if (ta && cpu_has_avx512_skx()) {
        interleave_rows16(a + kb0 * lda + i0 + r0, lda, kcl, static_cast<int>(h), MR, dst, MR);
        for (int64_t r = 0; r < MR && kcl % 2 != 0; ++r) {
          dst[(kp - 1) * MR + r] = r < h ? a[(kb0 + kcl - 1) * lda + i0 + r0 + r].bits : 0u;
        }
        continue;
      }
    }
#endif
    if constexpr (std::is_same_v<E, float> && !std::is_same_v<In, float>) {
      if (!ta) {  // rows of a widened and transposed; the last h % 4 rows below
        const int64_t hv = h / 4 * 4;
        widen_transpose(a + (i0 + r0) * lda + kb0, lda, static_cast<int>(hv), kcl, dst, MR);
        for (int64_t kk = 0; kk < kcl; ++kk) {
          for (int64_t r = hv; r < MR; ++r) {
            const int64_t row = i0 + r0 + r;
            dst[kk * MR + r] = r < h ? static_cast<float>(a[row * lda + kb0 + kk]) : 0.0f;
          }
        }
        continue;
      }
    }
    int64_t hv = 0;  // rows packed by transposing 32-bit elements
    if constexpr (std::is_same_v<E, In>) {
      if (!ta) hv = h / 4 * 4;
    } else if constexpr (std::is_same_v<E, Pair>) {
      if (!ta && lda % 2 == 0 && reinterpret_cast<uintptr_t>(a) % 4 == 0) hv = h / 4 * 4;
    }
    if (hv > 0) {
      transpose_copy(reinterpret_cast<const E*>(a + (i0 + r0) * lda + kb0),
                     lda * int64_t{sizeof(In)} / 4, static_cast<int>(hv),
                     kcl / (std::is_same_v<E, Pair> ? 2 : 1), dst, MR);
      if constexpr (std::is_same_v<E, Pair>) {  // the last pair: one value and a zero
        for (int64_t r = 0; r < hv && kcl % 2 != 0; ++r) {
          dst[(kp - 1) * MR + r] = a[(i0 + r0 + r) * lda + kb0 + kcl - 1].bits;
        }
      }
    }
    auto at = [&](int64_t r, int64_t kk) {
      return ta ? a[(kb0 + kk) * lda + i0 + r0 + r] : a[(i0 + r0 + r) * lda + kb0 + kk];
    };
    for (int64_t kq = 0; kq < kp; ++kq) {
      const int64_t kk = std::is_same_v<E, Pair> ? 2 * kq : kq;
      for (int64_t r = hv; r < MR; ++r) {
        dst[kq * MR + r] = r < h ? packed_value<E, In>(at, r, kk, kcl) : E{0};
      }
    }
  }
}

// The tiles' packing (overloads the templates above take second place to): B's panel as Pairs
// with zero pairs to whole tiles; A by pack_a_tiles.
template <int NR, typename In>
void pack_b_panel(bool tb, const In* b, int64_t ldb, int64_t n0, int64_t nc, int64_t p,
                  int64_t kb0, int64_t kcl, TilePair* dst) {
  pack_b_panel<NR, Pair>(tb, b, ldb, n0, nc, p, kb0, kcl, reinterpret_cast<Pair*>(dst));
  std::fill(dst + packed_len<Pair>(kcl) * NR, dst + packed_len<TilePair>(kcl) * NR, TilePair{0});
}
template <int MR, typename In>
void pack_a(bool ta, const In* a, int64_t lda, int64_t i0, int64_t rows, int64_t kb0,
            int64_t kcl, TilePair* out) {
  pack_a_tiles<MR>(ta, a, lda, i0, rows, kb0, kcl, out);
}

// The right operand: op(b) of a matrix, or the transpose of rows a function writes (hgemm_rows:
// a dequantized weight, one panel's rows at a time, never whole).
template <typename In>
struct RightOperand {
  bool tb;
  const In* b;
  int64_t ldb;
  const RowsFn<In>* rows = nullptr;

  // Panel p of the columns from n0 (nc of them), K range [kb0, kb0 + kcl), as pack_b_panel.
  template <int NR, typename E>
  void pack(int64_t n0, int64_t nc, int64_t p, int64_t kb0, int64_t kcl, E* dst) const {
    if (rows == nullptr) return pack_b_panel<NR>(tb, b, ldb, n0, nc, p, kb0, kcl, dst);
    // The panel's rows into a block (an even pitch: pairs are 32-bit words), packed from there.
    const int64_t j0 = n0 + p * NR, w = std::min<int64_t>(NR, n0 + nc - j0);
    const int64_t ld = (kcl + 1) / 2 * 2;
    thread_local std::vector<In> block;
    block.resize(static_cast<size_t>(w * ld));
    (*rows)(j0, w, kb0, kcl, block.data(), ld);
    pack_b_panel<NR>(true, block.data(), ld, 0, w, 0, 0, kcl, dst);
  }
};

// Waits for another thread to finish packing a panel (microseconds of work).
inline void pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// With out16 (alpha 1, beta 0, one K block: hgemm_rounded), each tile's sums go through the
// scratch tile, rounded to bfloat16 into out16 (rows ldo apart); c is not used.
template <int MR, int NR, typename E, typename In>
void gemm_tiles(TileFn<E> tile, EdgeFn<E> edge, bool ta, int64_t m, int64_t n, int64_t k,
                float alpha, const In* a, int64_t lda, const RightOperand<In>& b, float beta,
                float* c, int64_t ldc, bfloat16_t* out16 = nullptr, int64_t ldo = 0) {
  // K blocks of k_block<E>() values, or one of k (the buffers below are sized by it: a 576-value
  // K in 2,048-value blocks spread x's packed copy over 3.6 times its size).
  const int64_t kKc = std::min(k_block<E>(), k);
  const int64_t kpb = packed_len<E>(kKc);  // packed length of a full K block
  const int64_t chunk = std::max<int64_t>(NR, kMaxPackedB / k / NR * NR);
  const int64_t threads = detail::num_threads();
  const int64_t kblocks = (k + kKc - 1) / kKc;
  const int64_t units = (m + MR - 1) / MR;  // MR-row micro-panels of C
  // a packed once for the whole call where it fits kMaxPackedA, shared by every task as b's
  // panels are (micro-panel u of K block kb at shared_a + (kb * units + u) * kpb * MR, states as
  // b's); otherwise each task packs its own rows per K block. (Per task, the 1 B model's prefill
  // packed x once per 512 columns of every product.) Packing moves bytes only: same bits.
  const bool share_a = units * MR * kpb * kblocks <= kMaxPackedA;
  allocator::Buffer abuf_shared =
      share_a ? allocator::malloc(static_cast<size_t>(units * MR * kpb * kblocks) * sizeof(E))
              : allocator::Buffer{};
  E* shared_a = share_a ? static_cast<E*>(abuf_shared.raw_ptr()) : nullptr;
  std::unique_ptr<std::atomic<int>[]> a_state(new std::atomic<int>[share_a ? kblocks * units : 0]);
  for (int64_t i = 0; share_a && i < kblocks * units; ++i) {
    a_state[i].store(0, std::memory_order_relaxed);
  }
  for (int64_t n0 = 0; n0 < n; n0 += chunk) {
    const int64_t nc = std::min(chunk, n - n0);
    const int64_t panels = (nc + NR - 1) / NR;
    allocator::Buffer buf = allocator::malloc(static_cast<size_t>(panels * NR * kpb * kblocks) * sizeof(E));
    E* packed = static_cast<E*>(buf.raw_ptr());
    // Panel p of K block kb sits at packed + kb * kpb * panels * NR + p * kp * NR. Its state:
    // 0 unpacked, 1 being packed, 2 ready. The first task to need a panel packs it, so packing
    // is shared by whichever threads are running, without a barrier.
    std::unique_ptr<std::atomic<int>[]> state(new std::atomic<int>[kblocks * panels]);
    for (int64_t i = 0; i < kblocks * panels; ++i) state[i].store(0, std::memory_order_relaxed);
    // Tasks split the columns first, one block per thread (at most kMaxTaskColumns wide, at least
    // kMinTaskColumns: narrower, packing a's rows in every task would cost more): then
    // the panels a thread packs are the ones it reads, and no core waits for lines another core
    // wrote (on this 2-core machine that costs 10-17% of a 256 x 512 x 512 product). Rows are
    // split only when the columns cannot feed the pool. None of this changes a bit of the result.
    int64_t tc = std::max((nc + kMaxTaskColumns - 1) / kMaxTaskColumns,
                          std::min(threads, std::max<int64_t>(1, nc / kMinTaskColumns)));
    // A whole number of tasks per thread where the panels allow it (3 column blocks on 2
    // threads left one thread idle a third of the time: 512 x 576 x 1536 ran at 2/3 speed).
    if (tc > threads && tc % threads != 0 && (tc + threads - 1) / threads * threads <= panels) {
      tc = (tc + threads - 1) / threads * threads;
    }
    const int64_t tr = std::min(units, std::max<int64_t>(1, (threads + tc - 1) / tc));
    parallel_blocks(static_cast<size_t>(tr * tc), 1, [&](size_t lo, size_t hi) {
      thread_local std::vector<E> abuf;
      alignas(64) float scratch[MR * NR];
      abuf.resize(static_cast<size_t>((kMc + MR - 1) / MR * MR * kpb));
#if defined(__x86_64__)
      if constexpr (std::is_same_v<E, TilePair>) configure_tiles();
#endif
      for (size_t t = lo; t < hi; ++t) {
        const int64_t ti = static_cast<int64_t>(t) / tc, tj = static_cast<int64_t>(t) % tc;
        const int64_t row0 = ti * units / tr * MR, row1 = std::min(m, (ti + 1) * units / tr * MR);
        const int64_t p0 = tj * panels / tc, p1 = (tj + 1) * panels / tc;
        for (int64_t kb = 0; kb < kblocks; ++kb) {
          const int64_t kb0 = kb * kKc, kcl = std::min(kKc, k - kb0), kp = packed_len<E>(kcl);
          const Update u{alpha, beta, kb == 0};
          E* bblock = packed + kb * kpb * panels * NR;
          std::atomic<int>* st = state.get() + kb * panels;
          for (int64_t p = p0; p < p1; ++p) {
            int idle = 0;
            if (st[p].load(std::memory_order_acquire) == 0 &&
                st[p].compare_exchange_strong(idle, 1, std::memory_order_acq_rel)) {
              b.template pack<NR>(n0, nc, p, kb0, kcl, bblock + p * kp * NR);
              st[p].store(2, std::memory_order_release);
            }
          }
          for (int64_t i0 = row0; i0 < row1; i0 += kMc) {
            const int64_t rows = std::min(kMc, row1 - i0);
            const E* ablock = abuf.data();  // micro-panel r0 / MR at ablock + (r0 / MR) * astride
            int64_t astride = kp * MR;
            if (share_a) {
              const int64_t u0 = i0 / MR, u1 = (i0 + rows + MR - 1) / MR;
              std::atomic<int>* ast = a_state.get() + kb * units;
              E* base = shared_a + kb * units * kpb * MR;
              for (int64_t un = u0; un < u1; ++un) {
                int idle = 0;
                if (ast[un].load(std::memory_order_acquire) == 0 &&
                    ast[un].compare_exchange_strong(idle, 1, std::memory_order_acq_rel)) {
                  pack_a<MR>(ta, a, lda, un * MR, std::min<int64_t>(MR, m - un * MR), kb0, kcl,
                             base + un * kpb * MR);
                  ast[un].store(2, std::memory_order_release);
                }
              }
              for (int64_t un = u0; un < u1; ++un) {
                while (ast[un].load(std::memory_order_acquire) != 2) pause();
              }
              ablock = base + u0 * kpb * MR;
              astride = kpb * MR;
            } else {
              pack_a<MR>(ta, a, lda, i0, rows, kb0, kcl, abuf.data());
            }
            for (int64_t p = p0; p < p1; ++p) {
              while (st[p].load(std::memory_order_acquire) != 2) pause();
              const E* pb = bblock + p * kp * NR;
              const int64_t w = std::min<int64_t>(NR, nc - p * NR);
              for (int64_t r0 = 0; r0 < rows; r0 += MR) {
                const E* pa = ablock + (r0 / MR) * astride;
                const int64_t h = std::min<int64_t>(MR, rows - r0);
                const EdgeTile<E> t = h == MR ? EdgeTile<E>{tile, MR} : edge(h);
                if (out16 != nullptr) {
                  t.fn(kp, pa, pb, scratch, NR, u, false);
                  narrow_rows_to_bf16(scratch, NR, h, w, out16 + (i0 + r0) * ldo + n0 + p * NR,
                                      ldo);
                  continue;
                }
                float* cp = c + (i0 + r0) * ldc + n0 + p * NR;
                if (t.rows == h && w == NR) {
                  t.fn(kp, pa, pb, cp, ldc, u, false);
                  continue;
                }
                if constexpr (std::is_same_v<E, TilePair>) {
                  // The tiles add into C: they see the edge's C in the scratch tile.
                  for (int64_t i = 0; i < t.rows; ++i) {
                    for (int64_t j = 0; j < NR; ++j) {
                      scratch[i * NR + j] = i < h && j < w ? cp[i * ldc + j] : 0.0f;
                    }
                  }
                  t.fn(kp, pa, pb, scratch, NR, u, false);
                  for (int64_t i = 0; i < h; ++i) std::copy_n(scratch + i * NR, w, cp + i * ldc);
                  continue;
                }
                t.fn(kp, pa, pb, scratch, NR, u, true);
                for (int64_t i = 0; i < h; ++i) {
                  for (int64_t j = 0; j < w; ++j) {
                    cp[i * ldc + j] = updated(scratch[i * NR + j], cp[i * ldc + j], u);
                  }
                }
              }
            }
          }
        }
      }
#if defined(__x86_64__)
      if constexpr (std::is_same_v<E, TilePair>) release_tiles();
#endif
    });
    allocator::free(buf);
  }
  if (share_a) allocator::free(abuf_shared);
}

// The float32 kernel of `isa` over operands of type In (widened to float32 as they are packed).
template <GemmIsa isa, typename In>
void run_float_tiles(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const In* a,
                     int64_t lda, const RightOperand<In>& b, float beta, float* c, int64_t ldc) {
#if defined(__x86_64__)
  if constexpr (isa == GemmIsa::Avx512) {
    const EdgeFn<float> edge = [](int64_t h) {
      return h <= 4 ? EdgeTile<float>{tile_avx512<4>, 4}
             : h <= 8 ? EdgeTile<float>{tile_avx512<8>, 8}
                      : EdgeTile<float>{tile_avx512<12>, 12};
    };
    gemm_tiles<12, 32, float>(tile_avx512<12>, edge, ta, m, n, k, alpha, a, lda, b, beta, c, ldc);
  } else {
    const EdgeFn<float> edge = [](int64_t) { return EdgeTile<float>{tile_avx2, 6}; };
    gemm_tiles<6, 16, float>(tile_avx2, edge, ta, m, n, k, alpha, a, lda, b, beta, c, ldc);
  }
#endif
}

}  // namespace

bool gemm_supported(GemmIsa isa) { return cpu_has(isa); }

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           GemmIsa isa) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) throw std::invalid_argument("[sgemm] needs k > 0, got " + std::to_string(k));
  if (isa == GemmIsa::Best) isa = cpu_has(GemmIsa::Avx512) ? GemmIsa::Avx512 : GemmIsa::Avx2;
  if (!cpu_has(isa)) {
    throw std::invalid_argument(std::string("[sgemm] this CPU has no ") +
                                (isa == GemmIsa::Avx512 ? "AVX-512" : "AVX2 + FMA") +
                                " (check gemm_supported first)");
  }
  const RightOperand<float> rb{tb, b, ldb};
  if (isa == GemmIsa::Avx512) {
    run_float_tiles<GemmIsa::Avx512>(ta, m, n, k, alpha, a, lda, rb, beta, c, ldc);
  } else {
    run_float_tiles<GemmIsa::Avx2>(ta, m, n, k, alpha, a, lda, rb, beta, c, ldc);
  }
}

bool hgemm_supported(HalfKernel kernel) {
  switch (kernel) {
    case HalfKernel::Widen: return gemm_supported();
    case HalfKernel::Pairs: return cpu_has_avx512f() && cpu_has_avx512_bf16();
    case HalfKernel::Tiles: return cpu_has_avx512f() && cpu_has_amx_bf16();
  }
  return false;
}

template <typename T>
HalfKernel hgemm_kernel() {
  if (!std::is_same_v<T, bfloat16_t> || half_isa() != HalfIsa::avx512_bf16) {
    return HalfKernel::Widen;
  }
  if (hgemm_supported(HalfKernel::Tiles)) return HalfKernel::Tiles;
  return cpu_is_intel() ? HalfKernel::Widen : HalfKernel::Pairs;
}

namespace {

// hgemm and hgemm_rows: the checks, then the kernel.
template <typename T>
void run_hgemm(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
               const RightOperand<T>& b, float beta, float* c, int64_t ldc, HalfKernel kernel,
               bfloat16_t* out16 = nullptr, int64_t ldo = 0) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) throw std::invalid_argument("[hgemm] needs k > 0, got " + std::to_string(k));
  if (!gemm_supported() || !hgemm_supported(kernel) ||
      (kernel != HalfKernel::Widen && !std::is_same_v<T, bfloat16_t>)) {
    throw std::invalid_argument(
        "[hgemm] this CPU has no such kernel for it (check gemm_supported and hgemm_supported)");
  }
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, bfloat16_t>) {
    if (kernel == HalfKernel::Pairs) {
      const EdgeFn<Pair> edge = [](int64_t h) {
        return h <= 4 ? EdgeTile<Pair>{tile_pairs<4>, 4}
               : h <= 8 ? EdgeTile<Pair>{tile_pairs<8>, 8}
                        : EdgeTile<Pair>{tile_pairs<12>, 12};
      };
      gemm_tiles<12, 32, Pair>(tile_pairs<12>, edge, ta, m, n, k, alpha, a, lda, b, beta, c, ldc);
      return;
    }
    if (kernel == HalfKernel::Tiles) {
      const EdgeFn<TilePair> edge = [](int64_t h) {
        return h <= 16 ? EdgeTile<TilePair>{tile_amx<16>, 16}
                       : EdgeTile<TilePair>{tile_amx<32>, 32};
      };
      gemm_tiles<kTileMR, kTileNR, TilePair>(tile_amx<32>, edge, ta, m, n, k, alpha, a, lda, b,
                                             beta, c, ldc, out16, ldo);
      return;
    }
  }
  if (cpu_has(GemmIsa::Avx512)) {
    run_float_tiles<GemmIsa::Avx512>(ta, m, n, k, alpha, a, lda, b, beta, c, ldc);
  } else {
    run_float_tiles<GemmIsa::Avx2>(ta, m, n, k, alpha, a, lda, b, beta, c, ldc);
  }
#endif
}

}  // namespace

template <typename T>
void hgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
           const T* b, int64_t ldb, float beta, float* c, int64_t ldc, HalfKernel kernel) {
  run_hgemm(ta, m, n, k, alpha, a, lda, RightOperand<T>{tb, b, ldb}, beta, c, ldc, kernel);
}

template <typename T>
void hgemm_rows(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const RowsFn<T>& rows,
                float* c, int64_t ldc, HalfKernel kernel) {
  run_hgemm(false, m, n, k, 1.0f, a, lda, RightOperand<T>{true, nullptr, 0, &rows}, 0.0f, c, ldc,
            kernel);
}

namespace {
bool rounded_served(int64_t m, int64_t n, int64_t k) {
  return m > 0 && n > 0 && k > 0 && k <= kTileKBlock &&
         hgemm_kernel<bfloat16_t>() == HalfKernel::Tiles;
}
}  // namespace

bool hgemm_rounded(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const bfloat16_t* a,
                   int64_t lda, const bfloat16_t* b, int64_t ldb, bfloat16_t* out, int64_t ldo) {
  if (!rounded_served(m, n, k)) return false;
  run_hgemm(ta, m, n, k, 1.0f, a, lda, RightOperand<bfloat16_t>{tb, b, ldb}, 0.0f, nullptr, 0,
            HalfKernel::Tiles, out, ldo);
  return true;
}

bool hgemm_rows_rounded(int64_t m, int64_t n, int64_t k, const bfloat16_t* a, int64_t lda,
                        const RowsFn<bfloat16_t>& rows, bfloat16_t* out, int64_t ldo) {
  if (!rounded_served(m, n, k)) return false;
  run_hgemm(false, m, n, k, 1.0f, a, lda, RightOperand<bfloat16_t>{true, nullptr, 0, &rows}, 0.0f,
            nullptr, 0, HalfKernel::Tiles, out, ldo);
  return true;
}

template HalfKernel hgemm_kernel<float16_t>();
template HalfKernel hgemm_kernel<bfloat16_t>();
template void hgemm<float16_t>(bool, bool, int64_t, int64_t, int64_t, float, const float16_t*,
                               int64_t, const float16_t*, int64_t, float, float*, int64_t,
                               HalfKernel);
template void hgemm<bfloat16_t>(bool, bool, int64_t, int64_t, int64_t, float, const bfloat16_t*,
                                int64_t, const bfloat16_t*, int64_t, float, float*, int64_t,
                                HalfKernel);
template void hgemm_rows<float16_t>(int64_t, int64_t, int64_t, const float16_t*, int64_t,
                                    const RowsFn<float16_t>&, float*, int64_t, HalfKernel);
template void hgemm_rows<bfloat16_t>(int64_t, int64_t, int64_t, const bfloat16_t*, int64_t,
                                     const RowsFn<bfloat16_t>&, float*, int64_t, HalfKernel);

}  // namespace tessera::cpu
