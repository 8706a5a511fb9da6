// CPU kernels of the quantization family. Packing (MLX's): element j of a row is bits
// [j * bits, (j + 1) * bits) of the row's little-endian byte stream. quantize and dequantize
// follow MLX's CPU arithmetic step for step (float group statistics, rint, T-rounded product then
// sum), so MLX's packed arrays dequantize to the same values; this file is built without
// floating-point contraction (CMakeLists) so no product and sum fuse into one rounding.
// quantized_matmul never materialises the dequantized matrix: for a few rows of x it computes,
// per group, sum_k x_k (s q_k + b) = s * dot(x, q) + b * sum(x) from the packed bytes; for more,
// it dequantizes small tiles of W (in cache) and multiplies them with gemm.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/blas.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/half_gemm.h"
#include "backend/cpu/quantized_bf16.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/gemm.h"
#include "ops/quantized.h"

namespace tessera {

namespace {

uint8_t fp8_from_float(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | 0x7F);
  const float a = std::fabs(x);
  // 464 is halfway between 448 (the largest) and 480 (where 0x7F, the NaN code, would sit).
  if (a >= 464.0f) return static_cast<uint8_t>(sign | 0x7E);
  if (a < 0.015625f) {  // subnormal: steps of 2^-9 (8 of them reach the smallest normal)
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(std::rint(a * 512.0f)));
  }
  int e;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exponent = e - 1;
  int q = static_cast<int>(std::rint((2.0f * m - 1.0f) * 8.0f));
  if (q == 8) {
    q = 0;
    ++exponent;
  }
  return static_cast<uint8_t>(sign | ((exponent + 7) << 3) | q);
}

float fp8_to_float(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int e = (b >> 3) & 0xF, m = b & 7;
  if ((b & 0x7F) == 0x7F) return std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return sign * static_cast<float>(m) / 512.0f;
  return sign * std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
}

// fp4 e2m1 values by code, in MLX's order (0..7 the non-negative ones, 8..15 their negatives).
constexpr float kFP4[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// Both fp4 values of each byte (low nibble first): one 8-byte load decodes two elements.
const std::array<float, 2>* fp4_pair_table() {
  static const auto table = [] {
    std::array<std::array<float, 2>, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = {kFP4[i & 0xF], kFP4[i >> 4]};
    return t;
  }();
  return table.data();
}

// fp8 e4m3 values by code.
const float* fp8_table() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = fp8_to_float(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

// e8m0 scales by code: 2^(code - 127).
const float* e8m0_table() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = std::ldexp(1.0f, i - 127);
    return t;
  }();
  return table.data();
}

// How a packed row decodes: affine's integers q (w = scale * q + bias), or an fp mode's element
// values (w = scale * v) with one uint8 scale code per group.
struct Codec {
  QuantMode mode;
  int bits, group_size;
  bool affine() const { return mode == QuantMode::Affine; }
  // The group scale a uint8 code stands for: an fp8 e4m3 value (nvfp4) or 2^(code - 127).
  float scale(uint8_t code) const { return scales()[code]; }
  const float* scales() const { return mode == QuantMode::Nvfp4 ? fp8_table() : e8m0_table(); }
  void values(const uint8_t* row, int64_t first, int64_t n, float* out) const;
};

// q values count..count+n of a packed row (bytes), as floats.
void unpack(const uint8_t* row, int bits, int64_t first, int64_t n, float* out) {
  if (bits == 4 && first % 2 == 0) {
    const uint8_t* p = row + first / 2;
    for (int64_t i = 0; i < n / 2; ++i) {
      out[2 * i] = static_cast<float>(p[i] & 0xF);
      out[2 * i + 1] = static_cast<float>(p[i] >> 4);
    }
    return;
  }
  if (bits == 8) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(row[first + i]);
    return;
  }
  const unsigned mask = (1u << bits) - 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = (first + i) * bits;
    const int64_t byte = pos >> 3;
    const int shift = static_cast<int>(pos & 7);
    unsigned v = row[byte];
    if (shift + bits > 8) v |= static_cast<unsigned>(row[byte + 1]) << 8;
    out[i] = static_cast<float>((v >> shift) & mask);
  }
}

void Codec::values(const uint8_t* row, int64_t first, int64_t n, float* out) const {
  if (affine()) {
    unpack(row, bits, first, n, out);
  } else if (bits == 4) {  // groups of 16 or 32: `first` is even
    const uint8_t* p = row + first / 2;
    const std::array<float, 2>* pairs = fp4_pair_table();
    for (int64_t i = 0; i < n / 2; ++i) std::memcpy(out + 2 * i, pairs[p[i]].data(), 8);
  } else {
    const float* t = fp8_table();
    for (int64_t i = 0; i < n; ++i) out[i] = t[row[first + i]];
  }
}

template <typename T>
float as_float(T v) {
  return static_cast<float>(v);
}

