// Front ends of the shape family's primitives: reshape/flatten/unflatten, squeeze/expand_dims,
// transpose/swapaxes/moveaxis, broadcast_to/broadcast_arrays, concatenate/stack, split/unstack,
// flip. Composite ops (pad, repeat, tile, roll, meshgrid, atleast_*) are in shape_compose.cpp,
// derivatives in shape_grad.cpp.
#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "backend/common/views.h"
#include "core/transforms_impl.h"
#include "ops/shape.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

std::string ints_str(const std::vector<int>& v) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ")";
  return os.str();
}

}  // namespace

// ---- reshape / flatten / unflatten ----

array reshape(const array& a, Shape shape, StreamOrDevice s) {
  // One -1 may stand for the remaining size.
  int infer = -1;
  size_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) {
        throw std::invalid_argument("[reshape] only one dimension can be -1, got shape " +
                                    detail::shape_str(shape));
      }
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument("[reshape] invalid dimension " + std::to_string(shape[i]) +
                                  " in shape " + detail::shape_str(shape));
    } else if (__builtin_mul_overflow(known, static_cast<size_t>(shape[i]), &known)) {
      throw std::overflow_error("[reshape] shape " + detail::shape_str(shape) +
                                " has more elements than 64 bits count");
    }
  }
  if (infer >= 0) {
    if (known == 0 || a.size() % known != 0) {
      throw std::invalid_argument("[reshape] cannot infer the -1 dimension of " +
                                  detail::shape_str(shape) + " for an array of size " +
                                  std::to_string(a.size()));
    }
    shape[infer] = detail::checked_dim("reshape", static_cast<int64_t>(a.size() / known),
                                       "the inferred dimension");
    known = a.size();
  }
  if (known != a.size()) {
    throw std::invalid_argument("[reshape] cannot reshape an array of shape " +
                                detail::shape_str(a.shape()) + " (size " +
                                std::to_string(a.size()) + ") into shape " +
                                detail::shape_str(shape));
  }
  if (shape == a.shape()) return a;
  auto out_shape = shape;
  return array(std::move(out_shape), a.dtype(),
               std::make_shared<Reshape>(to_stream(s), shape, infer), {a});
}

array flatten(const array& a, int start_axis, int end_axis, StreamOrDevice s) {
  const int ndim = static_cast<int>(a.ndim());
  if (ndim == 0) return reshape(a, Shape{1}, s);
  int start = start_axis < 0 ? start_axis + ndim : start_axis;
  int end = end_axis < 0 ? end_axis + ndim : end_axis;
  start = std::max(start, 0);
  end = std::min(end, ndim - 1);
  if (start >= ndim) {
    throw std::invalid_argument("[flatten] start_axis " + std::to_string(start_axis) +
                                " is out of bounds for an array with " + std::to_string(ndim) +
                                " dimensions");
  }
  if (end < 0) {
    throw std::invalid_argument("[flatten] end_axis " + std::to_string(end_axis) +
                                " is out of bounds for an array with " + std::to_string(ndim) +
                                " dimensions");
  }
  if (end < start) {
    throw std::invalid_argument("[flatten] start_axis " + std::to_string(start_axis) +
                                " must not come after end_axis " + std::to_string(end_axis) +
                                " (ndim " + std::to_string(ndim) + ")");
  }
  if (start == end) return a;
  Shape shape(a.shape().begin(), a.shape().begin() + start);
  int64_t merged = 1;
  for (int i = start; i <= end; ++i) merged *= a.shape()[i];
  shape.push_back(static_cast<int32_t>(merged));
  shape.insert(shape.end(), a.shape().begin() + end + 1, a.shape().end());
  return reshape(a, std::move(shape), s);
}

array flatten(const array& a, StreamOrDevice s) {
  return flatten(a, 0, static_cast<int>(a.ndim()) - 1, s);
}

