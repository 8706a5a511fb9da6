// Front ends of the creation family: arange, full/zeros/ones (+ _like), astype, copy.
#include <cmath>
#include <optional>
#include <stdexcept>

#include "core/transforms_impl.h"
#include "ops/creation.h"
#include "ops/shape.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

array arange(double start, double stop, double step, Dtype dtype, StreamOrDevice s) {
  if (dtype == bool_) {
    throw std::invalid_argument("[arange] cannot compute a range of dtype bool");
  }
  if (std::isnan(start) || std::isnan(step) || std::isnan(stop)) {
    throw std::invalid_argument("[arange] start, stop and step must not be NaN");
  }
  if (std::isinf(start) || std::isinf(stop)) {
    throw std::invalid_argument("[arange] start and stop must be finite");
  }
  if (step == 0) throw std::invalid_argument("[arange] step must not be 0");
  // An infinite step takes the first element when it points from start towards stop (NumPy).
  double real = std::isinf(step) ? ((stop - start) * step > 0 ? 1.0 : 0.0)
                                 : std::ceil((stop - start) / step);
  if (real > static_cast<double>(INT32_MAX)) {
    throw std::invalid_argument("[arange] the range holds " + std::to_string(real) +
                                " elements, more than a dimension holds (2147483647)");
  }
  int size = std::max(static_cast<int>(real), 0);
  // The kernel computes start + i * step: keep 0 * inf from making the one element NaN.
  if (std::isinf(step)) step = stop - start;
  return array(Shape{size}, dtype, std::make_shared<Arange>(to_stream(s), start, stop, step), {});
}
array arange(double start, double stop, double step, StreamOrDevice s) {
  return arange(start, stop, step, float32, s);
}
array arange(double start, double stop, Dtype dtype, StreamOrDevice s) {
  return arange(start, stop, 1.0, dtype, s);
}
array arange(double start, double stop, StreamOrDevice s) {
  return arange(start, stop, 1.0, float32, s);
}
array arange(double stop, Dtype dtype, StreamOrDevice s) { return arange(0.0, stop, 1.0, dtype, s); }
array arange(double stop, StreamOrDevice s) { return arange(0.0, stop, 1.0, float32, s); }
array arange(int start, int stop, int step, StreamOrDevice s) {
  return arange(static_cast<double>(start), static_cast<double>(stop), static_cast<double>(step),
                int32, s);
}
array arange(int start, int stop, StreamOrDevice s) { return arange(start, stop, 1, s); }
array arange(int stop, StreamOrDevice s) { return arange(0, stop, 1, s); }

array astype(array a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  auto shape = a.shape();
  return array(std::move(shape), dtype, std::make_shared<AsType>(to_stream(s), dtype),
               {std::move(a)});
}

array copy(array a, StreamOrDevice s) {
  auto shape = a.shape();
  auto dtype = a.dtype();
  return array(std::move(shape), dtype, std::make_shared<Copy>(to_stream(s)), {std::move(a)});
}

