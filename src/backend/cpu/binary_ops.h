// One functor per binary (and ternary) elementwise op, on two values of the inputs' common
// dtype. Header-only so that the eager kernels (binary.cpp, ternary.cpp) and the kernels compile
// generates (compile/codegen.cpp) run the same code; the fusion table in
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

// Shared with the collectives (backend/common/element_ops.h).
using common::ops::AddOp;
using common::ops::MaximumOp;
using common::ops::MinimumOp;

struct SubtractOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x != y;
    } else {
      using C = compute_t<T>;
      return static_cast<T>(static_cast<C>(x) - static_cast<C>(y));
    }
  }
};

struct MultiplyOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x && y;
    } else if constexpr (is_complex_v<T>) {
      // The textbook product (NumPy's) with the products in double: exact there, so whether the
      // compiler fuses a multiply and an add (it does in the FMA copies of a loop, not in the
      // strided one) cannot change the result, and x * y is the same array whatever the layout.
      const double a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
      return T(static_cast<float>(a * c - b * d), static_cast<float>(a * d + b * c));
    } else {
      using C = compute_t<T>;
      return static_cast<T>(static_cast<C>(x) * static_cast<C>(y));
    }
  }
};

// True division for inexact types; floor division (NumPy) for integers, with x // 0 == 0.
struct DivideOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x && y;
    } else if constexpr (std::is_integral_v<T>) {
      if (y == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        // x / -1 negates; in unsigned arithmetic so that MIN wraps to MIN instead of trapping.
        if (y == T(-1)) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(x));
        T q = static_cast<T>(x / y);
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return q;
      } else {
        return static_cast<T>(x / y);
      }
    } else {
      using C = compute_t<T>;
      return static_cast<T>(static_cast<C>(x) / static_cast<C>(y));
    }
  }
};

// The remainder with the divisor's sign (NumPy's mod); x % 0 == 0 for integers.
struct RemainderOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) {
      return false;
    } else if constexpr (std::is_integral_v<T>) {
      if (y == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (y == T(-1)) return T(0);
        T r = static_cast<T>(x % y);
        if (r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
        return r;
      } else {
        return static_cast<T>(x % y);
      }
    } else {
      using C = compute_t<T>;
      const C a = static_cast<C>(x), b = static_cast<C>(y);
      C r = std::fmod(a, b);
      if (r != C(0) && ((r < C(0)) != (b < C(0)))) r += b;
      return static_cast<T>(r);
    }
  }
};

// floor(x / y) for floats, consistent with RemainderOp: (x - r) / y.
struct FloorQuotientOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      return DivideOp{}(x, y);
    } else {
      using C = compute_t<T>;
      return static_cast<T>(std::floor(static_cast<C>(x) / static_cast<C>(y)));
    }
  }
};

struct PowerOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x || !y;
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>) {
        if (y < 0) {  // only +/-1 have an integer reciprocal
          if (x == 1) return T(1);
          if (x == -1) return (y % 2 == 0) ? T(1) : T(-1);
          return T(0);
        }
      }
      using U = std::make_unsigned_t<T>;
      U base = static_cast<U>(x), res = 1;
      auto e = static_cast<U>(y);
      while (e) {
        if (e & 1u) res = static_cast<U>(res * base);
        base = static_cast<U>(base * base);
        e = static_cast<U>(e >> 1);
      }
      return static_cast<T>(res);
    } else {
      using C = compute_t<T>;
      return static_cast<T>(std::pow(static_cast<C>(x), static_cast<C>(y)));
    }
  }
};

struct ArcTan2Op {
  template <typename T>
  T operator()(T x, T y) const {
    using C = compute_t<T>;
    return static_cast<T>(std::atan2(static_cast<C>(x), static_cast<C>(y)));
  }
};

