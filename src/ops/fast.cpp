// tessera::fast on the CPU: rms_norm, layer_norm, rope and scaled_dot_product_attention as
// primitives (ops/fast.h), each with a composite of ops (the same math as MLX's reference
// fallbacks) whose transforms are theirs; attention's gradient is a kernel of its own.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include "core/transforms_impl.h"
#include "ops/fast.h"
#include "ops/utils.h"
#include "tessera/fast.h"
#include "tessera/linalg.h"
#include "tessera/transforms.h"
#include "tessera/ops.h"

namespace tessera::fast {

namespace {

// Checks an optional 1-D affine parameter (weight or bias) of a norm over x's last axis.
void check_affine(const char* op, const char* what, const std::optional<array>& p, const array& x) {
  if (!p) return;
  if (p->ndim() != 1) {
    throw std::invalid_argument(std::string("[") + op + "] " + what +
                                " must be 1-D; got shape " + detail::shape_str(p->shape()));
  }
  if (p->shape(0) != x.shape(-1)) {
    throw std::invalid_argument(std::string("[") + op + "] " + what + " of shape " +
                                detail::shape_str(p->shape()) +
                                " must match the last dimension of x " +
                                detail::shape_str(x.shape()));
  }
}

void check_at_least_1d(const char* op, const array& x) {
  if (x.ndim() == 0) {
    throw std::invalid_argument(std::string("[") + op +
                                "] x must have at least one dimension; got a 0-d array");
  }
}

void check_real_floating(const char* op, Dtype t) {
  if (!issubdtype(t, floating)) {
    throw std::invalid_argument(std::string("[") + op +
                                "] inputs must be real floating point; got " + dtype_name(t));
  }
}

// The most negative finite value of a floating dtype (numpy's finfo(t).min).
array lowest(Dtype t) {
  double v = t == float16    ? -65504.0
             : t == bfloat16 ? -3.3895313892515355e38
             : t == float32  ? -static_cast<double>(FLT_MAX)
                             : -DBL_MAX;
  return astype(array(v, float64), t);
}

}  // namespace

array rms_norm(const array& x, const std::optional<array>& weight, float eps, StreamOrDevice s) {
  check_at_least_1d("rms_norm", x);
  check_affine("rms_norm", "weight", weight, x);
  Dtype out_type = weight ? promote_types(x.dtype(), weight->dtype()) : x.dtype();
  check_real_floating("rms_norm", out_type);
  std::vector<array> inputs{x};
  if (weight) inputs.push_back(astype(*weight, out_type, s));
  return array(x.shape(), out_type, std::make_shared<RMSNorm>(to_stream(s), eps), inputs);
}

array rms_norm_composite(const array& x, const std::optional<array>& weight, float eps,
                         Dtype out_type, StreamOrDevice s) {
  array xf = astype(x, float32, s);
  array ms = mean(square(xf, s), -1, true, s);
  array y = astype(multiply(xf, rsqrt(add(ms, array(eps, float32), s), s), s), out_type, s);
  return weight ? multiply(y, astype(*weight, out_type, s), s) : y;
}

array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps, StreamOrDevice s) {
  check_at_least_1d("layer_norm", x);
  check_affine("layer_norm", "weight", weight, x);
  check_affine("layer_norm", "bias", bias, x);
  Dtype out_type = x.dtype();
  if (weight) out_type = promote_types(out_type, weight->dtype());
  if (weight && bias) out_type = promote_types(out_type, bias->dtype());
  check_real_floating("layer_norm", out_type);
  // As MLX: without a weight the bias does not take part in the output dtype, but is added.
  std::vector<array> inputs{x};
  if (weight) inputs.push_back(astype(*weight, out_type, s));
  if (bias) inputs.push_back(astype(*bias, out_type, s));
  return array(x.shape(), out_type,
               std::make_shared<LayerNorm>(to_stream(s), eps, weight.has_value(),
                                           bias.has_value()),
               inputs);
}

array layer_norm_composite(const array& x, const std::optional<array>& weight,
                           const std::optional<array>& bias, float eps, Dtype out_type,
                           StreamOrDevice s) {
  array xf = astype(x, float32, s);
  array xc = subtract(xf, mean(xf, -1, true, s), s);
  array var = mean(square(xc, s), -1, true, s);
  array y = astype(multiply(xc, rsqrt(add(var, array(eps, float32), s), s), s), out_type, s);
  if (weight) y = multiply(y, *weight, s);
  if (bias) y = add(y, *bias, s);
  return y;
}

