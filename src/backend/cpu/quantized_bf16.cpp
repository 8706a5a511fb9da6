// The few-rows product of affine 4-bit weights with bfloat16 x, scales and biases on AVX512_BF16
// (quantized_bf16.h).
#include "backend/cpu/quantized_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/half_gemm.h"
#include "backend/cpu/scratch.h"

namespace tessera::cpu {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

#define TESSERA_QUANT_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

// 16 bfloat16 values (bits) widened to float32.
TESSERA_QUANT_BF16 inline __m512 bf16x16_to_ps(const uint16_t* p, __mmask16 mask) {
  const __m512i v = _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, v, 16));
}

// Affine 4 bits with bfloat16 x, scales and biases (mlx-lm's quantized models), few rows: x's
// bfloat16 pairs times the weights' pairs by vdpbf16ps, 32 products per instruction, accumulated
// in float32.
// The weights are read 64 bytes (128 values) at a time. Dword i holds values 8i..8i+7, one per
// nibble; for s = 0..3, ((dword >> 4s) & 0x000F000F) | 0x43004300 is the bfloat16 pair
// (128 + q[8i+s], 128 + q[8i+s+4]), exact (bfloat16's spacing between 128 and 256 is 1): two
// instructions per 32 values. x is laid out once per call in the same order (x_pairs), so the
// bytes need no shuffle. Per group, s * dot(x, 128 + q) + (b - 128 s) * sum(x) is
// s * dot(x, q) + b * sum(x); the cancellation of the 128s costs ~2^-24 * 128 / 7.5 of the
// result's magnitude, far below bfloat16's rounding. Each lane's group scale comes from a
// permute of 16 groups' scales. Group sizes 32, 64 and 128.
constexpr int64_t kPairBlock = 128;  // values per 64-byte block

// k rounded up to whole 128-value blocks.
int64_t padded_k(int64_t k) { return (k + kPairBlock - 1) / kPairBlock * kPairBlock; }

// x (m, k) as bfloat16 bits in the blocks' order into out (m x padded_k(k)): block b, step s,
// lane i holds the pair (x[128b + 8i + s], x[128b + 8i + s + 4]); the padding is zeros.
void x_pairs(const uint16_t* x, int64_t m, int64_t k, uint16_t* out) {
  const int64_t padded = padded_k(k);
  std::fill(out, out + m * padded, uint16_t{0});
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t b = j / kPairBlock, e = j % kPairBlock, i = e / 8, s = e % 8;
      out[r * padded + b * kPairBlock + (s % 4) * 32 + 2 * i + s / 4] = x[r * k + j];
    }
  }
}

// The sum of 16 lanes. (g++ 12 warns that _mm512_reduce_add_ps's helpers read an undefined
// register, their pass-through operand; the lanes they read are all defined.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
TESSERA_QUANT_BF16 inline float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }
#pragma GCC diagnostic pop

// The bf16 pairs of 64 packed bytes (four steps, as x_pairs orders x): ((d >> 4s) & 0x000F000F)
// | 0x43004300.
[[gnu::always_inline]] TESSERA_QUANT_BF16 inline void nibble_pairs(__m512i d, __m512i* w) {
  const __m512i nibbles = _mm512_set1_epi32(0x000F000F), offset = _mm512_set1_epi32(0x43004300);
  w[0] = _mm512_ternarylogic_epi32(d, nibbles, offset, 0xEA);  // (d & nibbles) | offset
  w[1] = _mm512_ternarylogic_epi32(_mm512_maskz_srli_epi32(0xFFFF, d, 4), nibbles, offset, 0xEA);
  w[2] = _mm512_ternarylogic_epi32(_mm512_maskz_srli_epi32(0xFFFF, d, 8), nibbles, offset, 0xEA);
  w[3] = _mm512_ternarylogic_epi32(_mm512_maskz_srli_epi32(0xFFFF, d, 12), nibbles, offset, 0xEA);
}

