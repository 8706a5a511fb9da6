// The few-rows product of affine 4-bit weights with bfloat16 x, scales and biases on AVX512_BF16
// (quantized_bf16.h).
#include "backend/cpu/quantized_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>

#include "backend/cpu/copy.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/half_gemm.h"
#include "backend/cpu/scratch.h"

namespace tessera::cpu {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

#define TESSERA_QUANT_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))

// 16 bfloat16 values (bits) widened to float32.
TESSERA_QUANT_BF16 inline __m512 bf16x16_to_ps(const uint16_t* p, __mmask16 mask) {
  const __m512i v = _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, v, 16));
}

// Affine 4 bits with bfloat16 x, scales and biases (mlx-lm's quantized models), few rows: the
// weights' 4-bit values times x rounded to 16-bit integers by AVX512_VNNI's vpdpwssd, 32 products
// per instruction, summed exactly in int32. (vdpbf16ps on bfloat16 pairs did the same products in
// float, but on this Xeon it issues one per 2 cycles, vpdpwssd two per cycle: 1 x 2048 x 1024 on
// one core from L2, 79 -> 55 us; with the prefetch below, 1 x 2048 x 8192 over 1 GiB of weights
// on 2 threads 13.7 -> 24 GB/s, of a 31.7 GB/s read sweep.)
// x is rounded per 8 consecutive values, with a power of two putting the largest of the 8 in
// [2^14, 2^15): a bfloat16 value (8 significant bits) within 2^7 of that largest is exact, a
// smaller one is off by at most 2^-16 of the largest. An x with a NaN or an infinity is not
// served (the caller's float path takes it).
// The weights are read 64 bytes (128 values) at a time. Dword i holds values 8i..8i+7, one per
// nibble; for s = 0..3, (dword >> 4s) & 0x000F000F is the int16 pair (q[8i+s], q[8i+s+4]). x is
// laid out once per call in the same order (x_int16), so the bytes need no shuffle, and lane i's
// eight values share one scale. Per group, s * dot(x, q) + b * sum(x); each lane's group scale
// comes from a permute of 16 groups' scales. Group sizes 32, 64 and 128.
constexpr int64_t kPairBlock = 128;  // values per 64-byte block
constexpr int kLanes = 16;           // int32 lanes per block, 8 values each

// k rounded up to whole 128-value blocks.
int64_t padded_k(int64_t k) { return (k + kPairBlock - 1) / kPairBlock * kPairBlock; }

// x (m, k) as bfloat16 bits rounded to int16 in the blocks' order into xq (m x padded_k(k)):
// block b, step s, lane i holds the pair (x[128b + 8i + s], x[128b + 8i + s + 4]), the padding
// zeros; xs (m x blocks x 16) holds each lane's scale. False if x holds a NaN or an infinity.
bool x_int16(const uint16_t* x, int64_t m, int64_t k, int16_t* xq, float* xs) {
  const int64_t padded = padded_k(k), blocks = padded / kPairBlock;
  // 2^e as a float, for e in [-126, 127].
  auto power_of_two = [](int e) { return std::bit_cast<float>(uint32_t(e + 127) << 23); };
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      int16_t* qb = xq + r * padded + b * kPairBlock;
      for (int i = 0; i < kLanes; ++i) {
        const int64_t first = b * kPairBlock + 8 * i;
        const int count = static_cast<int>(std::clamp<int64_t>(k - first, 0, 8));
        uint16_t bits[8] = {};
        uint16_t largest = 0;  // of the magnitudes' bits: ordered as the magnitudes are
        for (int t = 0; t < count; ++t) {
          bits[t] = x[r * k + first + t];
          largest = std::max<uint16_t>(largest, bits[t] & 0x7FFF);
        }
        if (largest >= 0x7F80) return false;  // an infinity or a NaN
        // largest in [2^F, 2^(F+1)), F = exponent - 127: times 2^(14 - F) it is in [2^14, 2^15).
        // (Below 2^-112 the lane keeps 2^126: its values round to within 2^-127.)
        const int shift = std::min(141 - (largest >> 7), 126);
        const float up = power_of_two(shift);
        for (int t = 0; t < 8; ++t) {
          const float v = static_cast<float>(bfloat16_t::from_bits(bits[t])) * up;
          // Rounded to nearest even by the float addition (|v| < 2^15).
          const float rounded = (v + 12582912.0f) - 12582912.0f;
          qb[(t % 4) * 32 + 2 * i + t / 4] = static_cast<int16_t>(rounded);
        }
        xs[(r * blocks + b) * kLanes + i] = power_of_two(-shift);
      }
    }
  }
  return true;
}

