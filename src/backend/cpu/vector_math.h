// Branch-free float32 exp, log, tanh, sigmoid, sin, cos, expm1 and log1p that g++ -O3 vectorises
// inside the flat kernel loops (libm's scalar calls do not vectorise). exp/log/tanh/sigmoid:
// Cephes-style range reduction and minimax polynomials in float (measured on every float: exp
// within 1.0 ulp of the exact result, tanh 2.5, sigmoid 2.8). sin, cos: reduction and Taylor
// series in float (within 1.6 ulp for |x| <= 2^14). expm1, log1p: reduction and Taylor series in
// double, rounded to float once (within 1 ulp). exp, tanh, sigmoid, sin and cos also have
// AVX-512 forms (namespace v16) with the same bits.
// All give IEEE results for +/-inf, NaN, +/-0 and subnormals (sin/cos only on the range their
// *_fast_ok predicate accepts; callers send the rest to libm).
//
// mlx_exp, mlx_erf and mlx_erfinv reproduce, operation for operation, the float32 evaluation of
// MLX's CPU backend on Linux (mlx/backend/cpu/simd/math.h through the scalar base_simd.h), so
// that their results are bit-identical to MLX's: random::normal / truncated_normal depend on it.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tessera::cpu {

// a * b + c, rounded once where the target has FMA: the AVX-512 forms below (v16) use the same
// instruction, so that a scalar call and a vector lane give the same bits. Without FMA (the
// baseline build) it rounds twice.
inline float fmadd(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;  // ln 2 split: n * kLn2Hi is exact
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kRoundF = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer

// y 2^n for an integer-valued n in [-150, 128], rounded once (the first product is exact), as
// AVX-512's vscalefps rounds it; overflows to inf.
inline float scale2(float y, int32_t n) {
  const int32_t n1 = n >> 1;
  const float s1 = std::bit_cast<float>((static_cast<uint32_t>(n1) + 127u) << 23);
  const float s2 = std::bit_cast<float>((static_cast<uint32_t>(n - n1) + 127u) << 23);
  return y * s1 * s2;
}

// The integer n that x log2(e) rounds to (to nearest, ties to even), as a float and in `k`;
// exact for |x| < 2^22.
inline float exp_round(float x, int32_t& k) {
  const float s = fmadd(x, kLog2e, kRoundF);
  k = static_cast<int32_t>(std::bit_cast<uint32_t>(s) - std::bit_cast<uint32_t>(kRoundF));
  return s - kRoundF;
}

// Horner's rule over coefficients c, highest first, written out at compile time: as a loop, g++
// did not unroll it before vectorising the loops around a call, so no loop computing an exp, a
// tanh or a sine was vectorised any more ("multiple nested loops"; the fused softmax's row
// kernel over 4096 x 4096 took 46 ms against 10 before the coefficients became an array).
template <size_t N>
inline float horner(const float (&c)[N], float r) {
  return [&]<size_t... I>(std::index_sequence<I...>) {
    float p = c[0];
    ((p = fmadd(p, r, c[I + 1])), ...);
    return p;
  }(std::make_index_sequence<N - 1>{});
}

// p(r) with e^r = 1 + r + r^2 p(r) for |r| <= ln2 / 2 (Cephes' expf minimax polynomial).
inline constexpr float kExpPoly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                     4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// exp(x) = 2^n e^r with x = n ln2 + r. x is clamped to [-104, 89] first (NaN passes): past 89
// the result overflows to inf, below -104 it rounds to 0, both in the final scaling.
inline float vexp(float x) {
  float c = 89.0f < x ? 89.0f : x;
  c = c < -104.0f ? -104.0f : c;
  int32_t k;
  const float n = exp_round(c, k);
  float r = fmadd(-n, kLn2Hi, c);
  r = fmadd(-n, kLn2Lo, r);
  const float res = scale2(fmadd(horner(kExpPoly, r), r * r, r) + 1.0f, k);
  return x != x ? x + x : res;  // x quieted, as the vector form's arithmetic passes it on
}

inline float vlog(float x) {
  // Scale subnormals into the normal range first.
  const bool sub = x < std::numeric_limits<float>::min();
  const float xs = sub ? x * 8388608.0f : x;  // 2^23
  const uint32_t bits = std::bit_cast<uint32_t>(xs);
  float e = static_cast<float>(static_cast<int32_t>((bits >> 23) & 0xffu) - 126);
  e = sub ? e - 23.0f : e;
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
  const bool small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += e * -2.12194440e-4f;
  y += -0.5f * z;
  float res = m + y + e * 0.693359375f;
  res = x == std::numeric_limits<float>::infinity() ? x : res;
  res = x == 0.0f ? -std::numeric_limits<float>::infinity() : res;
  res = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : res;
  return x != x ? x : res;
}

// tanh(x) = sign(x) t / (t + 2) with t = expm1(2|x|) = 2^n (e^r - 1) + (2^n - 1): one formula
// for all x (expm1 keeps small arguments exact: tanh of a subnormal is itself). 2|x| is capped at
// 18.05, past which the result rounds to 1. Within 3 ulp of tanh (checked on every float).
inline float vtanh(float x) {
  const float a = std::fabs(x);
  const float t2 = 18.05f < a + a ? 18.05f : a + a;
  int32_t k;
  const float n = exp_round(t2, k);
  float r = fmadd(-n, kLn2Hi, t2);
  r = fmadd(-n, kLn2Lo, r);
  const float p = std::bit_cast<float>((static_cast<uint32_t>(k) + 127u) << 23);  // 2^n
  const float t = fmadd(fmadd(horner(kExpPoly, r), r * r, r), p, p - 1.0f);
  const float res = t / (t + 2.0f);  // >= +0
  const float signed_res = std::bit_cast<float>(std::bit_cast<uint32_t>(res) |
                                                (std::bit_cast<uint32_t>(x) & 0x80000000u));
  return x != x ? x + x : signed_res;
}

// exp(-|x|) never overflows, so tiny results for very negative x keep their precision.
// A NaN argument comes out quieted (the sign its propagation through e * s gives is not the
// same in every build of the loop).
inline float vsigmoid(float x) {
  const float e = vexp(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  const float res = x >= 0.0f ? s : e * s;
  return x != x ? x + x : res;
}

// ---- sin / cos ----

// Largest |x| the float reduction below keeps within 2 ulp (j * pi/2 with j < 2^14 against a
// three-part pi/2); NaN and +/-inf fail the test too. Beyond it callers take libm's.
inline constexpr float kTrigFastMax = 16384.0f;  // 2^14
inline bool trig_fast_ok(float x) { return std::fabs(x) <= kTrigFastMax; }

inline constexpr float kTwoOverPi = 0.636619772f;
inline constexpr float kPio2A = 1.57079637f;       // float(pi/2)
inline constexpr float kPio2B = -4.37113883e-08f;  // float(pi/2 - kPio2A)
inline constexpr float kPio2C = -1.71512451e-15f;  // float(pi/2 - kPio2A - kPio2B)
// Taylor coefficients, highest first: sin(r) = r + r z p(z), cos(r) = 1 - z / 2 + z^2 p(z).
inline constexpr float kSinPoly[] = {1.0f / 362880.0f, -1.0f / 5040.0f, 1.0f / 120.0f,
                                     -1.0f / 6.0f};
inline constexpr float kCosPoly[] = {-1.0f / 3628800.0f, 1.0f / 40320.0f, -1.0f / 720.0f,
                                     1.0f / 24.0f};

// |x| = j pi/2 + r with |r| <= pi/4 (Cody-Waite with fused multiply-adds, in float so that a
// vector holds 16 lanes, not 8); the quadrant j mod 4 goes to q.
inline float trig_reduce(float x, uint32_t& q) {
  const float ax = std::fabs(x);
  const float shifted = std::fma(ax, kTwoOverPi, kRoundF);
  q = std::bit_cast<uint32_t>(shifted);  // low bits hold j
  const float j = shifted - kRoundF;
  float r = std::fma(-j, kPio2A, ax);
  r = std::fma(-j, kPio2B, r);
  return std::fma(-j, kPio2C, r);
}

// Taylor series of sin(r) and cos(r) for |r| <= pi/4, in float (truncation below 2e-9).
inline float sin_poly(float r) {
  const float z = r * r;
  return fmadd(r * z, horner(kSinPoly, z), r);
}
inline float cos_poly(float r) {
  const float z = r * r;
  return fmadd(z * z, horner(kCosPoly, z), fmadd(-0.5f, z, 1.0f));
}

// (odd ? a : b) with its sign bit flipped where `sign` has it, by bit operations, not selects:
// g++ pushed what consumed a selected value through the selects, and cos(v) * v / 3 in a fused
// kernel divided three times.
inline float quadrant_pick(uint32_t odd, float a, float b, uint32_t sign) {
  const uint32_t m = 0u - odd;
  const uint32_t bits = (std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m);
  return std::bit_cast<float>(bits ^ sign);
}

// sin(x) for trig_fast_ok(x).
inline float vsin_fast(float x) {
  uint32_t q;
  const float r = trig_reduce(x, q);
  const float s = sin_poly(r), c = cos_poly(r);
  // sin(|x|) is negative in quadrants 2, 3; sin(x) = sign(x) sin(|x|).
  const uint32_t sign = ((q & 2) << 30) ^ (std::bit_cast<uint32_t>(x) & 0x80000000u);
  return quadrant_pick(q & 1, c, s, sign);
}

// cos(x) for trig_fast_ok(x).
inline float vcos_fast(float x) {
  uint32_t q;
  const float r = trig_reduce(x, q);
  const float s = sin_poly(r), c = cos_poly(r);
  return quadrant_pick(q & 1, s, c, ((q + 1) & 2) << 30);
}

inline float vsin(float x) { return trig_fast_ok(x) ? vsin_fast(x) : std::sin(x); }
inline float vcos(float x) { return trig_fast_ok(x) ? vcos_fast(x) : std::cos(x); }

// ---- The same functions on 16 lanes (AVX-512) ----
//
// g++ vectorises the scalar forms above, but spends about twice the instructions on them (range
// checks as selects, 2^n by integer shifts, ...): these take vscalefps, masks and min/max with
// the NaN operand placed to pass through. Operation for operation the scalar forms' arithmetic,
// so each lane has the scalar result's bits (tests check it on every float). Used by the eager
// float32 kernels and the fused kernels of builds for AVX-512 CPUs.
#if defined(__AVX512F__)
namespace v16 {

using V = __m512;
inline V set1(float f) { return _mm512_set1_ps(f); }
// The masked intrinsics with every lane set: g++ 12 takes the plain ones' undefined pass-through
// operand for an uninitialised read (-Wmaybe-uninitialized).
inline V min(V a, V b) { return _mm512_mask_min_ps(a, 0xffff, a, b); }
inline V max(V a, V b) { return _mm512_mask_max_ps(a, 0xffff, a, b); }
inline V scalef(V a, V b) { return _mm512_mask_scalef_ps(a, 0xffff, a, b); }
inline V sqrt(V a) { return _mm512_mask_sqrt_ps(a, 0xffff, a); }
inline __m512i shift_to_sign(__m512i a) { return _mm512_mask_slli_epi32(a, 0xffff, a, 30); }
inline __m512i sign_bits(V x) {
  return _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(int32_t(0x80000000u)));
}

inline V exp_round(V x) {
  return _mm512_sub_ps(_mm512_fmadd_ps(x, set1(kLog2e), set1(kRoundF)), set1(kRoundF));
}
template <size_t N>
inline V horner(const float (&c)[N], V r) {
  V p = set1(c[0]);
  for (size_t i = 1; i < N; ++i) p = _mm512_fmadd_ps(p, r, set1(c[i]));
  return p;
}
// e^r - 1 for x = n ln2 + r.
inline V expm1_reduced(V x, V n) {
  V r = _mm512_fnmadd_ps(n, set1(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, set1(kLn2Lo), r);
  return _mm512_fmadd_ps(horner(kExpPoly, r), _mm512_mul_ps(r, r), r);
}

// A NaN argument comes out quieted with its sign and payload (x86 arithmetic passes a NaN
// operand on so), as the scalar forms return it.
inline V exp(V x) {
  // min/max (vminps/vmaxps) return their second operand when either is NaN.
  const V c = max(set1(-104.0f), min(set1(89.0f), x));
  const V n = exp_round(c);
  const V e = _mm512_add_ps(expm1_reduced(c, n), set1(1.0f));
  return scalef(e, n);
}

inline V tanh(V x) {
  const V a = _mm512_abs_ps(x);
  const V t2 = min(set1(18.05f), _mm512_add_ps(a, a));
  const V n = exp_round(t2);
  const V p = scalef(set1(1.0f), n);
  const V t = _mm512_fmadd_ps(expm1_reduced(t2, n), p, _mm512_sub_ps(p, set1(1.0f)));
  const V res = _mm512_div_ps(t, _mm512_add_ps(t, set1(2.0f)));
  return _mm512_or_ps(res, _mm512_castsi512_ps(sign_bits(x)));
}

inline V sigmoid(V x) {
  const V e = exp(_mm512_or_ps(x, set1(-0.0f)));  // -|x|
  const V s = _mm512_div_ps(set1(1.0f), _mm512_add_ps(set1(1.0f), e));
  const V res = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(0.0f), _CMP_GE_OQ),
                                     _mm512_mul_ps(e, s), s);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), res, _mm512_add_ps(x, x));
}

