// Primitives of tessera::fast (front ends in fast.cpp, kernels in backend/cpu/fast.cpp). Each
// computes in one pass what its composite in fast.cpp computes op by op, with the composite's
// roundings (so the results agree bit for bit, or to the order of a sum), and takes its
// derivatives and batching from that composite.
#pragma once

#include <optional>

#include "tessera/primitive.h"

namespace tessera {

namespace fast {
// rope as ops: x (B, N, T, D), offset int32 (1 or B values), freqs float32 (dims / 2) or none.
array rope_composite(const array& x, const array& offset, const std::optional<array>& freqs,
                     int dims, bool traditional, std::optional<float> base, float scale,
                     StreamOrDevice s);
// rms_norm as ops: float32 x * rsqrt(mean(x^2) + eps) rounded to out_type, times weight.
array rms_norm_composite(const array& x, const std::optional<array>& weight, float eps,
                         Dtype out_type, StreamOrDevice s);
// layer_norm as ops: float32 (x - mean) * rsqrt(var + eps) rounded to out_type, times weight,
// plus bias (both already out_type).
array layer_norm_composite(const array& x, const std::optional<array>& weight,
                           const std::optional<array>& bias, float eps, Dtype out_type,
                           StreamOrDevice s);
// cross_entropy as ops: logsumexp of float32 logits minus the target's logit (targets int32,
// negative ones counting from the end).
array cross_entropy_composite(const array& logits, const array& targets, StreamOrDevice s);
// scaled_dot_product_attention as ops: q (B, Hq, Lq, D), k (B, Hkv, Lk, D), v (B, Hkv, Lk, Dv) of
// one floating dtype; mask (bool or that dtype) broadcast to (B, Hq, Lq, Lk); sinks (Hq) of
// that dtype. The whole score matrix is materialised: the reference of the fused kernel. With
// `stats`, also each query row's softmax statistics (B, Hq, Lq, 2) in stats_type: the largest
// score m (the sink's among them) and the sum of exp(score - m).
array sdpa_composite(const array& q, const array& k, const array& v, float scale, bool causal,
                     const std::optional<array>& mask, const std::optional<array>& sinks,
                     StreamOrDevice s, array* stats = nullptr, Dtype stats_type = float32);
}  // namespace fast

// A primitive whose kernel computes what `composite` computes op by op: its derivatives and
// batching are the composite's, except where a subclass overrides them with better ones.
class ComposedPrimitive : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  TESSERA_DECLARE_TRANSFORMS
  // The kernel's output from ops, on `inputs` (the primitive's own inputs, or the transforms'
  // replacements for them).
  virtual array composite(const std::vector<array>& inputs) const = 0;
};

// RMS normalisation over the last axis: inputs x and, optionally, weight (1-D, the last axis).
class RMSNorm : public ComposedPrimitive {
 public:
  RMSNorm(Stream s, float eps) : ComposedPrimitive(s), eps_(eps) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  array composite(const std::vector<array>& inputs) const override;
  TESSERA_DECLARE_VJP
  const char* name() const override { return "RMSNorm"; }
  TESSERA_STATE(eps_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  float eps_;
};

// The vjp of RMSNorm (layer false) or LayerNorm in one kernel: inputs x, [weight,] [bias,] the
// output's cotangent; outputs dx (x's dtype), then dweight and dbias where there are a weight and
// a bias (their dtype: sums over rows). Its own transforms replay the composite's vjp.
class NormVjp : public Primitive {
 public:
  NormVjp(Stream s, float eps, bool layer, bool has_weight, bool has_bias)
      : Primitive(s), eps_(eps), layer_(layer), has_weight_(has_weight), has_bias_(has_bias) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "NormVjp"; }
  TESSERA_STATE(eps_, layer_, has_weight_, has_bias_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

 private:
  std::vector<array> composite(const std::vector<array>& inputs) const;
  float eps_;
  bool layer_, has_weight_, has_bias_;
};

// Cross entropy of logits (..., C) against int32 class indices (...): float32 (...). Its vjp is
// CrossEntropyGrad.
class CrossEntropy : public ComposedPrimitive {
 public:
  explicit CrossEntropy(Stream s) : ComposedPrimitive(s) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  array composite(const std::vector<array>& inputs) const override;
  TESSERA_DECLARE_VJP
  TESSERA_PRIMITIVE_NAME(CrossEntropy)
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[1].shape()};
  }
};