array cross_entropy(const array& logits, const array& targets, StreamOrDevice s) {
  if (logits.ndim() == 0) {
    throw std::invalid_argument("[cross_entropy] logits must have at least 1 dimension but got "
                                "input with 0 dimensions.");
  }
  if (!issubdtype(logits.dtype(), floating)) {
    throw std::invalid_argument("[cross_entropy] Received unsupported logits type " +
                                dtype_name(logits.dtype()) + "; cast them to a float type");
  }
  if (!issubdtype(targets.dtype(), integer)) {
    throw std::invalid_argument("[cross_entropy] targets must be integer class indices but got " +
                                dtype_name(targets.dtype()) + ".");
  }
  const Shape batch(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape() != batch) {
    throw std::invalid_argument("[cross_entropy] targets shape " +
                                detail::shape_str(targets.shape()) + " does not match logits shape " +
                                detail::shape_str(logits.shape()) + " with the last axis removed.");
  }
  return array(batch, float32, std::make_shared<CrossEntropy>(to_stream(s)),
               {logits, astype(targets, int32, s)});
}

array cross_entropy_composite(const array& logits, const array& targets, StreamOrDevice s) {
  const array x = astype(logits, float32, s);
  const int classes = logits.shape().back();
  const array index = where(less(targets, array(0), s), add(targets, array(classes), s), targets, s);
  const array picked = squeeze(take_along_axis(x, expand_dims(index, -1, s), -1, s), -1, s);
  return subtract(logsumexp(x, -1, false, s), picked, s);
}

array rope(const array& x_in, int dims, bool traditional, std::optional<float> base, float scale,
           const array& offset_in, const std::optional<array>& freqs, StreamOrDevice s) {
  if (freqs && base) {
    throw std::invalid_argument("[rope] give either base or freqs, not both");
  }
  if (!freqs && !base) throw std::invalid_argument("[rope] one of base or freqs is required");
  if (x_in.ndim() < 3) {
    throw std::invalid_argument("[rope] x must have at least 3 dimensions; got shape " +
                                detail::shape_str(x_in.shape()));
  }
  if (!issubdtype(x_in.dtype(), floating)) {
    throw std::invalid_argument("[rope] x must be real floating point; got " +
                                dtype_name(x_in.dtype()));
  }
  if (offset_in.ndim() > 1) {
    throw std::invalid_argument("[rope] offset must be a scalar or 1-D; got shape " +
                                detail::shape_str(offset_in.shape()));
  }
  if (offset_in.size() != 1 && static_cast<int>(offset_in.size()) != x_in.shape(0)) {
    throw std::invalid_argument("[rope] offset must hold 1 or " + std::to_string(x_in.shape(0)) +
                                " (x.shape[0]) values; got shape " +
                                detail::shape_str(offset_in.shape()));
  }
  if (!issubdtype(offset_in.dtype(), integer)) {
    throw std::invalid_argument("[rope] offset must be an integer array; got " +
                                dtype_name(offset_in.dtype()));
  }
  if (dims <= 0 || dims % 2 != 0) {
    throw std::invalid_argument("[rope] dims must be positive and even; got " +
                                std::to_string(dims));
  }
  if (dims > x_in.shape(-1)) {
    throw std::invalid_argument("[rope] dims " + std::to_string(dims) +
                                " exceeds the last dimension of x " +
                                detail::shape_str(x_in.shape()));
  }
  const int half = dims / 2;
  if (freqs && (freqs->ndim() != 1 || freqs->shape(0) != half)) {
    throw std::invalid_argument("[rope] freqs must be 1-D with dims / 2 = " +
                                std::to_string(half) + " values; got shape " +
                                detail::shape_str(freqs->shape()));
  }

  // Work on a 4-D view (B, N, T, D).
  const Shape orig_shape = x_in.shape();
  array x = x_in;
  if (x.ndim() == 3) {
    x = expand_dims(x, 1, s);
  } else if (x.ndim() > 4) {
    x = flatten(x, 1, static_cast<int>(x.ndim()) - 3, s);
  }
  std::vector<array> inputs{x, astype(offset_in, int32, s)};
  if (freqs) inputs.push_back(astype(*freqs, float32, s));
  array out(x.shape(), x.dtype(),
            std::make_shared<RoPE>(to_stream(s), dims, traditional, base, scale), inputs);
  return reshape(out, orig_shape, s);
}