array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s) {
  if (shape.empty()) {
    throw std::invalid_argument("[unflatten] the shape to unflatten into must not be empty");
  }
  const int ndim = static_cast<int>(a.ndim());
  int ax = detail::normalize_axis("unflatten", axis, ndim);
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) {
        throw std::invalid_argument("[unflatten] only one dimension can be -1, got shape " +
                                    detail::shape_str(shape));
      }
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument("[unflatten] invalid dimension " + std::to_string(shape[i]) +
                                  " in shape " + detail::shape_str(shape));
    } else {
      known *= shape[i];
    }
  }
  const int64_t n = a.shape()[ax];
  if (infer >= 0) {
    if (known == 0 || n % known != 0) {
      throw std::invalid_argument("[unflatten] cannot infer the -1 dimension of " +
                                  detail::shape_str(shape) + " for axis " +
                                  std::to_string(axis) + " of size " + std::to_string(n));
    }
    shape[infer] = static_cast<int32_t>(n / known);
    known = n;
  }
  if (known != n) {
    throw std::invalid_argument("[unflatten] cannot unflatten axis " + std::to_string(axis) +
                                " of size " + std::to_string(n) + " into shape " +
                                detail::shape_str(shape));
  }
  Shape out(a.shape().begin(), a.shape().begin() + ax);
  out.insert(out.end(), shape.begin(), shape.end());
  out.insert(out.end(), a.shape().begin() + ax + 1, a.shape().end());
  return reshape(a, std::move(out), s);
}

// ---- squeeze / expand_dims ----

Shape Squeeze::output_shape(const Shape& in, const std::vector<int>& axes) {
  Shape out;
  size_t j = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (j < axes.size() && axes[j] == static_cast<int>(i)) {
      ++j;
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

Shape ExpandDims::output_shape(const Shape& in, const std::vector<int>& axes) {
  Shape out(in.size() + axes.size(), 1);
  size_t j = 0, k = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (j < axes.size() && axes[j] == static_cast<int>(i)) {
      ++j;
    } else {
      out[i] = in[k++];
    }
  }
  return out;
}

namespace {

array squeeze_impl(const array& a, std::vector<int> axes, StreamOrDevice s) {
  if (axes.empty()) return a;
  auto shape = Squeeze::output_shape(a.shape(), axes);
  return array(std::move(shape), a.dtype(), std::make_shared<Squeeze>(to_stream(s), std::move(axes)),
               {a});
}

std::vector<int> squeeze_axes(const array& a, const std::vector<int>& axes) {
  auto norm = detail::normalize_axes("squeeze", axes, static_cast<int>(a.ndim()));
  for (size_t i = 0; i < axes.size(); ++i) {
    int ax = axes[i] < 0 ? axes[i] + static_cast<int>(a.ndim()) : axes[i];
    if (a.shape()[ax] != 1) {
      throw std::invalid_argument("[squeeze] cannot squeeze axis " + std::to_string(axes[i]) +
                                  " of size " + std::to_string(a.shape()[ax]) +
                                  " (shape " + detail::shape_str(a.shape()) +
                                  "); only axes of size 1 can be removed");
    }
  }
  return norm;
}

}  // namespace

array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  return squeeze_impl(a, squeeze_axes(a, axes), s);
}

array squeeze(const array& a, int axis, StreamOrDevice s) {
  return squeeze_impl(a, squeeze_axes(a, {axis}), s);
}

array squeeze(const array& a, StreamOrDevice s) {
  std::vector<int> axes;
  for (size_t i = 0; i < a.ndim(); ++i) {
    if (a.shape()[i] == 1) axes.push_back(static_cast<int>(i));
  }
  return squeeze_impl(a, std::move(axes), s);
}

array expand_dims(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  if (axes.empty()) return a;
  const int out_ndim = static_cast<int>(a.ndim() + axes.size());
  auto norm = detail::normalize_axes("expand_dims", axes, out_ndim);
  auto shape = ExpandDims::output_shape(a.shape(), norm);
  return array(std::move(shape), a.dtype(),
               std::make_shared<ExpandDims>(to_stream(s), std::move(norm)), {a});
}

array expand_dims(const array& a, int axis, StreamOrDevice s) {
  return expand_dims(a, std::vector<int>{axis}, s);
}

// ---- transpose / swapaxes / moveaxis ----

array transpose(const array& a, std::vector<int> axes, StreamOrDevice s) {
  const int ndim = static_cast<int>(a.ndim());
  if (static_cast<int>(axes.size()) != ndim) {
    throw std::invalid_argument("[transpose] got " + std::to_string(axes.size()) + " axes " +
                                ints_str(axes) + " for an array with " + std::to_string(ndim) +
                                " dimensions");
  }
  std::vector<bool> seen(ndim, false);
  for (auto& ax : axes) {
    int n = ax < 0 ? ax + ndim : ax;
    if (n < 0 || n >= ndim) {
      throw std::invalid_argument("[transpose] axis " + std::to_string(ax) +
                                  " is out of bounds for an array with " + std::to_string(ndim) +
                                  " dimensions");
    }
    if (seen[n]) {
      throw std::invalid_argument("[transpose] repeated axis " + std::to_string(ax) +
                                  " in axes " + ints_str(axes));
    }
    seen[n] = true;
    ax = n;
  }
  bool identity = true;
  for (int i = 0; i < ndim; ++i) identity = identity && axes[i] == i;
  if (identity) return a;
  Shape shape(ndim);
  for (int i = 0; i < ndim; ++i) shape[i] = a.shape()[axes[i]];
  return array(std::move(shape), a.dtype(),
               std::make_shared<Transpose>(to_stream(s), std::move(axes)), {a});
}

