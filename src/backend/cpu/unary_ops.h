// One functor per unary elementwise op: called per element with the C++ type of the dtype
// (float16/bfloat16 compute in float). Header-only so that the eager kernels (unary.cpp) and the
// kernels compile generates (compile/codegen.cpp) run the same code; the fusion table in
// tessera/primitives/elementwise.h names a functor for each primitive.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cpu/numeric.h"
#include "backend/cpu/vector_math.h"

namespace tessera::cpu {

namespace ops {

// An op on floating values, computed in compute_t<T> (float for float16/bfloat16).
#define TESSERA_FLOAT_OP(NAME, EXPR)                  \
  struct NAME {                                       \
    template <typename T>                             \
    T operator()(T v) const {                         \
      using C = compute_t<T>;                         \
      const C x = static_cast<C>(v);                  \
      return static_cast<T>(EXPR);                    \
    }                                                 \
  };

TESSERA_FLOAT_OP(TanOp, std::tan(x))
TESSERA_FLOAT_OP(ArcSinOp, std::asin(x))
TESSERA_FLOAT_OP(ArcCosOp, std::acos(x))
TESSERA_FLOAT_OP(ArcTanOp, std::atan(x))
TESSERA_FLOAT_OP(SinhOp, std::sinh(x))
TESSERA_FLOAT_OP(CoshOp, std::cosh(x))
TESSERA_FLOAT_OP(ArcSinhOp, std::asinh(x))
TESSERA_FLOAT_OP(ArcCoshOp, std::acosh(x))
TESSERA_FLOAT_OP(ArcTanhOp, std::atanh(x))
TESSERA_FLOAT_OP(SqrtOp, std::sqrt(x))
TESSERA_FLOAT_OP(RsqrtOp, C(1) / std::sqrt(x))

#undef TESSERA_FLOAT_OP

// Rounding leaves integers as they are.
#define TESSERA_ROUNDING_OP(NAME, EXPR)                \
  struct NAME {                                        \
    template <typename T>                              \
    T operator()(T v) const {                          \
      if constexpr (std::is_integral_v<T>) {           \
        return v;                                      \
      } else {                                         \
        using C = compute_t<T>;                        \
        const C x = static_cast<C>(v);                 \
        return static_cast<T>(EXPR);                   \
      }                                                \
    }                                                  \
  };

TESSERA_ROUNDING_OP(FloorOp, std::floor(x))
TESSERA_ROUNDING_OP(CeilOp, std::ceil(x))
TESSERA_ROUNDING_OP(RoundOp, std::rint(x))

#undef TESSERA_ROUNDING_OP

// Like TESSERA_FLOAT_OP, with a vectorisable float32 version (vector_math.h).
#define TESSERA_FAST_FLOAT_OP(NAME, FAST, EXPR)              \
  struct NAME {                                              \
    template <typename T>                                    \
    T operator()(T v) const {                                \
      using C = compute_t<T>;                                \
      const C x = static_cast<C>(v);                         \
      if constexpr (std::is_same_v<C, float>) {              \
        return static_cast<T>(FAST(x));                      \
      } else {                                               \
        return static_cast<T>(EXPR);                         \
      }                                                      \
    }                                                        \
  };

TESSERA_FAST_FLOAT_OP(ExpOp, cpu::vexp, std::exp(x))
TESSERA_FAST_FLOAT_OP(Expm1Op, cpu::vexpm1, std::expm1(x))
TESSERA_FAST_FLOAT_OP(TanhOp, cpu::vtanh, std::tanh(x))
TESSERA_FAST_FLOAT_OP(SigmoidOp, cpu::vsigmoid, C(1) / (C(1) + std::exp(-x)))
// Float32 log is libm's logf, as MLX's CPU backend on Linux: random::gumbel (and anything else
// compared bit for bit with MLX) depends on it; cpu::vlog is not bit-identical to logf.
TESSERA_FAST_FLOAT_OP(LogOp, std::log, std::log(x))
// MLX's erf formula for float32 (and the 16-bit floats, computed in float), bit-identical to
// MLX's CPU results; libm's erf for float64.
TESSERA_FAST_FLOAT_OP(ErfOp, cpu::mlx_erf, std::erf(x))

#undef TESSERA_FAST_FLOAT_OP

// sin / cos: the vectorisable float32 kernel covers |x| <= 2^14; unary_kernel runs fast() on
// blocks where fast_ok() holds for every element, and operator() (libm beyond 2^14) elsewhere.
#define TESSERA_TRIG_OP(NAME, FAST, SAFE, EXPR)                                   \
  struct NAME {                                                                   \
    template <typename T>                                                         \
    T operator()(T v) const {                                                     \
      using C = compute_t<T>;                                                     \
      const C x = static_cast<C>(v);                                              \
      if constexpr (std::is_same_v<C, float>) {                                   \
        return static_cast<T>(SAFE(x));                                           \
      } else {                                                                    \
        return static_cast<T>(EXPR);                                              \
      }                                                                           \
    }                                                                             \
    template <typename T>                                                         \
      requires std::is_same_v<compute_t<T>, float>                                \
    bool fast_ok(T v) const {                                                     \
      return cpu::trig_fast_ok(static_cast<float>(v));                            \
    }                                                                             \
    template <typename T>                                                         \
      requires std::is_same_v<compute_t<T>, float>                                \
    T fast(T v) const {                                                           \
      return static_cast<T>(FAST(static_cast<float>(v)));                         \
    }                                                                             \
  };

TESSERA_TRIG_OP(SinOp, cpu::vsin_fast, cpu::vsin, std::sin(x))
TESSERA_TRIG_OP(CosOp, cpu::vcos_fast, cpu::vcos, std::cos(x))

#undef TESSERA_TRIG_OP

struct Log2Op {
  template <typename T>
  T operator()(T v) const {
    using C = compute_t<T>;
    if constexpr (is_complex_v<T>) {
      return std::log(v) / static_cast<float>(M_LN2);
    } else {
      return static_cast<T>(std::log2(static_cast<C>(v)));
    }
  }
};

struct Log1pOp {
  template <typename T>
  T operator()(T v) const {
    if constexpr (is_complex_v<T>) {
      return std::log(T(1.0f) + v);
    } else if constexpr (std::is_same_v<compute_t<T>, float>) {
      return static_cast<T>(cpu::vlog1p(static_cast<float>(v)));
    } else {
      return static_cast<T>(std::log1p(v));
    }
  }
};

struct Log10Op {
  template <typename T>
  T operator()(T v) const {
    using C = compute_t<T>;
    return static_cast<T>(std::log10(static_cast<C>(v)));
  }
};

// Inverse error function in double: Giles' single-precision approximation ("Approximating the
// erfinv function", 2010) as the start, refined by Newton steps on erf.
inline double erfinv_double(double y) {
  using C = double;
  if (std::isnan(y) || y < C(-1) || y > C(1)) return std::numeric_limits<C>::quiet_NaN();
  if (y == C(1)) return std::numeric_limits<C>::infinity();
  if (y == C(-1)) return -std::numeric_limits<C>::infinity();
  const float x = static_cast<float>(y);
  float w = -std::log((1.0f - x) * (1.0f + x));
  float p;
  if (w < 5.0f) {
    w -= 2.5f;
    p = 2.81022636e-08f;
    p = 3.43273939e-07f + p * w;
    p = -3.5233877e-06f + p * w;
    p = -4.39150654e-06f + p * w;
    p = 0.00021858087f + p * w;
    p = -0.00125372503f + p * w;
    p = -0.00417768164f + p * w;
    p = 0.246640727f + p * w;
    p = 1.50140941f + p * w;
  } else {
    w = std::sqrt(w) - 3.0f;
    p = -0.000200214257f;
    p = 0.000100950558f + p * w;
    p = 0.00134934322f + p * w;
    p = -0.00367342844f + p * w;
    p = 0.00573950773f + p * w;
    p = -0.0076224613f + p * w;
    p = 0.00943887047f + p * w;
    p = 1.00167406f + p * w;
    p = 2.83297682f + p * w;
  }
  double r = static_cast<double>(p * x);
  const double k = 2.0 / std::sqrt(M_PI);
  for (int i = 0; i < 3; ++i) {
    const double d = k * std::exp(-r * r);
    if (d == 0.0) break;
    r -= (std::erf(r) - y) / d;
  }
  return r;
}

// float32 (and the 16-bit floats, in float): MLX's CPU erfinv, bit for bit (random::normal and
// truncated_normal reproduce MLX's samples through it).
struct ErfInvOp {
  template <typename T>
  T operator()(T v) const {
    if constexpr (std::is_same_v<T, double>) {
      return erfinv_double(v);
    } else {
      return static_cast<T>(cpu::mlx_erfinv(static_cast<float>(v)));
    }
  }
};

struct AbsOp {
  template <typename T>
  auto operator()(T x) const {
    if constexpr (is_complex_v<T>) {
      return std::abs(x);
    } else if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
      return x;
    } else if constexpr (is_half_v<T>) {
      return static_cast<T>(std::fabs(static_cast<float>(x)));
    } else if constexpr (std::is_floating_point_v<T>) {
      return std::fabs(x);
    } else {  // signed: negate in unsigned arithmetic so MIN stays MIN (NumPy) without UB
      using U = std::make_unsigned_t<T>;
      return x < 0 ? static_cast<T>(U(0) - static_cast<U>(x)) : x;
    }
  }
};

struct NegativeOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else if constexpr (is_half_v<T>) {
      return static_cast<T>(-static_cast<float>(x));
    } else if constexpr (std::is_integral_v<T>) {  // wraps (MIN stays MIN) without UB
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(U(0) - static_cast<U>(x));
    } else {
      return static_cast<T>(-x);
    }
  }
};

