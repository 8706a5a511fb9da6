// Quantization ops of tessera.core with MLX's signatures: quantize, dequantize, quantized_matmul
// in MLX's modes (affine, mxfp4, mxfp8, nvfp4), to_fp8 / from_fp8.
#include <nanobind/stl/optional.h>

#include "ops_common.h"
#include "tessera/ops/quantized.h"

namespace tessera::python {

void init_ops_quantized(nb::module_& m) {
  m.def(
      "quantize",
      [](const array& w, std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, const std::optional<array>& global_scale, StreamOrDevice s) {
        auto out = quantize(w, group_size, bits, mode, global_scale, s);
        return out.size() == 3 ? nb::make_tuple(out[0], out[1], out[2])
                               : nb::make_tuple(out[0], out[1]);
      },
      nb::arg(), "group_size"_a = nb::none(), "bits"_a = nb::none(), "mode"_a = "affine",
      nb::kw_only(), "global_scale"_a = nb::none(), "stream"_a = nb::none(),
      "Quantize a matrix along its last axis in groups, packed into uint32.\n\n"
      "``'affine'`` stores ``q = round((w - bias) / scale)`` in ``bits`` bits per element;\n"
      "``'mxfp4'`` / ``'mxfp8'`` store fp4 (e2m1) / fp8 (e4m3) elements in groups of 32 with a\n"
      "power-of-two (e8m0) scale; ``'nvfp4'`` stores fp4 elements in groups of 16 with an fp8\n"
      "(e4m3) scale, optionally relative to ``global_scale``.\n\n"
      "Args:\n"
      "    w (array): Matrix to quantize (2 or more dims, real floating).\n"
      "    group_size (int, optional): affine: 32, 64 or 128 (default ``64``); the fp modes\n"
      "        take only theirs (32, or 16 for ``'nvfp4'``).\n"
      "    bits (int, optional): affine: 2, 3, 4, 5, 6 or 8 (default ``4``); the fp modes take\n"
      "        only theirs (4, or 8 for ``'mxfp8'``).\n"
      "    mode (str, optional): ``'affine'``, ``'mxfp4'``, ``'mxfp8'`` or ``'nvfp4'``.\n"
      "        Default: ``'affine'``.\n"
      "    global_scale (array, optional): A float32 scalar (``'nvfp4'`` only).\n\n"
      "Returns:\n"
      "    tuple(array, ...): The packed matrix, the scales and (affine only) the biases.\n");
  m.def(
      "dequantize",
      [](const array& w, const array& scales, const std::optional<array>& biases,
         std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
         const std::optional<array>& global_scale, std::optional<Dtype> dtype, StreamOrDevice s) {
        return dequantize(w, scales, biases, group_size, bits, mode, global_scale, dtype, s);
      },
      nb::arg(), "scales"_a, "biases"_a = nb::none(), "group_size"_a = nb::none(),
      "bits"_a = nb::none(), "mode"_a = "affine", "global_scale"_a = nb::none(),
      "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Dequantize a matrix quantized by :func:`quantize`.\n\n"
      "Args:\n"
      "    w (array): The packed matrix (uint32).\n"
      "    scales (array): The scales.\n"
      "    biases (array, optional): The biases (``'affine'`` only).\n"
      "    group_size (int, optional): Default: the mode's.\n"
      "    bits (int, optional): Default: the mode's.\n"
      "    mode (str, optional): ``'affine'``, ``'mxfp4'``, ``'mxfp8'`` or ``'nvfp4'``.\n"
      "    global_scale (array, optional): The scalar given to :func:`quantize` (``'nvfp4'``).\n"
      "    dtype (Dtype, optional): Output dtype (default: the scales' for affine, else\n"
      "        bfloat16).\n\n"
      "Returns:\n"
      "    array: The dequantized matrix.\n");
  m.def(
      "quantized_matmul",
      [](const array& x, const array& w, const array& scales, const std::optional<array>& biases,
         bool transpose, std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, StreamOrDevice s) {
        return quantized_matmul(x, w, scales, biases, transpose, group_size, bits, mode, s);
      },
      nb::arg(), nb::arg(), "scales"_a, "biases"_a = nb::none(), "transpose"_a = true,
      "group_size"_a = nb::none(), "bits"_a = nb::none(), "mode"_a = "affine", nb::kw_only(),
      "stream"_a = nb::none(),
      "Multiply ``x`` by a quantized matrix without dequantizing it.\n\n"
      "Args:\n"
      "    x (array): Input (..., K).\n"
      "    w (array): The packed matrix.\n"
      "    scales (array): The scales.\n"
      "    biases (array, optional): The biases (``'affine'`` only).\n"
      "    transpose (bool, optional): ``x @ w.T`` (else ``x @ w``). Default: ``True``.\n"
      "    group_size (int, optional): Default: the mode's.\n"
      "    bits (int, optional): Default: the mode's.\n"
      "    mode (str, optional): ``'affine'``, ``'mxfp4'``, ``'mxfp8'`` or ``'nvfp4'``.\n\n"
      "Returns:\n"
      "    array: The product.\n");
  m.def(
      "gather_qmm",
      [](const array& x, const array& w, const array& scales, const std::optional<array>& biases,
         const std::optional<array>& lhs_indices, const std::optional<array>& rhs_indices,
         bool transpose, std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, const std::optional<array>& global_scale, bool sorted_indices,
         StreamOrDevice s) {
        return gather_qmm(x, w, scales, biases, lhs_indices, rhs_indices, transpose, group_size,
                          bits, mode, global_scale, sorted_indices, s);
      },
      nb::arg(), nb::arg(), "scales"_a, "biases"_a = nb::none(), "lhs_indices"_a = nb::none(),
      "rhs_indices"_a = nb::none(), "transpose"_a = true, "group_size"_a = nb::none(),
      "bits"_a = nb::none(), "mode"_a = "affine", "global_scale"_a = nb::none(), nb::kw_only(),
      "sorted_indices"_a = false,
      "stream"_a = nb::none(),
      "Quantized matrix multiplication with matrix-level gather (the quantized\n"
      ":func:`gather_mm`).\n\n"
      "``lhs_indices`` and ``rhs_indices`` hold flat indices into the batch dimensions (all\n"
      "but the last two) of ``x`` and ``w``; they broadcast together, and each position\n"
      "multiplies the chosen matrices as :func:`quantized_matmul` does.\n\n"
      "Args:\n"
      "    x (array): Input (..., M, K).\n"
      "    w (array): The packed matrices.\n"
      "    scales (array): The scales (w's batch dimensions).\n"
      "    biases (array, optional): The biases (``'affine'`` only).\n"
      "    lhs_indices (array, optional): Integer indices into x's matrices.\n"
      "    rhs_indices (array, optional): Integer indices into w's matrices.\n"
      "    transpose (bool, optional): ``x @ w.T`` (else ``x @ w``). Default: ``True``.\n"
      "    group_size (int, optional): Default: the mode's.\n"
      "    bits (int, optional): Default: the mode's.\n"
      "    mode (str, optional): ``'affine'``, ``'mxfp4'``, ``'mxfp8'`` or ``'nvfp4'``.\n"
      "    global_scale (array, optional): nvfp4's global scale (see :func:`quantize`).\n"
      "    sorted_indices (bool, optional): ``rhs_indices`` is sorted (a hint; the result\n"
      "        does not depend on it). Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The products, shaped broadcast(lhs_indices, rhs_indices) + (M, N).\n");
  m.def(
      "qqmm",
      [](const array& x, const array& w, const std::optional<array>& scales,
         std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
         const std::optional<array>& global_scale_x, const std::optional<array>& global_scale_w,
         StreamOrDevice s) {
        return qqmm(x, w, scales, group_size, bits, mode, global_scale_x, global_scale_w, s);
      },
      nb::arg(), nb::arg(), "scales"_a = nb::none(), "group_size"_a = nb::none(),
      "bits"_a = nb::none(), "mode"_a = "nvfp4", "global_scale_x"_a = nb::none(),
      "global_scale_w"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Matrix multiplication with both operands quantized: ``x @ w.T`` where ``x`` is\n"
      "quantized in ``mode`` and ``w`` is packed already (uint32, with ``scales``) or\n"
      "quantized here.\n\n"
      "Args:\n"
      "    x (array): Input (..., K), float32 / float16 / bfloat16.\n"
      "    w (array): Packed weights with ``scales``, or floats to quantize.\n"
      "    scales (array, optional): The scales of a packed ``w``.\n"
      "    group_size (int, optional): Default: the mode's.\n"
      "    bits (int, optional): Default: the mode's.\n"
      "    mode (str, optional): ``'nvfp4'``, ``'mxfp8'`` or ``'mxfp4'``. Default: ``'nvfp4'``.\n"
      "    global_scale_x (array, optional): nvfp4's global scale of ``x``.\n"
      "    global_scale_w (array, optional): nvfp4's global scale of ``w`` (both or neither).\n\n"
      "Returns:\n"
      "    array: The product, in x's dtype.\n");
  m.def(
      "gather_qqmm",
      [](const array& x, const array& w, const std::optional<array>& scales,
         const std::optional<array>& lhs_indices, const std::optional<array>& rhs_indices,
         std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
         const std::optional<array>& global_scale_x, const std::optional<array>& global_scale_w,
         bool sorted_indices, StreamOrDevice s) {
        return gather_qqmm(x, w, scales, lhs_indices, rhs_indices, group_size, bits, mode,
                           global_scale_x, global_scale_w, sorted_indices, s);
      },
      nb::arg(), nb::arg(), "scales"_a = nb::none(), "lhs_indices"_a = nb::none(),
      "rhs_indices"_a = nb::none(), "group_size"_a = nb::none(), "bits"_a = nb::none(),
      "mode"_a = "nvfp4", "global_scale_x"_a = nb::none(), "global_scale_w"_a = nb::none(),
      nb::kw_only(), "sorted_indices"_a = false, "stream"_a = nb::none(),
      ":func:`qqmm` with matrix-level gather, as :func:`gather_qmm` gathers.\n\n"
      "Args:\n"
      "    x (array): Input (..., M, K).\n"
      "    w (array): Packed weights with ``scales``, or floats to quantize.\n"
      "    scales (array, optional): The scales of a packed ``w``.\n"
      "    lhs_indices (array, optional): Integer indices into x's matrices.\n"
      "    rhs_indices (array, optional): Integer indices into w's matrices.\n"
      "    group_size (int, optional): Default: the mode's.\n"
      "    bits (int, optional): Default: the mode's.\n"
      "    mode (str, optional): Default: ``'nvfp4'``.\n"
      "    global_scale_x (array, optional): nvfp4's global scale of ``x``.\n"
      "    global_scale_w (array, optional): nvfp4's global scale of ``w``.\n"
      "    sorted_indices (bool, optional): A hint. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The products.\n");
  m.def("to_fp8", &to_fp8, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        "Convert to fp8 e4m3 bytes (uint8), rounding to nearest even and saturating at 448.");
  m.def("from_fp8", &from_fp8, nb::arg(), "dtype"_a = bfloat16, nb::kw_only(),
        "stream"_a = nb::none(), "Convert fp8 e4m3 bytes (uint8) to a floating dtype.");
}

}  // namespace tessera::python