// A value of the input type in the accumulation type A (double stays exact).
template <typename A, typename T>
A to_acc(T v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return static_cast<A>(static_cast<float>(v));
  }
}

template <typename T, typename A>
T from_acc(A v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return T(static_cast<float>(v));
  }
}

template <typename T>
void quantize_rows(const array& w_in, std::vector<array>& outputs, int group_size, int bits) {
  const array w = cpu::ensure_row_contiguous(w_in);
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  const T* src = w.data<T>();
  auto* packed = reinterpret_cast<uint8_t*>(outputs[0].data<uint32_t>());
  T* scales = outputs[1].data<T>();
  T* biases = outputs[2].data<T>();
  const int64_t k = w.shape(-1), rows = k == 0 ? 0 : static_cast<int64_t>(w.size()) / k;
  const int64_t row_bytes = k * bits / 8, groups = k / group_size;
  const float n_bins = static_cast<float>((1 << bits) - 1), eps = 1e-7f;
  cpu::parallel_blocks(static_cast<size_t>(rows), 64, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      uint8_t* out = packed + r * row_bytes;
      std::memset(out, 0, static_cast<size_t>(row_bytes));
      for (int64_t g = 0; g < groups; ++g) {
        const T* x = src + r * k + g * group_size;
        float w_min = std::numeric_limits<float>::infinity(), w_max = -w_min;
        for (int j = 0; j < group_size; ++j) {
          w_max = std::max(w_max, as_float(x[j]));
          w_min = std::min(w_min, as_float(x[j]));
        }
        const bool mask = std::abs(w_min) > std::abs(w_max);
        float scale = std::max((w_max - w_min) / n_bins, eps);
        scale = mask ? scale : -scale;
        const float edge = mask ? w_min : w_max;
        const float q0 = std::rint(edge / scale);
        float bias = 0.0f;
        if (q0 != 0.0f) {
          scale = edge / q0;
          bias = edge;
        }
        for (int j = 0; j < group_size; ++j) {
          float q = std::rint((as_float(x[j]) - bias) / scale);
          q = std::min(std::max(q, 0.0f), n_bins);
          const int64_t pos = (g * group_size + j) * bits;
          const unsigned v = static_cast<unsigned>(q) << (pos & 7);
          out[pos >> 3] |= static_cast<uint8_t>(v & 0xFF);
          if ((pos & 7) + bits > 8) out[(pos >> 3) + 1] |= static_cast<uint8_t>(v >> 8);
        }
        scales[r * groups + g] = T(scale);
        biases[r * groups + g] = T(bias);
      }
    }
  });
}

template <typename T>
void dequantize_rows(const array& w_in, const array& s_in, const array& b_in, array& out,
                     int group_size, int bits) {
  const array w = cpu::ensure_row_contiguous(w_in), sc = cpu::ensure_row_contiguous(s_in),
              bi = cpu::ensure_row_contiguous(b_in);
  out.set_data(allocator::malloc(out.nbytes()));
  const auto* packed = reinterpret_cast<const uint8_t*>(w.data<uint32_t>());
  const T* scales = sc.data<T>();
  const T* biases = bi.data<T>();
  T* dst = out.data<T>();
  const int64_t k = out.shape(-1), rows = k == 0 ? 0 : static_cast<int64_t>(out.size()) / k;
  const int64_t row_bytes = k * bits / 8, groups = k / group_size;
  cpu::parallel_blocks(static_cast<size_t>(rows), 64, [&](size_t r0, size_t r1) {
    std::vector<float> q(static_cast<size_t>(group_size));
    for (size_t r = r0; r < r1; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        unpack(packed + r * row_bytes, bits, g * group_size, group_size, q.data());
        const T s = scales[r * groups + g], b = biases[r * groups + g];
        T* o = dst + r * k + g * group_size;
        // Two roundings to T, as MLX's multiply then add.
        for (int j = 0; j < group_size; ++j) o[j] = T(s * T(q[j])) + b;
      }
    }
  });
}

// Rows of x from which quantized_matmul dequantizes tiles of W and calls gemm; fewer rows read
// the packed weights directly (a memory-bound matrix-vector product).
constexpr int64_t kGemmRows = 4;
// Weight rows (transposed) or columns (plain) per dequantized tile.
constexpr int64_t kTileRows = 32;

// A group's scale and bias in the accumulation type: affine's are stored in T (S = T), the fp
// modes' scale is a uint8 code (S = uint8_t) and their bias is 0 (no biases array).
template <typename A, typename S>
A group_scale(const Codec& c, S v) {
  if constexpr (std::is_same_v<S, uint8_t>) {
    return static_cast<A>(c.scale(v));
  } else {
    return to_acc<A>(v);
  }
}
template <typename A, typename S>
A group_bias(const S* biases, int64_t i) {
  return biases ? to_acc<A>(biases[i]) : A(0);
}