array transpose(const array& a, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.rbegin(), axes.rend(), 0);
  return transpose(a, std::move(axes), s);
}

array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s) {
  const int ndim = static_cast<int>(a.ndim());
  int a1 = detail::normalize_axis_in_range("swapaxes", axis1, ndim);
  int a2 = detail::normalize_axis_in_range("swapaxes", axis2, ndim);
  std::vector<int> axes(ndim);
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[a1], axes[a2]);
  return transpose(a, std::move(axes), s);
}

array moveaxis(const array& a, int source, int destination, StreamOrDevice s) {
  const int ndim = static_cast<int>(a.ndim());
  int src = detail::normalize_axis_in_range("moveaxis", source, ndim);
  int dst = detail::normalize_axis_in_range("moveaxis", destination, ndim);
  if (src == dst) return a;
  std::vector<int> axes(ndim);
  std::iota(axes.begin(), axes.end(), 0);
  axes.erase(axes.begin() + src);
  axes.insert(axes.begin() + dst, src);
  return transpose(a, std::move(axes), s);
}

// ---- broadcasting ----

array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s) {
  for (auto d : shape) {
    if (d < 0) {
      throw std::invalid_argument("[broadcast_to] negative dimension in shape " +
                                  detail::shape_str(shape));
    }
  }
  if (a.shape() == shape) return a;
  if (shape.size() < a.ndim()) {
    throw std::invalid_argument("[broadcast_to] cannot broadcast shape " +
                                detail::shape_str(a.shape()) + " to the smaller rank shape " +
                                detail::shape_str(shape));
  }
  auto b = detail::broadcast_shapes("broadcast_to", a.shape(), shape);
  if (b != shape) {
    throw std::invalid_argument("[broadcast_to] shape " + detail::shape_str(a.shape()) +
                                " cannot be broadcast to " + detail::shape_str(shape));
  }
  return array(shape, a.dtype(), std::make_shared<Broadcast>(to_stream(s), shape), {a});
}

Broadcast::Broadcast(Stream s, Shape shape, std::initializer_list<const array*> sources,
                     int keep_last)
    : UnaryPrimitive(s), shape_(std::move(shape)),
      sources_(detail::shape_sources_while_compiling(sources)), keep_last_(keep_last) {}

Broadcast::Broadcast(Stream s, Shape shape, std::vector<array> sources, int keep_last)
    : UnaryPrimitive(s), shape_(std::move(shape)),
      sources_(detail::in_compile_trace() ? std::move(sources) : std::vector<array>{}),
      keep_last_(keep_last) {}

std::vector<Shape> Broadcast::shapeless_output_shapes(const std::vector<array>& inputs,
                                                      const std::vector<Shape>& source_shapes) {
  if (source_shapes.empty()) return output_shapes(inputs);
  auto leading = [&](const Shape& x) {
    const size_t k = std::min(x.size(), static_cast<size_t>(keep_last_));
    return Shape(x.begin(), x.end() - static_cast<long>(k));
  };
  const Shape& in = inputs[0].shape();
  Shape shape = leading(in);
  for (auto& src : source_shapes) shape = detail::broadcast_shapes("broadcast", shape, leading(src));
  shape.insert(shape.end(), in.end() - static_cast<long>(in.size() - leading(in).size()), in.end());
  return {shape};
}

namespace detail {
namespace {
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  }
  return true;
}
}  // namespace

