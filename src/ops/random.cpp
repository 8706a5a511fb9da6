// Front ends of the random family: keys, the implicit key sequence, bits and the distributions
// built from bits with ordinary ops, in the same order and dtypes as MLX so that results match
// it bit for bit. The only primitive is RandomBits (kernel in backend/cpu/random.cpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "ops/random.h"
#include "ops/utils.h"
#include "tessera/linalg.h"
#include "tessera/ops.h"
#include "tessera/random.h"

namespace tessera {

namespace random {

KeySequence::KeySequence(uint64_t seed) : key_(key(seed)) {}

void KeySequence::seed(uint64_t seed) { key_ = key(seed); }

array KeySequence::next() {
  auto [keep, out] = split(key_);
  key_ = keep;
  return out;
}

KeySequence& KeySequence::default_() {
  static const uint64_t time_seed = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  static thread_local KeySequence ks(time_seed);
  return ks;
}

array key(uint64_t seed) {
  uint32_t hi = static_cast<uint32_t>(seed >> 32);
  uint32_t lo = static_cast<uint32_t>(seed);
  return array({hi, lo});
}

void seed(uint64_t seed) { KeySequence::default_().seed(seed); }

namespace {

std::string tag(const char* op) { return std::string("[") + op + "] "; }

void check_shape(const char* op, const Shape& shape) {
  for (auto d : shape) {
    if (d < 0) {
      throw std::invalid_argument(tag(op) + "negative dimension in shape " +
                                  detail::shape_str(shape));
    }
  }
}

void check_key(const char* op, const array& key) {
  if (key.dtype() != uint32) {
    throw std::invalid_argument(tag(op) + "the key must have dtype uint32 but has " +
                                dtype_name(key.dtype()) + "; make one with random::key(seed)");
  }
  if (key.shape() != Shape{2}) {
    throw std::invalid_argument(tag(op) + "the key must have shape (2) but has shape " +
                                detail::shape_str(key.shape()) +
                                "; make one with random::key(seed)");
  }
}

Dtype bits_dtype(const char* op, int width) {
  switch (width) {
    case 1: return uint8;
    case 2: return uint16;
    case 4: return uint32;
    default:
      throw std::invalid_argument(tag(op) + "width must be 1, 2 or 4 bytes, got " +
                                  std::to_string(width));
  }
}

void check_floating(const char* op, Dtype dtype, const char* what) {
  if (!issubdtype(dtype, floating)) {
    throw std::invalid_argument(tag(op) + what + ", got " + dtype_name(dtype));
  }
}

// `shape` must be what `shape` and `other` broadcast to.
void check_broadcasts_to(const char* op, const Shape& shape, const Shape& other,
                         const char* what) {
  auto out = detail::broadcast_shapes(op, shape, other);
  if (out != shape) {
    throw std::invalid_argument(tag(op) + "cannot draw samples of shape " +
                                detail::shape_str(shape) + ": " + what + " has shape " +
                                detail::shape_str(other) + ", which broadcasts to " +
                                detail::shape_str(out));
  }
}

// The largest value below 1 in `dtype`, held as float32: uniform samples are clipped to it so
// that they stay below `high` after rounding to `dtype`.
array below_one(Dtype dtype) {
  switch (dtype) {
    case Dtype::Val::float32: return array(std::nextafter(1.0f, 0.0f), float32);
    case Dtype::Val::float16:
      return array(static_cast<float>(float16_t::from_bits(float16_t(1.0f).bits - 1)), float32);
    case Dtype::Val::bfloat16:
      return array(static_cast<float>(bfloat16_t::from_bits(bfloat16_t(1.0f).bits - 1)),
                   float32);
    default:
      throw std::invalid_argument(
          "[uniform] uniform samples come in float32, float16 or bfloat16 (as in MLX), got " +
          dtype_name(dtype) + "; draw float32 and convert with astype");
  }
}

}  // namespace

array bits(const Shape& shape, int width, const std::optional<array>& key_, StreamOrDevice s) {
  check_shape("bits", shape);
  Dtype dtype = bits_dtype("bits", width);
  array k = key_ ? *key_ : KeySequence::default_().next();
  check_key("bits", k);
  return array(shape, dtype, std::make_shared<RandomBits>(to_stream(s), shape, width), {k});
}

std::pair<array, array> split(const array& key, StreamOrDevice s) {
  auto stream = to_stream(s);
  auto rows = tessera::split(random::split(key, 2, stream), 2, 0, stream);
  return {reshape(rows[0], {2}, stream), reshape(rows[1], {2}, stream)};
}

array split(const array& key, int num, StreamOrDevice s) {
  if (num < 0) {
    throw std::invalid_argument("[split] num must be non-negative, got " + std::to_string(num));
  }
  check_key("split", key);
  return bits({num, 2}, 4, key, s);
}

array uniform(const array& low, const array& high, const Shape& shape, Dtype dtype,
              const std::optional<array>& key, StreamOrDevice s) {
  check_floating("uniform", dtype, "samples must have a real floating dtype");
  check_shape("uniform", shape);
  auto stream = to_stream(s);
  auto lo = astype(low, dtype, stream);
  auto hi = astype(high, dtype, stream);
  auto range = subtract(hi, lo, stream);
  check_broadcasts_to("uniform", shape, range.shape(), "high - low");
  auto upper = below_one(dtype);
  // bits / (2^32 - 1 rounded to float32), i.e. bits * 2^-32 in float32 arithmetic.
  auto maxval = array(static_cast<float>(std::numeric_limits<uint32_t>::max()), float32);
  auto u = divide(bits(shape, 4, key, stream), maxval, stream);
  u = astype(minimum(u, upper, stream), dtype, stream);
  return add(multiply(range, u, stream), lo, stream);
}

array uniform(const Shape& shape, Dtype dtype, const std::optional<array>& key,
              StreamOrDevice s) {
  check_floating("uniform", dtype, "samples must have a real floating dtype");
  return uniform(array(0.0, dtype), array(1.0, dtype), shape, dtype, key, s);
}

namespace {

// Uniform samples in (-1, 1) (float32), the input of erfinv for normal and laplace.
array open_unit_interval(const Shape& shape, const std::optional<array>& key, Stream stream) {
  auto low = array(std::nextafter(-1.0f, 0.0f), float32);
  auto high = array(1.0f, float32);
  return uniform(low, high, shape, float32, key, stream);
}

// Real and imaginary parts erfinv(U(-1, 1)) each (variance 1/2 each, as MLX).
array complex_normal(Shape shape, const std::optional<array>& loc,
                     const std::optional<array>& scale, const std::optional<array>& key,
                     Stream stream) {
  shape.push_back(2);
  auto samples = erfinv(open_unit_interval(shape, key, stream), stream);
  samples = squeeze(view(samples, complex64, stream), -1, stream);
  if (scale) samples = multiply(*scale, samples, stream);
  if (loc) samples = add(*loc, samples, stream);
  return samples;
}

}  // namespace

array normal(const Shape& shape, Dtype dtype, const std::optional<array>& loc,
             const std::optional<array>& scale, const std::optional<array>& key,
             StreamOrDevice s) {
  check_shape("normal", shape);
  auto stream = to_stream(s);
  if (dtype == complex64) return complex_normal(shape, loc, scale, key, stream);
  check_floating("normal", dtype, "samples must have a floating dtype or complex64");
  // sqrt(2) * erfinv(U(-1, 1)) is standard normal.
  auto samples = open_unit_interval(shape, key, stream);
  auto applied_scale = array(std::sqrt(2.0), dtype);
  if (scale) applied_scale = multiply(applied_scale, astype(*scale, dtype, stream), stream);
  samples = astype(erfinv(samples, stream), dtype, stream);
  samples = multiply(applied_scale, samples, stream);
  if (loc) samples = add(astype(*loc, dtype, stream), samples, stream);
  return samples;
}

array randint(const array& low, const array& high, const Shape& shape, Dtype dtype,
              const std::optional<array>& key, StreamOrDevice s) {
  if (issubdtype(dtype, inexact)) {
    throw std::invalid_argument("[randint] samples must have an integer dtype or bool, got " +
                                dtype_name(dtype));
  }
  auto stream = to_stream(s);
  auto u = uniform(low, high, shape, float32, key, stream);
  // floor, not truncation: -1.7 must become -2.
  auto out = astype(floor(u, stream), dtype, stream);
  // low and high may round in float32, so clamp into [low, high - 1]; low >= high gives low.
  auto hi = astype(subtract(high, array(1, high.dtype()), stream), dtype, stream);
  return maximum(minimum(out, hi, stream), astype(low, dtype, stream), stream);
}

array bernoulli(const array& p, const Shape& shape, const std::optional<array>& key,
                StreamOrDevice s) {
  if (!issubdtype(p.dtype(), floating)) {
    throw std::invalid_argument(
        "[bernoulli] the probability p must have a floating dtype, got " + dtype_name(p.dtype()));
  }
  check_shape("bernoulli", shape);
  check_broadcasts_to("bernoulli", shape, p.shape(), "p");
  auto stream = to_stream(s);
  // p scaled to [0, next float above UINT32_MAX]: p >= 1 is always true, p <= 0 never.
  auto upper = array(std::nextafter(static_cast<float>(std::numeric_limits<uint32_t>::max()),
                                    std::numeric_limits<float>::max()),
                     float32);
  auto b = bits(shape, 4, key, stream);
  return less(b, multiply(p, upper, stream), stream);
}

array bernoulli(const array& p, const std::optional<array>& key, StreamOrDevice s) {
  return bernoulli(p, p.shape(), key, s);
}

array bernoulli(const std::optional<array>& key, StreamOrDevice s) {
  return bernoulli(array(0.5f), key, s);
}

array truncated_normal(const array& lower, const array& upper, const Shape& shape, Dtype dtype,
                       const std::optional<array>& key, StreamOrDevice s) {
  check_floating("truncated_normal", dtype, "samples must have a real floating dtype");
  auto stream = to_stream(s);
  // Inverse CDF: sqrt(2) * erfinv(U(erf(lower / sqrt(2)), erf(upper / sqrt(2)))).
  auto sqrt2 = array(std::sqrt(2.0), dtype);
  auto lower_t = astype(lower, dtype, stream);
  auto upper_t = astype(upper, dtype, stream);
  auto a = erf(divide(lower_t, sqrt2, stream), stream);
  auto b = erf(divide(upper_t, sqrt2, stream), stream);
  auto u = uniform(a, b, shape, dtype, key, stream);
  auto out = multiply(sqrt2, erfinv(u, stream), stream);
  return maximum(minimum(upper_t, out, stream), lower_t, stream);
}

array truncated_normal(const array& lower, const array& upper, Dtype dtype,
                       const std::optional<array>& key, StreamOrDevice s) {
  auto shape = detail::broadcast_shapes("truncated_normal", lower.shape(), upper.shape());
  return truncated_normal(lower, upper, shape, dtype, key, s);
}

array gumbel(const Shape& shape, Dtype dtype, const std::optional<array>& key,
             StreamOrDevice s) {
  check_floating("gumbel", dtype, "samples must have a real floating dtype");
  auto stream = to_stream(s);
  auto u = uniform(shape, dtype, key, stream);
  return negative(log(negative(log(u, stream), stream), stream), stream);
}

namespace {

int categorical_axis(int axis, int ndim) {
  int ax = axis < 0 ? axis + ndim : axis;
  if (ax < 0 || ax >= ndim) {
    throw std::invalid_argument("[categorical] axis " + std::to_string(axis) +
                                " is out of range for logits with " + std::to_string(ndim) +
                                " dimensions");
  }
  return ax;
}

// One distribution (1-D logits) and many samples: invert the CDF, O(N + M) draws of randomness
// as in MLX. The index is the number of CDF entries <= u, less one (searchsorted "right" - 1).
array categorical_inverse_cdf(const array& logits, const Shape& shape,
                              const std::optional<array>& key, Stream s) {
  auto dtype = promote_types(logits.dtype(), float32);
  auto x = astype(logits, dtype, s);
  auto m = max(x, s);
  // With an infinite maximum, exp(x - m) is NaN: sample uniformly among the maximal entries.
  auto w = where(isinf(m, s), astype(equal(x, m, s), dtype, s), exp(subtract(x, m, s), s), s);
  auto cdf = cumsum(w, 0, /*reverse=*/false, /*inclusive=*/false, s);
  auto u = multiply(uniform(shape, float32, key, s), sum(w, s), s);
  auto at_or_below = less_equal(cdf, expand_dims(u, -1, s), s);
  auto count = sum(at_or_below, -1, false, s);
  return subtract(astype(count, uint32, s), array(1u, uint32), s);
}

array categorical_impl(const array& logits, int axis, const Shape& shape,
                       const std::optional<array>& key, Stream s) {
  auto n = logits.shape(axis);
  if (n > 0 && logits.size() == static_cast<size_t>(n) && !shape.empty()) {
    return categorical_inverse_cdf(reshape(logits, {n}, s), shape, key, s);
  }
  // Gumbel-max trick: argmax(logits + G) along the category axis.
  auto gumbel_shape = shape;
  int offset = axis + static_cast<int>(shape.size()) - static_cast<int>(logits.ndim()) + 1;
  gumbel_shape.insert(gumbel_shape.begin() + offset, n);
  auto g = gumbel(gumbel_shape, float32, key, s);
  return argmax(add(g, logits, s), offset, false, s);
}

}  // namespace

array categorical(const array& logits, int axis, const Shape& shape,
                  const std::optional<array>& key, StreamOrDevice s) {
  axis = categorical_axis(axis, static_cast<int>(logits.ndim()));
  check_shape("categorical", shape);
  auto reduced = logits.shape();
  reduced.erase(reduced.begin() + axis);
  check_broadcasts_to("categorical", shape, reduced, "logits without the category axis");
  return categorical_impl(logits, axis, shape, key, to_stream(s));
}

array categorical(const array& logits_, int axis, int num_samples,
                  const std::optional<array>& key, StreamOrDevice s) {
  axis = categorical_axis(axis, static_cast<int>(logits_.ndim()));
  if (num_samples < 0) {
    throw std::invalid_argument("[categorical] num_samples must be non-negative, got " +
                                std::to_string(num_samples));
  }
  auto stream = to_stream(s);
  auto logits = expand_dims(logits_, -1, stream);
  auto shape = logits.shape();
  shape.erase(shape.begin() + axis);
  shape.back() = num_samples;
  return categorical_impl(logits, axis, shape, key, stream);
}

array categorical(const array& logits, int axis, const std::optional<array>& key,
                  StreamOrDevice s) {
  axis = categorical_axis(axis, static_cast<int>(logits.ndim()));
  auto shape = logits.shape();
  shape.erase(shape.begin() + axis);
  return categorical_impl(logits, axis, shape, key, to_stream(s));
}

array laplace(const Shape& shape, Dtype dtype, const float loc, const float scale,
              const std::optional<array>& key, StreamOrDevice s) {
  check_floating("laplace", dtype, "samples must have a real floating dtype");
  auto stream = to_stream(s);
  // Inverse CDF: sign(u) * log1p(-|u|) for u in (-1, 1).
  auto u = open_unit_interval(shape, key, stream);
  auto samples = multiply(
      sign(u, stream),
      log1p(multiply(array(-1.0f, dtype), abs(u, stream), stream), stream), stream);
  samples = astype(samples, dtype, stream);
  if (scale != 1.0f) samples = multiply(array(scale, dtype), samples, stream);
  if (loc != 0.0f) samples = add(array(loc, dtype), samples, stream);
  return samples;
}

array permutation(const array& x, int axis, const std::optional<array>& key, StreamOrDevice s) {
  int ax = detail::normalize_axis("permutation", axis, static_cast<int>(x.ndim()));
  return take(x, permutation(x.shape(ax), key, s), ax, s);
}

array permutation(int x, const std::optional<array>& key, StreamOrDevice s) {
  if (x < 0) {
    throw std::invalid_argument("[permutation] the length must be non-negative, got " +
                                std::to_string(x));
  }
  // Sorting random words gives a uniform shuffle (ties have probability ~n^2 / 2^33).
  return argsort(bits({x}, key, s), s);
}

array multivariate_normal(const array& mean, const array& cov, const Shape& shape, Dtype dtype,
                          const std::optional<array>& key, StreamOrDevice s) {
  if (dtype != float32 && dtype != float64) {
    throw std::invalid_argument("[multivariate_normal] dtype must be float32 or float64; got " +
                                dtype_name(dtype));
  }
  if (mean.ndim() < 1 || cov.ndim() < 2 || cov.shape(-1) != cov.shape(-2) ||
      cov.shape(-1) != mean.shape(-1)) {
    throw std::invalid_argument("[multivariate_normal] needs mean (..., n) and cov (..., n, n); got "
                                "shapes " + detail::shape_str(mean.shape()) + " and " +
                                detail::shape_str(cov.shape()));
  }
  const int n = mean.shape(-1);
  Shape out = detail::broadcast_shapes("multivariate_normal",
                                       Shape(cov.shape().begin(), cov.shape().end() - 2),
                                       Shape(mean.shape().begin(), mean.shape().end() - 1));
  out = detail::broadcast_shapes("multivariate_normal", out, shape);
  out.push_back(n);
  // sqrt(cov) = u diag(sqrt(s)) vt (the symmetric root of a symmetric PSD matrix).
  auto usv = linalg::svd(astype(cov, dtype, s), true, s);
  array root = matmul(multiply(usv[0], expand_dims(sqrt(usv[1], s), -2, s), s), usv[2], s);
  array z = normal(out, dtype, 0.0f, 1.0f, key, s);
  return add(astype(mean, dtype, s), squeeze(matmul(expand_dims(z, -2, s), root, s), -2, s), s);
}

}  // namespace random

// ---- RandomBits ----

bool RandomBits::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const RandomBits*>(&other);
  return o && o->shape_ == shape_ && o->width_ == width_;
}

std::pair<std::vector<array>, std::vector<int>> RandomBits::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  // Keys batched along kax: the pair axis must stay last, so a batch axis there swaps with its
  // neighbour. The output gains the batch axis at the same place.
  array keys = inputs[0];
  int kax = axes[0];
  if (kax >= 0 && kax == static_cast<int>(keys.ndim()) - 1) {
    std::vector<int> perm(keys.ndim());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[kax], perm[kax - 1]);
    keys = transpose(keys, perm, stream());
    --kax;
  }
  Shape shape = shape_;
  if (kax >= 0) shape.insert(shape.begin() + kax, keys.shape(kax));
  Dtype dtype = width_ == 1 ? uint8 : width_ == 2 ? uint16 : uint32;
  auto out = array(shape, dtype, std::make_shared<RandomBits>(stream(), shape, width_), {keys});
  return {{out}, {kax}};
}

}  // namespace tessera