// Lanes of the packed matrix-vector product: independent partial sums (summed in a fixed
// order at the end of a row), so the loops vectorise without reassociating one running sum.
constexpr int kLanes = 16;

// Adds scale * (group g of x) . (the packed row's group) into lanes[] (A accumulation). With
// affine 4 bits, x comes de-interleaved (even elements then odd ones per group) so both nibble
// streams read x contiguously; the other formats decode the group into q first (fp4 by a table
// of byte pairs).
// (Always inlined: the few-rows loop below is compiled again for AVX2 and AVX-512, and this
// body must vectorise inside each copy.)
template <typename A>
[[gnu::always_inline]] inline void group_dot(A* lanes, A scale, const A* xg, const uint8_t* row,
                                             int64_t first, const Codec& c, float* q) {
  A acc[kLanes] = {};
  const int group_size = c.group_size;
  if (c.affine() && c.bits == 4) {
    const uint8_t* p = row + first / 2;
    const int half = group_size / 2;
    for (int i = 0; i < half; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[l] += xg[i + l] * static_cast<A>(p[i + l] & 0xF);
    }
    for (int i = 0; i < half; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[l] += xg[half + i + l] * static_cast<A>(p[i + l] >> 4);
    }
  } else {
    if (c.affine() && c.bits == 8) {
      for (int i = 0; i < group_size; ++i) q[i] = static_cast<float>(row[first + i]);
    } else {
      c.values(row, first, group_size, q);
    }
    for (int i = 0; i < group_size; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[l] += xg[i + l] * static_cast<A>(q[i + l]);
    }
  }
  for (int l = 0; l < kLanes; ++l) lanes[l] += scale * acc[l];
}

#if defined(__x86_64__) && defined(__GNUC__)
// (The masked forms with every lane set: g++ 12 warns that the plain ones read an undefined
// register.) 16 bytes widened to 16 int32 lanes, and int32 lanes to float.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i load16_u8(const uint8_t* p) {
  return _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 to_ps(__m512i v) {
  return _mm512_maskz_cvtepi32_ps(0xFFFF, v);
}

// The few-rows loop of qmm_transposed for affine 4 and 8 bits, float accumulation, written for
// AVX-512: the same lanes and the same order of additions (no contraction) as group_dot and the
// loop around it, so the results are those of the portable code, bit for bit.
template <typename S>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void affine_rows_avx512(
    const float* xa, const float* xsum, const uint8_t* packed, const S* scales, const S* biases,
    int64_t m, size_t n0, size_t n1, int64_t n, int64_t k, int bits, int group_size,
    float* out) {
  const int64_t groups = k / group_size, row_bytes = k * bits / 8;
  const __m512i low4 = _mm512_set1_epi32(0xF);
  for (size_t col = n0; col < n1; ++col) {
    const uint8_t* row = packed + col * row_bytes;
    for (int64_t r = 0; r < m; ++r) {
      const float* xr = xa + r * k;
      __m512 lanes = _mm512_setzero_ps();
      float total = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t i = static_cast<int64_t>(col) * groups + g;
        const float* xg = xr + g * group_size;
        __m512 acc = _mm512_setzero_ps();
        if (bits == 4) {
          const uint8_t* p = row + g * group_size / 2;
          const int half = group_size / 2;
          for (int j = 0; j < half; j += 16) {
            const __m512i v = load16_u8(p + j);
            const __m512 q = to_ps(_mm512_and_si512(v, low4));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(xg + j), q));
          }
          for (int j = 0; j < half; j += 16) {
            const __m512i v = load16_u8(p + j);
            const __m512 q = to_ps(_mm512_maskz_srli_epi32(0xFFFF, v, 4));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(xg + half + j), q));
          }
        } else {
          const uint8_t* p = row + g * group_size;
          for (int j = 0; j < group_size; j += 16) {
            const __m512 q = to_ps(load16_u8(p + j));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(xg + j), q));
          }
        }
        const __m512 scale = _mm512_set1_ps(to_acc<float>(scales[i]));
        lanes = _mm512_add_ps(lanes, _mm512_mul_ps(scale, acc));
        if (biases) total += to_acc<float>(biases[i]) * xsum[r * groups + g];
      }
      alignas(64) float l[kLanes];
      _mm512_store_ps(l, lanes);
      for (int j = 0; j < kLanes; ++j) total += l[j];
      out[r * n + col] = total;
    }
  }
}

#endif