array broadcast_for_elementwise(const array& a, const Shape& shape,
                                std::initializer_list<const array*> sources, StreamOrDevice s) {
  if (a.shape() == shape) return a;
  // A computed operand outside every transform and compile trace (the scalar of `z + 1.0`) is
  // broadcast at once: the view costs nothing, and the op's graph has one node instead of two.
  // Transforms and compile keep the node (their replays and shapeless shapes need it).
  if (a.status() == array::Status::available && !a.error() && !in_tracing() &&
      !in_compile_trace() && broadcasts_to(a.shape(), shape)) {
    Strides strides = common::broadcast_strides(a, shape);
    const auto layout = common::view_layout(shape, strides);
    return array::view_of(a, shape, std::move(strides), layout.flags, layout.data_size,
                          a.offset());
  }
  return array(broadcast_shapes("broadcast_to", a.shape(), shape), a.dtype(),
               std::make_shared<Broadcast>(to_stream(s), shape, sources), {a});
}

array broadcast_batch_for_product(const array& a, const Shape& batch, const array& other,
                                  StreamOrDevice s) {
  Shape shape = batch;
  shape.insert(shape.end(), a.shape().end() - 2, a.shape().end());
  if (!in_compile_trace()) return broadcast_to(a, shape, s);
  broadcast_shapes("broadcast_to", a.shape(), shape);  // checks
  const std::initializer_list<const array*> sources{&other};
  return array(shape, a.dtype(), std::make_shared<Broadcast>(to_stream(s), shape, sources, 2), {a});
}
}  // namespace detail

std::vector<array> broadcast_arrays(const std::vector<array>& inputs, StreamOrDevice s) {
  auto shape = detail::broadcast_shapes("broadcast_arrays", inputs);
  std::vector<array> out;
  out.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const array& a = inputs[i];
    if (a.shape() == shape || !detail::in_compile_trace()) {
      out.push_back(broadcast_to(a, shape, s));
      continue;
    }
    // While compile traces, each follows the others' shapes (a shapeless replay).
    std::vector<array> others;
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (j != i) others.push_back(inputs[j]);
    }
    out.push_back(array(shape, a.dtype(),
                        std::make_shared<Broadcast>(to_stream(s), shape, std::move(others)), {a}));
  }
  return out;
}

// ---- concatenate / stack ----

array concatenate(std::vector<array> arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) {
    throw std::invalid_argument("[concatenate] no arrays given to concatenate");
  }
  if (arrays.size() == 1) return arrays[0];
  const int ndim = static_cast<int>(arrays[0].ndim());
  if (ndim == 0) {
    throw std::invalid_argument(
        "[concatenate] 0-d arrays cannot be concatenated; use stack or flatten them first");
  }
  const int ax = detail::normalize_axis("concatenate", axis, ndim);
  auto shapes_str = [&] {
    std::string m;
    for (size_t i = 0; i < arrays.size(); ++i) {
      if (i) m += ", ";
      m += detail::shape_str(arrays[i].shape());
    }
    return m;
  };
  Shape shape = arrays[0].shape();
  int64_t total = 0;
  Dtype dtype = arrays[0].dtype();
  for (const auto& a : arrays) {
    if (static_cast<int>(a.ndim()) != ndim) {
      throw std::invalid_argument(
          "[concatenate] all arrays must have the same number of dimensions, got shapes " +
          shapes_str());
    }
    for (int i = 0; i < ndim; ++i) {
      if (i != ax && a.shape()[i] != shape[i]) {
        throw std::invalid_argument(
            "[concatenate] all dimensions except the concatenation axis " + std::to_string(axis) +
            " must match, got shapes " + shapes_str());
      }
    }
    total += a.shape()[ax];
    dtype = promote_types(dtype, a.dtype());
  }
  shape[ax] = detail::checked_dim("concatenate", total, "the concatenated axis");
  for (auto& a : arrays) {
    if (a.dtype() != dtype) a = astype(a, dtype, s);
  }
  return array(std::move(shape), dtype, std::make_shared<Concatenate>(to_stream(s), ax),
               std::move(arrays));
}

array concatenate(std::vector<array> arrays, StreamOrDevice s) {
  for (auto& a : arrays) a = flatten(a, s);
  return concatenate(std::move(arrays), 0, s);
}

array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) throw std::invalid_argument("[stack] no arrays given to stack");
  for (const auto& a : arrays) {
    if (a.shape() != arrays[0].shape()) {
      throw std::invalid_argument("[stack] all arrays must have the same shape, got " +
                                  detail::shape_str(arrays[0].shape()) + " and " +
                                  detail::shape_str(a.shape()));
    }
  }
  int ax = detail::normalize_axis("stack", axis, static_cast<int>(arrays[0].ndim()) + 1);
  std::vector<array> parts;
  parts.reserve(arrays.size());
  for (const auto& a : arrays) parts.push_back(expand_dims(a, ax, s));
  if (parts.size() == 1) return parts[0];
  return concatenate(std::move(parts), ax, s);
}

