// Fused-style neural-network kernels with MLX's mlx.core.fast signatures: rms_norm, layer_norm,
// rope, scaled_dot_product_attention. On the CPU they are composites of other ops (so their
// derivatives come from those ops); the math follows MLX's reference fallbacks exactly.
// Implemented in src/ops/fast.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera::fast {

// x * rsqrt(mean(x^2, -1) + eps) (computed in float32), cast to the output dtype, times weight.
// weight: 1-D with x.shape(-1) elements. Output dtype: promote(x, weight), which must be real
// floating.
array rms_norm(const array& x, const std::optional<array>& weight, float eps,
               StreamOrDevice s = {});

// (x - mean) * rsqrt(var + eps) over the last axis (in float32), then * weight + bias.
array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps, StreamOrDevice s = {});

// Rotary position embedding of the first `dims` features of x (at least 3-D: (B, ..., T, D)),
// position p = (offset + t) * scale, frequency base^(-2i/dims) or 1/freqs[i]. `traditional`
// rotates adjacent pairs (x[2i], x[2i+1]); otherwise the halves (x[i], x[i + dims/2]). Exactly one
// of base and freqs must be given. offset: an int, or an integer array of 1 or x.shape(0) values.
array rope(const array& x, int dims, bool traditional, std::optional<float> base, float scale,
           int offset, const std::optional<array>& freqs = std::nullopt, StreamOrDevice s = {});
array rope(const array& x, int dims, bool traditional, std::optional<float> base, float scale,
           const array& offset, const std::optional<array>& freqs = std::nullopt,
           StreamOrDevice s = {});

// softmax(scale * q @ k^T + mask) @ v over rank-4 (B, heads, L, D) inputs; k/v may have fewer
// heads (grouped-query attention: n_q_heads a multiple of n_kv_heads). mask_mode: "" (none, or
// the array in mask_arr), "causal" (query i sees keys j <= i + L_kv - L_q) or "array". A bool
// mask selects (false -> excluded); any other mask is added to the scores. sinks: one extra
// logit per query head that takes part in the softmax but has no value.
array scaled_dot_product_attention(const array& queries, const array& keys, const array& values,
                                   const float scale, const std::string& mask_mode = "",
                                   std::optional<array> mask_arr = {},
                                   const std::optional<array>& sinks = {},
                                   bool force_fused = false, StreamOrDevice s = {});

// Cross entropy with class indices: logsumexp(logits, -1) - logits[..., target], float32, of the
// shape of targets (logits' shape without its last axis). Targets in [-C, C) (negative ones count
// from the end); others give NaN. One pass per row, no (N, C) temporary; its gradient
// (softmax - one-hot) is one kernel too.
array cross_entropy(const array& logits, const array& targets, StreamOrDevice s = {});

}  // namespace tessera::fast