// out (M, N) = x (M, K) @ W^T for half-precision x of many rows (a prefill) on Tessera's GEMM
// (gemm.h's hgemm_rows, by hgemm_kernel): W dequantized to T as the GEMM packs it, a panel of
// rows at a time (each value scale * q + bias in float32, one fused multiply-add for bfloat16's
// 4-bit affine rows on AVX-512, rounded to T once), accumulating in float32, each result rounded
// to T once. False where the GEMM has no kernel for the shape or the CPU. (Chunks of dequantized
// columns, multiplied one after another, packed x again for every chunk and were read twice.)
template <typename T, typename S>
bool qmm_half_gemm(const T* x, const uint8_t* packed, const S* scales, const S* biases, T* out,
                   int64_t m, int64_t n, int64_t k, const Codec& c) {
  if (!cpu::gemm_supported() || !cpu::gemm_serves(m, n)) return false;
  const int group_size = c.group_size;
  const int64_t groups = k / group_size, row_bytes = k * c.bits / 8;
  const cpu::RowsFn<T> rows = [&](int64_t j0, int64_t count, int64_t k0, int64_t len, T* dst,
                                  int64_t ld) {
    thread_local std::vector<float> q;  // a row's values in float32, then rounded
    q.resize(static_cast<size_t>(len));
    if constexpr (std::is_same_v<T, bfloat16_t>) {
      if (c.affine() && c.bits == 4 && cpu::affine4_dequantize_serves(group_size)) {
        const int64_t g0 = k0 / group_size, ng = len / group_size;
        float* sc = q.data();  // the groups' scales and biases, as float
        float* bi = q.data() + ng;
        for (int64_t r = 0; r < count; ++r) {
          const int64_t col = j0 + r;
          for (int64_t g = 0; g < ng; ++g) {
            sc[g] = group_scale<float>(c, scales[col * groups + g0 + g]);
            bi[g] = group_bias<float>(biases, col * groups + g0 + g);
          }
          cpu::affine4_dequantize_bf16(packed + col * row_bytes, k0, len, group_size, sc, bi,
                                       dst + r * ld);
        }
        return;
      }
    }
    for (int64_t r = 0; r < count; ++r) {
      const int64_t col = j0 + r;
      c.values(packed + col * row_bytes, k0, len, q.data());
      for (int64_t g = k0 / group_size; g < (k0 + len) / group_size; ++g) {
        const float sc = group_scale<float>(c, scales[col * groups + g]);
        const float bi = group_bias<float>(biases, col * groups + g);
        float* qg = q.data() + (g * group_size - k0);
        for (int j = 0; j < group_size; ++j) qg[j] = sc * qg[j] + bi;
      }
      if constexpr (std::is_same_v<T, bfloat16_t>) {
        cpu::narrow_to_bf16(q.data(), dst + r * ld, static_cast<size_t>(len));
      } else {
        for (int64_t j = 0; j < len; ++j) dst[r * ld + j] = T(q[j]);
      }
    }
  };
  if constexpr (std::is_same_v<T, bfloat16_t>) {
    if (cpu::hgemm_rows_rounded(m, n, k, x, k, rows, out, n)) return true;
  }
  const std::unique_ptr<float[]> res(new float[static_cast<size_t>(m * n)]);  // not read first
  cpu::hgemm_rows<T>(m, n, k, x, k, rows, res.get(), n, cpu::hgemm_kernel<T>());
  const size_t size = static_cast<size_t>(m * n);
  if constexpr (std::is_same_v<T, bfloat16_t>) {
    cpu::narrow_to_bf16(res.get(), out, size);
  } else {
    for (size_t i = 0; i < size; ++i) out[i] = T(res[i]);
  }
  return true;
}