array rope_composite(const array& x, const array& offset_in, const std::optional<array>& freqs,
                     int dims, bool traditional, std::optional<float> base, float scale,
                     StreamOrDevice s) {
  const int half = dims / 2;
  const int B = x.shape(0), N = x.shape(1), T = x.shape(2), D = x.shape(3);
  const Dtype t = x.dtype();
  array offset = offset_in;
  if (offset.size() > 1) offset = expand_dims(offset, {-1, -2}, s);  // (B, 1, 1)
  array positions =
      multiply(add(arange(static_cast<double>(T), float32, s), offset, s), array(scale), s);
  array inv_freqs =
      freqs ? reciprocal(*freqs, s)
            : exp(multiply(arange(0.0, static_cast<double>(-half), -1.0, float32, s),
                           array(static_cast<float>(std::log(*base) / half)), s),
                  s);
  array theta = multiply(expand_dims(positions, -1, s), inv_freqs, s);
  array cosv = astype(cos(theta, s), t, s);
  array sinv = astype(sin(theta, s), t, s);
  auto rotate = [&](const array& x1, const array& x2) {
    return std::vector<array>{subtract(multiply(x1, cosv, s), multiply(x2, sinv, s), s),
                              add(multiply(x1, sinv, s), multiply(x2, cosv, s), s)};
  };

  if (traditional) {
    array x1 = slice(x, Shape{0, 0, 0, 0}, Shape{B, N, T, dims}, Shape{1, 1, 1, 2}, s);
    array x2 = slice(x, Shape{0, 0, 0, 1}, Shape{B, N, T, dims}, Shape{1, 1, 1, 2}, s);
    auto r = rotate(x1, x2);
    array out = reshape(concatenate({expand_dims(r[0], -1, s), expand_dims(r[1], -1, s)}, -1, s),
                        {B, N, T, dims}, s);
    if (dims < D) out = concatenate({out, slice(x, Shape{0, 0, 0, dims}, x.shape(), s)}, -1, s);
    return out;
  }
  array x1 = slice(x, Shape{0, 0, 0, 0}, Shape{B, N, T, half}, s);
  array x2 = slice(x, Shape{0, 0, 0, half}, Shape{B, N, T, dims}, s);
  auto parts = rotate(x1, x2);
  if (dims < D) parts.push_back(slice(x, Shape{0, 0, 0, dims}, x.shape(), s));
  return concatenate(parts, -1, s);
}

array rope(const array& x, int dims, bool traditional, std::optional<float> base, float scale,
           int offset, const std::optional<array>& freqs, StreamOrDevice s) {
  return rope(x, dims, traditional, base, scale, array(offset, int32), freqs, s);
}