array full(Shape shape, array vals, Dtype dtype, StreamOrDevice s) {
  for (auto d : shape) {
    if (d < 0) {
      throw std::invalid_argument("[full] negative dimension in shape " +
                                  detail::shape_str(shape));
    }
  }
  if (vals.size() != 1) {
    // Broadcast a non-scalar fill value, as MLX does; a value that does not fit is full's error.
    if (detail::broadcast_shapes("full", vals.shape(), shape) != shape) {
      throw std::invalid_argument("[full] a fill value of shape " + detail::shape_str(vals.shape()) +
                                  " cannot be broadcast to the shape " + detail::shape_str(shape));
    }
    auto b = broadcast_to(astype(std::move(vals), dtype, s), shape, s);
    return copy(std::move(b), s);
  }
  auto v = astype(reshape(std::move(vals), Shape{}, s), dtype, s);
  auto out_shape = shape;
  return array(std::move(out_shape), dtype, std::make_shared<Full>(to_stream(s), std::move(shape)),
               {std::move(v)});
}
array full(Shape shape, array vals, StreamOrDevice s) {
  auto dtype = vals.dtype();
  return full(std::move(shape), std::move(vals), dtype, s);
}
array full_like(const array& a, array vals, Dtype dtype, StreamOrDevice s) {
  if (vals.size() == 1 && vals.ndim() <= a.ndim()) {
    auto v = astype(reshape(std::move(vals), Shape{}, s), dtype, s);
    return array(a.shape(), dtype, std::make_shared<Full>(to_stream(s), a), {std::move(v)});
  }
  Shape shape = detail::broadcast_shapes("full_like", a.shape(), vals.shape());
  return full(std::move(shape), std::move(vals), dtype, s);
}
array full_like(const array& a, array vals, StreamOrDevice s) {
  return full_like(a, std::move(vals), a.dtype(), s);
}
array zeros(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(false), dtype, s);
}
array zeros_like(const array& a, StreamOrDevice s) { return full_like(a, array(false), a.dtype(), s); }
array zeros_like(const array& a, Dtype dtype, StreamOrDevice s) {
  return full_like(a, array(false), dtype, s);
}
array ones(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(true), dtype, s);
}
array ones_like(const array& a, StreamOrDevice s) { return full_like(a, array(true), a.dtype(), s); }
array ones_like(const array& a, Dtype dtype, StreamOrDevice s) {
  return full_like(a, array(true), dtype, s);
}

// ---- derivatives ----

bool Arange::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Arange*>(&other);
  return o && o->start_ == start_ && o->stop_ == stop_ && o->step_ == step_;
}

bool AsType::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const AsType*>(&other);
  return o && o->dtype_ == dtype_;
}

const char* AsType::fused_functor() const {
#define TESSERA_CAST(T) "CastOp<" #T ">{}"
  switch (dtype_.val()) {
    case Dtype::Val::bool_: return TESSERA_CAST(bool);
    case Dtype::Val::uint8: return TESSERA_CAST(uint8_t);
    case Dtype::Val::uint16: return TESSERA_CAST(uint16_t);
    case Dtype::Val::uint32: return TESSERA_CAST(uint32_t);
    case Dtype::Val::uint64: return TESSERA_CAST(uint64_t);
    case Dtype::Val::int8: return TESSERA_CAST(int8_t);
    case Dtype::Val::int16: return TESSERA_CAST(int16_t);
    case Dtype::Val::int32: return TESSERA_CAST(int32_t);
    case Dtype::Val::int64: return TESSERA_CAST(int64_t);
    case Dtype::Val::float16: return TESSERA_CAST(tessera::float16_t);
    case Dtype::Val::bfloat16: return TESSERA_CAST(tessera::bfloat16_t);
    case Dtype::Val::float32: return TESSERA_CAST(float);
    case Dtype::Val::float64: return TESSERA_CAST(double);
    case Dtype::Val::complex64: return TESSERA_CAST(tessera::complex64_t);
  }
#undef TESSERA_CAST
  return nullptr;
}

std::vector<array> AsType::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents, const std::vector<int>&,
                               const std::vector<array>&) {
  if (cotangents[0].dtype() != dtype_) {
    throw std::invalid_argument("[astype] the cotangent dtype does not match the output dtype");
  }
  return {astype(cotangents[0], primals[0].dtype(), stream())};
}

