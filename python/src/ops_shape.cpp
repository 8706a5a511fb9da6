// Shape ops of tessera.core with MLX's signatures: reshape, flatten, squeeze, expand_dims, flip,
// transpose, broadcast, concatenate, stack, split, repeat, tile, pad, roll, atleast_*.
#include "ops_common.h"

namespace tessera::python {

using namespace ops_detail;

void init_ops_shape(nb::module_& m) {
  // ---------------------------------------------------------------- shape
  m.def(
      "diff", [](const array& a, int n, int axis, StreamOrDevice s) { return diff(a, n, axis, s); },
      nb::arg(), "n"_a = 1, "axis"_a = -1, nb::kw_only(), "stream"_a = nb::none(),
      "The n-th discrete difference along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    n (int, optional): How many times to take the difference. Default: ``1``.\n"
      "    axis (int, optional): The axis. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The differences.\n");
  m.def(
      "reshape",
      [](const array& a, const ShapeLike& shape, StreamOrDevice s) {
        return reshape(a, to_shape(shape, "reshape"), s);
      },
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
      "depends",
      [](const nb::object& inputs, const nb::object& deps) -> nb::object {
        auto arrays = [](const nb::object& o) {
          return nb::isinstance<array>(o) ? std::vector<array>{nb::cast<array>(o)}
                                          : nb::cast<std::vector<array>>(o);
        };
        auto out = depends(arrays(inputs), arrays(deps));
        return nb::isinstance<array>(inputs) ? nb::cast(out[0]) : nb::cast(out);
      },
      nb::arg(), nb::arg(),
      nb::sig("def depends(inputs: array | Sequence[array], dependencies: array | "
              "Sequence[array])"),
      "Insert dependencies between arrays in the graph: the outputs equal ``inputs``,\n"
      "and evaluating them evaluates ``dependencies`` first.\n\n"
      "Args:\n"
      "    inputs (array or Sequence[array]): The input array or arrays.\n"
      "    dependencies (array or Sequence[array]): The arrays to depend on.\n\n"
      "Returns:\n"
      "    array or list(array): The outputs, which depend on ``dependencies``.\n");
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
      [](const ArrayLike& a, const ShapeLike& shape, StreamOrDevice s) {
        return broadcast_to(to_array(a), to_shape(shape, "broadcast_to"), s);
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

}

}  // namespace tessera::python