array scaled_dot_product_attention(const array& queries, const array& keys, const array& values,
                                   const float scale, const std::string& mask_mode,
                                   std::optional<array> mask_arr,
                                   const std::optional<array>& sinks, bool force_fused,
                                   StreamOrDevice s) {
  const char* op = "[scaled_dot_product_attention]";
  for (const array* x : {&queries, &keys, &values}) {
    if (x->ndim() != 4) {
      throw std::invalid_argument(std::string(op) + " queries, keys and values must be 4-D " +
                                  "(batch, heads, length, dim); got shape " +
                                  detail::shape_str(x->shape()));
    }
  }
  if (mask_mode != "" && mask_mode != "causal" && mask_mode != "array") {
    throw std::invalid_argument(std::string(op) + " invalid mask_mode '" + mask_mode +
                                "'; use '', 'causal' or 'array'");
  }
  const bool causal = mask_mode == "causal";
  if (causal && mask_arr) {
    throw std::invalid_argument(std::string(op) +
                                " mask_mode 'causal' takes no mask array; pass one or the other");
  }
  if (mask_arr && mask_arr->ndim() > 4) {
    throw std::invalid_argument(std::string(op) + " the mask must have at most 4 dims; got " +
                                detail::shape_str(mask_arr->shape()));
  }
  if (keys.shape(0) != queries.shape(0) || values.shape(0) != queries.shape(0)) {
    throw std::invalid_argument(std::string(op) + " batch sizes differ: queries " +
                                detail::shape_str(queries.shape()) + ", keys " +
                                detail::shape_str(keys.shape()) + ", values " +
                                detail::shape_str(values.shape()));
  }
  if (queries.shape(-1) != keys.shape(-1)) {
    throw std::invalid_argument(std::string(op) + " queries " +
                                detail::shape_str(queries.shape()) + " and keys " +
                                detail::shape_str(keys.shape()) +
                                " must have the same last dimension");
  }
  if (keys.shape(-2) != values.shape(-2)) {
    throw std::invalid_argument(std::string(op) + " keys " + detail::shape_str(keys.shape()) +
                                " and values " + detail::shape_str(values.shape()) +
                                " must have the same length (dim 2)");
  }
  const int n_q_heads = queries.shape(1), n_kv_heads = keys.shape(1);
  if (values.shape(1) != n_kv_heads) {
    throw std::invalid_argument(std::string(op) + " keys and values must have the same number " +
                                "of heads; got " + std::to_string(n_kv_heads) + " and " +
                                std::to_string(values.shape(1)));
  }
  if (n_kv_heads == 0 || n_q_heads % n_kv_heads != 0) {
    throw std::invalid_argument(std::string(op) + " the query heads (" +
                                std::to_string(n_q_heads) +
                                ") must be a multiple of the key/value heads (" +
                                std::to_string(n_kv_heads) + ")");
  }
  Dtype final_type = promote_types(promote_types(queries.dtype(), keys.dtype()), values.dtype());
  check_real_floating("scaled_dot_product_attention", final_type);

  std::optional<array> mask;
  if (mask_arr) {
    if (promote_types(mask_arr->dtype(), final_type) != final_type) {
      throw std::invalid_argument(std::string(op) + " the mask dtype " +
                                  dtype_name(mask_arr->dtype()) +
                                  " must promote to the output dtype " + dtype_name(final_type));
    }
    Shape mask_shape = queries.shape();
    mask_shape.back() = keys.shape(-2);
    array m = mask_arr->dtype() == bool_ ? *mask_arr : astype(*mask_arr, final_type, s);
    mask = broadcast_to(m, mask_shape, s);
  }
  std::optional<array> sink;
  if (sinks) {
    if (promote_types(sinks->dtype(), final_type) != final_type) {
      throw std::invalid_argument(std::string(op) + " the sinks dtype " +
                                  dtype_name(sinks->dtype()) +
                                  " must promote to the output dtype " + dtype_name(final_type));
    }
    if (sinks->ndim() != 1 || sinks->shape(0) != n_q_heads) {
      throw std::invalid_argument(std::string(op) + " sinks must be 1-D with one value per " +
                                  "query head (" + std::to_string(n_q_heads) + "); got shape " +
                                  detail::shape_str(sinks->shape()));
    }
    sink = astype(*sinks, final_type, s);
  }

  std::vector<array> inputs{astype(queries, final_type, s), astype(keys, final_type, s),
                            astype(values, final_type, s)};
  if (mask) inputs.push_back(*mask);
  if (sink) inputs.push_back(*sink);
  // While a gradient is traced, the rows' softmax statistics come out too, for its kernel.
  auto p = std::make_shared<ScaledDotProductAttention>(to_stream(s), scale, causal,
                                                       mask.has_value(), sink.has_value(),
                                                       detail::in_tracing());
  return array::make_arrays(p->output_shapes(inputs), p->output_types(final_type), p, inputs)[0];
}