// out (M, N) = x (M, K) @ W^T, W (N, K) packed; accumulation in A.
template <typename T, typename A, typename S>
void qmm_transposed(const T* x, const uint8_t* packed, const S* scales, const S* biases, T* out,
                    int64_t m, int64_t n, int64_t k, const Codec& c) {
  if constexpr (std::is_same_v<T, bfloat16_t> && std::is_same_v<S, bfloat16_t>) {
    if (c.affine() && cpu::affine4_pairs_serve(c.bits, c.group_size, m) &&
        cpu::affine4_pairs_product(x, packed, scales, biases, out, m, n, k, c.group_size)) {
      return;
    }
  }
  if constexpr (std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>) {
    if (m >= kGemmRows && qmm_half_gemm(x, packed, scales, biases, out, m, n, k, c)) return;
  }
  const int group_size = c.group_size;
  const int64_t groups = k / group_size, row_bytes = k * c.bits / 8;
  std::vector<A> xa(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m * k; ++i) xa[i] = to_acc<A>(x[i]);
  if (m >= kGemmRows) {
    // Tiles of dequantized weight rows, each one gemm into its output columns.
    std::vector<A> tmp(std::is_same_v<T, A> ? 0 : static_cast<size_t>(m * n));
    A* dst = std::is_same_v<T, A> ? reinterpret_cast<A*>(out) : tmp.data();
    cpu::parallel_blocks(static_cast<size_t>(n), kTileRows, [&](size_t n0, size_t n1) {
      std::vector<A> tile(static_cast<size_t>((n1 - n0) * k));
      std::vector<float> q(static_cast<size_t>(group_size));
      for (size_t col = n0; col < n1; ++col) {
        A* t = tile.data() + (col - n0) * k;
        for (int64_t g = 0; g < groups; ++g) {
          c.values(packed + col * row_bytes, g * group_size, group_size, q.data());
          const A sc = group_scale<A>(c, scales[col * groups + g]);
          const A bi = group_bias<A>(biases, col * groups + g);
          for (int j = 0; j < group_size; ++j) t[g * group_size + j] = sc * static_cast<A>(q[j]) + bi;
        }
      }
      cpu::gemm(false, true, static_cast<int>(m), static_cast<int>(n1 - n0), static_cast<int>(k),
                1.0f, xa.data(), static_cast<int>(k), tile.data(), static_cast<int>(k), 0.0f,
                dst + n0, static_cast<int>(n));
    });
    if constexpr (!std::is_same_v<T, A>) {
      for (int64_t i = 0; i < m * n; ++i) out[i] = from_acc<T>(tmp[i]);
    }
    return;
  }
  // Few rows: s * dot(x, q) + b * sum(x) per group, straight from the packed bytes.
  std::vector<A> xsum(static_cast<size_t>(m * groups), A(0));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const A* xg = xa.data() + r * k + g * group_size;
      A acc = 0;
      for (int j = 0; j < group_size; ++j) acc += xg[j];
      xsum[r * groups + g] = acc;
    }
  }
  // Affine 4 bits on the float paths read x de-interleaved (group_dot).
  if (c.affine() && c.bits == 4) {
    std::vector<A> even(static_cast<size_t>(group_size));
    for (int64_t g = 0; g < m * groups; ++g) {
      A* xg = xa.data() + g * group_size;
      std::copy(xg, xg + group_size, even.begin());
      for (int j = 0; j < group_size / 2; ++j) {
        xg[j] = even[2 * j];
        xg[group_size / 2 + j] = even[2 * j + 1];
      }
    }
  }
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (std::is_same_v<A, float> && !std::is_same_v<S, uint8_t>) {
    const cpu::HalfIsa isa = cpu::half_isa();  // TESSERA_CPU_ISA's choice, in every build
    if (c.affine() && (c.bits == 4 || c.bits == 8) && group_size % 32 == 0 &&
        (isa == cpu::HalfIsa::avx512 || isa == cpu::HalfIsa::avx512_bf16)) {
      std::vector<float> res(static_cast<size_t>(m * n));
      cpu::parallel_blocks(static_cast<size_t>(n), 64, [&](size_t n0, size_t n1) {
        affine_rows_avx512(xa.data(), xsum.data(), packed, scales, biases, m, n0, n1, n, k,
                           c.bits, group_size, res.data());
      });
      for (int64_t i = 0; i < m * n; ++i) out[i] = from_acc<T>(res[i]);
      return;
    }
  }
#endif
  cpu::parallel_blocks(static_cast<size_t>(n), 64, [&](size_t n0, size_t n1) {
    std::vector<float> q(static_cast<size_t>(group_size));
    // The widest vectors this CPU has (a baseline build's copies for AVX2 and AVX-512): the lanes
    // are the same partial sums in the same order in every copy, so the results are too.
    cpu::run_widest([&]() __attribute__((always_inline)) {
      for (size_t col = n0; col < n1; ++col) {
        const uint8_t* row = packed + col * row_bytes;
        for (int64_t r = 0; r < m; ++r) {
          const A* xr = xa.data() + r * k;
          A lanes[kLanes] = {}, total = 0;
          for (int64_t g = 0; g < groups; ++g) {
            const int64_t i = static_cast<int64_t>(col) * groups + g;
            group_dot(lanes, group_scale<A>(c, scales[i]), xr + g * group_size, row,
                      g * group_size, c, q.data());
            if (biases) total += to_acc<A>(biases[i]) * xsum[r * groups + g];
          }
          for (int l = 0; l < kLanes; ++l) total += lanes[l];
          out[r * n + col] = from_acc<T>(total);
        }
      }
    });
  });
}

