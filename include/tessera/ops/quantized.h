// Quantization (see tessera/ops.h), MLX's "affine" format bit for bit: each group of
// `group_size` consecutive elements along the last dim stores q = round((w - bias) / scale) in
// `bits` bits (2, 3, 4, 5, 6 or 8), packed least-significant bit first into a little-endian bit
// stream of uint32 words, so w ~ scale * q + bias. Group sizes 32, 64, 128.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// {wq (..., K * bits / 32) uint32, scales (..., K / group_size), biases (same)}: scales and biases
// in w's dtype. Defaults: group_size 64, bits 4. Only mode "affine" exists yet (MLX's mxfp4,
// mxfp8 and nvfp4 raise, naming the mode).
std::vector<array> quantize(const array& w, std::optional<int> group_size = std::nullopt,
                            std::optional<int> bits = std::nullopt,
                            const std::string& mode = "affine", StreamOrDevice s = {});
// scale * q + bias, in the scales' dtype (or `dtype`).
array dequantize(const array& w, const array& scales, const std::optional<array>& biases,
                 std::optional<int> group_size = std::nullopt,
                 std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                 std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});
// x @ dequantize(w).T (transpose) or x @ dequantize(w), without materialising the dequantized
// matrix when transposed.
array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases, bool transpose = true,
                       std::optional<int> group_size = std::nullopt,
                       std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                       StreamOrDevice s = {});

// x as fp8 e4m3 bytes (uint8): round to nearest even, saturating at +-448; NaN stays NaN (MLX
// saturates it to 448).
array to_fp8(const array& x, StreamOrDevice s = {});
// fp8 e4m3 bytes (uint8) back to a floating dtype (default bfloat16, as MLX).
array from_fp8(const array& x, Dtype dtype = bfloat16, StreamOrDevice s = {});

}  // namespace tessera
