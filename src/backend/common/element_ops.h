// Element arithmetic every back end and the collectives share: the dtype traits of the element
// types, well-defined integer wrap-around, and the functors a reduction combines two values with
// (add, maximum, minimum). The CPU's eager kernels and the kernels compile generates call these
// functors (backend/cpu/binary_ops.h names them among its own), and the collectives reduce with
// them (distributed/reduce_kernels.h), so a sum over ranks rounds as the eager sum does.
// Header-only: generated kernels include it (installed under tessera/kernel/backend/common).
#pragma once

#include <cmath>
#include <type_traits>

#include "tessera/types.h"

namespace tessera::common {


template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;
template <typename T>
inline constexpr bool is_complex_v = std::is_same_v<T, complex64_t>;
template <typename T>
inline constexpr bool is_inexact_v =
    is_half_v<T> || std::is_floating_point_v<T> || is_complex_v<T>;
// The type a value of T is computed in (float for the 16-bit floats).
template <typename T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

// Orders complex numbers by real part, then imaginary part (as NumPy's maximum/sort do).
template <typename T>
inline bool less_than(const T& x, const T& y) {
  if constexpr (is_complex_v<T>) {
    return x.real() < y.real() || (x.real() == y.real() && x.imag() < y.imag());
  } else if constexpr (is_half_v<T>) {
    return static_cast<float>(x) < static_cast<float>(y);
  } else {
    return x < y;
  }
}

template <typename T>
inline bool is_nan(const T& x) {
  if constexpr (is_complex_v<T>) {
    return std::isnan(x.real()) || std::isnan(x.imag());
  } else if constexpr (is_half_v<T>) {
    return std::isnan(static_cast<float>(x));
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// Accumulation type of an output type: halves accumulate in float.
template <typename O>
using AccOf = std::conditional_t<is_half_v<O>, float, O>;

// Integer sums/products wrap around as in MLX/NumPy; computing in unsigned arithmetic (at least
// as wide as unsigned int, so no promotion to signed int) keeps that well defined.
template <typename A>
using WrapOf = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, std::make_unsigned_t<A>>;
template <typename A>
inline A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>) {
    return static_cast<A>(static_cast<WrapOf<A>>(a) + static_cast<WrapOf<A>>(b));
  } else {
    return a + b;
  }
}
template <typename A>
inline A wrap_mul(A a, A b) {
  if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>) {
    return static_cast<A>(static_cast<WrapOf<A>>(a) * static_cast<WrapOf<A>>(b));
  } else {
    return a * b;
  }
}


namespace ops {

struct AddOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x || y;
    } else if constexpr (std::is_integral_v<T>) {
      return wrap_add(x, y);  // wraps around as MLX's and NumPy's do
    } else {
      using C = compute_t<T>;
      return static_cast<T>(static_cast<C>(x) + static_cast<C>(y));
    }
  }
};

// NaN propagates (from either side); complex numbers compare by real part, then imaginary.
struct MaximumOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      return (x > y || x != x) ? x : y;
    } else {
      if (is_nan(x)) return x;
      return less_than(y, x) ? x : y;
    }
  }
};

struct MinimumOp {
  template <typename T>
  T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      return (x < y || x != x) ? x : y;
    } else {
      if (is_nan(x)) return x;
      return less_than(x, y) ? x : y;
    }
  }
};

}  // namespace ops

}  // namespace tessera::common
