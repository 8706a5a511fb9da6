// Ops of the elementwise family (see tessera/ops.h): unary math, binary arithmetic and
// comparisons with NumPy broadcasting, where, and the C++ operators on arrays and scalars.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// ---- unary ----
array abs(const array& a, StreamOrDevice s = {});
array positive(const array& a, StreamOrDevice s = {});
array negative(const array& a, StreamOrDevice s = {});
array operator-(const array& a);
array sign(const array& a, StreamOrDevice s = {});
array reciprocal(const array& a, StreamOrDevice s = {});
array square(const array& a, StreamOrDevice s = {});
array sqrt(const array& a, StreamOrDevice s = {});
array rsqrt(const array& a, StreamOrDevice s = {});
array exp(const array& a, StreamOrDevice s = {});
array expm1(const array& a, StreamOrDevice s = {});
array log(const array& a, StreamOrDevice s = {});
array log2(const array& a, StreamOrDevice s = {});
array log10(const array& a, StreamOrDevice s = {});
array log1p(const array& a, StreamOrDevice s = {});
array sin(const array& a, StreamOrDevice s = {});
array cos(const array& a, StreamOrDevice s = {});
array tan(const array& a, StreamOrDevice s = {});
array arcsin(const array& a, StreamOrDevice s = {});
array arccos(const array& a, StreamOrDevice s = {});
array arctan(const array& a, StreamOrDevice s = {});
array sinh(const array& a, StreamOrDevice s = {});
array cosh(const array& a, StreamOrDevice s = {});
array tanh(const array& a, StreamOrDevice s = {});
array arcsinh(const array& a, StreamOrDevice s = {});
array arccosh(const array& a, StreamOrDevice s = {});
array arctanh(const array& a, StreamOrDevice s = {});
array sigmoid(const array& a, StreamOrDevice s = {});
array erf(const array& a, StreamOrDevice s = {});
array erfinv(const array& a, StreamOrDevice s = {});
array degrees(const array& a, StreamOrDevice s = {});
array radians(const array& a, StreamOrDevice s = {});
// floor/ceil/trunc/round keep integer dtypes unchanged; round rounds half to even.
array floor(const array& a, StreamOrDevice s = {});
array ceil(const array& a, StreamOrDevice s = {});
array trunc(const array& a, StreamOrDevice s = {});
array round(const array& a, int decimals, StreamOrDevice s = {});
inline array round(const array& a, StreamOrDevice s = {}) { return round(a, 0, s); }
array logical_not(const array& a, StreamOrDevice s = {});
array bitwise_invert(const array& a, StreamOrDevice s = {});
array operator~(const array& a);
array isnan(const array& a, StreamOrDevice s = {});
array isinf(const array& a, StreamOrDevice s = {});
array isfinite(const array& a, StreamOrDevice s = {});
array isposinf(const array& a, StreamOrDevice s = {});
array isneginf(const array& a, StreamOrDevice s = {});
// Replace NaN by `nan` and +/-inf by posinf/neginf (default: the dtype's largest finite value).
array nan_to_num(const array& a, float nan = 0.0f, const std::optional<float> posinf = std::nullopt,
                 const std::optional<float> neginf = std::nullopt, StreamOrDevice s = {});
// Limit values to [a_min, a_max]; at least one bound must be given.
array clip(const array& a, const std::optional<array>& a_min = std::nullopt,
           const std::optional<array>& a_max = std::nullopt, StreamOrDevice s = {});
array stop_gradient(const array& a, StreamOrDevice s = {});
array conjugate(const array& a, StreamOrDevice s = {});
array real(const array& a, StreamOrDevice s = {});
array imag(const array& a, StreamOrDevice s = {});