// The sum of 16 lanes. (g++ 12 warns that _mm512_reduce_add_ps's helpers read an undefined
// register, their pass-through operand; the lanes they read are all defined.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
TESSERA_QUANT_BF16 inline float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }
#pragma GCC diagnostic pop

// The int16 pairs of 64 packed bytes (four steps, as x_int16 orders x): (d >> 4s) & 0x000F000F.
[[gnu::always_inline]] TESSERA_QUANT_BF16 inline void nibble_pairs(__m512i d, __m512i* w) {
  const __m512i nibbles = _mm512_set1_epi32(0x000F000F);
  w[0] = _mm512_and_si512(d, nibbles);
  w[1] = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, d, 4), nibbles);
  w[2] = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, d, 8), nibbles);
  w[3] = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, d, 12), nibbles);
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

// How far ahead of its reads the kernel asks for weight bytes (into the next rows: a thread's
// columns are consecutive). Without it a core waited for each line the prefetchers had not
// brought: 1 x 2048 x 8192 products over 1 GiB of weights, 13.7 -> 21 GB/s on 2 threads with the
// bfloat16 kernel this one replaced; 2-8 KiB ahead all ran alike, 512 B 16 GB/s.
constexpr int64_t kPrefetchBytes = 4096;

// x's int16 pairs and lane scales for one call.
struct XInt16 {
  const int16_t* q;
  const float* scales;
};

// Output column col for M rows of x. (Two weight rows sharing each load of x ran faster from
// cache and at half the speed from memory: the prefetchers follow one stream far better.)
template <int M>
TESSERA_QUANT_BF16 void affine4_col_bf16(const Affine4Shape& sh, XInt16 xp,
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
      _mm_prefetch(reinterpret_cast<const char*>(row + b * 64 + kPrefetchBytes), _MM_HINT_T0);
      asm("" : "+v"(d));  // in a register: g++ would otherwise fold the load into each shift
      __m512i w[4];
      nibble_pairs(d, w);
      const __m512 s = _mm512_maskz_permutexvar_ps(0xFFFF, lane_group, window_scales);
      lane_group = _mm512_add_epi32(lane_group, step);
      for (int r = 0; r < M; ++r) {
        const int16_t* xb = xp.q + r * sh.padded + b * kPairBlock;
        __m512i acc = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) {
          acc = _mm512_dpwssd_epi32(acc, w[j], _mm512_loadu_si512(xb + 32 * j));
        }
        const __m512 dot = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, acc),
                                         _mm512_loadu_ps(xp.scales + (r * sh.blocks + b) * kLanes));
        sums[r] = _mm512_fmadd_ps(s, dot, sums[r]);
      }
    }
    for (int r = 0; r < M; ++r) lanes[r] = _mm512_add_ps(lanes[r], sums[r]);
  }
  // The groups' bias terms, 16 groups per step.
  for (int64_t g = 0; biases && g < groups; g += 16) {
    const __mmask16 mask =
        groups - g >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (groups - g)) - 1);
    const __m512 b = bf16x16_to_ps(biases + col * groups + g, mask);
    for (int r = 0; r < M; ++r) {
      lanes[r] = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(mask, xsum + r * groups + g), lanes[r]);
    }
  }
  for (int r = 0; r < M; ++r) out[r * sh.n + col] = hsum16(lanes[r]);
}

