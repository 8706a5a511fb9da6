// Branch-free float32 exp, log, tanh, sigmoid, sin, cos, expm1 and log1p that g++ -O3 vectorises
// inside the flat kernel loops (libm's scalar calls do not vectorise). exp/log/tanh/sigmoid:
// Cephes-style range reduction and minimax polynomials in float, within a few ulp. sin, cos:
// reduction and Taylor series in float (within 2 ulp for |x| <= 2^14). expm1, log1p: reduction
// and Taylor series in double, rounded to float once (within 1 ulp).
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
#include <cstdint>
#include <limits>

namespace tessera::cpu {

// 2^n for integer n in [-252, 254] without overflow in the exponent field (two factors).
inline float exp2i_split(int32_t n, float y) {
  const int32_t n1 = n >> 1;
  const int32_t n2 = n - n1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  return y * s1 * s2;
}

// exp's core: x = n ln2 + r (ln2 split so that n * hi is exact), e^r by a minimax polynomial.
// Returns e^r and sets n; the callers scale by 2^n.
inline float exp_reduced(float x, float& n) {
  n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r2 + r + 1.0f;
}

inline float vexp(float x) {
  constexpr float kHi = 88.72283935546875f;  // ln(FLT_MAX), rounded up
  constexpr float kLo = -103.972084045410f;  // below: the result rounds to 0
  float n;
  const float p = exp_reduced(std::min(std::max(x, kLo), kHi), n);
  float res = exp2i_split(static_cast<int32_t>(n), p);
  res = x > kHi ? std::numeric_limits<float>::infinity() : res;
  res = x < kLo ? 0.0f : res;
  return x != x ? x : res;
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

// vexp for 0 <= x <= 18.05: 2^n stays normal, so it needs neither vexp's range checks nor its
// two-factor scaling, and gives vexp's bits (both scalings are exact).
inline float vexp_bounded(float x) {
  float n;
  const float p = exp_reduced(x, n);
  return p * std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
}

inline float vtanh(float x) {
  const float a = std::fabs(x);
  // Small |x|: odd polynomial (no cancellation); otherwise 1 - 2 / (exp(2|x|) + 1), with 2|x|
  // capped at 18.05, past which the result rounds to 1 either way. Bit for bit the earlier
  // form on every float (checked exhaustively), ~20% faster: the exp needs no range handling.
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float big = 1.0f - 2.0f / (vexp_bounded(std::min(2.0f * a, 18.05f)) + 1.0f);
  const float signed_big = std::copysign(big, x);
  const float res = a < 0.625f ? small : signed_big;
  return x != x ? x : res;
}

// exp(-|x|) never overflows, so tiny results for very negative x keep their precision.
inline float vsigmoid(float x) {
  const float e = vexp(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

// ---- sin / cos ----

// Largest |x| the float reduction below keeps within 2 ulp (j * pi/2 with j < 2^14 against a
// three-part pi/2); NaN and +/-inf fail the test too. Beyond it callers take libm's.
inline constexpr float kTrigFastMax = 16384.0f;  // 2^14
inline bool trig_fast_ok(float x) { return std::fabs(x) <= kTrigFastMax; }

// |x| = j pi/2 + r with |r| <= pi/4 (Cody-Waite with fused multiply-adds, in float so that a
// vector holds 16 lanes, not 8); the quadrant j mod 4 goes to q.
inline float trig_reduce(float x, uint32_t& q) {
  constexpr float kTwoOverPi = 0.636619772f;
  constexpr float kPio2A = 1.57079637f;       // float(pi/2)
  constexpr float kPio2B = -4.37113883e-08f;  // float(pi/2 - kPio2A)
  constexpr float kPio2C = -1.71512451e-15f;  // float(pi/2 - kPio2A - kPio2B)
  constexpr float kRound = 12582912.0f;       // 1.5 * 2^23: adding it rounds to an integer
  const float ax = std::fabs(x);
  const float shifted = ax * kTwoOverPi + kRound;
  q = std::bit_cast<uint32_t>(shifted);  // low bits hold j
  const float j = shifted - kRound;
  float r = std::fma(-j, kPio2A, ax);
  r = std::fma(-j, kPio2B, r);
  return std::fma(-j, kPio2C, r);
}

// Taylor series of sin(r) and cos(r) for |r| <= pi/4, in float (truncation below 2e-9).
inline float sin_poly(float r) {
  const float z = r * r;
  float p = 1.0f / 362880.0f;
  p = p * z - 1.0f / 5040.0f;
  p = p * z + 1.0f / 120.0f;
  p = p * z - 1.0f / 6.0f;
  return r + r * z * p;
}
inline float cos_poly(float r) {
  const float z = r * r;
  float p = -1.0f / 3628800.0f;
  p = p * z + 1.0f / 40320.0f;
  p = p * z - 1.0f / 720.0f;
  p = p * z + 1.0f / 24.0f;
  return 1.0f - 0.5f * z + z * z * p;
}

// sin(x) for trig_fast_ok(x).
inline float vsin_fast(float x) {
  uint32_t q;
  const float r = trig_reduce(x, q);
  const float s = sin_poly(r), c = cos_poly(r);
  float v = (q & 1) ? c : s;
  // sin(|x|) is negative in quadrants 2, 3; sin(x) = sign(x) sin(|x|).
  const bool neg = ((q & 2) != 0) != std::signbit(x);
  return neg ? -v : v;
}

// cos(x) for trig_fast_ok(x).
inline float vcos_fast(float x) {
  uint32_t q;
  const float r = trig_reduce(x, q);
  const float s = sin_poly(r), c = cos_poly(r);
  float v = (q & 1) ? s : c;
  return ((q + 1) & 2) ? -v : v;
}

inline float vsin(float x) { return trig_fast_ok(x) ? vsin_fast(x) : std::sin(x); }
inline float vcos(float x) { return trig_fast_ok(x) ? vcos_fast(x) : std::cos(x); }

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
