// CPU kernels of the tessera::fast primitives (ops/fast.h) but attention's (attention.cpp): the
// norms, cross entropy, RoPE. Each rounds where its composite's ops round, with the same functors
// (unary_ops.h), so a primitive and its composite agree bit for bit.
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/copy.h"
#include "backend/cpu/fast_common.h"
#include "backend/cpu/half_gemm.h"
#include "backend/cpu/numeric.h"
#include "backend/cpu/scratch.h"
#include "backend/cpu/unary_ops.h"
#include "backend/cpu/vec16_ops.h"
#include "backend/cpu/vector_math.h"
#include "core/thread_pool.h"
#include "ops/fast.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

#if defined(__x86_64__)
// The first min(left, 16) of 16 lanes.
inline __mmask16 first_lanes(int left) {
  return left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
}
#endif

#if defined(__x86_64__)
// g++ 12 takes the unmasked AVX-512 intrinsics' pass-through operand for a read of an undefined
// register (here and in cross entropy's rows below); every lane they read is defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// One bfloat16 row of the non-traditional rotation (the two halves), 16 pairs per pass, every
// product, sum and difference rounded to bfloat16 as the scalar loop rounds (the same bits).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void rope_halves_bf16(
    const bfloat16_t* x1, const bfloat16_t* x2, const bfloat16_t* c, const bfloat16_t* s,
    bfloat16_t* o1, bfloat16_t* o2, int half) {
  namespace v = cpu::ops;
  for (int i = 0; i < half; i += 16) {
    const __mmask16 m = first_lanes(half - i);
    const __m512 a = v::load_bf16(m, x1 + i), b = v::load_bf16(m, x2 + i);
    const __m512 cv = v::load_bf16(m, c + i), sv = v::load_bf16(m, s + i);
    const __m512 ac = v::round_bf16(_mm512_mul_ps(a, cv)), bs = v::round_bf16(_mm512_mul_ps(b, sv));
    const __m512 as = v::round_bf16(_mm512_mul_ps(a, sv)), bc = v::round_bf16(_mm512_mul_ps(b, cv));
    v::store_bf16(o1 + i, m, v::round_bf16(_mm512_sub_ps(ac, bs)));
    v::store_bf16(o2 + i, m, v::round_bf16(_mm512_add_ps(as, bc)));
  }
}
#pragma GCC diagnostic pop
#endif

// x (B, N, T, D) row-contiguous; cos / sin tables per batch entry (the offset may differ).
template <typename T>
void rope_rows(const array& x, const int32_t* offset, size_t n_offsets, const float* freqs,
               int dims, bool traditional, std::optional<float> base, float scale, T* out) {
  using C = cpu::compute_t<T>;
  const int B = x.shape(0), N = x.shape(1), L = x.shape(2), D = x.shape(3), half = dims / 2;
  const T* xp = x.data<T>();
  // The composite: inv_freq = exp(-i * (log(base) / half)) or 1 / freqs[i], theta = position *
  // inv_freq, all float32; cos and sin rounded to T; the rotation in T's arithmetic.
  std::vector<float> inv_freq(half);
  const float step = base ? static_cast<float>(std::log(*base) / half) : 0.0f;
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = base ? cpu::ops::ExpOp{}(static_cast<float>(-i) * step) : 1.0f / freqs[i];
  }
  auto mul = [](T a, T b) { return static_cast<T>(static_cast<C>(a) * static_cast<C>(b)); };
  auto add = [](T a, T b) { return static_cast<T>(static_cast<C>(a) + static_cast<C>(b)); };
  auto sub = [](T a, T b) { return static_cast<T>(static_cast<C>(a) - static_cast<C>(b)); };
  std::vector<T> cos_t(static_cast<size_t>(L) * half), sin_t(cos_t.size());
  for (int b = 0; b < B; ++b) {
    if (b == 0 || n_offsets > 1) {
      const float off = static_cast<float>(offset[n_offsets > 1 ? b : 0]);
      for (int t = 0; t < L; ++t) {
        const float pos = (static_cast<float>(t) + off) * scale;
        for (int i = 0; i < half; ++i) {
          const float theta = pos * inv_freq[i];
          cos_t[static_cast<size_t>(t) * half + i] = static_cast<T>(cpu::ops::CosOp{}(theta));
          sin_t[static_cast<size_t>(t) * half + i] = static_cast<T>(cpu::ops::SinOp{}(theta));
        }
      }
    }
    detail::parallel_for(static_cast<size_t>(N) * L, 64, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const size_t row = static_cast<size_t>(b) * N * L + r;
        const T* in = xp + row * D;
        T* o = out + row * D;
        const T* c = cos_t.data() + (r % L) * half;
        const T* s = sin_t.data() + (r % L) * half;
        if (traditional) {  // adjacent pairs
          for (int i = 0; i < half; ++i) {
            const T x1 = in[2 * i], x2 = in[2 * i + 1];
            o[2 * i] = sub(mul(x1, c[i]), mul(x2, s[i]));
            o[2 * i + 1] = add(mul(x1, s[i]), mul(x2, c[i]));
          }
        } else {  // the two halves
#if defined(__x86_64__)
          if constexpr (std::is_same_v<T, bfloat16_t>) {
            if (copy_isa() == CopyIsa::avx512) {
              rope_halves_bf16(in, in + half, c, s, o, o + half, half);
              for (int i = dims; i < D; ++i) o[i] = in[i];
              continue;
            }
          }
#endif
          const T* x1 = in;
          const T* x2 = in + half;
          T* o1 = o;
          T* o2 = o + half;
          for (int i = 0; i < half; ++i) {
            o1[i] = sub(mul(x1[i], c[i]), mul(x2[i], s[i]));
            o2[i] = add(mul(x1[i], s[i]), mul(x2[i], c[i]));
          }
        }
        for (int i = dims; i < D; ++i) o[i] = in[i];
      }
    });
  }
}