// ---- binary (NumPy broadcasting; the result dtype is promote_types of the inputs) ----
array add(const array& a, const array& b, StreamOrDevice s = {});
array subtract(const array& a, const array& b, StreamOrDevice s = {});
array multiply(const array& a, const array& b, StreamOrDevice s = {});
// True division: integer inputs give float32.
array divide(const array& a, const array& b, StreamOrDevice s = {});
// floor(a / b); integers divide with floor semantics (NumPy), x // 0 == 0.
array floor_divide(const array& a, const array& b, StreamOrDevice s = {});
// The remainder with the sign of the divisor (NumPy's mod), x % 0 == 0 for integers.
array remainder(const array& a, const array& b, StreamOrDevice s = {});
// {floor_divide(a, b), remainder(a, b)} computed in one pass.
std::vector<array> divmod(const array& a, const array& b, StreamOrDevice s = {});
array power(const array& a, const array& b, StreamOrDevice s = {});
// NaN in either input gives NaN.
array maximum(const array& a, const array& b, StreamOrDevice s = {});
array minimum(const array& a, const array& b, StreamOrDevice s = {});
array arctan2(const array& a, const array& b, StreamOrDevice s = {});
array logaddexp(const array& a, const array& b, StreamOrDevice s = {});
array equal(const array& a, const array& b, StreamOrDevice s = {});
array not_equal(const array& a, const array& b, StreamOrDevice s = {});
array less(const array& a, const array& b, StreamOrDevice s = {});
array less_equal(const array& a, const array& b, StreamOrDevice s = {});
array greater(const array& a, const array& b, StreamOrDevice s = {});
array greater_equal(const array& a, const array& b, StreamOrDevice s = {});
array logical_and(const array& a, const array& b, StreamOrDevice s = {});
array logical_or(const array& a, const array& b, StreamOrDevice s = {});
array logical_xor(const array& a, const array& b, StreamOrDevice s = {});
// Integer or bool inputs only.
array bitwise_and(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_or(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_xor(const array& a, const array& b, StreamOrDevice s = {});
// Bool shifts as uint8; a shift by >= the bit width (or < 0) gives 0 (or -1 for a negative
// value shifted right).
array left_shift(const array& a, const array& b, StreamOrDevice s = {});
array right_shift(const array& a, const array& b, StreamOrDevice s = {});
// |a - b| <= atol + rtol * |b|, with infinities equal when of the same sign.
array isclose(const array& a, const array& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false, StreamOrDevice s = {});
// all(isclose(a, b, ...)): a 0-d bool array.
array allclose(const array& a, const array& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false, StreamOrDevice s = {});
// True (0-d bool) when a and b have the same shape and equal elements (any dtypes).
array array_equal(const array& a, const array& b, bool equal_nan, StreamOrDevice s = {});
inline array array_equal(const array& a, const array& b, StreamOrDevice s = {}) {
  return array_equal(a, b, false, s);
}

// ---- ternary ----
// Elements of x where condition is true, else of y (all three broadcast together).
array where(const array& condition, const array& x, const array& y, StreamOrDevice s = {});

// ---- operators ----
// As MLX's C++ API: a C++ scalar becomes array(scalar) of its own type (double -> float32,
// int -> int32) and then promotes with the other side as two arrays do: float16 * 2.0 gives
// float32, int8 + 1 gives int32. Division takes a double scalar only, so x / 2 is float32 or
// wider. (Python scalars follow MLX's Python rules instead, in the bindings.)
namespace detail {
template <typename T>
inline constexpr bool is_scalar_v =
    std::is_arithmetic_v<T> || std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t> ||
    std::is_same_v<T, complex64_t>;
}  // namespace detail

#define TESSERA_ARRAY_BINARY_OPERATOR(OP, FN)                      \
  array operator OP(const array& a, const array& b);               \
  template <typename T>                                            \
    requires detail::is_scalar_v<T>                                \
  array operator OP(T a, const array& b) {                         \
    return FN(array(a), b);                                        \
  }                                                                \
  template <typename T>                                            \
    requires detail::is_scalar_v<T>                                \
  array operator OP(const array& a, T b) {                         \
    return FN(a, array(b));                                        \
  }

array operator/(const array& a, const array& b);
inline array operator/(double a, const array& b) { return divide(array(a), b); }
inline array operator/(const array& a, double b) { return divide(a, array(b)); }
TESSERA_ARRAY_BINARY_OPERATOR(+, add)
TESSERA_ARRAY_BINARY_OPERATOR(-, subtract)
TESSERA_ARRAY_BINARY_OPERATOR(*, multiply)
TESSERA_ARRAY_BINARY_OPERATOR(%, remainder)
TESSERA_ARRAY_BINARY_OPERATOR(==, equal)
TESSERA_ARRAY_BINARY_OPERATOR(!=, not_equal)
TESSERA_ARRAY_BINARY_OPERATOR(<, less)
TESSERA_ARRAY_BINARY_OPERATOR(<=, less_equal)
TESSERA_ARRAY_BINARY_OPERATOR(>, greater)
TESSERA_ARRAY_BINARY_OPERATOR(>=, greater_equal)
TESSERA_ARRAY_BINARY_OPERATOR(&&, logical_and)
TESSERA_ARRAY_BINARY_OPERATOR(||, logical_or)
TESSERA_ARRAY_BINARY_OPERATOR(&, bitwise_and)
TESSERA_ARRAY_BINARY_OPERATOR(|, bitwise_or)
TESSERA_ARRAY_BINARY_OPERATOR(^, bitwise_xor)
TESSERA_ARRAY_BINARY_OPERATOR(<<, left_shift)
TESSERA_ARRAY_BINARY_OPERATOR(>>, right_shift)

#undef TESSERA_ARRAY_BINARY_OPERATOR

}  // namespace tessera
