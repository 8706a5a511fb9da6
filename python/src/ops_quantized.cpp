// Quantization ops of tessera.core with MLX's signatures: quantize, dequantize, quantized_matmul
// (the affine mode; MLX's floating-point modes raise, naming the mode).
#include <nanobind/stl/optional.h>

#include "ops_common.h"
#include "tessera/ops/quantized.h"

namespace tessera::python {

namespace {

void no_global_scale(const char* op, const std::optional<array>& global_scale) {
  if (global_scale) {
    throw std::invalid_argument(std::string("[") + op +
                                "] global_scale belongs to the 'nvfp4' mode, which Tessera does "
                                "not support yet");
  }
}

}  // namespace

void init_ops_quantized(nb::module_& m) {
  m.def(
      "quantize",
      [](const array& w, std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, const std::optional<array>& global_scale, StreamOrDevice s) {
        no_global_scale("quantize", global_scale);
        auto out = quantize(w, group_size, bits, mode, s);
        return nb::make_tuple(out[0], out[1], out[2]);
      },
      nb::arg(), "group_size"_a = nb::none(), "bits"_a = nb::none(), "mode"_a = "affine",
      nb::kw_only(), "global_scale"_a = nb::none(), "stream"_a = nb::none(),
      "Quantize a matrix along its last axis (MLX's affine format).\n\n"
      "Each group of ``group_size`` consecutive elements stores\n"
      "``q = round((w - bias) / scale)`` in ``bits`` bits, packed into uint32.\n\n"
      "Args:\n"
      "    w (array): Matrix to quantize (2 or more dims, real floating).\n"
      "    group_size (int, optional): 32, 64 or 128. Default: ``64``.\n"
      "    bits (int, optional): 2, 3, 4, 5, 6 or 8. Default: ``4``.\n"
      "    mode (str, optional): ``'affine'``. Default: ``'affine'``.\n\n"
      "Returns:\n"
      "    tuple(array, array, array): The packed matrix, the scales and the biases.\n");
  m.def(
      "dequantize",
      [](const array& w, const array& scales, const std::optional<array>& biases,
         std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
         const std::optional<array>& global_scale, std::optional<Dtype> dtype, StreamOrDevice s) {
        no_global_scale("dequantize", global_scale);
        return dequantize(w, scales, biases, group_size, bits, mode, dtype, s);
      },
      nb::arg(), "scales"_a, "biases"_a = nb::none(), "group_size"_a = nb::none(),
      "bits"_a = nb::none(), "mode"_a = "affine", "global_scale"_a = nb::none(),
      "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Dequantize a matrix quantized by :func:`quantize`: ``scale * q + bias``.\n\n"
      "Args:\n"
      "    w (array): The packed matrix (uint32).\n"
      "    scales (array): The scales.\n"
      "    biases (array): The biases.\n"
      "    group_size (int, optional): Default: ``64``.\n"
      "    bits (int, optional): Default: ``4``.\n"
      "    mode (str, optional): ``'affine'``.\n"
      "    dtype (Dtype, optional): Output dtype (default: the scales').\n\n"
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
      "    biases (array): The biases.\n"
      "    transpose (bool, optional): ``x @ w.T`` (else ``x @ w``). Default: ``True``.\n"
      "    group_size (int, optional): Default: ``64``.\n"
      "    bits (int, optional): Default: ``4``.\n"
      "    mode (str, optional): ``'affine'``.\n\n"
      "Returns:\n"
      "    array: The product.\n");
  m.def("to_fp8", &to_fp8, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        "Convert to fp8 e4m3 bytes (uint8), rounding to nearest even and saturating at 448.");
  m.def("from_fp8", &from_fp8, nb::arg(), "dtype"_a = bfloat16, nb::kw_only(),
        "stream"_a = nb::none(), "Convert fp8 e4m3 bytes (uint8) to a floating dtype.");
}

}  // namespace tessera::python
