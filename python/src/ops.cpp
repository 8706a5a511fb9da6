// tessera.core's array ops (tessera/ops/*.h, matmul & co.) with MLX's mlx.core signatures.
#include "convert.h"

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

namespace tessera::python {

namespace {

// `int | Sequence[int]` shapes (zeros, ones, full).
using ShapeArg = std::variant<int, Shape>;
Shape to_shape(const ShapeArg& shape) {
  if (auto* n = std::get_if<int>(&shape)) return Shape{*n};
  return std::get<Shape>(shape);
}

// arange's bounds: a Python bool, int or float, kept apart so the result dtype follows them.
using Scalar = std::variant<bool, int64_t, double>;
Dtype scalar_dtype(const Scalar& v) {
  if (auto* i = std::get_if<int64_t>(&v)) {
    return (*i > std::numeric_limits<int32_t>::max() || *i < std::numeric_limits<int32_t>::min())
               ? int64
               : int32;
  }
  return std::holds_alternative<double>(v) ? float32 : bool_;
}
double scalar_value(const Scalar& v) {
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
void def_unary(nb::module_& m, const char* name, UnaryFn f, const char* doc) {
  m.def(
      name, [f](const ArrayLike& a, StreamOrDevice s) { return f(to_array(a), s); }, nb::arg(),
      nb::kw_only(), "stream"_a = nb::none(), doc);
}

// `op(a, b, /, *, stream)`: Python scalars take the other operand's dtype (MLX's weak typing).
void def_binary(nb::module_& m, const char* name, BinaryFn f, const char* doc) {
  m.def(
      name,
      [f](const ArrayLike& a, const ArrayLike& b, StreamOrDevice s) {
        auto [x, y] = to_arrays(a, b);
        return f(x, y, s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(), doc);
}

// `op(a, b, /, *, stream)` converting each operand on its own (the logical ops, as MLX).
void def_logical(nb::module_& m, const char* name, BinaryFn f, const char* doc) {
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

}  // namespace

void init_ops(nb::module_& m) {
  // ---------------------------------------------------------------- shape
  m.def(
      "reshape",
      [](const array& a, Shape shape, StreamOrDevice s) { return reshape(a, std::move(shape), s); },
      nb::arg(), "shape"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Give an array a new shape with the same elements.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    shape (tuple(int)): The new shape; one entry may be ``-1`` (inferred).\n\n"
      "Returns:\n"
      "    array: The reshaped array.\n");
  m.def(
      "flatten",
      [](const array& a, int start_axis, int end_axis, StreamOrDevice s) {
        return flatten(a, start_axis, end_axis, s);
      },
      nb::arg(), "start_axis"_a = 0, "end_axis"_a = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Merge the axes from ``start_axis`` to ``end_axis`` (inclusive) into one.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    start_axis (int, optional): First axis to merge. Default: ``0``.\n"
      "    end_axis (int, optional): Last axis to merge. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The flattened array.\n");
  m.def(
      "unflatten",
      [](const array& a, int axis, Shape shape, StreamOrDevice s) {
        return unflatten(a, axis, std::move(shape), s);
      },
      nb::arg(), "axis"_a, "shape"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Split one axis into several.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int): The axis to split.\n"
      "    shape (tuple(int)): Sizes of the new axes; one may be ``-1``.\n\n"
      "Returns:\n"
      "    array: The unflattened array.\n");
  m.def(
      "squeeze",
      [](const array& a, const OptAxes& axis, StreamOrDevice s) {
        if (!axis) return squeeze(a, s);
        if (auto* i = std::get_if<int>(&*axis)) return squeeze(a, *i, s);
        return squeeze(a, std::get<std::vector<int>>(*axis), s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Remove size-1 axes.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or tuple(int), optional): Axes to remove. ``None`` (the\n"
      "      default) removes every size-1 axis.\n\n"
      "Returns:\n"
      "    array: The squeezed array.\n");
  m.def(
      "expand_dims",
      [](const array& a, const std::variant<int, std::vector<int>>& axis, StreamOrDevice s) {
        if (auto* i = std::get_if<int>(&axis)) return expand_dims(a, *i, s);
        return expand_dims(a, std::get<std::vector<int>>(axis), s);
      },
      nb::arg(), "axis"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Insert size-1 axes.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or tuple(int)): Positions of the new axes in the output.\n\n"
      "Returns:\n"
      "    array: The array with the added axes.\n");
  m.def(
      "flip",
      [](const array& a, const OptAxes& axis, StreamOrDevice s) {
        if (!axis) return flip(a, s);
        if (auto* i = std::get_if<int>(&*axis)) return flip(a, *i, s);
        return flip(a, std::get<std::vector<int>>(*axis), s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Reverse the order of elements along the given axes.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or tuple(int), optional): Axes to reverse. ``None`` (the\n"
      "      default) reverses every axis.\n\n"
      "Returns:\n"
      "    array: The flipped array.\n");
  m.def(
      "unstack", [](const array& a, int axis, StreamOrDevice s) { return unstack(a, axis, s); },
      nb::arg(), nb::kw_only(), "axis"_a = 0, "stream"_a = nb::none(),
      "Split an array into its slices along an axis, removing that axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int, optional): The axis to unstack. Default: ``0``.\n\n"
      "Returns:\n"
      "    list(array): The slices.\n");
  m.def(
      "moveaxis",
      [](const array& a, int source, int destination, StreamOrDevice s) {
        return moveaxis(a, source, destination, s);
      },
      nb::arg(), "source"_a, "destination"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Move one axis to a new position.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    source (int): The axis to move.\n"
      "    destination (int): Its position in the output.\n\n"
      "Returns:\n"
      "    array: The array with the axis moved.\n");
  m.def(
      "swapaxes",
      [](const array& a, int axis1, int axis2, StreamOrDevice s) {
        return swapaxes(a, axis1, axis2, s);
      },
      nb::arg(), "axis1"_a, "axis2"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Exchange two axes.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis1 (int): First axis.\n"
      "    axis2 (int): Second axis.\n\n"
      "Returns:\n"
      "    array: The array with the two axes swapped.\n");
  m.def(
      "transpose",
      [](const array& a, const std::optional<std::vector<int>>& axes, StreamOrDevice s) {
        return axes ? transpose(a, *axes, s) : transpose(a, s);
      },
      nb::arg(), "axes"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Permute the axes of an array.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axes (list(int), optional): The new order of the axes. ``None`` (the\n"
      "      default) reverses them.\n\n"
      "Returns:\n"
      "    array: The transposed array.\n");
  m.def(
      "permute_dims",
      [](const array& a, const std::optional<std::vector<int>>& axes, StreamOrDevice s) {
        return axes ? transpose(a, *axes, s) : transpose(a, s);
      },
      nb::arg(), "axes"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Permute the axes of an array (the same as :func:`transpose`).\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axes (list(int), optional): The new order of the axes. ``None`` (the\n"
      "      default) reverses them.\n\n"
      "Returns:\n"
      "    array: The transposed array.\n");
  m.def(
      "broadcast_to",
      [](const ArrayLike& a, const Shape& shape, StreamOrDevice s) {
        return broadcast_to(to_array(a), shape, s);
      },
      nb::arg(), "shape"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Broadcast an array to a shape (NumPy's rules).\n\n"
      "Args:\n"
      "    a (array): Input array or scalar.\n"
      "    shape (list(int)): The target shape.\n\n"
      "Returns:\n"
      "    array: The broadcast array.\n");
  m.def(
      "broadcast_arrays",
      [](const nb::args& arrays, StreamOrDevice s) {
        return broadcast_arrays(nb::cast<std::vector<array>>(arrays), s);
      },
      "arrays"_a, "stream"_a = nb::none(),
      "Broadcast arrays against one another.\n\n"
      "Args:\n"
      "    *arrays (array): The input arrays.\n\n"
      "Returns:\n"
      "    list(array): The arrays, broadcast to a common shape.\n");
  m.def(
      "concatenate",
      [](std::vector<array> arrays, std::optional<int> axis, StreamOrDevice s) {
        return axis ? concatenate(std::move(arrays), *axis, s) : concatenate(std::move(arrays), s);
      },
      nb::arg(), "axis"_a.none() = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Join arrays along an axis.\n\n"
      "Args:\n"
      "    arrays (list(array)): The arrays to join.\n"
      "    axis (int, optional): The axis to join along; ``None`` joins the\n"
      "      flattened arrays. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The concatenated array.\n");
  m.def(
      "concat",
      [](std::vector<array> arrays, std::optional<int> axis, StreamOrDevice s) {
        return axis ? concatenate(std::move(arrays), *axis, s) : concatenate(std::move(arrays), s);
      },
      nb::arg(), "axis"_a.none() = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Join arrays along an axis (the same as :func:`concatenate`).\n\n"
      "Args:\n"
      "    arrays (list(array)): The arrays to join.\n"
      "    axis (int, optional): The axis to join along; ``None`` joins the\n"
      "      flattened arrays. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The concatenated array.\n");
  m.def(
      "stack",
      [](const std::vector<array>& arrays, std::optional<int> axis, StreamOrDevice s) {
        return axis ? stack(arrays, *axis, s) : stack(arrays, s);
      },
      nb::arg(), "axis"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Join arrays along a new axis.\n\n"
      "Args:\n"
      "    arrays (list(array)): The arrays to stack (all of one shape).\n"
      "    axis (int, optional): Position of the new axis. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The stacked array.\n");
  m.def(
      "split",
      [](const array& a, const std::variant<int, Shape>& indices_or_sections, int axis,
         StreamOrDevice s) {
        if (auto* n = std::get_if<int>(&indices_or_sections)) return split(a, *n, axis, s);
        return split(a, std::get<Shape>(indices_or_sections), axis, s);
      },
      nb::arg(), "indices_or_sections"_a, "axis"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Split an array along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices_or_sections (int or list(int)): A number of equal parts, or\n"
      "      the indices at which to split.\n"
      "    axis (int, optional): The axis to split. Default: ``0``.\n\n"
      "Returns:\n"
      "    list(array): The parts.\n");
  m.def(
      "meshgrid",
      [](const nb::args& arrays, bool sparse, const std::string& indexing, StreamOrDevice s) {
        auto grids = meshgrid(nb::cast<std::vector<array>>(arrays), sparse, indexing, s);
        return nb::tuple(nb::cast(grids));
      },
      "arrays"_a, "sparse"_a = false, "indexing"_a = "xy", "stream"_a = nb::none(),
      "Coordinate grids from 1-D coordinate arrays.\n\n"
      "Args:\n"
      "    *arrays (array): The 1-D coordinate arrays.\n"
      "    sparse (bool, optional): Return broadcastable grids instead of full\n"
      "      ones. Default: ``False``.\n"
      "    indexing (str, optional): ``'xy'`` (Cartesian) or ``'ij'`` (matrix).\n"
      "      Default: ``'xy'``.\n\n"
      "Returns:\n"
      "    tuple(array): The grids.\n");
  m.def(
      "repeat",
      [](const array& a, int repeats, std::optional<int> axis, StreamOrDevice s) {
        return axis ? repeat(a, repeats, *axis, s) : repeat(a, repeats, s);
      },
      nb::arg(), "repeats"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Repeat each element of an array.\n\n"
      "Args:\n"
      "    array (array): Input array.\n"
      "    repeats (int): Times to repeat each element.\n"
      "    axis (int, optional): The axis to repeat along; ``None`` (the\n"
      "      default) repeats the flattened array.\n\n"
      "Returns:\n"
      "    array: The repeated array.\n");
  m.def(
      "tile",
      [](const array& a, const std::variant<int, std::vector<int>>& reps, StreamOrDevice s) {
        if (auto* n = std::get_if<int>(&reps)) return tile(a, std::vector<int>{*n}, s);
        return tile(a, std::get<std::vector<int>>(reps), s);
      },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Build an array by repeating ``a`` ``reps`` times along each axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    reps (int or list(int)): Repetitions per axis.\n\n"
      "Returns:\n"
      "    array: The tiled array.\n");
  m.def(
      "pad",
      [](const array& a,
         const std::variant<int, std::tuple<int>, std::pair<int, int>,
                            std::vector<std::pair<int, int>>>& pad_width,
         const std::string& mode, const ArrayLike& constant_values, StreamOrDevice s) {
        array value = to_array(constant_values.obj, a.dtype());
        if (auto* n = std::get_if<int>(&pad_width)) return pad(a, *n, value, mode, s);
        if (auto* t = std::get_if<std::tuple<int>>(&pad_width)) {
          return pad(a, std::get<0>(*t), value, mode, s);
        }
        if (auto* p = std::get_if<std::pair<int, int>>(&pad_width))
          return pad(a, *p, value, mode, s);
        const auto& widths = std::get<std::vector<std::pair<int, int>>>(pad_width);
        if (widths.size() == 1) return pad(a, widths[0], value, mode, s);
        return pad(a, widths, value, mode, s);
      },
      nb::arg(), "pad_width"_a, "mode"_a = "constant", "constant_values"_a = 0, nb::kw_only(),
      "stream"_a = nb::none(),
      "Pad an array.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    pad_width (int, tuple(int), tuple(int, int) or list(tuple(int, int))):\n"
      "      Padding before and after each axis: one width for all, one\n"
      "      ``(before, after)`` pair for all, or a pair per axis.\n"
      "    mode (str): ``'constant'``, ``'edge'``, ``'reflect'`` or\n"
      "      ``'symmetric'``. Default: ``'constant'``.\n"
      "    constant_values (array or scalar): Fill value for ``'constant'``.\n"
      "      Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The padded array.\n");
  m.def(
      "roll",
      [](const array& a, const std::variant<int, Shape>& shift, const OptAxes& axis,
         StreamOrDevice s) {
        return std::visit(
            [&](const auto& sh) -> array {
              if (!axis) return roll(a, sh, s);
              return std::visit([&](const auto& ax) { return roll(a, sh, ax, s); }, *axis);
            },
            shift);
      },
      nb::arg(), "shift"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Roll elements along axes; those pushed off one end come back at the other.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    shift (int or tuple(int)): Positions to shift by (one per axis).\n"
      "    axis (int or tuple(int), optional): Axes to roll. ``None`` (the\n"
      "      default) rolls the flattened array and restores the shape.\n\n"
      "Returns:\n"
      "    array: The rolled array.\n");
  m.def(
      "atleast_1d",
      [](const nb::args& arys, StreamOrDevice s) {
        return atleast(
            arys, s, [](const array& x, StreamOrDevice st) { return atleast_1d(x, st); },
            [](const std::vector<array>& xs, StreamOrDevice st) { return atleast_1d(xs, st); });
      },
      "arys"_a, "stream"_a = nb::none(),
      "View inputs with at least one dimension.\n\n"
      "Args:\n"
      "    *arys (array): Input arrays.\n\n"
      "Returns:\n"
      "    array or list(array): One array for one input, else a list.\n");
  m.def(
      "atleast_2d",
      [](const nb::args& arys, StreamOrDevice s) {
        return atleast(
            arys, s, [](const array& x, StreamOrDevice st) { return atleast_2d(x, st); },
            [](const std::vector<array>& xs, StreamOrDevice st) { return atleast_2d(xs, st); });
      },
      "arys"_a, "stream"_a = nb::none(),
      "View inputs with at least two dimensions.\n\n"
      "Args:\n"
      "    *arys (array): Input arrays.\n\n"
      "Returns:\n"
      "    array or list(array): One array for one input, else a list.\n");
  m.def(
      "atleast_3d",
      [](const nb::args& arys, StreamOrDevice s) {
        return atleast(
            arys, s, [](const array& x, StreamOrDevice st) { return atleast_3d(x, st); },
            [](const std::vector<array>& xs, StreamOrDevice st) { return atleast_3d(xs, st); });
      },
      "arys"_a, "stream"_a = nb::none(),
      "View inputs with at least three dimensions.\n\n"
      "Args:\n"
      "    *arys (array): Input arrays.\n\n"
      "Returns:\n"
      "    array or list(array): One array for one input, else a list.\n");

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

  // ---------------------------------------------------------------- creation
  m.def(
      "arange",
      [](Scalar start, std::optional<Scalar> stop, const std::optional<Scalar>& step,
         const std::optional<Dtype>& dtype, StreamOrDevice s) {
        if (!stop) {
          stop = start;
          start = int64_t{0};
        }
        Dtype t = dtype
                      ? *dtype
                      : promote_types(scalar_dtype(start),
                                      step ? promote_types(scalar_dtype(*stop), scalar_dtype(*step))
                                           : scalar_dtype(*stop));
        return arange(scalar_value(start), scalar_value(*stop), step ? scalar_value(*step) : 1.0, t,
                      s);
      },
      "start"_a.noconvert(), "stop"_a.noconvert().none(), "step"_a.noconvert().none() = nb::none(),
      "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Evenly spaced values in ``[start, stop)``.\n\n"
      "Args:\n"
      "    start (float or int, optional): First value. Default: ``0``.\n"
      "    stop (float or int): End of the interval (not included).\n"
      "    step (float or int, optional): Spacing. Default: ``1``.\n"
      "    dtype (Dtype, optional): Result dtype; by default int32 when every\n"
      "      argument is an int, else float32.\n\n"
      "Returns:\n"
      "    array: The values.\n");
  m.def(
      "arange",
      [](Scalar stop, const std::optional<Scalar>& step, const std::optional<Dtype>& dtype,
         StreamOrDevice s) {
        Dtype t = dtype ? *dtype
                        : (step ? promote_types(scalar_dtype(stop), scalar_dtype(*step))
                                : scalar_dtype(stop));
        return arange(0.0, scalar_value(stop), step ? scalar_value(*step) : 1.0, t, s);
      },
      "stop"_a.noconvert(), "step"_a.noconvert().none() = nb::none(), "dtype"_a = nb::none(),
      nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "linspace",
      [](double start, double stop, int num, bool endpoint, std::optional<Dtype> dtype,
         StreamOrDevice s) {
        return linspace(start, stop, num, endpoint, dtype.value_or(float32), s);
      },
      "start"_a, "stop"_a, "num"_a = 50, "endpoint"_a = true, "dtype"_a.none() = float32,
      "stream"_a = nb::none(),
      "``num`` evenly spaced values from ``start`` to ``stop``.\n\n"
      "Args:\n"
      "    start (scalar): First value.\n"
      "    stop (scalar): Last value (included when ``endpoint``).\n"
      "    num (int, optional): Number of values. Default: ``50``.\n"
      "    endpoint (bool, optional): Include ``stop``. Default: ``True``.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The values.\n");
  m.def(
      "full",
      [](const ShapeArg& shape, const ArrayLike& vals, std::optional<Dtype> dtype,
         StreamOrDevice s) { return full(to_shape(shape), to_array(vals.obj, dtype), s); },
      "shape"_a, "vals"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "An array of the given shape filled with ``vals`` (broadcast).\n\n"
      "Args:\n"
      "    shape (int or list(int)): The shape.\n"
      "    vals (float or int or array): The fill value(s).\n"
      "    dtype (Dtype, optional): Result dtype; by default that of ``vals``.\n\n"
      "Returns:\n"
      "    array: The filled array.\n");
  m.def(
      "full_like",
      [](const array& a, const ArrayLike& vals, std::optional<Dtype> dtype, StreamOrDevice s) {
        Dtype t = dtype.value_or(a.dtype());
        return full_like(a, to_array(vals.obj, t), t, s);
      },
      nb::arg(), "vals"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "An array shaped like ``a`` filled with ``vals``.\n\n"
      "Args:\n"
      "    a (array): Gives the shape (and the default dtype).\n"
      "    vals (float or int or array): The fill value(s).\n"
      "    dtype (Dtype, optional): Result dtype; by default ``a``'s.\n\n"
      "Returns:\n"
      "    array: The filled array.\n");
  m.def(
      "zeros",
      [](const ShapeArg& shape, std::optional<Dtype> dtype, StreamOrDevice s) {
        return zeros(to_shape(shape), dtype.value_or(float32), s);
      },
      "shape"_a, "dtype"_a.none() = float32, nb::kw_only(), "stream"_a = nb::none(),
      "An array of zeros.\n\n"
      "Args:\n"
      "    shape (int or list(int)): The shape.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The zeros.\n");
  m.def(
      "zeros_like",
      [](const array& a, std::optional<Dtype> dtype, StreamOrDevice s) {
        return zeros_like(a, dtype.value_or(a.dtype()), s);
      },
      nb::arg(), "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Zeros with the shape (and by default the dtype) of ``a``.\n\n"
      "Args:\n"
      "    a (array): The array to take the shape from.\n"
      "    dtype (Dtype, optional): Result dtype; by default ``a``'s.\n\n"
      "Returns:\n"
      "    array: The zeros.\n");
  m.def(
      "ones",
      [](const ShapeArg& shape, std::optional<Dtype> dtype, StreamOrDevice s) {
        return ones(to_shape(shape), dtype.value_or(float32), s);
      },
      "shape"_a, "dtype"_a.none() = float32, nb::kw_only(), "stream"_a = nb::none(),
      "An array of ones.\n\n"
      "Args:\n"
      "    shape (int or list(int)): The shape.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The ones.\n");
  m.def(
      "ones_like",
      [](const array& a, std::optional<Dtype> dtype, StreamOrDevice s) {
        return ones_like(a, dtype.value_or(a.dtype()), s);
      },
      nb::arg(), "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Ones with the shape (and by default the dtype) of ``a``.\n\n"
      "Args:\n"
      "    a (array): The array to take the shape from.\n"
      "    dtype (Dtype, optional): Result dtype; by default ``a``'s.\n\n"
      "Returns:\n"
      "    array: The ones.\n");
  m.def(
      "eye",
      [](int n, std::optional<int> m_, int k, std::optional<Dtype> dtype, StreamOrDevice s) {
        return eye(n, m_.value_or(n), k, dtype.value_or(float32), s);
      },
      "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a.none() = float32, nb::kw_only(),
      "stream"_a = nb::none(),
      "A 2-D array with ones on a diagonal and zeros elsewhere.\n\n"
      "Args:\n"
      "    n (int): Number of rows.\n"
      "    m (int, optional): Number of columns. Default: ``n``.\n"
      "    k (int, optional): The diagonal (0: main, > 0: above). Default: ``0``.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The matrix.\n");
  m.def(
      "identity",
      [](int n, std::optional<Dtype> dtype, StreamOrDevice s) {
        return identity(n, dtype.value_or(float32), s);
      },
      "n"_a, "dtype"_a.none() = float32, nb::kw_only(), "stream"_a = nb::none(),
      "The ``n`` x ``n`` identity matrix.\n\n"
      "Args:\n"
      "    n (int): Number of rows and columns.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The identity matrix.\n");
  m.def(
      "tri",
      [](int n, std::optional<int> m_, int k, std::optional<Dtype> dtype, StreamOrDevice s) {
        return tri(n, m_.value_or(n), k, dtype.value_or(float32), s);
      },
      "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a.none() = float32, nb::kw_only(),
      "stream"_a = nb::none(),
      "A matrix of ones at and below a diagonal, zeros above.\n\n"
      "Args:\n"
      "    n (int): Number of rows.\n"
      "    m (int, optional): Number of columns. Default: ``n``.\n"
      "    k (int, optional): The diagonal. Default: ``0``.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The triangular matrix.\n");
  m.def(
      "tril", [](const array& x, int k, StreamOrDevice s) { return tril(x, k, s); }, "x"_a,
      "k"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Zero the elements above the ``k``-th diagonal.\n\n"
      "Args:\n"
      "    x (array): Input array (at least 2-D).\n"
      "    k (int, optional): The diagonal. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The lower triangle.\n");
  m.def(
      "triu", [](const array& x, int k, StreamOrDevice s) { return triu(x, k, s); }, "x"_a,
      "k"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Zero the elements below the ``k``-th diagonal.\n\n"
      "Args:\n"
      "    x (array): Input array (at least 2-D).\n"
      "    k (int, optional): The diagonal. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The upper triangle.\n");
  m.def(
      "astype", [](const array& a, Dtype dtype, StreamOrDevice s) { return astype(a, dtype, s); },
      nb::arg(), "dtype"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Convert an array to another dtype.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    dtype (Dtype): The target dtype.\n\n"
      "Returns:\n"
      "    array: The converted array.\n");
  m.def(
      "view",
      [](const ArrayLike& a, const Dtype& dtype, StreamOrDevice s) {
        return view(to_array(a), dtype, s);
      },
      nb::arg(), "dtype"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Reinterpret the bytes of an array as another dtype.\n\n"
      "The last axis scales by the ratio of the two element sizes.\n\n"
      "Args:\n"
      "    a (array): Input array or scalar.\n"
      "    dtype (Dtype): The dtype to read the bytes as.\n\n"
      "Returns:\n"
      "    array: The reinterpreted array.\n");
  m.def(
      "as_strided",
      [](const array& a, std::optional<Shape> shape, std::optional<Strides> strides, size_t offset,
         StreamOrDevice s) {
        Shape sh = shape ? *shape : a.shape();
        Strides st;
        if (strides) {
          st = *strides;
        } else {
          // Row-contiguous strides for `sh`.
          st.assign(sh.size(), 1);
          for (size_t i = sh.size(); i-- > 1;) st[i - 1] = st[i] * sh[i];
        }
        return as_strided(a, std::move(sh), std::move(st), offset, s);
      },
      nb::arg(), "shape"_a = nb::none(), "strides"_a = nb::none(), "offset"_a = 0, nb::kw_only(),
      "stream"_a = nb::none(),
      "A view of an array's buffer with any shape and strides.\n\n"
      "Nothing is checked: a view reaching outside the buffer reads garbage.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    shape (list(int), optional): The view's shape. Default: ``a.shape``.\n"
      "    strides (list(int), optional): Its strides, in elements. Default:\n"
      "      row-contiguous strides for ``shape``.\n"
      "    offset (int): Elements to skip at the start. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The strided view.\n");
  m.def(
      "contiguous",
      [](const array& a, bool allow_col_major, StreamOrDevice s) {
        return contiguous(a, allow_col_major, s);
      },
      nb::arg(), "allow_col_major"_a = false, nb::kw_only(), "stream"_a = nb::none(),
      "A row-contiguous array equal to ``a``.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    allow_col_major (bool): Keep a column-major input as it is.\n"
      "      Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The contiguous array.\n");

  // ---------------------------------------------------------------- indexing
  m.def(
      "take",
      [](const array& a, const std::variant<int, array>& indices, std::optional<int> axis,
         StreamOrDevice s) {
        if (auto* i = std::get_if<int>(&indices))
          return axis ? take(a, *i, *axis, s) : take(a, *i, s);
        const array& idx = std::get<array>(indices);
        return axis ? take(a, idx, *axis, s) : take(a, idx, s);
      },
      nb::arg(), "indices"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Elements of an array at the given indices along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices (int or array): Integer indices (negative ones count from the\n"
      "      end).\n"
      "    axis (int, optional): The axis to index; ``None`` (the default)\n"
      "      indexes the flattened array.\n\n"
      "Returns:\n"
      "    array: The selected elements.\n");
  m.def(
      "take_along_axis",
      [](const array& a, const array& indices, std::optional<int> axis, StreamOrDevice s) {
        if (axis) return take_along_axis(a, indices, *axis, s);
        return take_along_axis(reshape(a, {-1}, s), indices, 0, s);
      },
      nb::arg(), "indices"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Pick values along an axis with indices broadcast against the array.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices (array): Integer indices (as many dims as ``a``).\n"
      "    axis (int, optional): The axis; ``None`` (the default) uses the\n"
      "      flattened array.\n\n"
      "Returns:\n"
      "    array: The selected values.\n");
  m.def(
      "put_along_axis",
      [](const array& a, const array& indices, const array& values, std::optional<int> axis,
         StreamOrDevice s) {
        if (axis) return put_along_axis(a, indices, values, *axis, s);
        return reshape(put_along_axis(reshape(a, {-1}, s), indices, values, 0, s), a.shape(), s);
      },
      nb::arg(), "indices"_a, "values"_a, "axis"_a.none(), nb::kw_only(), "stream"_a = nb::none(),
      "A copy of ``a`` with values written at indices along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices (array): Integer indices (as many dims as ``a``).\n"
      "    values (array): The values to write (broadcast to ``indices``).\n"
      "    axis (int or None): The axis; ``None`` uses the flattened array.\n\n"
      "Returns:\n"
      "    array: The updated array.\n");
  m.def(
      "slice",
      [](const array& a, const array& start_indices, std::vector<int> axes, Shape slice_size,
         StreamOrDevice s) {
        return slice_dynamic(a, start_indices, std::move(axes), std::move(slice_size), s);
      },
      nb::arg(), "start_indices"_a, "axes"_a, "slice_size"_a, nb::kw_only(),
      "stream"_a = nb::none(),
      "A slice whose start is read from an array when evaluated.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    start_indices (array): Start of the slice along each of ``axes``.\n"
      "    axes (list(int)): The axes ``start_indices`` refers to.\n"
      "    slice_size (list(int)): The slice's shape.\n\n"
      "Returns:\n"
      "    array: The slice.\n");
  m.def(
      "slice_update",
      [](const array& a, const array& update, const array& start_indices, std::vector<int> axes,
         StreamOrDevice s) {
        return slice_update_dynamic(a, update, start_indices, std::move(axes), s);
      },
      nb::arg(), "update"_a, "start_indices"_a, "axes"_a, nb::kw_only(), "stream"_a = nb::none(),
      "A copy of ``a`` with a slice, whose start is read from an array when\n"
      "evaluated, replaced by ``update``.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    update (array): The new values of the slice.\n"
      "    start_indices (array): Start of the slice along each of ``axes``.\n"
      "    axes (list(int)): The axes ``start_indices`` refers to.\n\n"
      "Returns:\n"
      "    array: The updated array.\n");
  m.def(
      "diagonal",
      [](const array& a, int offset, int axis1, int axis2, StreamOrDevice s) {
        return diagonal(a, offset, axis1, axis2, s);
      },
      "a"_a, "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, "stream"_a = nb::none(),
      "A diagonal of the planes spanned by two axes, as a new last axis.\n\n"
      "Args:\n"
      "    a (array): Input array (at least 2-D).\n"
      "    offset (int, optional): The diagonal (> 0: above the main one).\n"
      "      Default: ``0``.\n"
      "    axis1 (int, optional): First axis of the planes. Default: ``0``.\n"
      "    axis2 (int, optional): Second axis of the planes. Default: ``1``.\n\n"
      "Returns:\n"
      "    array: The diagonals.\n");
  m.def(
      "diag", [](const array& a, int k, StreamOrDevice s) { return diag(a, k, s); }, nb::arg(),
      "k"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Extract a diagonal of a 2-D array, or build a diagonal matrix from a 1-D one.\n\n"
      "Args:\n"
      "    a (array): A 1-D or 2-D array.\n"
      "    k (int, optional): The diagonal. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The diagonal, or the matrix.\n");
  m.def(
      "trace",
      [](const array& a, int offset, int axis1, int axis2, std::optional<Dtype> dtype,
         StreamOrDevice s) {
        return dtype ? trace(a, offset, axis1, axis2, *dtype, s)
                     : trace(a, offset, axis1, axis2, s);
      },
      nb::arg(), "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, "dtype"_a = nb::none(),
      nb::kw_only(), "stream"_a = nb::none(),
      "Sum along a diagonal.\n\n"
      "Args:\n"
      "    a (array): Input array (at least 2-D).\n"
      "    offset (int, optional): The diagonal. Default: ``0``.\n"
      "    axis1 (int, optional): First axis of the planes. Default: ``0``.\n"
      "    axis2 (int, optional): Second axis of the planes. Default: ``1``.\n"
      "    dtype (Dtype, optional): Accumulation and result dtype.\n\n"
      "Returns:\n"
      "    array: The sums.\n");

  // ---------------------------------------------------------------- reductions
  m.def(
      "all",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return all(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Logical and over the given axes."));
  m.def(
      "any",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return any(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Logical or over the given axes."));
  m.def(
      "sum",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return sum(a, axes_or_all(axis, a), keepdims, s);
      },
      "array"_a, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Sum over the given axes."));
  m.def(
      "count_nonzero",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return count_nonzero(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "keepdims"_a = false,
      "stream"_a = nb::none(), REDUCE_DOC("Number of non-zero elements over the given axes."));
  m.def(
      "prod",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return prod(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Product over the given axes."));
  m.def(
      "min",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return min(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Minimum over the given axes."));
  m.def(
      "max",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return max(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Maximum over the given axes."));
  m.def(
      "logsumexp",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return logsumexp(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      REDUCE_DOC("log(sum(exp(a))) over the given axes, computed stably."));
  m.def(
      "mean",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return mean(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Mean over the given axes."));
  m.def(
      "var",
      [](const array& a, const OptAxes& axis, bool keepdims, int ddof, StreamOrDevice s) {
        return var(a, axes_or_all(axis, a), keepdims, ddof, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0, nb::kw_only(),
      "stream"_a = nb::none(),
      REDUCE_DOC("Variance over the given axes, dividing by ``N - ddof`` (``ddof`` "
                 "defaults to 0)."));
  m.def(
      "std",
      [](const array& a, const OptAxes& axis, bool keepdims, int ddof, StreamOrDevice s) {
        return tessera::std(a, axes_or_all(axis, a), keepdims, ddof, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0, nb::kw_only(),
      "stream"_a = nb::none(),
      REDUCE_DOC("Standard deviation over the given axes, dividing by ``N - ddof`` "
                 "(``ddof`` defaults to 0)."));
  m.def(
      "argmin",
      [](const array& a, std::optional<int> axis, bool keepdims, StreamOrDevice s) {
        return axis ? argmin(a, *axis, keepdims, s) : argmin(a, keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      "Index of the first minimum along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int, optional): The axis; ``None`` (the default) indexes the\n"
      "      flattened array.\n"
      "    keepdims (bool, optional): Keep the reduced axis. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The uint32 indices.\n");
  m.def(
      "argmax",
      [](const array& a, std::optional<int> axis, bool keepdims, StreamOrDevice s) {
        return axis ? argmax(a, *axis, keepdims, s) : argmax(a, keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      "Index of the first maximum along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int, optional): The axis; ``None`` (the default) indexes the\n"
      "      flattened array.\n"
      "    keepdims (bool, optional): Keep the reduced axis. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The uint32 indices.\n");
  m.def(
      "softmax",
      [](const array& a, const OptAxes& axis, bool precise, StreamOrDevice s) {
        return softmax(a, axes_or_all(axis, a), precise, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "precise"_a = false, "stream"_a = nb::none(),
      "exp(a) normalised to sum to one over the given axes.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or list(int), optional): The axes; ``None`` (the default)\n"
      "      uses every axis.\n"
      "    precise (bool, optional): Accumulate half-precision inputs in float32.\n"
      "      Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The softmax.\n");

  // ---------------------------------------------------------------- scans
  m.def(
      "cumsum",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
         std::optional<Dtype> dtype, StreamOrDevice s) {
        return axis ? cumsum(a, *axis, reverse, inclusive, dtype, s)
                    : cumsum(a, reverse, inclusive, dtype, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "dtype"_a = nb::none(), "stream"_a = nb::none(),
      SCAN_DOC("Cumulative sum.") "    dtype (Dtype, optional): Accumulation and result dtype.\n"
                                  "\nReturns:\n    array: The running sums.\n");
  m.def(
      "cumprod",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
         std::optional<Dtype> dtype, StreamOrDevice s) {
        return axis ? cumprod(a, *axis, reverse, inclusive, dtype, s)
                    : cumprod(a, reverse, inclusive, dtype, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "dtype"_a = nb::none(), "stream"_a = nb::none(),
      SCAN_DOC("Cumulative product.") "    dtype (Dtype, optional): Accumulation and result "
                                      "dtype.\n\nReturns:\n    array: The running products.\n");
  m.def(
      "cummax",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive, StreamOrDevice s) {
        return axis ? cummax(a, *axis, reverse, inclusive, s) : cummax(a, reverse, inclusive, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "stream"_a = nb::none(),
      SCAN_DOC("Cumulative maximum.") "\nReturns:\n    array: The running maxima.\n");
  m.def(
      "cummin",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive, StreamOrDevice s) {
        return axis ? cummin(a, *axis, reverse, inclusive, s) : cummin(a, reverse, inclusive, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "stream"_a = nb::none(),
      SCAN_DOC("Cumulative minimum.") "\nReturns:\n    array: The running minima.\n");
  m.def(
      "logcumsumexp",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
         StreamOrDevice s) {
        return axis ? logcumsumexp(a, *axis, reverse, inclusive, s)
                    : logcumsumexp(a, reverse, inclusive, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "stream"_a = nb::none(),
      SCAN_DOC("Cumulative log(sum(exp(a))), computed stably.") "\nReturns:\n    array: The "
                                                                "running values.\n");

  // ---------------------------------------------------------------- sorting
  m.def(
      "sort",
      [](const array& a, std::optional<int> axis, StreamOrDevice s) {
        return axis ? sort(a, *axis, s) : sort(a, s);
      },
      nb::arg(), "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Sort an array along an axis (NaNs last).\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or None, optional): The axis; ``None`` sorts the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The sorted array.\n");
  m.def(
      "argsort",
      [](const array& a, std::optional<int> axis, StreamOrDevice s) {
        return axis ? argsort(a, *axis, s) : argsort(a, s);
      },
      nb::arg(), "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Indices that sort an array along an axis (a stable sort).\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or None, optional): The axis; ``None`` sorts the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The uint32 indices.\n");
  m.def(
      "partition",
      [](const array& a, int kth, std::optional<int> axis, StreamOrDevice s) {
        return axis ? partition(a, kth, *axis, s) : partition(a, kth, s);
      },
      nb::arg(), "kth"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Partially sort: the ``kth`` element lands where a full sort puts it, smaller\n"
      "ones before it and larger ones after, in no particular order.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    kth (int): The element index to place (negative counts from the end).\n"
      "    axis (int or None, optional): The axis; ``None`` uses the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The partitioned array.\n");
  m.def(
      "argpartition",
      [](const array& a, int kth, std::optional<int> axis, StreamOrDevice s) {
        return axis ? argpartition(a, kth, *axis, s) : argpartition(a, kth, s);
      },
      nb::arg(), "kth"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Indices that partition an array (see :func:`partition`).\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    kth (int): The element index to place (negative counts from the end).\n"
      "    axis (int or None, optional): The axis; ``None`` uses the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The uint32 indices.\n");
  m.def(
      "topk",
      [](const array& a, int k, std::optional<int> axis, StreamOrDevice s) {
        return axis ? topk(a, k, *axis, s) : topk(a, k, s);
      },
      nb::arg(), "k"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "The ``k`` largest elements along an axis, in no particular order.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    k (int): How many elements.\n"
      "    axis (int or None, optional): The axis; ``None`` uses the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The selected elements.\n");

  // ---------------------------------------------------------------- matrix products
  m.def(
      "matmul", [](const array& a, const array& b, StreamOrDevice s) { return matmul(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Matrix product with NumPy's rules: 1-D operands are promoted to matrices\n"
      "(and the added axis removed) and leading axes broadcast.\n\n"
      "Args:\n"
      "    a (array): First operand.\n"
      "    b (array): Second operand.\n\n"
      "Returns:\n"
      "    array: The product.\n");
  m.def(
      "addmm",
      [](const array& c, const array& a, const array& b, float alpha, float beta,
         StreamOrDevice s) { return addmm(c, a, b, alpha, beta, s); },
      nb::arg(), nb::arg(), nb::arg(), "alpha"_a = 1.0f, "beta"_a = 1.0f, nb::kw_only(),
      "stream"_a = nb::none(),
      "``alpha * (a @ b) + beta * c``.\n\n"
      "Args:\n"
      "    c (array): The added array (broadcast to the product).\n"
      "    a (array): First factor.\n"
      "    b (array): Second factor.\n"
      "    alpha (float, optional): Scale of the product. Default: ``1.0``.\n"
      "    beta (float, optional): Scale of ``c``. Default: ``1.0``.\n\n"
      "Returns:\n"
      "    array: The result.\n");
  m.def(
      "inner", [](const array& a, const array& b, StreamOrDevice s) { return inner(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Inner product over the last axes of two arrays.\n\n"
      "Args:\n"
      "    a (array): First input.\n"
      "    b (array): Second input.\n\n"
      "Returns:\n"
      "    array: The inner product.\n");
  m.def(
      "outer", [](const array& a, const array& b, StreamOrDevice s) { return outer(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Outer product of two arrays (flattened first).\n\n"
      "Args:\n"
      "    a (array): First input.\n"
      "    b (array): Second input.\n\n"
      "Returns:\n"
      "    array: The 2-D outer product.\n");
  m.def(
      "tensordot",
      [](const array& a, const array& b,
         const std::variant<int, std::vector<std::vector<int>>>& axes, StreamOrDevice s) {
        if (auto* n = std::get_if<int>(&axes)) return tensordot(a, b, *n, s);
        const auto& pair = std::get<std::vector<std::vector<int>>>(axes);
        if (pair.size() != 2) {
          throw std::invalid_argument("[tensordot] axes must be a list of two lists of axes.");
        }
        return tensordot(a, b, pair[0], pair[1], s);
      },
      nb::arg(), nb::arg(), "axes"_a = 2, nb::kw_only(), "stream"_a = nb::none(),
      "Sum of products over the given axes of two arrays.\n\n"
      "Args:\n"
      "    a (array): First input.\n"
      "    b (array): Second input.\n"
      "    axes (int or list(list(int)), optional): The number of trailing axes\n"
      "      of ``a`` to contract with the leading axes of ``b``, or two lists\n"
      "      of axes to contract pairwise. Default: ``2``.\n\n"
      "Returns:\n"
      "    array: The tensor product.\n");

  // ---------------------------------------------------------------- Array API aliases
  m.attr("acos") = m.attr("arccos");
  m.attr("acosh") = m.attr("arccosh");
  m.attr("asin") = m.attr("arcsin");
  m.attr("asinh") = m.attr("arcsinh");
  m.attr("atan") = m.attr("arctan");
  m.attr("atanh") = m.attr("arctanh");
  m.attr("atan2") = m.attr("arctan2");
  m.attr("bitwise_left_shift") = m.attr("left_shift");
  m.attr("bitwise_right_shift") = m.attr("right_shift");
  m.attr("cumulative_prod") = m.attr("cumprod");
  m.attr("cumulative_sum") = m.attr("cumsum");
  m.attr("empty") = m.attr("zeros");
  m.attr("empty_like") = m.attr("zeros_like");
  m.attr("matrix_transpose") = m.attr("transpose");
  m.attr("pow") = m.attr("power");
}

}  // namespace tessera::python
