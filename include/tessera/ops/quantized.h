// Quantization (see tessera/ops.h) in MLX's formats, bit for bit. Every mode packs groups of
// `group_size` consecutive elements along the last dim, least-significant bit first, into a
// little-endian bit stream of uint32 words.
// - "affine": q = round((w - bias) / scale) in `bits` bits (2, 3, 4, 5, 6 or 8), group sizes 32,
//   64, 128; w ~ scale * q + bias, scales and biases in w's dtype.
// - "mxfp4" / "mxfp8" (OCP microscaling): groups of 32, elements fp4 e2m1 / fp8 e4m3, one uint8
//   e8m0 scale (a power of two, 2^(byte - 127)) per group; no biases.
// - "nvfp4": groups of 16, fp4 e2m1 elements, one fp8 e4m3 scale per group, optionally under a
//   float32 scalar `global_scale` (the scales then encode scale * 448 * 6 / global_scale).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// affine: {wq (..., K * bits / 32) uint32, scales (..., K / group_size), biases (same)}; the fp
// modes: {wq, scales (uint8)}. Defaults per mode (as MLX): affine 64 / 4, mxfp4 32 / 4, mxfp8
// 32 / 8, nvfp4 16 / 4; the fp modes accept only their own. global_scale: nvfp4 only.
std::vector<array> quantize(const array& w, std::optional<int> group_size = std::nullopt,
                            std::optional<int> bits = std::nullopt,
                            const std::string& mode = "affine",
                            const std::optional<array>& global_scale = std::nullopt,
                            StreamOrDevice s = {});
// The values quantize encoded, in `dtype` (default: the scales' and biases' for affine, bfloat16
// for the fp modes, as MLX). biases: affine only; global_scale: nvfp4 only (MLX returns float32
// there whatever `dtype` says; Tessera returns `dtype`).
array dequantize(const array& w, const array& scales,
                 const std::optional<array>& biases = std::nullopt,
                 std::optional<int> group_size = std::nullopt,
                 std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                 const std::optional<array>& global_scale = std::nullopt,
                 std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});
// x @ dequantize(w).T (transpose) or x @ dequantize(w), without materialising the dequantized
// matrix when transposed. Any mode (biases: affine only); the fp modes compute in x's dtype.
array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases, bool transpose = true,
                       std::optional<int> group_size = std::nullopt,
                       std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                       StreamOrDevice s = {});

// quantized_matmul of x's matrices at lhs_indices with w's at rhs_indices (MLX's gather_qmm, the
// mixture-of-experts product): x (..., M, K), w (..., N, K packed) (transpose) or (..., K, N);
// the indices (integers, broadcast together; default: every matrix in order) number the
// flattened batches. Output: broadcast(lhs, rhs).shape + (M, N). An index past its batch raises.
// sorted_indices is MLX's hint that rhs_indices is sorted; the result does not depend on it.
array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases = std::nullopt,
                 const std::optional<array>& lhs_indices = std::nullopt,
                 const std::optional<array>& rhs_indices = std::nullopt, bool transpose = true,
                 std::optional<int> group_size = std::nullopt,
                 std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                 bool sorted_indices = false, StreamOrDevice s = {});
// MLX 0.32's form with nvfp4's global scale (none: the form above).
array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases, const std::optional<array>& lhs_indices,
                 const std::optional<array>& rhs_indices, bool transpose,
                 std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                 const std::optional<array>& global_scale, bool sorted_indices = false,
                 StreamOrDevice s = {});

// Both operands quantized (MLX's qqmm): x is quantized in `mode` (one of the fp modes; with
// global_scale_x for nvfp4) and multiplied, as its dequantized values, by w^T, which is either
// packed already (uint32, with scales_w) or quantized here (with global_scale_w). nvfp4 takes both
// global scales or neither. x (..., K) of float32 / float16 / bfloat16; out in x's dtype.
array qqmm(const array& x, const array& w, const std::optional<array>& scales_w = std::nullopt,
           std::optional<int> group_size = std::nullopt, std::optional<int> bits = std::nullopt,
           const std::string& mode = "nvfp4",
           const std::optional<array>& global_scale_x = std::nullopt,
           const std::optional<array>& global_scale_w = std::nullopt, StreamOrDevice s = {});
// qqmm's operands gathered as gather_qmm gathers them.
array gather_qqmm(const array& x, const array& w,
                  const std::optional<array>& scales_w = std::nullopt,
                  const std::optional<array>& lhs_indices = std::nullopt,
                  const std::optional<array>& rhs_indices = std::nullopt,
                  std::optional<int> group_size = std::nullopt,
                  std::optional<int> bits = std::nullopt, const std::string& mode = "nvfp4",
                  const std::optional<array>& global_scale_x = std::nullopt,
                  const std::optional<array>& global_scale_w = std::nullopt,
                  bool sorted_indices = false, StreamOrDevice s = {});

// x as fp8 e4m3 bytes (uint8): round to nearest even, saturating at +-448; NaN stays NaN (MLX
// saturates it to 448).
array to_fp8(const array& x, StreamOrDevice s = {});
// fp8 e4m3 bytes (uint8) back to a floating dtype (default bfloat16, as MLX).
array from_fp8(const array& x, Dtype dtype = bfloat16, StreamOrDevice s = {});

}  // namespace tessera