// The gradient of CrossEntropy with respect to the logits: (softmax(logits) - one_hot(target))
// times the row's cotangent, in the logits' dtype. Inputs logits, targets, cotangent (float32).
class CrossEntropyGrad : public ComposedPrimitive {
 public:
  explicit CrossEntropyGrad(Stream s) : ComposedPrimitive(s) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  // The composite's vjp.
  array composite(const std::vector<array>& inputs) const override;
  TESSERA_PRIMITIVE_NAME(CrossEntropyGrad)
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
};

// Layer normalisation over the last axis: inputs x, then weight when has_weight, then bias when
// has_bias (1-D, the last axis, of the output dtype).
class LayerNorm : public ComposedPrimitive {
 public:
  LayerNorm(Stream s, float eps, bool has_weight, bool has_bias)
      : ComposedPrimitive(s), eps_(eps), has_weight_(has_weight), has_bias_(has_bias) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  array composite(const std::vector<array>& inputs) const override;
  TESSERA_DECLARE_VJP
  const char* name() const override { return "LayerNorm"; }
  TESSERA_STATE(eps_, has_weight_, has_bias_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  float eps_;
  bool has_weight_, has_bias_;
};

// Attention softmax(scale * q k^T + mask) v in one kernel: inputs q, k, v as sdpa_composite
// takes them, then the mask when has_mask, then the sinks when has_sinks. Keys stream through
// in blocks with an online softmax in float32 (float64 for float64), so memory grows with the
// length times the head size, never with the product of the lengths; grouped-query heads share
// each key block. With output_stats (the front end sets it while a gradient is traced; MLX
// outputs the log-sum-exp then), a second output: each query row's softmax statistics, its
// largest score m and the sum l of exp(score - m) ((B, Hq, Lq, 2) in the kernel's float type),
// which the gradient reads instead of recomputing them. (m and l, not m + log l: a row whose
// scores are all at a mask's lowest value would lose its l in the sum.) Its vjp is
// ScaledDotProductAttentionVjp, its batching the kernel on a merged batch axis.
class ScaledDotProductAttention : public Primitive {
 public:
  ScaledDotProductAttention(Stream s, float scale, bool causal, bool has_mask, bool has_sinks,
                            bool output_stats)
      : Primitive(s), scale_(scale), causal_(causal), has_mask_(has_mask),
        has_sinks_(has_sinks), output_stats_(output_stats) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "ScaledDotProductAttention"; }
  TESSERA_STATE(scale_, causal_, has_mask_, has_sinks_, output_stats_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  // The outputs' dtypes for inputs of dtype t.
  std::vector<Dtype> output_types(Dtype t) const;

 private:
  // The outputs as ops (sdpa_composite), on `inputs` or the transforms' replacements for them.
  std::vector<array> composite(const std::vector<array>& inputs) const;
  float scale_;
  bool causal_, has_mask_, has_sinks_, output_stats_;
};

// The gradient of ScaledDotProductAttention with respect to q, k, v and, with has_sinks, the
// sinks: inputs those of the forward, then (has_stats) the forward's softmax statistics, its
// output and the output's cotangent; outputs in that order. The scores are recomputed block by
// block (each row's statistics first where they are not given, then the products), so memory stays
// O(L * d) as in the forward. Its own derivatives and batching are those of the composite's vjp.
class ScaledDotProductAttentionVjp : public Primitive {
 public:
  ScaledDotProductAttentionVjp(Stream s, float scale, bool causal, bool has_mask, bool has_sinks,
                               bool has_stats)
      : Primitive(s), scale_(scale), causal_(causal), has_mask_(has_mask), has_sinks_(has_sinks),
        has_stats_(has_stats) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "ScaledDotProductAttentionVjp"; }
  TESSERA_STATE(scale_, causal_, has_mask_, has_sinks_, has_stats_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

 private:
  // The composite's vjp on `inputs`, as this primitive's own transforms replay it.
  std::vector<array> composite(const std::vector<array>& inputs) const;
  float scale_;
  bool causal_, has_mask_, has_sinks_, has_stats_;
};

// Rotary position embedding of x (B, N, T, D): inputs x, offset (int32, 1 or B values) and,
// without a base, freqs (float32, dims / 2 values).
class RoPE : public ComposedPrimitive {
 public:
  RoPE(Stream s, int dims, bool traditional, std::optional<float> base, float scale)
      : ComposedPrimitive(s), dims_(dims), traditional_(traditional), base_(base), scale_(scale) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  array composite(const std::vector<array>& inputs) const override;
  TESSERA_DECLARE_VJP
  TESSERA_DECLARE_JVP
  const char* name() const override { return "RoPE"; }
  TESSERA_STATE(dims_, traditional_, base_, scale_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  int dims_;
  bool traditional_;
  std::optional<float> base_;
  float scale_;
};

}  // namespace tessera