// What affine4_col_bf16 needs of a product's shape, computed once per call (g++ turns the
// divisions by the runtime group size into idiv).
struct Affine4Shape {
  int64_t n, groups, row_bytes, blocks, padded;
  int64_t per_window;  // blocks per 16 groups
  int64_t full_blocks;  // whole 64-byte blocks of a row, and the bytes of a last partial one
  __mmask64 tail;
  int shift;  // log2(group size)
  int step;   // groups per block
  Affine4Shape(int64_t n_, int64_t k_, int group_size)
      : n(n_), groups(k_ / group_size), row_bytes(k_ / 2),
        blocks((k_ + kPairBlock - 1) / kPairBlock), padded(blocks * kPairBlock),
        per_window(16 * group_size / kPairBlock), full_blocks(row_bytes / 64),
        tail((__mmask64(1) << (row_bytes % 64)) - 1),
        shift(group_size == 32 ? 5 : group_size == 64 ? 6 : 7),
        step(static_cast<int>(kPairBlock / group_size)) {}
};

// Output column col for M rows of x. (Two weight rows sharing each load of x ran faster from
// cache and at half the speed from memory: the prefetchers follow one stream far better.)
template <int M>
TESSERA_QUANT_BF16 void affine4_col_bf16(const Affine4Shape& sh, const uint16_t* xp,
                                         const float* xsum, const uint8_t* packed,
                                         const uint16_t* scales, const uint16_t* biases,
                                         size_t col, float* out) {
  const int64_t groups = sh.groups;
  const uint8_t* row = packed + col * sh.row_bytes;
  const uint16_t* sc = scales + col * groups;
  // Lane i's group within a window's first block, and the step from block to block.
  const __m512i lane_group0 = _mm512_maskz_srli_epi32(
      0xFFFF, _mm512_set_epi32(120, 112, 104, 96, 88, 80, 72, 64, 56, 48, 40, 32, 24, 16, 8, 0),
      sh.shift);
  const __m512i step = _mm512_set1_epi32(sh.step);
  __m512 lanes[M];
  for (int r = 0; r < M; ++r) lanes[r] = _mm512_setzero_ps();
  for (int64_t first = 0, g0 = 0; first < sh.blocks; first += sh.per_window, g0 += 16) {
    const int64_t left = groups - g0;
    const __m512 window_scales =
        bf16x16_to_ps(sc + g0, left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1));
    __m512i lane_group = lane_group0;
    __m512 sums[M];  // this window's (g++ kept lanes[] in memory across windows)
    for (int r = 0; r < M; ++r) sums[r] = _mm512_setzero_ps();
    for (int64_t b = first; b < std::min(sh.blocks, first + sh.per_window); ++b) {
      __m512i d =
          _mm512_maskz_loadu_epi8(b < sh.full_blocks ? ~__mmask64(0) : sh.tail, row + b * 64);
      asm("" : "+v"(d));  // in a register: g++ would otherwise fold the load into each shift
      __m512i w[4];
      nibble_pairs(d, w);
      const __m512 s = _mm512_maskz_permutexvar_ps(0xFFFF, lane_group, window_scales);
      lane_group = _mm512_add_epi32(lane_group, step);
      for (int r = 0; r < M; ++r) {
        const uint16_t* xb = xp + r * sh.padded + b * kPairBlock;
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < 4; ++j) {
          acc = _mm512_dpbf16_ps(acc, (__m512bh)w[j], (__m512bh)_mm512_loadu_si512(xb + 32 * j));
        }
        sums[r] = _mm512_fmadd_ps(s, acc, sums[r]);
      }
    }
    for (int r = 0; r < M; ++r) lanes[r] = _mm512_add_ps(lanes[r], sums[r]);
  }
  // The groups' bias terms, 16 groups per step.
  const __m512 k128 = _mm512_set1_ps(128.0f);
  for (int64_t g = 0; g < groups; g += 16) {
    const __mmask16 mask =
        groups - g >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (groups - g)) - 1);
    const __m512 b = biases ? bf16x16_to_ps(biases + col * groups + g, mask) : _mm512_setzero_ps();
    const __m512 coef = _mm512_fnmadd_ps(k128, bf16x16_to_ps(sc + g, mask), b);
    for (int r = 0; r < M; ++r) {
      lanes[r] =
          _mm512_fmadd_ps(coef, _mm512_maskz_loadu_ps(mask, xsum + r * groups + g), lanes[r]);
    }
  }
  for (int r = 0; r < M; ++r) out[r * sh.n + col] = hsum16(lanes[r]);
}