// log(e^x + e^y) = hi + log1p(e^(lo - hi)); an infinite hi (or lo = -inf) is the answer itself
// (inf - inf would make it nan). Complex numbers are ordered by real part, then imaginary.
struct LogAddExpOp {
  template <typename T>
  T operator()(T x, T y) const {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    if constexpr (std::is_same_v<T, complex64_t>) {
      const bool x_hi = x.real() > y.real() || (x.real() == y.real() && x.imag() > y.imag());
      const T hi = x_hi ? x : y, lo = x_hi ? y : x;
      if (lo.real() == -kInf || hi.real() == kInf) return hi;
      return hi + std::log(T(1) + std::exp(lo - hi));
    } else {
      using C = compute_t<T>;
      const C a = static_cast<C>(x), b = static_cast<C>(y);
      if (std::isnan(a) || std::isnan(b)) return static_cast<T>(a + b);
      const C hi = a > b ? a : b, lo = a > b ? b : a;
      if (lo == -kInf || hi == kInf) return static_cast<T>(hi);
      return static_cast<T>(hi + std::log1p(std::exp(lo - hi)));
    }
  }
};

template <typename T>
bool eq(T x, T y) {
  if constexpr (is_half_v<T>) {
    return static_cast<float>(x) == static_cast<float>(y);
  } else {
    return x == y;
  }
}

struct EqualOp {
  template <typename T>
  bool operator()(T x, T y) const { return eq(x, y); }
};
struct NaNEqualOp {
  template <typename T>
  bool operator()(T x, T y) const { return eq(x, y) || (is_nan(x) && is_nan(y)); }
};
struct NotEqualOp {
  template <typename T>
  bool operator()(T x, T y) const { return !eq(x, y); }
};
struct LessOp {
  template <typename T>
  bool operator()(T x, T y) const { return less_than(x, y); }
};
struct LessEqualOp {
  template <typename T>
  bool operator()(T x, T y) const { return less_than(x, y) || eq(x, y); }
};
struct GreaterOp {
  template <typename T>
  bool operator()(T x, T y) const { return less_than(y, x); }
};
struct GreaterEqualOp {
  template <typename T>
  bool operator()(T x, T y) const { return less_than(y, x) || eq(x, y); }
};

// Shifts by >= the bit width (or by a negative amount) give 0, or -1 for a negative value
// shifted right, as a sequence of single-bit shifts would.
template <typename T>
T shift_left(T x, T y) {
  constexpr int bits = static_cast<int>(sizeof(T) * 8);
  if constexpr (std::is_signed_v<T>) {
    if (y < 0) return T(0);
  }
  if (y >= static_cast<T>(bits)) return T(0);
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(x) << static_cast<int>(y)));
}
template <typename T>
T shift_right(T x, T y) {
  constexpr int bits = static_cast<int>(sizeof(T) * 8);
  if constexpr (std::is_signed_v<T>) {
    if (y < 0 || y >= static_cast<T>(bits)) return (x < 0) ? static_cast<T>(-1) : T(0);
  } else {
    if (y >= static_cast<T>(bits)) return T(0);
  }
  return static_cast<T>(x >> static_cast<int>(y));
}

struct LogicalAndOp {
  bool operator()(bool x, bool y) const { return x && y; }
};
struct LogicalOrOp {
  bool operator()(bool x, bool y) const { return x || y; }
};

struct BitwiseAndOp {
  template <typename T>
  T operator()(T x, T y) const { return static_cast<T>(x & y); }
};
struct BitwiseOrOp {
  template <typename T>
  T operator()(T x, T y) const { return static_cast<T>(x | y); }
};
struct BitwiseXorOp {
  template <typename T>
  T operator()(T x, T y) const { return static_cast<T>(x ^ y); }
};
struct LeftShiftOp {
  template <typename T>
  T operator()(T x, T y) const { return shift_left(x, y); }
};
struct RightShiftOp {
  template <typename T>
  T operator()(T x, T y) const { return shift_right(x, y); }
};

// where(c, x, y).
struct SelectOp {
  template <typename T>
  T operator()(bool c, T x, T y) const { return c ? x : y; }
};

}  // namespace ops
}  // namespace tessera::cpu