// out (M, N) = x (M, K) @ W, W (K, N) packed along N: blocks of whole column groups in
// parallel, each dequantizing its K x width tile once and multiplying it with gemm.
template <typename T, typename A, typename S>
void qmm_plain(const T* x, const uint8_t* packed, const S* scales, const S* biases, T* out,
               int64_t m, int64_t n, int64_t k, const Codec& c) {
  const int group_size = c.group_size;
  const int64_t groups = n / group_size, row_bytes = n * c.bits / 8;
  std::vector<A> xa(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m * k; ++i) xa[i] = to_acc<A>(x[i]);
  std::vector<A> tmp(std::is_same_v<T, A> ? 0 : static_cast<size_t>(m * n));
  A* dst = std::is_same_v<T, A> ? reinterpret_cast<A*>(out) : tmp.data();
  const size_t groups_per_tile = std::max<size_t>(1, static_cast<size_t>(kTileRows * 4 / group_size));
  cpu::parallel_blocks(static_cast<size_t>(groups), groups_per_tile, [&](size_t g0, size_t g1) {
    const int64_t c0 = static_cast<int64_t>(g0) * group_size, width = (g1 - g0) * group_size;
    std::vector<float> q(static_cast<size_t>(width));
    std::vector<A> tile(static_cast<size_t>(k * width));
    for (int64_t kk = 0; kk < k; ++kk) {
      c.values(packed + kk * row_bytes, c0, width, q.data());
      A* t = tile.data() + kk * width;
      for (int64_t j = 0; j < width; ++j) {
        const int64_t i = kk * groups + (c0 + j) / group_size;
        t[j] = group_scale<A>(c, scales[i]) * static_cast<A>(q[j]) + group_bias<A>(biases, i);
      }
    }
    cpu::gemm(false, false, static_cast<int>(m), static_cast<int>(width), static_cast<int>(k), 1.0f,
              xa.data(), static_cast<int>(k), tile.data(), static_cast<int>(width), 0.0f, dst + c0,
              static_cast<int>(n));
  });
  if constexpr (!std::is_same_v<T, A>) {
    for (int64_t i = 0; i < m * n; ++i) out[i] = from_acc<T>(tmp[i]);
  }
}

template <typename F>
void by_float_dtype(const char* op, Dtype dt, F f) {
  if (dt == float32) {
    f(float{});
  } else if (dt == float16) {
    f(float16_t{});
  } else if (dt == bfloat16) {
    f(bfloat16_t{});
  } else if (dt == float64) {
    f(double{});
  } else {
    throw std::invalid_argument(std::string("[") + op + "] no CPU kernel for dtype " +
                                dtype_name(dt));
  }
}

// ---- MLX's fp modes, quantized as MLX's CPU composition of ops does it ----
// MLX computes mxfp4 / mxfp8 / nvfp4 on the CPU with ordinary ops in w's dtype T (float
// arithmetic rounded to T after every op; P: the type of an op mixing T with float32).
// Reproducing each rounding makes the codes identical to MLX's.

template <typename T>
using Wider = std::conditional_t<std::is_same_v<T, double>, double, float>;

// v rounded to T, kept as P.
template <typename T, typename P>
P round_to(P v) {
  return static_cast<P>(T(v));
}

// float -> int32 as x86's conversion does it (NaN and out of range: INT_MIN), which is what an
// astype of MLX's produces on this machine.
int32_t to_int32(double v) {
  if (!(v >= -2147483648.0 && v < 2147483648.0)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(v);
}

// The fp4 code nearest v: MLX's argmin over |v - lut| computed in U (first minimum; NaN: code 0).
template <typename U, typename P>
uint8_t nearest_fp4(P v) {
  uint8_t best = 0;
  P bd = std::abs(round_to<U>(v - static_cast<P>(kFP4[0])));
  for (uint8_t i = 1; i < 16; ++i) {
    const P d = std::abs(round_to<U>(v - static_cast<P>(kFP4[i])));
    if (d < bd) {
      bd = d;
      best = i;
    }
  }
  return best;
}

float first_float(const array& a) {
  const array c = cpu::ensure_row_contiguous(a);
  return c.data<float>()[0];
}

template <typename T>
void fp_quantize_rows(const array& w_in, const array* global_scale, std::vector<array>& outputs,
                      const Codec& c) {
  using P = Wider<T>;
  const array w = cpu::ensure_row_contiguous(w_in);
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  const T* src = w.data<T>();
  auto* packed = reinterpret_cast<uint8_t*>(outputs[0].data<uint32_t>());
  uint8_t* scales = outputs[1].data<uint8_t>();
  const int gs = c.group_size;
  const int64_t k = w.shape(-1), rows = k == 0 ? 0 : static_cast<int64_t>(w.size()) / k;
  const int64_t row_bytes = k * c.bits / 8, groups = k / gs;
  const bool nv = c.mode == QuantMode::Nvfp4;
  // nvfp4's encoding factor, 448 * 6 / global_scale in float32 (1 without a global scale).
  const P enc = static_cast<P>(global_scale ? 2688.0f / first_float(*global_scale) : 1.0f);
  const P maxval = c.bits == 4 ? P(6) : P(448);
  cpu::parallel_blocks(static_cast<size_t>(rows), 16, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      uint8_t* out = packed + r * row_bytes;
      for (int64_t g = 0; g < groups; ++g) {
        const T* x = src + r * k + g * gs;
        P amax = 0;  // max |x|, NaN propagating
        for (int j = 0; j < gs; ++j) {
          const P a = std::abs(static_cast<P>(x[j]));
          if (a > amax || a != a) amax = a;
          if (amax != amax) break;
        }
        const P s = round_to<T>(amax / maxval);
        uint8_t code;
        P divisor;  // the group's elements are x / divisor (then times enc for nvfp4)
        if (nv) {
          code = fp8_from_float(static_cast<float>(s * enc));
          divisor = round_to<T>(static_cast<P>(fp8_to_float(code)));
        } else {
          // The smallest power of two 2^e >= s (so no element clips): MLX rounds log2(s) (in
          // T) to an integer, then adds one where 2^e < s.
          P e = 0;
          if (s != 0) {
            e = static_cast<P>(to_int32(std::rint(round_to<T>(static_cast<P>(std::log2(s))))));
            if (std::pow(P(2), e) < s) e += 1;
            e = round_to<T>(e);
          }
          divisor = round_to<T>(static_cast<P>(std::pow(P(2), e)));
          code = static_cast<uint8_t>(to_int32(round_to<T>(e + P(127))) & 0xFF);
        }
        scales[r * groups + g] = code;
        for (int j = 0; j < gs; ++j) {
          const P v = round_to<T>(static_cast<P>(x[j]) / divisor);
          uint8_t q;
          if (c.bits == 8) {
            q = fp8_from_float(static_cast<float>(v));
          } else if (nv) {
            q = nearest_fp4<P>(v * enc);  // the product is float32: distances in P
          } else {
            q = nearest_fp4<T>(v);
          }
          const int64_t e = g * gs + j;
          if (c.bits == 8) {
            out[e] = q;
          } else if (e % 2 == 0) {
            out[e / 2] = q;
          } else {
            out[e / 2] = static_cast<uint8_t>(out[e / 2] | (q << 4));
          }
        }
      }
    }
  });
}