array stack(const std::vector<array>& arrays, StreamOrDevice s) { return stack(arrays, 0, s); }

// ---- split / unstack ----

std::vector<array> split(const array& a, const Shape& indices, int axis, StreamOrDevice s) {
  const int ax = detail::normalize_axis("split", axis, static_cast<int>(a.ndim()));
  if (indices.empty()) return {a};
  const int n = a.shape()[ax];
  // NumPy slicing rules: negative indices count from the end, then clamp to [0, n].
  Shape idx(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    int v = indices[i] < 0 ? indices[i] + n : indices[i];
    idx[i] = std::clamp(v, 0, n);
  }
  std::vector<Shape> shapes(idx.size() + 1, a.shape());
  for (size_t k = 0; k <= idx.size(); ++k) {
    int start = k == 0 ? 0 : idx[k - 1];
    int stop = k == idx.size() ? n : idx[k];
    shapes[k][ax] = std::max(stop - start, 0);
  }
  std::vector<Dtype> dtypes(shapes.size(), a.dtype());
  return array::make_arrays(std::move(shapes), dtypes,
                            std::make_shared<Split>(to_stream(s), std::move(idx), ax), {a});
}

std::vector<array> split(const array& a, const Shape& indices, StreamOrDevice s) {
  return split(a, indices, 0, s);
}

std::vector<array> split(const array& a, int num_splits, int axis, StreamOrDevice s) {
  const int ax = detail::normalize_axis("split", axis, static_cast<int>(a.ndim()));
  if (num_splits <= 0) {
    throw std::invalid_argument("[split] num_splits must be positive, got " +
                                std::to_string(num_splits));
  }
  const int n = a.shape()[ax];
  if (n % num_splits != 0) {
    throw std::invalid_argument("[split] cannot split axis " + std::to_string(axis) +
                                " of size " + std::to_string(n) + " (shape " +
                                detail::shape_str(a.shape()) + ") into " +
                                std::to_string(num_splits) + " equal parts");
  }
  Shape indices(num_splits - 1);
  for (int i = 0; i + 1 < num_splits; ++i) indices[i] = (i + 1) * (n / num_splits);
  return split(a, indices, ax, s);
}

std::vector<array> split(const array& a, int num_splits, StreamOrDevice s) {
  return split(a, num_splits, 0, s);
}

std::vector<array> unstack(const array& a, int axis, StreamOrDevice s) {
  const int ax = detail::normalize_axis("unstack", axis, static_cast<int>(a.ndim()));
  const int n = a.shape()[ax];
  std::vector<array> out;
  if (n == 0) return out;
  out.reserve(n);
  for (auto& part : split(a, n, ax, s)) out.push_back(squeeze(part, ax, s));
  return out;
}

std::vector<array> unstack(const array& a, StreamOrDevice s) { return unstack(a, 0, s); }

// ---- depends ----

std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies) {
  if (inputs.empty()) throw std::invalid_argument("[depends] needs at least one input");
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (const auto& a : inputs) {
    shapes.push_back(a.shape());
    dtypes.push_back(a.dtype());
  }
  std::vector<array> all = inputs;
  all.insert(all.end(), dependencies.begin(), dependencies.end());
  const Stream s = inputs[0].has_primitive() ? inputs[0].primitive().stream() : to_stream({});
  return array::make_arrays(std::move(shapes), std::move(dtypes),
                            std::make_shared<Depends>(s, inputs.size()), std::move(all));
}

std::vector<Shape> Depends::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> out;
  for (size_t i = 0; i < n_; ++i) out.push_back(inputs[i].shape());
  return out;
}

bool Depends::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Depends*>(&other);
  return o && o->n_ == n_;
}

// The cotangents pass to the inputs; the dependencies get zeros.
std::vector<array> Depends::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> out;
  for (int arg : argnums) {
    out.push_back(static_cast<size_t>(arg) < n_ ? cotangents[arg]
                                                : zeros_like(primals[arg], stream()));
  }
  return out;
}

// ---- flip ----

array flip(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  auto norm = detail::normalize_axes("flip", axes, static_cast<int>(a.ndim()));
  if (norm.empty()) return a;
  auto shape = a.shape();
  return array(std::move(shape), a.dtype(), std::make_shared<Flip>(to_stream(s), std::move(norm)),
               {a});
}