// x rounded to T and held in C, exactly: static_cast<C>(static_cast<T>(x)), written for bfloat16
// in 32-bit lanes (detail::float_to_bf16_bits's bits) so that loops of it vectorise. kNan false:
// the caller knows x is not a NaN (two instructions fewer per vector).
template <typename T, typename C, bool kNan = true>
[[gnu::always_inline]] inline C rounded(C x) {
  if constexpr (std::is_same_v<T, bfloat16_t> && std::is_same_v<C, float>) {
    const uint32_t u = std::bit_cast<uint32_t>(x);
    const uint32_t r = kNan && x != x ? (u | 0x400000u) : u + 0x7fffu + ((u >> 16) & 1u);
    return std::bit_cast<float>(r & 0xffff0000u);
  } else {
    return static_cast<C>(static_cast<T>(x));
  }
}

// y, already rounded to T (rounded<T>), as a T.
template <typename T, typename C>
[[gnu::always_inline]] inline T narrow(C y) {
  if constexpr (std::is_same_v<T, bfloat16_t> && std::is_same_v<C, float>) {
    return bfloat16_t::from_bits(static_cast<uint16_t>(std::bit_cast<uint32_t>(y) >> 16));
  } else {
    return static_cast<T>(y);
  }
}

// Sum of 16 lanes as a tree (vector adds once vectorised).
[[gnu::always_inline]] inline float lane_sum(float (&lanes)[16]) {
  for (int w = 8; w >= 1; w /= 2) {
    for (int t = 0; t < w; ++t) lanes[t] += lanes[t + w];
  }
  return lanes[0];
}

// A norm's output row: (x - mean) * scale rounded to T, times the weight and plus the bias (where
// given) in T's arithmetic. kNan false: no step can make a NaN (the callers know).
template <bool kNan, typename In, typename T, typename W>
[[gnu::always_inline]] inline void norm_row_out(const In* in, int D, const W* weight,
                                                const W* bias, float mean, float scale, T* o) {
  using C = cpu::compute_t<T>;
  for (int i = 0; i < D; ++i) {
    C y = rounded<T, C, kNan>((static_cast<float>(in[i]) - mean) * scale);
    if (weight) y = rounded<T, C, kNan>(y * static_cast<C>(weight[i]));
    if (bias) y = rounded<T, C, kNan>(y + static_cast<C>(bias[i]));
    o[i] = narrow<T>(y);
  }
}

