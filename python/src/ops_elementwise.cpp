// Elementwise ops of tessera.core (one and two inputs) with MLX's signatures.
#include "ops_common.h"

namespace tessera::python {

using namespace ops_detail;

void init_ops_elementwise(nb::module_& m) {
  // ---------------------------------------------------------------- elementwise, unary
  def_unary(m, "abs", &tessera::abs, UNARY_DOC("Element-wise absolute value."));
  def_unary(m, "sign", &tessera::sign, UNARY_DOC("Element-wise sign (-1, 0 or 1)."));
  m.def(
      "positive", [](const array& a, StreamOrDevice s) { return positive(a, s); }, nb::arg(),
      nb::kw_only(), "stream"_a = nb::none(), UNARY_DOC("Element-wise unary plus (a copy)."));
  def_unary(m, "negative", &tessera::negative, UNARY_DOC("Element-wise negation."));
  m.def(
      "trunc", [](const array& a, StreamOrDevice s) { return trunc(a, s); }, nb::arg(),
      nb::kw_only(), "stream"_a = nb::none(),
      UNARY_DOC("Element-wise rounding toward zero (integer dtypes are unchanged)."));
  def_unary(m, "square", &tessera::square, UNARY_DOC("Element-wise square."));
  def_unary(m, "sqrt", &tessera::sqrt, UNARY_DOC("Element-wise square root."));
  def_unary(m, "rsqrt", &tessera::rsqrt, UNARY_DOC("Element-wise reciprocal square root."));
  def_unary(m, "reciprocal", &tessera::reciprocal, UNARY_DOC("Element-wise reciprocal, 1 / a."));
  def_unary(m, "logical_not", &tessera::logical_not, UNARY_DOC("Element-wise logical not."));
  def_unary(m, "exp", &tessera::exp, UNARY_DOC("Element-wise exponential."));
  def_unary(m, "expm1", &tessera::expm1,
            UNARY_DOC("Element-wise exp(a) - 1, accurate for small a."));
  def_unary(m, "erf", &tessera::erf, UNARY_DOC("Element-wise Gauss error function."));
  def_unary(m, "erfinv", &tessera::erfinv, UNARY_DOC("Element-wise inverse of erf."));
  def_unary(m, "sin", &tessera::sin, UNARY_DOC("Element-wise sine."));
  def_unary(m, "cos", &tessera::cos, UNARY_DOC("Element-wise cosine."));
  def_unary(m, "tan", &tessera::tan, UNARY_DOC("Element-wise tangent."));
  def_unary(m, "arcsin", &tessera::arcsin, UNARY_DOC("Element-wise inverse sine."));
  def_unary(m, "arccos", &tessera::arccos, UNARY_DOC("Element-wise inverse cosine."));
  def_unary(m, "arctan", &tessera::arctan, UNARY_DOC("Element-wise inverse tangent."));
  def_unary(m, "sinh", &tessera::sinh, UNARY_DOC("Element-wise hyperbolic sine."));
  def_unary(m, "cosh", &tessera::cosh, UNARY_DOC("Element-wise hyperbolic cosine."));
  def_unary(m, "tanh", &tessera::tanh, UNARY_DOC("Element-wise hyperbolic tangent."));
  def_unary(m, "arcsinh", &tessera::arcsinh, UNARY_DOC("Element-wise inverse hyperbolic sine."));
  def_unary(m, "arccosh", &tessera::arccosh, UNARY_DOC("Element-wise inverse hyperbolic cosine."));
  def_unary(m, "arctanh", &tessera::arctanh, UNARY_DOC("Element-wise inverse hyperbolic tangent."));
  def_unary(m, "degrees", &tessera::degrees, UNARY_DOC("Convert radians to degrees."));
  def_unary(m, "radians", &tessera::radians, UNARY_DOC("Convert degrees to radians."));
  def_unary(m, "log", &tessera::log, UNARY_DOC("Element-wise natural logarithm."));
  def_unary(m, "log2", &tessera::log2, UNARY_DOC("Element-wise base-2 logarithm."));
  def_unary(m, "log10", &tessera::log10, UNARY_DOC("Element-wise base-10 logarithm."));
  def_unary(m, "log1p", &tessera::log1p,
            UNARY_DOC("Element-wise log(1 + a), accurate for small a."));
  m.def(
      "stop_gradient", [](const array& a, StreamOrDevice s) { return stop_gradient(a, s); },
      nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "The input unchanged, with no gradient flowing through it.\n\n"
      "Args:\n"
      "    a (array): Input array.\n\n"
      "Returns:\n"
      "    array: The same values, treated as a constant by transforms.\n");
  def_unary(m, "sigmoid", &tessera::sigmoid, UNARY_DOC("Element-wise logistic sigmoid."));
  def_unary(m, "floor", &tessera::floor, UNARY_DOC("Element-wise floor."));
  def_unary(m, "ceil", &tessera::ceil, UNARY_DOC("Element-wise ceiling."));
  def_unary(m, "isnan", &tessera::isnan, UNARY_DOC("Element-wise test for NaN."));
  def_unary(m, "isinf", &tessera::isinf, UNARY_DOC("Element-wise test for +/-infinity."));
  def_unary(m, "isfinite", &tessera::isfinite,
            UNARY_DOC("Element-wise test for finite values (not NaN or infinite)."));
  def_unary(m, "isposinf", &tessera::isposinf, UNARY_DOC("Element-wise test for +infinity."));
  def_unary(m, "isneginf", &tessera::isneginf, UNARY_DOC("Element-wise test for -infinity."));
  def_unary(m, "conj", &tessera::conjugate, UNARY_DOC("Element-wise complex conjugate."));
  def_unary(m, "conjugate", &tessera::conjugate, UNARY_DOC("Element-wise complex conjugate."));
  def_unary(m, "real", &tessera::real, UNARY_DOC("The real part of each element."));
  def_unary(m, "imag", &tessera::imag, UNARY_DOC("The imaginary part of each element."));
  def_unary(m, "bitwise_invert", &tessera::bitwise_invert,
            UNARY_DOC("Element-wise bitwise not (integer or bool input)."));
  m.def(
      "round",
      [](const ArrayLike& a, int decimals, StreamOrDevice s) {
        return round(to_array(a), decimals, s);
      },
      nb::arg(), "decimals"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Round to a number of decimals, halves to even.\n\n"
      "Args:\n"
      "    a (array): Input array or scalar.\n"
      "    decimals (int): Decimal places to keep. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The rounded array.\n");
  m.def(
      "nan_to_num",
      [](const ArrayLike& a, float nan, std::optional<float> posinf, std::optional<float> neginf,
         StreamOrDevice s) { return nan_to_num(to_array(a), nan, posinf, neginf, s); },
      nb::arg(), "nan"_a = 0.0f, "posinf"_a = nb::none(), "neginf"_a = nb::none(), nb::kw_only(),
      "stream"_a = nb::none(),
      "Replace NaN and infinities by finite numbers.\n\n"
      "Args:\n"
      "    a (array): Input array or scalar.\n"
      "    nan (float): Replacement for NaN. Default: ``0``.\n"
      "    posinf (float, optional): Replacement for +inf; ``None`` uses the\n"
      "      dtype's largest finite value.\n"
      "    neginf (float, optional): Replacement for -inf; ``None`` uses the\n"
      "      dtype's lowest finite value.\n\n"
      "Returns:\n"
      "    array: The array with those values replaced.\n");
  m.def(
      "clip",
      [](const array& a, const std::optional<ArrayLike>& a_min,
         const std::optional<ArrayLike>& a_max, StreamOrDevice s) {
        std::optional<array> lo, hi;
        if (a_min) lo = to_array_like(a_min->obj, a);
        if (a_max) hi = to_array_like(a_max->obj, a);
        return clip(a, lo, hi, s);
      },
      nb::arg(), "a_min"_a.none(), "a_max"_a.none(), nb::kw_only(), "stream"_a = nb::none(),
      "Limit values to an interval.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    a_min (scalar or array or None): Lower bound (``None``: none).\n"
      "    a_max (scalar or array or None): Upper bound (``None``: none).\n\n"
      "Returns:\n"
      "    array: The clipped array.\n");

  // ---------------------------------------------------------------- elementwise, binary
  def_binary(m, "add", &tessera::add, BINARY_DOC("Element-wise sum."));
  def_binary(m, "subtract", &tessera::subtract, BINARY_DOC("Element-wise difference."));
  def_binary(m, "multiply", &tessera::multiply, BINARY_DOC("Element-wise product."));
  def_binary(m, "divide", &tessera::divide,
             BINARY_DOC("Element-wise true division (integers give a float result)."));
  m.def(
      "divmod",
      [](const ArrayLike& a, const ArrayLike& b, StreamOrDevice s) {
        auto [x, y] = to_arrays(a, b);
        return divmod(x, y, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Element-wise quotient and remainder, ``(a // b, a % b)``, in one pass.\n\n"
      "Args:\n"
      "    a (array): First operand (array or scalar).\n"
      "    b (array): Second operand (array or scalar).\n\n"
      "Returns:\n"
      "    list(array): The floor quotient and the remainder.\n");
  def_binary(m, "floor_divide", &tessera::floor_divide,
             BINARY_DOC("Element-wise floor division, a // b."));
  def_binary(m, "remainder", &tessera::remainder,
             BINARY_DOC("Element-wise remainder with the sign of the divisor, a % b."));
  def_binary(m, "equal", &tessera::equal, BINARY_DOC("Element-wise a == b."));
  def_binary(m, "not_equal", &tessera::not_equal, BINARY_DOC("Element-wise a != b."));
  def_binary(m, "less", &tessera::less, BINARY_DOC("Element-wise a < b."));
  def_binary(m, "less_equal", &tessera::less_equal, BINARY_DOC("Element-wise a <= b."));
  def_binary(m, "greater", &tessera::greater, BINARY_DOC("Element-wise a > b."));
  def_binary(m, "greater_equal", &tessera::greater_equal, BINARY_DOC("Element-wise a >= b."));
  def_binary(m, "logaddexp", &tessera::logaddexp,
             BINARY_DOC("Element-wise log(exp(a) + exp(b)), computed stably."));
  def_binary(m, "power", &tessera::power, BINARY_DOC("Element-wise a raised to the power b."));
  def_binary(m, "minimum", &tessera::minimum, BINARY_DOC("Element-wise minimum (NaN propagates)."));
  def_binary(m, "maximum", &tessera::maximum, BINARY_DOC("Element-wise maximum (NaN propagates)."));
  def_binary(m, "bitwise_and", &tessera::bitwise_and, BINARY_DOC("Element-wise bitwise and."));
  def_binary(m, "bitwise_or", &tessera::bitwise_or, BINARY_DOC("Element-wise bitwise or."));
  def_binary(m, "bitwise_xor", &tessera::bitwise_xor, BINARY_DOC("Element-wise bitwise xor."));
  def_binary(m, "left_shift", &tessera::left_shift, BINARY_DOC("Element-wise a << b."));
  def_binary(m, "right_shift", &tessera::right_shift, BINARY_DOC("Element-wise a >> b."));
  def_logical(m, "logical_and", &tessera::logical_and, BINARY_DOC("Element-wise logical and."));
  def_logical(m, "logical_or", &tessera::logical_or, BINARY_DOC("Element-wise logical or."));
  def_logical(m, "logical_xor", &tessera::logical_xor, BINARY_DOC("Element-wise logical xor."));
  m.def(
      "arctan2", [](const array& a, const array& b, StreamOrDevice s) { return arctan2(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Element-wise inverse tangent of a / b, using both signs for the quadrant.\n\n"
      "Args:\n"
      "    a (array): The y coordinates.\n"
      "    b (array): The x coordinates.\n\n"
      "Returns:\n"
      "    array: The angles in radians.\n");
  m.def(
      "array_equal",
      [](const ArrayLike& a, const ArrayLike& b, bool equal_nan, StreamOrDevice s) {
        auto [x, y] = to_arrays(a, b);
        return array_equal(x, y, equal_nan, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), "equal_nan"_a = false, "stream"_a = nb::none(),
      "Whether two arrays have the same shape and equal elements (any dtypes).\n\n"
      "Args:\n"
      "    a (array): First input.\n"
      "    b (array): Second input.\n"
      "    equal_nan (bool): Count NaNs as equal. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: A scalar boolean array.\n");
  m.def(
      "isclose",
      [](const array& a, const array& b, double rtol, double atol, bool equal_nan,
         StreamOrDevice s) { return isclose(a, b, rtol, atol, equal_nan, s); },
      nb::arg(), nb::arg(), "rtol"_a = 1e-5, "atol"_a = 1e-8, nb::kw_only(), "equal_nan"_a = false,
      "stream"_a = nb::none(),
      "Element-wise ``abs(a - b) <= atol + rtol * abs(b)``.\n\n"
      "Args:\n"
      "    a (array): First input.\n"
      "    b (array): Second input.\n"
      "    rtol (float): Relative tolerance. Default: ``1e-5``.\n"
      "    atol (float): Absolute tolerance. Default: ``1e-8``.\n"
      "    equal_nan (bool): Count NaNs as equal. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The boolean comparison.\n");
  m.def(
      "allclose",
      [](const array& a, const array& b, double rtol, double atol, bool equal_nan,
         StreamOrDevice s) { return allclose(a, b, rtol, atol, equal_nan, s); },
      nb::arg(), nb::arg(), "rtol"_a = 1e-5, "atol"_a = 1e-8, nb::kw_only(), "equal_nan"_a = false,
      "stream"_a = nb::none(),
      "Whether every element of a is close to b (see :func:`isclose`).\n\n"
      "Args:\n"
      "    a (array): First input.\n"
      "    b (array): Second input.\n"
      "    rtol (float): Relative tolerance. Default: ``1e-5``.\n"
      "    atol (float): Absolute tolerance. Default: ``1e-8``.\n"
      "    equal_nan (bool): Count NaNs as equal. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: A scalar boolean array.\n");
  m.def(
      "where",
      [](const ArrayLike& condition, const ArrayLike& x, const ArrayLike& y, StreamOrDevice s) {
        auto [xa, ya] = to_arrays(x, y);
        return where(to_array(condition), xa, ya, s);
      },
      "condition"_a, nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Choose elements from x where condition is true, else from y.\n\n"
      "Args:\n"
      "    condition (array): The condition (broadcast with x and y).\n"
      "    x (array): Values where the condition holds.\n"
      "    y (array): Values where it does not.\n\n"
      "Returns:\n"
      "    array: The selected values.\n");

}

}  // namespace tessera::python