// The lanes where trig_fast_ok holds.
inline __mmask16 trig_fast_ok(V x) {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(x), set1(kTrigFastMax), _CMP_LE_OQ);
}
// sin_poly(r) and cos_poly(r) of x's reduction, and its quadrant.
inline void sincos_reduced(V x, V& s, V& c, __m512i& q) {
  const V ax = _mm512_abs_ps(x);
  const V shifted = _mm512_fmadd_ps(ax, set1(kTwoOverPi), set1(kRoundF));
  q = _mm512_castps_si512(shifted);
  const V j = _mm512_sub_ps(shifted, set1(kRoundF));
  V r = _mm512_fnmadd_ps(j, set1(kPio2A), ax);
  r = _mm512_fnmadd_ps(j, set1(kPio2B), r);
  r = _mm512_fnmadd_ps(j, set1(kPio2C), r);
  const V z = _mm512_mul_ps(r, r);
  s = _mm512_fmadd_ps(_mm512_mul_ps(r, z), horner(kSinPoly, z), r);
  c = _mm512_fmadd_ps(_mm512_mul_ps(z, z), horner(kCosPoly, z),
                      _mm512_fnmadd_ps(set1(0.5f), z, set1(1.0f)));
}
// quadrant_pick on every lane.
inline V quadrant_pick(__m512i q, V a, V b, __m512i sign) {
  const __mmask16 odd = _mm512_test_epi32_mask(q, _mm512_set1_epi32(1));
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(_mm512_mask_blend_ps(odd, b, a)), sign));
}
inline V sin_fast(V x) {
  V s, c;
  __m512i q;
  sincos_reduced(x, s, c, q);
  const __m512i quad = shift_to_sign(_mm512_and_si512(q, _mm512_set1_epi32(2)));
  return quadrant_pick(q, c, s, _mm512_xor_si512(quad, sign_bits(x)));
}
inline V cos_fast(V x) {
  V s, c;
  __m512i q;
  sincos_reduced(x, s, c, q);
  const __m512i qp1 = _mm512_add_epi32(q, _mm512_set1_epi32(1));
  return quadrant_pick(q, s, c, shift_to_sign(_mm512_and_si512(qp1, _mm512_set1_epi32(2))));
}

}  // namespace v16
#endif