// One row of rms_norm: the composite's float32 sum of squares (16 lane sums) times 1/D, plus
// eps, 1/sqrt, the product rounded to T, then times the weight in T's arithmetic.
template <typename In, typename T, typename W>
[[gnu::always_inline]] inline void rms_row(const In* in, int D, const W* weight, float eps,
                                           bool params_finite, T* o) {
  float lanes[16] = {};
  int i0 = 0;
  for (; i0 + 16 <= D; i0 += 16) {
    for (int t = 0; t < 16; ++t) {
      const float v = static_cast<float>(in[i0 + t]);
      lanes[t] += v * v;
    }
  }
  for (int i = i0; i < D; ++i) {
    const float v = static_cast<float>(in[i]);
    lanes[i - i0] += v * v;
  }
  const float scale = cpu::ops::RsqrtOp{}(lane_sum(lanes) / static_cast<float>(D) + eps);
  // A finite sum of squares: every x is finite, so no step makes a NaN.
  const W* no_bias = nullptr;
  if (params_finite && std::isfinite(scale)) {
    norm_row_out<false>(in, D, weight, no_bias, 0.0f, scale, o);
  } else {
    norm_row_out<true>(in, D, weight, no_bias, 0.0f, scale, o);
  }
}

// One row of layer_norm: the float32 mean and centred sum of squares (16 lane sums each) over
// D, plus eps, 1/sqrt, the product rounded to T, then times the weight and plus the bias in T's
// arithmetic.
template <typename In, typename T, typename W>
[[gnu::always_inline]] inline void layer_norm_row(const In* in, int D, const W* weight,
                                                  const W* bias, float eps, bool params_finite,
                                                  T* o) {
  float lanes[16] = {}, sq[16] = {};
  int i0 = 0;
  for (; i0 + 16 <= D; i0 += 16) {
    for (int t = 0; t < 16; ++t) lanes[t] += static_cast<float>(in[i0 + t]);
  }
  for (int i = i0; i < D; ++i) lanes[i - i0] += static_cast<float>(in[i]);
  const float mean = lane_sum(lanes) / static_cast<float>(D);
  for (i0 = 0; i0 + 16 <= D; i0 += 16) {
    for (int t = 0; t < 16; ++t) {
      const float c = static_cast<float>(in[i0 + t]) - mean;
      sq[t] += c * c;
    }
  }
  for (int i = i0; i < D; ++i) {
    const float c = static_cast<float>(in[i]) - mean;
    sq[i - i0] += c * c;
  }
  const float scale = cpu::ops::RsqrtOp{}(lane_sum(sq) / static_cast<float>(D) + eps);
  // A finite mean and sum of squares: every x is finite, and with finite parameters no step
  // makes a NaN (a product may overflow to inf; inf plus a finite bias stays inf).
  if (params_finite && std::isfinite(mean) && std::isfinite(scale)) {
    norm_row_out<false>(in, D, weight, bias, mean, scale, o);
  } else {
    norm_row_out<true>(in, D, weight, bias, mean, scale, o);
  }
}