array flip(const array& a, int axis, StreamOrDevice s) {
  return flip(a, std::vector<int>{axis}, s);
}

array flip(const array& a, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return flip(a, axes, s);
}

// ---- equivalence and output shapes ----

bool Broadcast::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Broadcast*>(&other);
  return o && o->shape_ == shape_ && o->keep_last_ == keep_last_;
}

std::vector<Shape> Broadcast::output_shapes(const std::vector<array>& inputs) {
  return {detail::broadcast_shapes("broadcast_to", inputs[0].shape(), shape_)};
}

bool Reshape::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Reshape*>(&other);
  return o && o->shape_ == shape_ && o->infer_ == infer_;
}

std::vector<Shape> Reshape::output_shapes(const std::vector<array>& inputs) {
  const size_t size = inputs[0].size();
  Shape out = shape_;
  if (infer_ >= 0) {
    size_t known = 1;
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int>(i) != infer_) known *= static_cast<size_t>(out[i]);
    }
    if (known == 0 || size % known != 0) {
      throw std::invalid_argument(
          "[reshape] shapeless compile: an input of shape " + detail::shape_str(inputs[0].shape()) +
          " does not reshape to " + detail::shape_str(out) + " with dim " +
          std::to_string(infer_) + " inferred");
    }
    out[static_cast<size_t>(infer_)] = static_cast<int32_t>(size / known);
  }
  size_t n = 1;
  for (auto d : out) n *= static_cast<size_t>(d);
  if (n != size) {
    throw std::invalid_argument("[reshape] shapeless compile: the traced target shape " +
                                detail::shape_str(out) + " does not fit an input of shape " +
                                detail::shape_str(inputs[0].shape()) +
                                "; give the dim that varies as -1, or compile without shapeless");
  }
  return {out};
}

bool Transpose::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Transpose*>(&other);
  return o && o->axes_ == axes_;
}

std::vector<Shape> Transpose::output_shapes(const std::vector<array>& inputs) {
  Shape out(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) out[i] = inputs[0].shape()[axes_[i]];
  return {out};
}

bool ExpandDims::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ExpandDims*>(&other);
  return o && o->axes_ == axes_;
}

std::vector<Shape> ExpandDims::output_shapes(const std::vector<array>& inputs) {
  return {output_shape(inputs[0].shape(), axes_)};
}

// Both list sorted positions: the squeeze's in its input, the expand_dims's in its output, so
// equal lists remove and insert the same unit dims.
bool ExpandDims::undoes(const Primitive& previous) const {
  auto* s = dynamic_cast<const Squeeze*>(&previous);
  return s && s->axes() == axes_;
}

bool Squeeze::undoes(const Primitive& previous) const {
  auto* e = dynamic_cast<const ExpandDims*>(&previous);
  return e && e->axes() == axes_;
}

bool Squeeze::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Squeeze*>(&other);
  return o && o->axes_ == axes_;
}

std::vector<Shape> Squeeze::output_shapes(const std::vector<array>& inputs) {
  return {output_shape(inputs[0].shape(), axes_)};
}

bool Concatenate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Concatenate*>(&other);
  return o && o->axis_ == axis_;
}

std::vector<Shape> Concatenate::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out[axis_] = 0;
  for (const auto& in : inputs) out[axis_] += in.shape()[axis_];
  return {out};
}

bool Split::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Split*>(&other);
  return o && o->axis_ == axis_ && o->indices_ == indices_;
}

bool Flip::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Flip*>(&other);
  return o && o->axes_ == axes_;
}

std::vector<Shape> Flip::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

bool Pad::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Pad*>(&other);
  return o && o->axes_ == axes_ && o->low_ == low_ && o->high_ == high_;
}

// The array's iteration is an op (a slice of the first axis), so it is defined with the ops.
array::ArrayIterator::reference array::ArrayIterator::operator*() const {
  if (idx_ < 0 || idx_ >= arr_.shape(0)) {
    throw std::out_of_range("[array] iterator index " + std::to_string(idx_) +
                            " is outside the first axis of size " + std::to_string(arr_.shape(0)));
  }
  Shape start(arr_.ndim(), 0), stop = arr_.shape();
  start[0] = idx_;
  stop[0] = idx_ + 1;
  Shape rest(arr_.shape().begin() + 1, arr_.shape().end());
  return reshape(slice(arr_, std::move(start), std::move(stop)), std::move(rest));
}

}  // namespace tessera