struct SignOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else if constexpr (is_complex_v<T>) {
      const float m = std::abs(x);
      return m == 0.0f ? T(0.0f) : x / m;
    } else if constexpr (std::is_unsigned_v<T>) {
      return static_cast<T>(x != 0);
    } else {
      using C = compute_t<T>;
      const C v = static_cast<C>(x);
      if constexpr (std::is_floating_point_v<C>) {
        if (std::isnan(v)) return x;
      }
      return static_cast<T>(static_cast<C>((v > C(0)) - (v < C(0))));
    }
  }
};

struct SquareOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else {
      using C = compute_t<T>;
      const C v = static_cast<C>(x);
      return static_cast<T>(v * v);
    }
  }
};

struct LogicalNotOp {
  bool operator()(bool x) const { return !x; }
};

struct BitwiseInvertOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return !x;
    } else {
      return static_cast<T>(~x);
    }
  }
};

// StopGradient's value: the input, unchanged.
struct StopGradientOp {
  template <typename T>
  T operator()(T x) const { return x; }
};

// astype: the conversion copy.cpp makes.
template <typename To>
struct CastOp {
  template <typename From>
  To operator()(From v) const { return detail::cast_scalar<To, From>(v); }
};

struct ConjugateOp {
  complex64_t operator()(complex64_t x) const { return std::conj(x); }
};
struct RealOp {
  float operator()(complex64_t x) const { return x.real(); }
};
struct ImagOp {
  float operator()(complex64_t x) const { return x.imag(); }
};

// For fused kernels (backend/cpu/compiled/codegen.cpp): whether an op has a vectorisable form
// valid on part of its domain (sin, cos), and a call of that form that records in `slow` when an
// argument was outside it. The kernel reruns a block exactly when any was.
template <typename Op, typename... T>
inline constexpr bool has_fast_path = requires(const Op& op, T... x) {
  op.fast_ok(x...);
  op.fast(x...);
};

template <typename Op, typename... T>
inline auto fast_or_exact(const Op& op, unsigned& slow, T... x) {
  if constexpr (has_fast_path<Op, T...>) {
    slow |= !op.fast_ok(x...);
    return op.fast(x...);
  } else {
    return op(x...);
  }
}

}  // namespace ops
}  // namespace tessera::cpu