std::vector<array> AsType::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                               const std::vector<int>&) {
  return {astype(tangents[0], dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> AsType::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  return {{astype(inputs[0], dtype_, stream())}, axes};
}

// Full's input is the 0-d fill value: its cotangent is the sum of the output's, its tangent
// fills the output, and a batch of fill values (B) fills a batch of outputs (B, shape...).
std::vector<array> Full::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                             const std::vector<int>&, const std::vector<array>&) {
  return {sum(cotangents[0], false, stream())};
}
std::vector<array> Full::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {full(shape_, tangents[0], stream())};
}
std::pair<std::vector<array>, std::vector<int>> Full::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  const array& v = inputs[0];  // (B): one fill value per batch element
  // vmap inside a compile trace: a Full that follows a shape source (zeros_like(x)) whose
  // source vmap batched follows the batched source, batched where it is, so a shapeless replay
  // fills the new shape; a batch of fill values is laid along that axis and broadcast to it.
  if (const detail::VmappedSources* sources = detail::vmapped_shape_sources()) {
    for (const auto& [src, src_ax] : *sources) {
      if (src_ax < 0) continue;
      if (axes[0] < 0) {
        return {{array(src.shape(), v.dtype(), std::make_shared<Full>(stream(), src), {v})},
                {src_ax}};
      }
      std::vector<int> unit_dims;  // every dim but the batch axis (no traced sizes involved)
      for (int d = 0; d < static_cast<int>(src.ndim()); ++d) {
        if (d != src_ax) unit_dims.push_back(d);
      }
      array spread(src.shape(), v.dtype(),
                   std::make_shared<Broadcast>(stream(), src.shape(), std::vector<array>{src}),
                   {expand_dims(v, unit_dims, stream())});
      return {{copy(spread, stream())}, {src_ax}};
    }
  }
  // Here only because its shape source is batched (vmap inside compile): the same fill.
  if (axes[0] < 0) {
    auto same = sources_.empty() ? std::make_shared<Full>(stream(), shape_)
                                 : std::make_shared<Full>(stream(), sources_[0]);
    return {{array(shape_, v.dtype(), std::move(same), {v})}, {-1}};
  }
  Shape ones(shape_.size() + 1, 1), out = shape_;
  ones[0] = v.shape(0);
  out.insert(out.begin(), v.shape(0));
  return {{copy(broadcast_to(reshape(v, ones, stream()), out, stream()), stream())}, {0}};
}
Full::Full(Stream s, const array& like)
    : UnaryPrimitive(s), shape_(like.shape()), sources_(detail::shape_sources_while_compiling({&like})) {}

// A Full without a shape source has the shape it was given (full(shape, v)): a constant of
// the graph, whatever the inputs' shapes at a shapeless replay.
std::vector<Shape> Full::output_shapes(const std::vector<array>&) { return {shape_}; }

std::vector<Shape> Full::shapeless_output_shapes(const std::vector<array>& inputs,
                                                 const std::vector<Shape>& source_shapes) {
  if (source_shapes.empty()) return output_shapes(inputs);
  return {source_shapes[0]};
}

bool Full::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Full*>(&other);
  return o && o->shape_ == shape_;
}

std::vector<array> Copy::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                             const std::vector<int>&, const std::vector<array>&) {
  return cotangents;
}

std::vector<array> Copy::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return tangents;
}

std::pair<std::vector<array>, std::vector<int>> Copy::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  return {{copy(inputs[0], stream())}, axes};
}


namespace {

// cos(2 pi k n / (M - 1)) for n in [0, M).
array window_cos(int M, int k, StreamOrDevice s) {
  const double w = 2.0 * k * 3.14159265358979323846 / (M - 1);
  return cos(multiply(arange(0, M, float32, s), array(static_cast<float>(w), float32), s), s);
}

// The shared cases: no points, or one (a window of one point is [1]).
std::optional<array> trivial_window(int M, StreamOrDevice s) {
  if (M < 1) return zeros({0}, float32, s);
  if (M == 1) return ones({1}, float32, s);
  return std::nullopt;
}

}  // namespace

array hanning(int M, StreamOrDevice s) {
  if (auto w = trivial_window(M, s)) return *w;
  return subtract(array(0.5f), multiply(array(0.5f), window_cos(M, 1, s), s), s);
}

array hamming(int M, StreamOrDevice s) {
  if (auto w = trivial_window(M, s)) return *w;
  return subtract(array(0.54f), multiply(array(0.46f), window_cos(M, 1, s), s), s);
}

array blackman(int M, StreamOrDevice s) {
  if (auto w = trivial_window(M, s)) return *w;
  return add(subtract(array(0.42f), multiply(array(0.5f), window_cos(M, 1, s), s), s),
             multiply(array(0.08f), window_cos(M, 2, s), s), s);
}

array bartlett(int M, StreamOrDevice s) {
  if (auto w = trivial_window(M, s)) return *w;
  array n = arange(0, M, float32, s);
  array t = subtract(multiply(n, array(2.0f / (M - 1)), s), array(1.0f), s);
  return subtract(array(1.0f), abs(t, s), s);
}

}  // namespace tessera