array sdpa_composite(const array& queries, const array& keys, const array& values, float scale,
                     bool causal, const std::optional<array>& mask,
                     const std::optional<array>& sink, StreamOrDevice s, array* stats,
                     Dtype stats_type) {
  const Dtype final_type = queries.dtype();
  const int n_q_heads = queries.shape(1), n_kv_heads = keys.shape(1);
  array q = multiply(array(scale, final_type), queries, s);
  array k = keys;
  array v = values;
  const int n_repeats = n_q_heads / n_kv_heads;
  if (n_repeats > 1) {
    // (B, Hq, L, D) -> (B, Hkv, R, L, D); k, v gain a broadcast dim for the repeats.
    q = unflatten(q, 1, {n_kv_heads, n_repeats}, s);
    k = expand_dims(k, 2, s);
    v = expand_dims(v, 2, s);
  }
  array scores = matmul(q, swapaxes(k, -1, -2, s), s);
  if (causal || mask) {
    array m = [&]() {
      if (!causal) return *mask;
      const int kl = k.shape(-2), ql = q.shape(-2);
      array qi = expand_dims(arange(kl - ql, kl, s), 1, s);
      array ki = expand_dims(arange(0, kl, s), 0, s);
      return greater_equal(qi, ki, s);
    }();
    if (n_repeats > 1 && m.ndim() >= 3) {
      m = m.shape(-3) == 1 ? expand_dims(m, -3, s) : unflatten(m, -3, {n_kv_heads, n_repeats}, s);
    }
    scores = m.dtype() == bool_ ? where(m, scores, lowest(scores.dtype()), s)
                                : add(scores, m, s);
  }
  if (sink) {
    array sk = expand_dims(*sink, {0, 2, 3}, s);  // (1, Hq, 1, 1)
    if (scores.ndim() == 5) sk = unflatten(sk, 1, {n_kv_heads, n_repeats}, s);
    Shape bshape = scores.shape();
    bshape.back() = 1;
    scores = concatenate({broadcast_to(sk, bshape, s), scores}, -1, s);
  }
  if (stats) {
    const array sc = astype(scores, stats_type, s);
    const array m = max(sc, -1, true, s);
    const array l = sum(exp(subtract(sc, m, s), s), -1, true, s);
    *stats = concatenate({m, l}, -1, s);
    if (n_repeats > 1) *stats = flatten(*stats, 1, 2, s);
  }
  scores = softmax(scores, std::vector<int>{-1}, true, s);
  if (sink) {
    Shape start(scores.ndim(), 0);
    start.back() = 1;
    scores = slice(scores, start, scores.shape(), s);
  }
  array out = matmul(scores, v, s);
  if (n_repeats > 1) out = flatten(out, 1, 2, s);
  return out;
}

}  // namespace tessera::fast

namespace tessera {

namespace {

using CompositeFn = std::function<std::vector<array>(const std::vector<array>&)>;

// The transforms of a primitive computed by a composite function of all its inputs: the
// composite's own vjp (for the inputs in argnums) and jvp (tangents of the others zero).
std::vector<array> composite_vjp(const CompositeFn& fn, const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums) {
  auto grads = tessera::vjp(fn, primals, cotangents).second;
  std::vector<array> out;
  for (int a : argnums) out.push_back(grads[a]);
  return out;
}

std::vector<array> composite_jvp(const CompositeFn& fn, const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums, Stream s) {
  std::vector<array> all;
  for (const auto& p : primals) all.push_back(zeros_like(p, s));
  for (size_t i = 0; i < argnums.size(); ++i) all[argnums[i]] = tangents[i];
  return tessera::jvp(fn, primals, all).second;
}

}  // namespace

std::vector<array> ComposedPrimitive::vjp(const std::vector<array>& primals,
                                          const std::vector<array>& cotangents,
                                          const std::vector<int>& argnums,
                                          const std::vector<array>&) {
  auto fn = [this](const std::vector<array>& in) { return std::vector<array>{composite(in)}; };
  return composite_vjp(fn, primals, cotangents, argnums);
}

std::vector<array> ComposedPrimitive::jvp(const std::vector<array>& primals,
                                          const std::vector<array>& tangents,
                                          const std::vector<int>& argnums) {
  auto fn = [this](const std::vector<array>& in) { return std::vector<array>{composite(in)}; };
  return composite_jvp(fn, primals, tangents, argnums, stream());
}

std::pair<std::vector<array>, std::vector<int>> ComposedPrimitive::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto fn = [this](const std::vector<array>& in) { return std::vector<array>{composite(in)}; };
  return {tessera::vmap(fn, axes, {0})(inputs), {0}};
}

array RoPE::composite(const std::vector<array>& inputs) const {
  std::optional<array> freqs;
  if (inputs.size() > 2) freqs = inputs[2];
  return fast::rope_composite(inputs[0], inputs[1], freqs, dims_, traditional_, base_, scale_,
                              stream());
}

bool RoPE::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const RoPE*>(&other);
  return o && o->state() == state();
}

// Only x (input 0) carries derivatives. The rotation's transpose is the rotation by the opposite
// angle: the same kernel with the scale of the positions negated (cos(-t) = cos(t), sin(-t) =
// -sin(t); per pair dx1 = g1 cos + g2 sin, dx2 = g2 cos - g1 sin, the composite vjp's sums).
// Batching is the composite's.
std::vector<array> RoPE::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  std::vector<array> in = primals;
  in[0] = astype(cotangents[0], primals[0].dtype(), stream());
  array dx(primals[0].shape(), primals[0].dtype(),
           std::make_shared<RoPE>(stream(), dims_, traditional_, base_, -scale_), in);
  std::vector<array> out;
  for (int a : argnums) out.push_back(a == 0 ? dx : zeros_like(primals[a], stream()));
  return out;
}