template <int M>
void affine4_rows_bf16(const Affine4Shape& sh, XInt16 xp, const float* xsum,
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
         (half_isa() == HalfIsa::avx512 || half_isa() == HalfIsa::avx512_bf16) &&
         cpu_has_avx512_vnni();
}

// out (m, n) = x (m, k) @ W^T for affine4_pairs_serve: columns in blocks of 64 over the pool.
bool affine4_pairs_product(const bfloat16_t* x, const uint8_t* packed, const bfloat16_t* scales,
                           const bfloat16_t* biases, bfloat16_t* out, int64_t m, int64_t n,
                           int64_t k, int group_size) {
  const int64_t groups = k / group_size, padded = padded_k(k);
  Scratch<int16_t> xq(static_cast<size_t>(m * padded));
  Scratch<float> xs(static_cast<size_t>(m * (padded / kPairBlock) * kLanes));
  if (!x_int16(reinterpret_cast<const uint16_t*>(x), m, k, xq.data(), xs.data())) return false;
  Scratch<float> xsum(static_cast<size_t>(m * groups));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      float acc = 0.0f;
      for (int j = 0; j < group_size; ++j) acc += static_cast<float>(x[r * k + g * group_size + j]);
      xsum[r * groups + g] = acc;
    }
  }
  const Affine4Shape shape(n, k, group_size);
  const auto* sb = reinterpret_cast<const uint16_t*>(scales);
  const auto* bb = reinterpret_cast<const uint16_t*>(biases);
  Scratch<float> res(static_cast<size_t>(m * n));
  parallel_blocks(static_cast<size_t>(n), 64, [&](size_t n0, size_t n1) {
    auto rows = [&](auto kernel) {
      kernel(shape, XInt16{xq.data(), xs.data()}, xsum.data(), packed, sb, bb, n0, n1, res.data());
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
  narrow_to_bf16(res.data(), out, static_cast<size_t>(m * n));
  return true;
}

bool affine4_dequantize_serves(int group_size) {
  return group_size % 16 == 0 && loop_isa() == LoopIsa::avx512;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f,avx512bw,avx512vl"))) void affine4_dequantize_bf16(
    const uint8_t* row, int64_t k0, int64_t len, int group_size, const float* sc, const float* bi,
    bfloat16_t* dst) {
  const uint8_t* p = row + k0 / 2;
  for (int64_t i = 0; i < len; i += 16) {
    // 8 bytes -> 16 values, the low nibble first: bytes (lo0, hi0, lo1, hi1, ...) widened.
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i / 2));
    const __m128i w = _mm_cvtepu8_epi16(bytes);
    const __m128i v = _mm_or_si128(_mm_and_si128(w, _mm_set1_epi16(0x0F)),
                                   _mm_slli_epi16(_mm_srli_epi16(w, 4), 8));
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
    const int64_t g = i / group_size;
    const __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(sc[g]), q, _mm512_set1_ps(bi[g]));
    ops::store_bf16(dst + i, 0xFFFF, ops::round_bf16(y));
  }
}
#pragma GCC diagnostic pop

#undef TESSERA_QUANT_BF16
#else
bool affine4_pairs_serve(int, int, int64_t) { return false; }
bool affine4_dequantize_serves(int) { return false; }
void affine4_dequantize_bf16(const uint8_t*, int64_t, int64_t, int, const float*, const float*,
                             bfloat16_t*) {}
bool affine4_pairs_product(const bfloat16_t*, const uint8_t*, const bfloat16_t*, const bfloat16_t*,
                           bfloat16_t*, int64_t, int64_t, int64_t, int) {
  return false;
}
#endif

}  // namespace tessera::cpu
