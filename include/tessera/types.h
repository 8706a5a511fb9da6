// Scalar types without a native C++ spelling: IEEE half (float16_t), brain float
// (bfloat16_t) and complex64_t. Storage is exact; arithmetic goes through float.
#pragma once

#include <bit>
#include <complex>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <type_traits>

namespace tessera {

namespace detail {

// Round-to-nearest-even float -> IEEE binary16 bits; handles subnormals, inf, nan.
constexpr uint16_t float_to_half_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xffu) {  // inf or nan (keep nan quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  }
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (e <= 0) {                                                // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: ok
  return static_cast<uint16_t>(half);
}

constexpr float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int32_t e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

constexpr uint16_t float_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

constexpr float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace detail

// IEEE 754 binary16. Converts implicitly to float, so `a + b` computes in float.
struct float16_t {
  uint16_t bits = 0;
  constexpr float16_t() = default;
  constexpr float16_t(float f) : bits(detail::float_to_half_bits(f)) {}  // NOLINT
  constexpr float16_t(double d) : float16_t(static_cast<float>(d)) {}     // NOLINT
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
  constexpr float16_t(I i) : float16_t(static_cast<float>(i)) {}  // NOLINT
  constexpr operator float() const { return detail::half_bits_to_float(bits); }
  static constexpr float16_t from_bits(uint16_t b) {
    float16_t h;
    h.bits = b;
    return h;
  }
};

// bfloat16: the top half of a float32, rounded to nearest even.
struct bfloat16_t {
  uint16_t bits = 0;
  constexpr bfloat16_t() = default;
  constexpr bfloat16_t(float f) : bits(detail::float_to_bf16_bits(f)) {}  // NOLINT
  constexpr bfloat16_t(double d) : bfloat16_t(static_cast<float>(d)) {}    // NOLINT
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
  constexpr bfloat16_t(I i) : bfloat16_t(static_cast<float>(i)) {}  // NOLINT
  constexpr operator float() const { return detail::bf16_bits_to_float(bits); }
  static constexpr bfloat16_t from_bits(uint16_t b) {
    bfloat16_t h;
    h.bits = b;
    return h;
  }
};

using complex64_t = std::complex<float>;

inline std::ostream& operator<<(std::ostream& os, float16_t v) { return os << static_cast<float>(v); }
inline std::ostream& operator<<(std::ostream& os, bfloat16_t v) { return os << static_cast<float>(v); }

namespace detail {
// One value converted to another element type, as astype converts (complex to real keeps the
// real part; anything to bool is "not zero").
template <typename To, typename From>
To cast_scalar(const From& v) {
  if constexpr (std::is_same_v<To, complex64_t>) {
    if constexpr (std::is_same_v<From, complex64_t>) {
      return v;
    } else {
      return complex64_t(static_cast<float>(v), 0.0f);
    }
  } else if constexpr (std::is_same_v<From, complex64_t>) {
    return cast_scalar<To>(v.real());
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f || static_cast<double>(v) != 0.0;
  } else if constexpr (std::is_same_v<From, bool>) {
    return v ? static_cast<To>(1.0f) : static_cast<To>(0.0f);  // (a select vectorises)
  } else if constexpr (std::is_same_v<From, float16_t> || std::is_same_v<From, bfloat16_t>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}
}  // namespace detail

}  // namespace tessera