// The values MLX's composition of ops dequantizes to, in T: element value (fp4 or fp8, exact in
// T) times the group scale as MLX rounds it; with nvfp4's global scale MLX keeps float32 (P),
// rounded here to T once.
template <typename T>
void fp_dequantize_rows(const array& w_in, const array& s_in, const array* global_scale,
                        array& out, const Codec& c) {
  using P = Wider<T>;
  const array w = cpu::ensure_row_contiguous(w_in), sc = cpu::ensure_row_contiguous(s_in);
  out.set_data(allocator::malloc(out.nbytes()));
  const auto* packed = reinterpret_cast<const uint8_t*>(w.data<uint32_t>());
  const uint8_t* scales = sc.data<uint8_t>();
  T* dst = out.data<T>();
  const int gs = c.group_size;
  const int64_t k = out.shape(-1), rows = k == 0 ? 0 : static_cast<int64_t>(out.size()) / k;
  const int64_t row_bytes = k * c.bits / 8, groups = k / gs;
  const bool nv = c.mode == QuantMode::Nvfp4;
  const P inv = global_scale ? static_cast<P>(first_float(*global_scale)) / P(2688) : P(1);
  cpu::parallel_blocks(static_cast<size_t>(rows), 64, [&](size_t r0, size_t r1) {
    std::vector<float> v(static_cast<size_t>(gs));
    for (size_t r = r0; r < r1; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t code = scales[r * groups + g];
        P scale;
        if (nv) {
          scale = round_to<T>(static_cast<P>(fp8_to_float(code)));
          if (global_scale) scale *= inv;
        } else {
          scale = round_to<T>(static_cast<P>(std::pow(P(2), P(code) - P(127))));
        }
        c.values(packed + r * row_bytes, g * gs, gs, v.data());
        T* o = dst + r * k + g * gs;
        for (int j = 0; j < gs; ++j) o[j] = T(round_to<T>(static_cast<P>(v[j])) * scale);
      }
    }
  });
}

}  // namespace

void AffineQuantize::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  by_float_dtype("quantize", inputs[0].dtype(), [&](auto t) {
    quantize_rows<decltype(t)>(inputs[0], outputs, group_size_, bits_);
  });
}

void AffineDequantize::eval_cpu(const std::vector<array>& inputs, array& out) {
  by_float_dtype("dequantize", out.dtype(), [&](auto t) {
    dequantize_rows<decltype(t)>(inputs[0], inputs[1], inputs[2], out, group_size_, bits_);
  });
}

void FPQuantize::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Codec c{mode_, bits_, group_size_};
  by_float_dtype("quantize", inputs[0].dtype(), [&](auto t) {
    fp_quantize_rows<decltype(t)>(inputs[0], inputs.size() > 1 ? &inputs[1] : nullptr, outputs, c);
  });
}

void FPDequantize::eval_cpu(const std::vector<array>& inputs, array& out) {
  const Codec c{mode_, bits_, group_size_};
  by_float_dtype("dequantize", out.dtype(), [&](auto t) {
    fp_dequantize_rows<decltype(t)>(inputs[0], inputs[1], inputs.size() > 2 ? &inputs[2] : nullptr,
                                    out, c);
  });
}