// ---- expm1 / log1p ----

inline float vexpm1(float xf) {
  constexpr double kInvLn2 = 1.4426950408889634074;
  constexpr double kLn2Hi = 0.69314718055994528623;   // double(ln 2)
  constexpr double kLn2Lo = 2.3190468138462996154e-17;  // ln 2 - kLn2Hi
  constexpr double kRound = 6755399441055744.0;
  // Beyond [-104, 89] the float result is -1 or +inf either way.
  const double x = std::min(std::max(static_cast<double>(xf), -104.0), 89.0);
  const double shifted = x * kInvLn2 + kRound;
  const int64_t n = std::bit_cast<int64_t>(shifted) - std::bit_cast<int64_t>(kRound);
  const double nd = shifted - kRound;
  double r = std::fma(-nd, kLn2Hi, x);
  r = std::fma(-nd, kLn2Lo, r);  // |r| <= ln2 / 2
  // expm1(r): Taylor series to r^10 (truncation below 1e-12 relative).
  double p = 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = r + r * r * p;
  // expm1(x) = 2^n expm1(r) + (2^n - 1); 2^n is a normal double for n in [-151, 129].
  const double s = std::bit_cast<double>(static_cast<uint64_t>(n + 1023) << 52);
  const float res = static_cast<float>(s * p + (s - 1.0));
  // +/-0 keep their sign; NaN passes through.
  return (xf == 0.0f || xf != xf) ? xf : res;
}