// A block of rows [r0, r1) of either norm, compiled once per instruction set (the baseline
// build's scalar loops ran at half the speed of the composite's vectorised ops). W: T, or the
// float a half T's weight and bias were widened to (exactly).
template <typename In, typename T, typename W>
[[gnu::always_inline]] inline void norm_rows_body(const In* x, int D, const W* weight,
                                                  const W* bias, float eps, bool layer,
                                                  bool params_finite, size_t r0, size_t r1,
                                                  T* out) {
  for (size_t r = r0; r < r1; ++r) {
    if (layer) layer_norm_row(x + r * D, D, weight, bias, eps, params_finite, out + r * D);
    else rms_row(x + r * D, D, weight, eps, params_finite, out + r * D);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
template <typename In, typename T, typename W>
TESSERA_AVX512 void norm_rows_avx512(const In* x, int D, const W* weight, const W* bias,
                                     float eps, bool layer, bool params_finite, size_t r0,
                                     size_t r1, T* out) {
  norm_rows_body(x, D, weight, bias, eps, layer, params_finite, r0, r1, out);
}
template <typename In, typename T, typename W>
__attribute__((target("avx2,fma"))) void norm_rows_avx2(const In* x, int D, const W* weight,
                                                        const W* bias, float eps, bool layer,
                                                        bool params_finite, size_t r0, size_t r1,
                                                        T* out) {
  norm_rows_body(x, D, weight, bias, eps, layer, params_finite, r0, r1, out);
}
#endif

// rms_norm (layer false) or layer_norm over the rows of x (row-contiguous) into out.
template <typename In, typename T>
void norm_rows(const array& x, const T* weight, const T* bias, float eps, bool layer, T* out) {
  const int D = x.shape(-1);
  const size_t rows = D ? x.size() / D : 0;
  const In* xp = x.data<In>();
  const size_t grain = std::max<size_t>(1, 16384 / std::max(D, 1));
  auto run = [&](const auto* w, const auto* b) {
    bool finite = true;
    for (int i = 0; i < D; ++i) {
      finite = finite && (!w || std::isfinite(static_cast<double>(w[i]))) &&
               (!b || std::isfinite(static_cast<double>(b[i])));
    }
    detail::parallel_for(rows, grain, [&](size_t r0, size_t r1) {
#if defined(__x86_64__) && defined(__GNUC__)
      if (copy_isa() == CopyIsa::avx512) {
        return norm_rows_avx512(xp, D, w, b, eps, layer, finite, r0, r1, out);
      }
      if (copy_isa() == CopyIsa::avx2) {
        return norm_rows_avx2(xp, D, w, b, eps, layer, finite, r0, r1, out);
      }
#endif
      norm_rows_body(xp, D, w, b, eps, layer, finite, r0, r1, out);
    });
  };
  using C = cpu::compute_t<T>;
  if constexpr (std::is_same_v<T, C>) {
    run(weight, bias);
  } else {  // half weights and biases widened once, not once per row
    cpu::Scratch<C> wide((weight ? D : 0) + (bias ? D : 0));
    C* w = weight ? wide.data() : nullptr;
    C* b = bias ? wide.data() + (weight ? D : 0) : nullptr;
    for (int i = 0; i < D; ++i) {
      if (w) w[i] = static_cast<C>(weight[i]);
      if (b) b[i] = static_cast<C>(bias[i]);
    }
    run(static_cast<const C*>(w), static_cast<const C*>(b));
  }
}

// ---- the norms' gradient ----

// Rows of x (row-contiguous, D wide) with their cotangents g, as the composites' vjps compute them
// in float32: xc = x - mean(x) for layer_norm (x for rms_norm), r = 1 / sqrt(mean(xc^2) + eps),
// gy = g * weight rounded to T (or g), and
//   rms_norm    dx = r gy - xc r^3 (gy . xc) / D
//   layer_norm  dx = r (gy - sum(gy) / D) - xc r^3 (gy . xc) / D;
// dweight = the sum over rows of g * y (y = xc r rounded to T, each product rounded to T), dbias
// the sum of g, both added in float32 in blocks of 16 rows and then block by block, so the bits
// do not depend on the pool.
constexpr size_t kNormBlock = 16;

// The sum of D values in C, as 16 lane sums added in order.
template <typename C, typename V>
[[gnu::always_inline]] inline C lane_sum16(const V* x, int D) {
  C lanes[16] = {};
  int j0 = 0;
  for (; j0 + 16 <= D; j0 += 16) {
    for (int t = 0; t < 16; ++t) lanes[t] += static_cast<C>(x[j0 + t]);
  }
  for (int j = j0; j < D; ++j) lanes[j - j0] += static_cast<C>(x[j]);
  C sum = 0;
  for (C v : lanes) sum += v;
  return sum;
}

// Blocks [b0, b1) of 16 rows each: dx rows, and each block's dweight / dbias partial sums in
// pw / pb (D each, nullptr when not wanted); gy and xc are D-wide scratch rows.
template <typename In, typename T, typename C = cpu::compute_t<T>>
[[gnu::always_inline]] inline void norm_vjp_blocks_body(const In* xp, const T* g, size_t rows,
                                                        int D, const T* weight, float eps,
                                                        bool layer, In* dx, C* pw, C* pb,
                                                        size_t b0, size_t b1, C* gy, C* xc) {
  for (size_t blk = b0; blk < b1; ++blk) {
    C* w_sum = pw ? pw + blk * D : nullptr;
    C* b_sum = pb ? pb + blk * D : nullptr;
    if (w_sum) std::fill(w_sum, w_sum + D, C(0));
    if (b_sum) std::fill(b_sum, b_sum + D, C(0));
    for (size_t r = blk * kNormBlock; r < std::min(rows, (blk + 1) * kNormBlock); ++r) {
      const In* xr = xp + r * D;
      const T* gr = g + r * D;
      const C mean = layer ? lane_sum16<C>(xr, D) / static_cast<C>(D) : C(0);
      // xc and gy, and their 16 lane sums (vector adds once vectorised), in one pass.
      C sq[16] = {}, dot[16] = {}, sg[16] = {};
      for (int j0 = 0; j0 < D; j0 += 16) {
        const int n = std::min(16, D - j0);
        for (int t = 0; t < n; ++t) {
          const int j = j0 + t;
          const C c = static_cast<C>(xr[j]) - mean;
          const C gv = weight ? rounded<T, C>(static_cast<C>(gr[j]) * static_cast<C>(weight[j]))
                              : static_cast<C>(gr[j]);
          xc[j] = c;
          gy[j] = gv;
          sq[t] += c * c;
          dot[t] += gv * c;
          sg[t] += gv;
        }
      }
      C ss = 0, dd = 0, gs = 0;
      for (int t = 0; t < 16; ++t) ss += sq[t], dd += dot[t], gs += sg[t];
      const C inv = C(1) / std::sqrt(ss / static_cast<C>(D) + static_cast<C>(eps));
      const C k = inv * inv * inv * dd / static_cast<C>(D);
      const C shift = layer ? inv * gs / static_cast<C>(D) : C(0);
      In* __restrict dxr = dx + r * D;
      for (int j = 0; j < D; ++j) {
        dxr[j] = narrow<In>(rounded<In, C>(gy[j] * inv - shift - xc[j] * k));
      }
      if (w_sum) {
        for (int j = 0; j < D; ++j) {
          const C y = rounded<T, C>(xc[j] * inv);
          w_sum[j] += rounded<T, C>(static_cast<C>(gr[j]) * y);
        }
      }
      if (b_sum) {
        for (int j = 0; j < D; ++j) b_sum[j] += static_cast<C>(gr[j]);
      }
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
template <typename In, typename T, typename C>
TESSERA_AVX512 void norm_vjp_blocks_avx512(
    const In* xp, const T* g, size_t rows, int D, const T* weight, float eps, bool layer, In* dx,
    C* pw, C* pb, size_t b0, size_t b1, C* gy, C* xc) {
  norm_vjp_blocks_body(xp, g, rows, D, weight, eps, layer, dx, pw, pb, b0, b1, gy, xc);
}
template <typename In, typename T, typename C>
__attribute__((target("avx2,fma"))) void norm_vjp_blocks_avx2(
    const In* xp, const T* g, size_t rows, int D, const T* weight, float eps, bool layer, In* dx,
    C* pw, C* pb, size_t b0, size_t b1, C* gy, C* xc) {
  norm_vjp_blocks_body(xp, g, rows, D, weight, eps, layer, dx, pw, pb, b0, b1, gy, xc);
}
#endif

template <typename In, typename T>
void norm_vjp_rows(const array& x, const T* weight, const T* g, float eps, bool layer, In* dx,
                   T* dw, T* db) {
  using C = cpu::compute_t<T>;
  const int D = x.shape(-1);
  const size_t rows = D ? x.size() / D : 0;
  const In* xp = x.data<In>();
  const size_t blocks = (rows + kNormBlock - 1) / kNormBlock;
  std::vector<C> pw(dw ? blocks * D : 0), pb(db ? blocks * D : 0);
  C* pwp = dw ? pw.data() : nullptr;
  C* pbp = db ? pb.data() : nullptr;
  const size_t grain = std::max<size_t>(1, 4096 / std::max(D, 1));
  detail::parallel_for(blocks, grain, [&](size_t b0, size_t b1) {
    std::vector<C> gy(static_cast<size_t>(D)), xc(static_cast<size_t>(D));
#if defined(__x86_64__) && defined(__GNUC__)
    if (copy_isa() == CopyIsa::avx512) {
      return norm_vjp_blocks_avx512(xp, g, rows, D, weight, eps, layer, dx, pwp, pbp, b0, b1,
                                    gy.data(), xc.data());
    }
    if (copy_isa() == CopyIsa::avx2) {
      return norm_vjp_blocks_avx2(xp, g, rows, D, weight, eps, layer, dx, pwp, pbp, b0, b1,
                                  gy.data(), xc.data());
    }
#endif
    norm_vjp_blocks_body(xp, g, rows, D, weight, eps, layer, dx, pwp, pbp, b0, b1, gy.data(),
                         xc.data());
  });
  for (auto [sums, out] : {std::pair{&pw, dw}, std::pair{&pb, db}}) {
    if (!out) continue;
    // Block by block in order (each column's sum the same as one column at a time), row-wise.
    std::vector<C> total(static_cast<size_t>(D), C(0));
    for (size_t blk = 0; blk < blocks; ++blk) {
      const C* part = sums->data() + blk * D;
      for (int j = 0; j < D; ++j) total[j] += part[j];
    }
    for (int j = 0; j < D; ++j) out[j] = static_cast<T>(total[j]);
  }
}

// ---- cross entropy ----

template <typename C>
[[gnu::always_inline]] inline C exp_c(C x) {
  if constexpr (std::is_same_v<C, float>) return cpu::vexp(x);
  else return std::exp(x);
}

// Rows of cross entropy: the row's maximum m and sum of exp(x - m) in C (float, double for
// double) from 16 lane maxima and 16 lane sums, then either the loss log(sum) - (x[target] - m)
// or the gradient row (exp(x - m) / sum - [j == target]) * g. A target outside [-n, n) gives NaN.
template <typename T>
[[gnu::always_inline]] inline auto row_lse(const T* x, int n) {
  using C = cpu::compute_t<T>;
  C mx[16];
  for (C& v : mx) v = -std::numeric_limits<C>::infinity();
  int j0 = 0;
  for (; j0 + 16 <= n; j0 += 16) {
    for (int t = 0; t < 16; ++t) {
      const C v = static_cast<C>(x[j0 + t]);
      mx[t] = mx[t] > v ? mx[t] : v;
    }
  }
  for (int j = j0; j < n; ++j) {
    const C v = static_cast<C>(x[j]);
    mx[j - j0] = mx[j - j0] > v ? mx[j - j0] : v;
  }
  C m = mx[0];
  for (C v : mx) m = m > v ? m : v;
  C sm[16] = {};
  for (j0 = 0; j0 + 16 <= n; j0 += 16) {
    for (int t = 0; t < 16; ++t) sm[t] += exp_c(static_cast<C>(x[j0 + t]) - m);
  }
  for (int j = j0; j < n; ++j) sm[j - j0] += exp_c(static_cast<C>(x[j]) - m);
  C sum = 0;
  for (C v : sm) sum += v;
  return std::pair<C, C>{m, sum};
}

// rows [r0, r1): loss[r] (grad == nullptr) or grad rows (g the rows' cotangents).
template <typename T>
[[gnu::always_inline]] inline void cross_entropy_body(const T* x, const int32_t* targets, int n,
                                                      size_t r0, size_t r1, float* loss,
                                                      const float* g, T* grad) {
  using C = cpu::compute_t<T>;
  for (size_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    int t = targets[r];
    if (t < 0) t += n;
    const bool valid = t >= 0 && t < n;
    // Relative to the row's maximum m: large logits keep their differences.
    const auto [m, sum] = row_lse(xr, n);
    if (!grad) {
      loss[r] = valid ? static_cast<float>(std::log(sum) - (static_cast<C>(xr[t]) - m))
                      : std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    T* gr = grad + r * n;
    const C scale = (valid ? static_cast<C>(g[r]) : std::numeric_limits<C>::quiet_NaN()) / sum;
    for (int j = 0; j < n; ++j) gr[j] = static_cast<T>(exp_c(static_cast<C>(xr[j]) - m) * scale);
    if (valid) {
      gr[t] = static_cast<T>(exp_c(static_cast<C>(xr[t]) - m) * scale -
                             static_cast<C>(g[r]));
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TESSERA_CE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
// (g++ 12's uninitialised-register warnings, as above; the reductions' helpers too.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// 16 values of x from x + j as float32, lanes past `mask` set to `fill`.
template <typename T>
TESSERA_CE_AVX512 inline __m512 load16(const T* x, __mmask16 mask, float fill) {
  const __m512 f = _mm512_set1_ps(fill);
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_mask_loadu_ps(f, mask, x);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, x);
    __m512 v;
    if constexpr (std::is_same_v<T, bfloat16_t>) {
      v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      v = _mm512_cvtph_ps(h);
    }
    return _mm512_mask_blend_ps(mask, f, v);
  }
}

// exp(x) for x <= 0 (a logit minus its row's maximum), NaN passed on: x = n ln2 + r with
// |r| <= ln2 / 2, e^r from the polynomial of vector_math.h, scaled by 2^n (vscalefps).
TESSERA_CE_AVX512 inline __m512 exp_nonpositive(__m512 x) {
  const __m512 c = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // NaN x: x (max's second operand)
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(cpu::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(cpu::kLn2Hi), c);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(cpu::kLn2Lo), r);
  __m512 p = _mm512_set1_ps(cpu::kExpPoly[0]);
  for (size_t i = 1; i < std::size(cpu::kExpPoly); ++i) {
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(cpu::kExpPoly[i]));
  }
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(e, n);
}

// row_lse on 16 lanes: the maximum, then the sum of exp(x - m) (the row is read twice; a row of
// a 32 K vocabulary is 64 KiB of bfloat16, in L2 the second time). With `e`, exp(x - m) is kept
// there too (n floats), for the gradient.
template <typename T>
TESSERA_CE_AVX512 std::pair<float, float> row_lse_avx512(const T* x, int n, float* e = nullptr) {
  const float ninf = -std::numeric_limits<float>::infinity();
  __m512 vm = _mm512_set1_ps(ninf);
  int j = 0;
  for (; j + 16 <= n; j += 16) vm = _mm512_max_ps(vm, load16(x + j, 0xffff, ninf));
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - j)) - 1);
  if (tail) vm = _mm512_max_ps(vm, load16(x + j, tail, ninf));
  // A NaN logit makes the row's loss NaN: the sum below carries it (exp(NaN - m) is NaN).
  const float m = _mm512_reduce_max_ps(vm);
  const __m512 vmx = _mm512_set1_ps(m);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  for (j = 0; j + 32 <= n; j += 32) {
    const __m512 e0 = exp_nonpositive(_mm512_sub_ps(load16(x + j, 0xffff, 0.0f), vmx));
    const __m512 e1 = exp_nonpositive(_mm512_sub_ps(load16(x + j + 16, 0xffff, 0.0f), vmx));
    if (e) _mm512_storeu_ps(e + j, e0), _mm512_storeu_ps(e + j + 16, e1);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; j < n; j += 16) {
    const __mmask16 k = first_lanes(n - j);
    const __m512 e0 =
        _mm512_maskz_mov_ps(k, exp_nonpositive(_mm512_sub_ps(load16(x + j, k, 0.0f), vmx)));
    if (e) _mm512_mask_storeu_ps(e + j, k, e0);
    s0 = _mm512_add_ps(s0, e0);
  }
  return {m, _mm512_reduce_add_ps(_mm512_add_ps(s0, s1))};
}

// 16 float32 values into x + j as T (rounded to nearest even), lanes past `mask` left alone.
template <typename T>
TESSERA_CE_AVX512 inline void store16(T* x, __mmask16 mask, __m512 v) {
  if constexpr (std::is_same_v<T, float>) {
    _mm512_mask_storeu_ps(x, mask, v);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    cpu::ops::store_bf16(x, mask, cpu::ops::round_bf16(v));
  } else {
    const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(x, mask, h);
  }
}

// The rows' losses, or (grad) their gradient rows exp(x - m) * g / sum, less g at the target.
template <typename T>
TESSERA_CE_AVX512 void cross_entropy_avx512(const T* x, const int32_t* targets, int n, size_t r0,
                                            size_t r1, float* loss, const float* g, T* grad) {
  std::vector<float> e(grad ? static_cast<size_t>(n) : 0);  // one row's exp(x - m)
  for (size_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    int t = targets[r];
    if (t < 0) t += n;
    const bool valid = t >= 0 && t < n;
    const auto [m, sum] = row_lse_avx512(xr, n, grad ? e.data() : nullptr);
    if (!grad) {
      loss[r] = valid ? std::log(sum) - (static_cast<float>(xr[t]) - m)
                      : std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    T* gr = grad + r * n;
    const float scale = (valid ? g[r] : std::numeric_limits<float>::quiet_NaN()) / sum;
    const __m512 vs = _mm512_set1_ps(scale);
    for (int j = 0; j < n; j += 16) {
      const __mmask16 k = first_lanes(n - j);
      store16(gr + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, e.data() + j), vs));
    }
    if (valid) gr[t] = static_cast<T>(e[t] * scale - g[r]);
  }
}
#pragma GCC diagnostic pop
template <typename T>
__attribute__((target("avx2,fma"))) void cross_entropy_avx2(const T* x, const int32_t* targets,
                                                            int n, size_t r0, size_t r1,
                                                            float* loss, const float* g,
                                                            T* grad) {
  cross_entropy_body(x, targets, n, r0, r1, loss, g, grad);
}
#endif

// Cross entropy's loss (grad null) or its gradient over every row of x (row-contiguous).
template <typename T>
void cross_entropy_rows(const array& x, const int32_t* targets, float* loss, const float* g,
                        T* grad) {
  const int n = x.shape(-1);
  const size_t rows = n ? x.size() / n : 0;
  const T* xp = x.data<T>();
  detail::parallel_for(rows, std::max<size_t>(1, 16384 / std::max(n, 1)),
                       [&](size_t r0, size_t r1) {
#if defined(__x86_64__) && defined(__GNUC__)
    if constexpr (!std::is_same_v<T, double>) {
      if (copy_isa() == CopyIsa::avx512) {
        return cross_entropy_avx512(xp, targets, n, r0, r1, loss, g, grad);
      }
      if (copy_isa() == CopyIsa::avx2) {
        return cross_entropy_avx2(xp, targets, n, r0, r1, loss, g, grad);
      }
    }
#endif
    cross_entropy_body(xp, targets, n, r0, r1, loss, g, grad);
  });
}

}  // namespace