namespace {

// `count` products into out's consecutive (m x n) blocks: product i multiplies x's matrix
// pick(i).first (m rows of x) with w's matrix pick(i).second, both numbered in flat batch order.
template <typename Pick>
void qmm_products(const std::vector<array>& inputs, array& out, const Codec& c, bool transpose,
                  int64_t m, int64_t count, Pick pick) {
  const bool affine = c.affine();
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array w = cpu::ensure_row_contiguous(inputs[1]);
  const array sc = cpu::ensure_row_contiguous(inputs[2]);
  const array bi = affine ? cpu::ensure_row_contiguous(inputs[3]) : sc;
  const int64_t kx = x.shape(-1), n = out.shape(-1);
  const int64_t w_bytes = int64_t{w.shape(-1)} * w.shape(-2) * 4;
  const int64_t groups = int64_t{sc.shape(-1)} * sc.shape(-2);
  const auto* packed = reinterpret_cast<const uint8_t*>(w.data<uint32_t>());
  by_float_dtype("quantized_matmul", out.dtype(), [&](auto t) {
    using T = decltype(t);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    auto run = [&](auto s_tag) {
      using S = decltype(s_tag);
      for (int64_t i = 0; i < count; ++i) {
        const auto [xi, wi] = pick(i);
        const T* xp = x.data<T>() + xi * m * kx;
        const uint8_t* wp = packed + wi * w_bytes;
        const S* sp = sc.data<S>() + wi * groups;
        const S* bp = affine ? bi.data<S>() + wi * groups : nullptr;
        T* op = out.data<T>() + i * m * n;
        if (transpose) {
          qmm_transposed<T, A, S>(xp, wp, sp, bp, op, m, n, kx, c);
        } else {
          qmm_plain<T, A, S>(xp, wp, sp, bp, op, m, n, kx, c);
        }
      }
    };
    if (affine) {
      run(T{});
    } else {
      run(uint8_t{});
    }
  });
}

}  // namespace

void QuantizedMatmul::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  // One weight matrix for every row of x, or (batched w, broadcast by the front end) one per
  // batch entry, each with its x rows.
  const array& w = inputs[1];
  const int64_t batch = w.ndim() == 2 ? 1 : static_cast<int64_t>(w.size() / (w.shape(-1) * w.shape(-2)));
  const int64_t m = static_cast<int64_t>(inputs[0].size()) / std::max<int64_t>(inputs[0].shape(-1), 1) / batch;
  qmm_products(inputs, out, Codec{mode_, bits_, group_size_}, transpose_, m, batch,
               [](int64_t i) { return std::pair<int64_t, int64_t>{i, i}; });
}

void GatherQMM::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const array lhs = cpu::ensure_row_contiguous(inputs[inputs.size() - 2]);
  const array rhs = cpu::ensure_row_contiguous(inputs[inputs.size() - 1]);
  const array &x = inputs[0], &w = inputs[1];
  const int64_t m = x.shape(-2);
  const int64_t nx = static_cast<int64_t>(x.size()) / std::max<int64_t>(int64_t{x.shape(-1)} * m, 1);
  const int64_t nw = static_cast<int64_t>(w.size()) / (int64_t{w.shape(-1)} * w.shape(-2));
  const uint32_t* li = lhs.data<uint32_t>();
  const uint32_t* ri = rhs.data<uint32_t>();
  const int64_t count = static_cast<int64_t>(lhs.size());
  for (int64_t i = 0; i < count; ++i) {
    if (li[i] >= nx || ri[i] >= nw) {
      const bool left = li[i] >= nx;
      throw std::invalid_argument(
          std::string("[gather_qmm] ") + (left ? "lhs_indices" : "rhs_indices") + " holds " +
          std::to_string(left ? li[i] : ri[i]) + " but " + (left ? "x" : "w") + " has " +
          std::to_string(left ? nx : nw) + " matrices");
    }
  }
  qmm_products(inputs, out, Codec{mode_, bits_, group_size_}, transpose_, m, count,
               [&](int64_t i) { return std::pair<int64_t, int64_t>{li[i], ri[i]}; });
}

void ConvertFP8::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  const size_t n = x.size();
  if (to_) {
    uint8_t* dst = out.data<uint8_t>();
    by_float_dtype("to_fp8", x.dtype(), [&](auto t) {
      using T = decltype(t);
      const T* src = x.data<T>();
      cpu::parallel_blocks(n, 1 << 16, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) dst[i] = fp8_from_float(static_cast<float>(src[i]));
      });
    });
    return;
  }
  const uint8_t* src = x.data<uint8_t>();
  by_float_dtype("from_fp8", out.dtype(), [&](auto t) {
    using T = decltype(t);
    T* dst = out.data<T>();
    cpu::parallel_blocks(n, 1 << 16, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) dst[i] = T(fp8_to_float(src[i]));
    });
  });
}

}  // namespace tessera
