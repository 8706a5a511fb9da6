// Convolutions and contractions of tessera.core with MLX's signatures: conv1d/2d/3d,
// conv_transpose1d/2d/3d, conv_general, convolve, einsum, einsum_path. Per-dim arguments take an
// int (every spatial dim) or a tuple.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "ops_common.h"
#include "tessera/einsum.h"
#include "tessera/ops/conv.h"

namespace tessera::python {

namespace {

using Pair = std::variant<int, std::pair<int, int>>;
using Triple = std::variant<int, std::tuple<int, int, int>>;
using PerDim = std::variant<int, std::vector<int>>;

std::pair<int, int> pair_of(const Pair& v) {
  if (auto* n = std::get_if<int>(&v)) return {*n, *n};
  return std::get<std::pair<int, int>>(v);
}
std::tuple<int, int, int> triple_of(const Triple& v) {
  if (auto* n = std::get_if<int>(&v)) return {*n, *n, *n};
  return std::get<std::tuple<int, int, int>>(v);
}
std::vector<int> vec_of(const PerDim& v) {
  if (auto* n = std::get_if<int>(&v)) return {*n};
  return std::get<std::vector<int>>(v);
}

#define CONV_DOC(dims, shape_in, shape_w)                                                   \
  "Apply a " dims " convolution over an input with several channels.\n\n"                   \
  "Args:\n"                                                                                 \
  "    input (array): Input of shape ``" shape_in "``.\n"                                   \
  "    weight (array): Weight of shape ``" shape_w "``.\n"                                  \
  "    stride (int or tuple(int), optional): Kernel stride. Default: ``1``.\n"              \
  "    padding (int or tuple(int), optional): Zero padding on both sides. Default: ``0``.\n" \
  "    dilation (int or tuple(int), optional): Kernel dilation. Default: ``1``.\n"          \
  "    groups (int, optional): Input feature groups. Default: ``1``.\n\n"                   \
  "Returns:\n"                                                                              \
  "    array: The convolved array.\n"

#define CONV_T_DOC(dims, shape_in, shape_w)                                                  \
  "Apply a " dims " transposed convolution over an input with several channels.\n\n"         \
  "Args:\n"                                                                                  \
  "    input (array): Input of shape ``" shape_in "``.\n"                                    \
  "    weight (array): Weight of shape ``" shape_w "``.\n"                                   \
  "    stride (int or tuple(int), optional): Kernel stride. Default: ``1``.\n"               \
  "    padding (int or tuple(int), optional): Padding removed from both sides. Default: ``0``.\n" \
  "    dilation (int or tuple(int), optional): Kernel dilation. Default: ``1``.\n"           \
  "    output_padding (int or tuple(int), optional): Extra size at the high end of each\n"   \
  "      output dim. Default: ``0``.\n"                                                      \
  "    groups (int, optional): Input feature groups. Default: ``1``.\n\n"                    \
  "Returns:\n"                                                                               \
  "    array: The convolved array.\n"

}  // namespace

void init_ops_conv(nb::module_& m) {
  m.def("conv1d", nb::overload_cast<const array&, const array&, int, int, int, int, StreamOrDevice>(&conv1d),
        nb::arg(), nb::arg(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1,
        nb::kw_only(), "stream"_a = nb::none(), CONV_DOC("1D", "(N, L, C_in)", "(C_out, K, C_in / groups)"));
  m.def(
      "conv2d",
      [](const array& x, const array& w, const Pair& stride, const Pair& padding,
         const Pair& dilation, int groups, StreamOrDevice s) {
        return conv2d(x, w, pair_of(stride), pair_of(padding), pair_of(dilation), groups, s);
      },
      nb::arg(), nb::arg(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1,
      nb::kw_only(), "stream"_a = nb::none(),
      CONV_DOC("2D", "(N, H, W, C_in)", "(C_out, KH, KW, C_in / groups)"));
  m.def(
      "conv3d",
      [](const array& x, const array& w, const Triple& stride, const Triple& padding,
         const Triple& dilation, int groups, StreamOrDevice s) {
        return conv3d(x, w, triple_of(stride), triple_of(padding), triple_of(dilation), groups, s);
      },
      nb::arg(), nb::arg(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1,
      nb::kw_only(), "stream"_a = nb::none(),
      CONV_DOC("3D", "(N, D, H, W, C_in)", "(C_out, KD, KH, KW, C_in / groups)"));
  m.def("conv_transpose1d",
        nb::overload_cast<const array&, const array&, int, int, int, int, int, StreamOrDevice>(
            &conv_transpose1d),
        nb::arg(), nb::arg(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
        "output_padding"_a = 0, "groups"_a = 1, nb::kw_only(), "stream"_a = nb::none(),
        CONV_T_DOC("1D", "(N, L, C_in)", "(C_out, K, C_in / groups)"));
  m.def(
      "conv_transpose2d",
      [](const array& x, const array& w, const Pair& stride, const Pair& padding,
         const Pair& dilation, const Pair& output_padding, int groups, StreamOrDevice s) {
        return conv_transpose2d(x, w, pair_of(stride), pair_of(padding), pair_of(dilation),
                                pair_of(output_padding), groups, s);
      },
      nb::arg(), nb::arg(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "output_padding"_a = 0, "groups"_a = 1, nb::kw_only(), "stream"_a = nb::none(),
      CONV_T_DOC("2D", "(N, H, W, C_in)", "(C_out, KH, KW, C_in / groups)"));
  m.def(
      "conv_transpose3d",
      [](const array& x, const array& w, const Triple& stride, const Triple& padding,
         const Triple& dilation, const Triple& output_padding, int groups, StreamOrDevice s) {
        return conv_transpose3d(x, w, triple_of(stride), triple_of(padding), triple_of(dilation),
                                triple_of(output_padding), groups, s);
      },
      nb::arg(), nb::arg(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "output_padding"_a = 0, "groups"_a = 1, nb::kw_only(), "stream"_a = nb::none(),
      CONV_T_DOC("3D", "(N, D, H, W, C_in)", "(C_out, KD, KH, KW, C_in / groups)"));
  m.def(
      "conv_general",
      [](const array& x, const array& w, const PerDim& stride,
         const std::variant<int, std::vector<int>, std::pair<std::vector<int>, std::vector<int>>>&
             padding,
         const PerDim& kernel_dilation, const PerDim& input_dilation, int groups, bool flip,
         StreamOrDevice s) {
        std::vector<int> lo, hi;
        if (auto* n = std::get_if<int>(&padding)) {
          lo = hi = {*n};
        } else if (auto* v = std::get_if<std::vector<int>>(&padding)) {
          lo = hi = *v;
        } else {
          std::tie(lo, hi) = std::get<std::pair<std::vector<int>, std::vector<int>>>(padding);
        }
        return conv_general(x, w, vec_of(stride), lo, hi, vec_of(kernel_dilation),
                            vec_of(input_dilation), groups, flip, s);
      },
      nb::arg(), nb::arg(), "stride"_a = 1, "padding"_a = 0, "kernel_dilation"_a = 1,
      "input_dilation"_a = 1, "groups"_a = 1, "flip"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      nb::sig("def conv_general(input: array, weight: array, /, stride: int | Sequence[int] = 1, "
              "padding: int | Sequence[int] | tuple[Sequence[int], Sequence[int]] = 0, "
              "kernel_dilation: int | Sequence[int] = 1, input_dilation: int | Sequence[int] = 1, "
              "groups: int = 1, flip: bool = False, *, stream: StreamOrDevice = None) "
              "-> array"),
      "General convolution over an input with several channels.\n\n"
      "Args:\n"
      "    input (array): Input of shape ``(N, ..., C_in)``.\n"
      "    weight (array): Weight of shape ``(C_out, ..., C_in / groups)``.\n"
      "    stride (int or list(int), optional): Kernel strides. Default: ``1``.\n"
      "    padding (int, list(int) or tuple(list(int), list(int)), optional): Zero padding\n"
      "      (both sides, or low and high); negative values crop. Default: ``0``.\n"
      "    kernel_dilation (int or list(int), optional): Kernel dilation. Default: ``1``.\n"
      "    input_dilation (int or list(int), optional): Input dilation. Default: ``1``.\n"
      "    groups (int, optional): Input feature groups. Default: ``1``.\n"
      "    flip (bool, optional): Flip the kernel (a convolution rather than a\n"
      "      cross-correlation). Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The convolved array.\n");
  m.def("convolve", &convolve, nb::arg(), nb::arg(), "mode"_a = "full", nb::kw_only(),
        "stream"_a = nb::none(),
        "The discrete convolution of 1D arrays (the shorter one, flipped, is the kernel).\n\n"
        "Args:\n"
        "    a (array): 1D input.\n"
        "    v (array): 1D input.\n"
        "    mode (str, optional): ``'full'``, ``'same'`` or ``'valid'``. Default: ``'full'``.\n\n"
        "Returns:\n"
        "    array: The convolution.\n");
  m.def(
      "einsum",
      [](const std::string& subscripts, const nb::args& operands, StreamOrDevice s) {
        std::vector<array> arrays;
        for (auto o : operands) arrays.push_back(to_array(o));
        return einsum(subscripts, arrays, s);
      },
      "subscripts"_a, "operands"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Einstein summation over the operands (NumPy's subscripts).\n\n"
      "Args:\n"
      "    subscripts (str): The subscripts, e.g. ``'ij,jk->ik'``.\n"
      "    *operands (array): The operands.\n\n"
      "Returns:\n"
      "    array: The contraction.\n");
  m.def(
      "einsum_path",
      [](const std::string& subscripts, const nb::args& operands) {
        std::vector<array> arrays;
        for (auto o : operands) arrays.push_back(to_array(o));
        auto [path, text] = einsum_path(subscripts, arrays);
        nb::list steps;
        for (const auto& step : path) {
          nb::list t;
          for (int i : step) t.append(i);
          steps.append(nb::tuple(t));
        }
        return nb::make_tuple(steps, text);
      },
      "subscripts"_a, "operands"_a,
      "The contraction order einsum uses (NumPy's greedy order) and a summary.\n\n"
      "Returns:\n"
      "    tuple(list(tuple(int)), str): The path and its description.\n");
}

}  // namespace tessera::python