void CrossEntropy::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array t = cpu::ensure_row_contiguous(inputs[1]);
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("cross_entropy", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_rows<T>(x, t.data<int32_t>(), out.data<float>(), nullptr, nullptr);
  });
}

void CrossEntropyGrad::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array t = cpu::ensure_row_contiguous(inputs[1]);
  const array g = cpu::ensure_row_contiguous(inputs[2]);
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("cross_entropy", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_rows<T>(x, t.data<int32_t>(), nullptr, g.data<float>(), out.data<T>());
  });
}

void LayerNorm::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  size_t at = 1;
  const array w = has_weight_ ? cpu::ensure_row_contiguous(inputs[at++]) : array(0.0f);
  const array b = has_bias_ ? cpu::ensure_row_contiguous(inputs[at]) : array(0.0f);
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("layer_norm", out.dtype(), [&](auto out_tag) {
    using T = decltype(out_tag);
    const T* wp = has_weight_ ? w.data<T>() : nullptr;
    const T* bp = has_bias_ ? b.data<T>() : nullptr;
    dispatch_floating("layer_norm", x.dtype(), [&](auto in_tag) {
      norm_rows<decltype(in_tag), T>(x, wp, bp, eps_, true, out.data<T>());
    });
  });
}

void RMSNorm::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array w = inputs.size() > 1 ? cpu::ensure_row_contiguous(inputs[1]) : array(0.0f);
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("rms_norm", out.dtype(), [&](auto out_tag) {
    using T = decltype(out_tag);
    const T* wp = inputs.size() > 1 ? w.data<T>() : nullptr;
    dispatch_floating("rms_norm", x.dtype(), [&](auto in_tag) {
      norm_rows<decltype(in_tag), T>(x, wp, nullptr, eps_, false, out.data<T>());
    });
  });
}