std::vector<array> RoPE::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                             const std::vector<int>& argnums) {
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) {
      std::vector<array> in = primals;
      in[0] = tangents[i];  // rope is linear in x
      return {composite(in)};
    }
  }
  return {zeros_like(primals[0], stream())};
}

// ---- ScaledDotProductAttention: the fused gradient and batching ----

std::vector<array> ScaledDotProductAttention::composite(const std::vector<array>& inputs) const {
  std::optional<array> mask, sinks;
  size_t at = 3;
  if (has_mask_) mask = inputs[at++];
  if (has_sinks_) sinks = inputs[at++];
  array stats(0.0f);
  array out = fast::sdpa_composite(inputs[0], inputs[1], inputs[2], scale_, causal_, mask, sinks,
                                   stream(), output_stats_ ? &stats : nullptr,
                                   output_types(inputs[0].dtype()).back());
  if (!output_stats_) return {out};
  return {out, stats};
}

bool ScaledDotProductAttention::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ScaledDotProductAttention*>(&other);
  return o && o->state() == state();
}

std::vector<Shape> ScaledDotProductAttention::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out.back() = inputs[2].shape(-1);
  if (!output_stats_) return {out};
  Shape stats = inputs[0].shape();
  stats.back() = 2;
  return {out, stats};
}

std::vector<Dtype> ScaledDotProductAttention::output_types(Dtype t) const {
  if (!output_stats_) return {t};
  return {t, t == float64 ? float64 : float32};
}

// The cotangents of q, k, v and the sinks come from the fused gradient kernel (which reads the
// softmax statistics where the forward gave them); an additive mask's (rarely asked for) from the
// composite.
std::vector<array> ScaledDotProductAttention::vjp(const std::vector<array>& primals,
                                                  const std::vector<array>& cotangents,
                                                  const std::vector<int>& argnums,
                                                  const std::vector<array>& outputs) {
  const int mask_index = has_mask_ ? 3 : -1;
  if (std::find(argnums.begin(), argnums.end(), mask_index) != argnums.end()) {
    auto fn = [this](const std::vector<array>& in) { return composite(in); };
    return composite_vjp(fn, primals, cotangents, argnums);
  }
  std::vector<array> in = primals;
  if (output_stats_) in.push_back(outputs[1]);
  in.push_back(outputs[0]);
  in.push_back(cotangents[0]);
  std::vector<Shape> shapes{primals[0].shape(), primals[1].shape(), primals[2].shape()};
  if (has_sinks_) shapes.push_back(primals.back().shape());
  const Dtype t = primals[0].dtype();
  auto grads = array::make_arrays(
      shapes, std::vector<Dtype>(shapes.size(), t),
      std::make_shared<ScaledDotProductAttentionVjp>(stream(), scale_, causal_, has_mask_,
                                                     has_sinks_, output_stats_),
      in);
  std::vector<array> out;
  for (int a : argnums) out.push_back(a < 3 ? grads[a] : grads[3]);  // a == sinks' index
  return out;
}

std::vector<array> ScaledDotProductAttention::jvp(const std::vector<array>& primals,
                                                  const std::vector<array>& tangents,
                                                  const std::vector<int>& argnums) {
  auto fn = [this](const std::vector<array>& in) { return composite(in); };
  return composite_jvp(fn, primals, tangents, argnums, stream());
}

