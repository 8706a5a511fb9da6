// Branch-free float32 exp, log, tanh and sigmoid that g++ -O3 vectorises inside the flat kernel
// loops (libm's scalar calls do not vectorise). Cephes-style range reduction and minimax
// polynomials; relative error within a few ulp over the whole range, IEEE results for
// +/-inf, NaN, 0 and subnormals.
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

inline float vexp(float x) {
  constexpr float kHi = 88.72283935546875f;  // ln(FLT_MAX), rounded up
  constexpr float kLo = -103.972084045410f;  // below: the result rounds to 0
  const float xc = std::min(std::max(x, kLo), kHi);
  const float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  // r = x - n ln2, with ln2 split so n * hi is exact.
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
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

inline float vtanh(float x) {
  const float a = std::fabs(x);
  // Small |x|: odd polynomial (no cancellation); otherwise 1 - 2 / (exp(2|x|) + 1).
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float big = 1.0f - 2.0f / (vexp(2.0f * a) + 1.0f);
  const float signed_big = std::copysign(big, x);
  return a < 0.625f ? small : signed_big;
}

// exp(-|x|) never overflows, so tiny results for very negative x keep their precision.
inline float vsigmoid(float x) {
  const float e = vexp(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

}  // namespace tessera::cpu