template <int M>
void affine4_rows_bf16(const Affine4Shape& sh, const uint16_t* xp, const float* xsum,
                       const uint8_t* packed, const uint16_t* scales, const uint16_t* biases,
                       size_t n0, size_t n1, float* out) {
  for (size_t col = n0; col < n1; ++col) {
    affine4_col_bf16<M>(sh, xp, xsum, packed, scales, biases, col, out);
  }
}
}  // namespace

bool affine4_pairs_serve(int bits, int group_size, int64_t m) {
  return bits == 4 && m <= kPairRows &&
         (group_size == 32 || group_size == 64 || group_size == 128) &&
         half_isa() == HalfIsa::avx512_bf16;
}

// out (m, n) = x (m, k) @ W^T for affine4_pairs_serve: columns in blocks of 64 over the pool.
void affine4_pairs_product(const bfloat16_t* x, const uint8_t* packed, const bfloat16_t* scales,
                           const bfloat16_t* biases, bfloat16_t* out, int64_t m, int64_t n,
                           int64_t k, int group_size) {
  const int64_t groups = k / group_size;
  Scratch<float> xsum(static_cast<size_t>(m * groups));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      float acc = 0.0f;
      for (int j = 0; j < group_size; ++j) acc += static_cast<float>(x[r * k + g * group_size + j]);
      xsum[r * groups + g] = acc;
    }
  }
  Scratch<uint16_t> xp(static_cast<size_t>(m * padded_k(k)));
  x_pairs(reinterpret_cast<const uint16_t*>(x), m, k, xp.data());
  const Affine4Shape shape(n, k, group_size);
  const auto* sb = reinterpret_cast<const uint16_t*>(scales);
  const auto* bb = reinterpret_cast<const uint16_t*>(biases);
  Scratch<float> res(static_cast<size_t>(m * n));
  parallel_blocks(static_cast<size_t>(n), 64, [&](size_t n0, size_t n1) {
    auto rows = [&](auto kernel) {
      kernel(shape, xp.data(), xsum.data(), packed, sb, bb, n0, n1, res.data());
    };
    static_assert(kPairRows == 8, "the kernel is instantiated for 1 to 8 rows");
    switch (m) {
      case 1: return rows(affine4_rows_bf16<1>);
      case 2: return rows(affine4_rows_bf16<2>);
      case 3: return rows(affine4_rows_bf16<3>);
      case 4: return rows(affine4_rows_bf16<4>);
      case 5: return rows(affine4_rows_bf16<5>);
      case 6: return rows(affine4_rows_bf16<6>);
      case 7: return rows(affine4_rows_bf16<7>);
      default: return rows(affine4_rows_bf16<8>);
    }
  });
  for (int64_t i = 0; i < m * n; ++i) out[i] = bfloat16_t(res[i]);
}

#undef TESSERA_QUANT_BF16
#else
bool affine4_pairs_serve(int, int, int64_t) { return false; }
void affine4_pairs_product(const bfloat16_t*, const uint8_t*, const bfloat16_t*, const bfloat16_t*,
                           bfloat16_t*, int64_t, int64_t, int64_t, int) {}
#endif

}  // namespace tessera::cpu