// The mapped axis joins the batch axis (inputs that are not mapped are broadcast along it), and
// the fused kernel runs once: batched attention stays one kernel. Mapped sinks (one set per
// mapped entry) have no place in the kernel's inputs: the composite takes that case.
std::pair<std::vector<array>, std::vector<int>> ScaledDotProductAttention::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const size_t n_batched = has_sinks_ ? inputs.size() - 1 : inputs.size();
  if (has_sinks_ && axes.back() >= 0) {
    auto fn = [this](const std::vector<array>& in) { return composite(in); };
    auto out = tessera::vmap(fn, axes, std::vector<int>(output_stats_ ? 2 : 1, 0))(inputs);
    return {out, std::vector<int>(out.size(), 0)};
  }
  int size = 0;
  for (size_t i = 0; i < n_batched; ++i) {
    if (axes[i] >= 0) size = inputs[i].shape(axes[i]);
  }
  std::vector<array> merged;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i >= n_batched) {
      merged.push_back(inputs[i]);
      continue;
    }
    array x = inputs[i];
    if (axes[i] >= 0) {
      x = moveaxis(x, axes[i], 0, stream());
    } else {
      Shape shape = x.shape();
      shape.insert(shape.begin(), size);
      x = broadcast_to(expand_dims(x, 0, stream()), shape, stream());
    }
    merged.push_back(flatten(x, 0, 1, stream()));
  }
  auto p = std::make_shared<ScaledDotProductAttention>(stream(), scale_, causal_, has_mask_,
                                                       has_sinks_, output_stats_);
  auto outs = array::make_arrays(p->output_shapes(merged), p->output_types(merged[0].dtype()), p,
                                 merged);
  for (auto& o : outs) o = unflatten(o, 0, {size, o.shape(0) / size}, stream());
  return {outs, std::vector<int>(outs.size(), 0)};
}

// ---- ScaledDotProductAttentionVjp: the composite vjp's transforms ----

std::vector<array> ScaledDotProductAttentionVjp::composite(const std::vector<array>& in) const {
  const size_t n_primals = in.size() - 2 - has_stats_;  // ..., [stats,] output, cotangent
  std::vector<array> primals(in.begin(), in.begin() + static_cast<long>(n_primals));
  auto fn = [&](const std::vector<array>& x) {
    std::vector<array> all = primals;
    all[0] = x[0], all[1] = x[1], all[2] = x[2];
    if (has_sinks_) all.back() = x[3];
    std::optional<array> mask, sinks;
    if (has_mask_) mask = all[3];
    if (has_sinks_) sinks = all.back();
    return std::vector<array>{fast::sdpa_composite(all[0], all[1], all[2], scale_, causal_, mask,
                                                   sinks, stream())};
  };
  std::vector<array> wrt{primals[0], primals[1], primals[2]};
  if (has_sinks_) wrt.push_back(primals.back());
  return tessera::vjp(fn, wrt, {in.back()}).second;
}

bool ScaledDotProductAttentionVjp::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ScaledDotProductAttentionVjp*>(&other);
  return o && o->state() == state();
}

std::vector<Shape> ScaledDotProductAttentionVjp::output_shapes(const std::vector<array>& in) {
  std::vector<Shape> out{in[0].shape(), in[1].shape(), in[2].shape()};
  if (has_sinks_) out.push_back(in[in.size() - 3 - has_stats_].shape());
  return out;
}

std::vector<array> ScaledDotProductAttentionVjp::vjp(const std::vector<array>& primals,
                                                     const std::vector<array>& cotangents,
                                                     const std::vector<int>& argnums,
                                                     const std::vector<array>&) {
  auto fn = [&](const std::vector<array>& in) { return composite(in); };
  return composite_vjp(fn, primals, cotangents, argnums);
}

std::vector<array> ScaledDotProductAttentionVjp::jvp(const std::vector<array>& primals,
                                                     const std::vector<array>& tangents,
                                                     const std::vector<int>& argnums) {
  auto fn = [&](const std::vector<array>& in) { return composite(in); };
  return composite_jvp(fn, primals, tangents, argnums, stream());
}

std::pair<std::vector<array>, std::vector<int>> ScaledDotProductAttentionVjp::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto fn = [this](const std::vector<array>& in) { return composite(in); };
  auto out = tessera::vmap(fn, axes, std::vector<int>(has_sinks_ ? 4 : 3, 0))(inputs);
  return {out, std::vector<int>(out.size(), 0)};
}

// ---- CrossEntropy: a kernel for the gradient, the composite for the rest ----

array CrossEntropy::composite(const std::vector<array>& inputs) const {
  return fast::cross_entropy_composite(inputs[0], inputs[1], stream());
}

std::vector<array> CrossEntropy::vjp(const std::vector<array>& primals,
                                     const std::vector<array>& cotangents,
                                     const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> out;
  for (int a : argnums) {
    out.push_back(a == 0 ? array(primals[0].shape(), primals[0].dtype(),
                                 std::make_shared<CrossEntropyGrad>(stream()),
                                 {primals[0], primals[1], astype(cotangents[0], float32, stream())})
                         : zeros_like(primals[1], stream()));
  }
  return out;
}