inline float vlog1p(float xf) {
  constexpr double kLn2 = 0.69314718055994530942;
  constexpr uint64_t kSqrtHalf = 0x3fe6a09e667f3bcdull;  // bits of sqrt(1/2)
  // 1 + x is exact in double for 2^-26 <= |x| <= 2^29; beyond, the rounding is far below a
  // float ulp of the result. Below 2^-26 log1p(x) rounds to x itself.
  const double u = 1.0 + static_cast<double>(xf);
  const uint64_t bits = std::bit_cast<uint64_t>(u);
  // u = 2^k m with m in [sqrt(1/2), sqrt(2)).
  const int64_t k = static_cast<int64_t>(bits - kSqrtHalf) >> 52;
  const double m = std::bit_cast<double>(bits - (static_cast<uint64_t>(k) << 52));
  const double f = m - 1.0;
  // log(m) = 2 atanh(s), s = f / (2 + f), |s| <= 0.1716: odd series to s^11 (truncation below
  // 1e-10 relative).
  const double s = f / (2.0 + f);
  const double z = s * s;
  double p = 1.0 / 11.0;
  p = p * z + 1.0 / 9.0;
  p = p * z + 1.0 / 7.0;
  p = p * z + 1.0 / 5.0;
  p = p * z + 1.0 / 3.0;
  const double lm = 2.0 * s + 2.0 * s * z * p;
  float res = static_cast<float>(static_cast<double>(k) * kLn2 + lm);
  res = std::fabs(xf) < 1.4901161193847656e-8f ? xf : res;  // 2^-26 (keeps -0, subnormals)
  res = xf == std::numeric_limits<float>::infinity() ? xf : res;
  res = xf == -1.0f ? -std::numeric_limits<float>::infinity() : res;
  res = xf < -1.0f ? std::numeric_limits<float>::quiet_NaN() : res;
  return xf != xf ? xf : res;
}