void NormVjp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array w = has_weight_ ? cpu::ensure_row_contiguous(inputs[1]) : array(0.0f);
  const array g = cpu::ensure_row_contiguous(inputs.back());
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  dispatch_floating("norm", g.dtype(), [&](auto out_tag) {
    using T = decltype(out_tag);
    dispatch_floating("norm", x.dtype(), [&](auto in_tag) {
      using In = decltype(in_tag);
      size_t at = 1;
      T* dw = has_weight_ ? outputs[at++].data<T>() : nullptr;
      T* db = has_bias_ ? outputs[at++].data<T>() : nullptr;
      norm_vjp_rows<In, T>(x, has_weight_ ? w.data<T>() : nullptr, g.data<T>(), eps_, layer_,
                           outputs[0].data<In>(), dw, db);
    });
  });
}

void RoPE::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array offset = cpu::ensure_row_contiguous(inputs[1]);
  const float* freqs = nullptr;
  array f = inputs.size() > 2 ? cpu::ensure_row_contiguous(inputs[2]) : array(0.0f);
  if (inputs.size() > 2) freqs = f.data<float>();
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("rope", out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rope_rows<T>(x, offset.data<int32_t>(), offset.size(), freqs, dims_, traditional_, base_,
                 scale_, out.data<T>());
  });
}

}  // namespace tessera