array CrossEntropyGrad::composite(const std::vector<array>& in) const {
  auto fn = [&](const std::vector<array>& x) {
    return std::vector<array>{fast::cross_entropy_composite(x[0], in[1], stream())};
  };
  return astype(tessera::vjp(fn, {in[0]}, {in[2]}).second[0], in[0].dtype(), stream());
}

// ---- LayerNorm and RMSNorm: their composites ----

namespace {
// The output dtype of a norm: that of its weight or bias (the front ends cast them to it), else
// x's.
Dtype norm_out_type(const std::vector<array>& inputs) {
  return inputs.size() > 1 ? inputs[1].dtype() : inputs[0].dtype();
}
}  // namespace

array LayerNorm::composite(const std::vector<array>& inputs) const {
  std::optional<array> weight, bias;
  size_t at = 1;
  if (has_weight_) weight = inputs[at++];
  if (has_bias_) bias = inputs[at++];
  return fast::layer_norm_composite(inputs[0], weight, bias, eps_, norm_out_type(inputs),
                                    stream());
}

bool LayerNorm::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const LayerNorm*>(&other);
  return o && o->state() == state();
}

array RMSNorm::composite(const std::vector<array>& inputs) const {
  std::optional<array> weight;
  if (inputs.size() > 1) weight = inputs[1];
  return fast::rms_norm_composite(inputs[0], weight, eps_, norm_out_type(inputs), stream());
}

bool RMSNorm::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const RMSNorm*>(&other);
  return o && o->eps_ == eps_;
}

namespace {
// A norm's gradients through NormVjp: dx, dweight, dbias picked by argnums (0 x, 1 the weight or
// the bias, 2 the bias).
std::vector<array> norm_vjp(const std::vector<array>& primals, const array& cotangent,
                            const std::vector<int>& argnums, float eps, bool layer, bool has_weight,
                            bool has_bias, const Stream& s) {
  std::vector<array> in = primals;
  in.push_back(cotangent);
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (const array& p : primals) {
    shapes.push_back(p.shape());
    dtypes.push_back(p.dtype());
  }
  auto grads = array::make_arrays(
      shapes, dtypes, std::make_shared<NormVjp>(s, eps, layer, has_weight, has_bias), in);
  std::vector<array> out;
  for (int a : argnums) out.push_back(grads[a]);
  return out;
}
}  // namespace

std::vector<array> RMSNorm::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums, const std::vector<array>&) {
  return norm_vjp(primals, cotangents[0], argnums, eps_, false, primals.size() > 1, false,
                  stream());
}

std::vector<array> LayerNorm::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>& argnums, const std::vector<array>&) {
  return norm_vjp(primals, cotangents[0], argnums, eps_, true, has_weight_, has_bias_, stream());
}

// ---- NormVjp: the composite vjp's transforms ----

std::vector<array> NormVjp::composite(const std::vector<array>& in) const {
  const array& g = in.back();
  auto fn = [&](const std::vector<array>& p) {
    std::optional<array> weight, bias;
    size_t at = 1;
    if (has_weight_) weight = p[at++];
    if (has_bias_) bias = p[at++];
    return std::vector<array>{
        layer_ ? fast::layer_norm_composite(p[0], weight, bias, eps_, g.dtype(), stream())
               : fast::rms_norm_composite(p[0], weight, eps_, g.dtype(), stream())};
  };
  std::vector<array> primals(in.begin(), in.end() - 1);
  return tessera::vjp(fn, primals, {g}).second;
}

bool NormVjp::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const NormVjp*>(&other);
  return o && o->state() == state();
}

std::vector<Shape> NormVjp::output_shapes(const std::vector<array>& in) {
  std::vector<Shape> out;
  for (size_t i = 0; i + 1 < in.size(); ++i) out.push_back(in[i].shape());
  return out;
}

std::vector<array> NormVjp::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums, const std::vector<array>&) {
  auto fn = [&](const std::vector<array>& in) { return composite(in); };
  return composite_vjp(fn, primals, cotangents, argnums);
}

std::vector<array> NormVjp::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  auto fn = [&](const std::vector<array>& in) { return composite(in); };
  return composite_jvp(fn, primals, tangents, argnums, stream());
}

std::pair<std::vector<array>, std::vector<int>> NormVjp::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  auto fn = [this](const std::vector<array>& in) { return composite(in); };
  auto out = tessera::vmap(fn, axes, std::vector<int>(inputs.size() - 1, 0))(inputs);
  return {out, std::vector<int>(out.size(), 0)};
}

}  // namespace tessera