// ---- MLX-identical float32 exp, erf and erfinv ----

// MLX's CPU exp: 2^(x log2 e) as 2^floor(y + 1/2) (the rounding done in double) times a
// degree-6 fma polynomial in the remainder; NaN kept, x > 88 -> inf, x < -88 -> 0.
inline float mlx_exp(float x0) {
  // fma with +0 rounds the product once and keeps g++ from contracting it into y - ip below
  // (MLX rounds the product, then subtracts).
  const float y = std::fma(x0, 1.442695f, 0.0f);
  float ip = static_cast<float>(std::floor(static_cast<double>(y) + 0.5));
  const float f = y - ip;
  float p = 1.535336188319500e-4f;
  p = std::fma(p, f, 1.339887440266574e-3f);
  p = std::fma(p, f, 9.618437357674640e-3f);
  p = std::fma(p, f, 5.550332471162809e-2f);
  p = std::fma(p, f, 2.402264791363012e-1f);
  p = std::fma(p, f, 6.931472028550421e-1f);
  p = std::fma(p, f, 1.000000000000000f);
  // Outside [-127, 127] the value is replaced below; clamping only keeps the int conversion
  // defined.
  ip = std::min(std::max(ip, -127.0f), 127.0f);
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(ip) + 127) << 23);
  float res = x0 != x0 ? x0 : scale * p;
  res = x0 > 88.0f ? std::numeric_limits<float>::infinity() : res;
  res = x0 < -88.0f ? 0.0f : res;
  return res;
}

// MLX's CPU erf (Abramowitz-Stegun 7.1.26 with its own exp; absolute error about 1e-7).
inline float mlx_erf(float v) {
  const float t = 1.0f / std::fma(0.3275911f, std::fabs(v), 1.0f);
  float r = std::fma(1.061405429f, t, -1.453152027f);
  r = std::fma(r, t, 1.421413741f);
  r = std::fma(r, t, -0.284496736f);
  r = std::fma(r, t, 0.254829592f);
  const float e = -mlx_exp(-v * v);
  const float res = std::fma(e * t, r, 1.0f);
  return v > 0.0f ? res : -res;
}

// MLX's CPU erfinv: w = log(1 - a^2) with libm's logf, then one of two fma polynomials in w
// (|w| > 6.125 or not), times a. Scalar because of the logf call.
inline float mlx_erfinv(float a) {
  const float w = std::log(std::fma(a, 0.0f - a, 1.0f));
  float p;
  if (std::fabs(w) > 6.125f) {
    p = 3.03697567e-10f;
    p = std::fma(p, w, 2.93243101e-8f);
    p = std::fma(p, w, 1.22150334e-6f);
    p = std::fma(p, w, 2.84108955e-5f);
    p = std::fma(p, w, 3.93552968e-4f);
    p = std::fma(p, w, 3.02698812e-3f);
    p = std::fma(p, w, 4.83185798e-3f);
    p = std::fma(p, w, -2.64646143e-1f);
    p = std::fma(p, w, 8.40016484e-1f);
  } else {
    p = 5.43877832e-9f;
    p = std::fma(p, w, 1.43285448e-7f);
    p = std::fma(p, w, 1.22774793e-6f);
    p = std::fma(p, w, 1.12963626e-7f);
    p = std::fma(p, w, -5.61530760e-5f);
    p = std::fma(p, w, -1.47697632e-4f);
    p = std::fma(p, w, 2.31468678e-3f);
    p = std::fma(p, w, 1.15392581e-2f);
    p = std::fma(p, w, -2.32015476e-1f);
    p = std::fma(p, w, 8.86226892e-1f);
  }
  return a * p;
}

}  // namespace tessera::cpu
