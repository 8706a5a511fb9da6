// Shared by the ops binding files (ops_*.cpp): the argument types MLX's ops take, docstring
// templates, and the one-line binders of elementwise ops.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "convert.h"

namespace tessera::python::ops_detail {


// An `int | Sequence[int]` shape: entries must be integers (TypeError naming the entry) that fit
// in int32 (OverflowError naming the value, as MLX).
Shape to_shape(const ShapeLike& shape, const char* op);

// arange's bounds: a Python bool, int or float, kept apart so the result dtype follows them.
using Scalar = std::variant<bool, int64_t, double>;
inline Dtype scalar_dtype(const Scalar& v) {
  if (auto* i = std::get_if<int64_t>(&v)) {
    return (*i > std::numeric_limits<int32_t>::max() || *i < std::numeric_limits<int32_t>::min())
               ? int64
               : int32;
  }
  return std::holds_alternative<double>(v) ? float32 : bool_;
}
inline double scalar_value(const Scalar& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  return std::get<bool>(v) ? 1.0 : 0.0;
}

#define UNARY_DOC(summary)                      \
  summary                                       \
      "\n\n"                                    \
      "Args:\n"                                 \
      "    a (array): Input array or scalar.\n" \
      "\n"                                      \
      "Returns:\n"                              \
      "    array: The result, element by element.\n"

#define BINARY_DOC(summary)                                \
  summary                                                  \
      " NumPy-style broadcasting applies.\n\n"             \
      "Args:\n"                                            \
      "    a (array): First operand (array or scalar).\n"  \
      "    b (array): Second operand (array or scalar).\n" \
      "\n"                                                 \
      "Returns:\n"                                         \
      "    array: The result, element by element.\n"

#define REDUCE_DOC(summary)                                                    \
  summary                                                                      \
      "\n\n"                                                                   \
      "Args:\n"                                                                \
      "    a (array): Input array.\n"                                          \
      "    axis (int or list(int), optional): Axes to reduce over. ``None``\n" \
      "      (the default) reduces over every axis.\n"                         \
      "    keepdims (bool, optional): Keep the reduced axes as size-1 dims.\n" \
      "      Default: ``False``.\n"                                            \
      "\n"                                                                     \
      "Returns:\n"                                                             \
      "    array: The reduced array.\n"

#define SCAN_DOC(summary)                                                      \
  summary                                                                      \
      "\n\n"                                                                   \
      "Args:\n"                                                                \
      "    a (array): Input array.\n"                                          \
      "    axis (int, optional): Axis to scan along. ``None`` (the default)\n" \
      "      scans the flattened array.\n"                                     \
      "    reverse (bool): Scan from the end. Default: ``False``.\n"           \
      "    inclusive (bool): Include the current element in its own result.\n" \
      "      Default: ``True``.\n"

using UnaryFn = array (*)(const array&, StreamOrDevice);
using BinaryFn = array (*)(const array&, const array&, StreamOrDevice);

// `op(a, /, *, stream)` with a scalar or array operand.
inline void def_unary(nb::module_& m, const char* name, UnaryFn f, const char* doc) {
  m.def(
      name, [f](const ArrayLike& a, StreamOrDevice s) { return f(to_array(a), s); }, nb::arg(),
      nb::kw_only(), "stream"_a = nb::none(), doc);
}

// `op(a, b, /, *, stream)`: Python scalars take the other operand's dtype (MLX's weak typing).
inline void def_binary(nb::module_& m, const char* name, BinaryFn f, const char* doc) {
  m.def(
      name,
      [f](const ArrayLike& a, const ArrayLike& b, StreamOrDevice s) {
        auto [x, y] = to_arrays(a, b);
        return f(x, y, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(), doc);
}

// `op(a, b, /, *, stream)` converting each operand on its own (the logical ops, as MLX).
inline void def_logical(nb::module_& m, const char* name, BinaryFn f, const char* doc) {
  m.def(
      name,
      [f](const ArrayLike& a, const ArrayLike& b, StreamOrDevice s) {
        return f(to_array(a), to_array(b), s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(), doc);
}

// atleast_1d / 2d / 3d: one array in, one out; several in, a list out.
template <typename One, typename Many>
nb::object atleast(const nb::args& arys, StreamOrDevice s, One one, Many many) {
  if (arys.size() == 1) return nb::cast(one(nb::cast<array>(arys[0]), s));
  return nb::cast(many(nb::cast<std::vector<array>>(arys), s));
}


}  // namespace tessera::python::ops_detail
