// Front ends of the indexing family: slice / slice_update, take / take_along_axis /
// put_along_axis / scatter_add_axis, gather / scatter*, and their vjp/jvp/vmap rules.
#include "ops/indexing.h"

#include <algorithm>
#include <numeric>
#include <ostream>
#include <set>
#include <stdexcept>

#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace detail::idx {

std::string op_prefix(const char* op) { return std::string("[") + op + "] "; }

// Start/stride normalisation as NumPy: starts wrapped then clamped, stops clamped, the output
// size derived; strides of dims with one output element become 1. Returns the output shape and
// whether any stride is negative.
std::pair<Shape, bool> normalize_slice(const Shape& shape, Shape& start, const Shape& stop,
                                       Shape& strides) {
  Shape out(shape.size());
  bool neg = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t n = shape[i];
    int64_t st = start[i] < 0 ? start[i] + n : start[i];
    int64_t ed = stop[i] < 0 ? stop[i] + n : stop[i];
    int64_t step = strides[i];
    int64_t size;
    if (step < 0) {
      neg = true;
      st = std::min(st, n - 1);
      ed = std::max<int64_t>(ed, -1);
      ed = std::min(ed, st);
      size = (st - ed + (-step) - 1) / (-step);
    } else {
      st = std::clamp<int64_t>(st, 0, n);
      ed = std::clamp<int64_t>(ed, 0, n);
      ed = std::max(ed, st);
      size = (ed - st + step - 1) / step;
    }
    start[i] = static_cast<int32_t>(st);
    out[i] = static_cast<int32_t>(size);
    if (size == 1) strides[i] = 1;
    // An empty dim must not move the view's start outside the buffer.
    if (size == 0) start[i] = 0;
  }
  return {out, neg};
}

void check_slice_args(const char* op, const array& a, const Shape& start, const Shape& stop,
                      const Shape& strides) {
  if (start.size() != a.ndim() || stop.size() != a.ndim() || strides.size() != a.ndim()) {
    throw std::invalid_argument(
        op_prefix(op) + "got " + std::to_string(start.size()) + " starts, " +
        std::to_string(stop.size()) + " stops and " + std::to_string(strides.size()) +
        " strides for an array with " + std::to_string(a.ndim()) + " dimensions");
  }
  for (size_t i = 0; i < strides.size(); ++i) {
    if (strides[i] == 0) {
      throw std::invalid_argument(op_prefix(op) + "stride of dimension " + std::to_string(i) +
                                  " is 0 in strides " + detail::shape_str(strides));
    }
  }
}

// Slice / SliceUpdate from already normalised parameters (used by the derivatives too).
array make_slice(const array& a, Shape start, Shape strides, Shape out_shape, StreamOrDevice s) {
  auto shape = out_shape;
  return array(std::move(shape), a.dtype(),
               std::make_shared<Slice>(to_stream(s), std::move(start), std::move(strides),
                                       out_shape),
               {a});
}

array make_slice_update(const array& src, const array& upd, Shape start, Shape strides,
                        StreamOrDevice s) {
  auto shape = src.shape();
  return array(std::move(shape), src.dtype(),
               std::make_shared<SliceUpdate>(to_stream(s), std::move(start), std::move(strides)),
               {src, upd});
}

void check_index_dtype(const char* op, const array& idx) {
  if (idx.dtype() == bool_) {
    throw std::invalid_argument(op_prefix(op) + "boolean indices are not supported; use an " +
                                "integer dtype");
  }
  if (!is_integral(idx.dtype())) {
    throw std::invalid_argument(op_prefix(op) + "indices must have an integer dtype, got " +
                                dtype_name(idx.dtype()));
  }
}

Shape insert_dim(Shape s, int pos, int32_t v) {
  s.insert(s.begin() + pos, v);
  return s;
}

// Broadcast arrays of equal rank against each other in every dim except `axis`.
std::vector<array> broadcast_except_axis(const char* op, const std::vector<array>& arrays,
                                         int axis, StreamOrDevice s) {
  Shape common;
  bool first = true;
  for (const auto& x : arrays) {
    Shape rest = x.shape();
    rest.erase(rest.begin() + axis);
    common = first ? rest : detail::broadcast_shapes(op, common, rest);
    first = false;
  }
  std::vector<array> out;
  for (const auto& x : arrays) {
    out.push_back(broadcast_to(x, insert_dim(common, axis, x.shape(axis)), s));
  }
  return out;
}

// Common front end of scatter / scatter_add / ...
array scatter_impl(const char* op, ScatterReduce reduce, const array& a,
                   const std::vector<array>& indices, const array& updates,
                   const std::vector<int>& axes_in, StreamOrDevice s) {
  if (indices.size() > a.ndim()) {
    throw std::invalid_argument(op_prefix(op) + "got " + std::to_string(indices.size()) +
                                " index arrays for an array with " + std::to_string(a.ndim()) +
                                " dimensions");
  }
  if (indices.size() != axes_in.size()) {
    throw std::invalid_argument(op_prefix(op) + "got " + std::to_string(indices.size()) +
                                " index arrays but " + std::to_string(axes_in.size()) + " axes");
  }
  std::vector<int> axes;
  for (int ax : axes_in) axes.push_back(detail::normalize_axis(op, ax, static_cast<int>(a.ndim())));
  if (std::set<int>(axes.begin(), axes.end()).size() != axes.size()) {
    throw std::invalid_argument(op_prefix(op) + "repeated axis in the axes argument");
  }
  for (const auto& idx : indices) check_index_dtype(op, idx);
  Shape idx_shape = detail::broadcast_shapes(op, indices);
  if (updates.ndim() != a.ndim() + idx_shape.size()) {
    throw std::invalid_argument(
        op_prefix(op) + "updates of shape " + detail::shape_str(updates.shape()) + " have " +
        std::to_string(updates.ndim()) + " dimensions; expected " +
        std::to_string(a.ndim() + idx_shape.size()) + " (indices shape " +
        detail::shape_str(idx_shape) + " followed by a slice of the array's " +
        std::to_string(a.ndim()) + " dimensions)");
  }
  for (size_t i = 0; i < idx_shape.size(); ++i) {
    if (updates.shape(static_cast<int>(i)) != idx_shape[i]) {
      throw std::invalid_argument(op_prefix(op) + "updates of shape " +
                                  detail::shape_str(updates.shape()) +
                                  " do not start with the broadcast indices shape " +
                                  detail::shape_str(idx_shape));
    }
  }
  for (size_t i = 0; i < a.ndim(); ++i) {
    if (updates.shape(static_cast<int>(i + idx_shape.size())) > a.shape(static_cast<int>(i))) {
      throw std::invalid_argument(op_prefix(op) + "updates of shape " +
                                  detail::shape_str(updates.shape()) +
                                  " hold slices larger than the array of shape " +
                                  detail::shape_str(a.shape()));
    }
  }
  std::vector<array> inputs{a};
  for (const auto& idx : indices) inputs.push_back(broadcast_to(idx, idx_shape, s));
  inputs.push_back(astype(updates, a.dtype(), s));
  auto shape = a.shape();
  return array(std::move(shape), a.dtype(),
               std::make_shared<Scatter>(to_stream(s), reduce, std::move(axes)),
               std::move(inputs));
}

array scatter_axis_impl(const char* op, ScatterReduce reduce, const array& a,
                        const array& indices, const array& values, int axis_in,
                        StreamOrDevice s) {
  int axis = detail::normalize_axis(op, axis_in, static_cast<int>(a.ndim()));
  if (indices.ndim() != a.ndim()) {
    throw std::invalid_argument(op_prefix(op) + "indices of shape " +
                                detail::shape_str(indices.shape()) +
                                " must have as many dimensions as the array of shape " +
                                detail::shape_str(a.shape()));
  }
  // No index into an empty array is ever read, so its dtype does not matter (MLX accepts
  // put_along_axis(a, a, a) of an empty float array).
  if (a.size() == 0 && indices.size() == 0) return a;
  check_index_dtype(op, indices);
  if (a.size() == 0) return a;
  auto upd = astype(values, a.dtype(), s);
  if (upd.ndim() > indices.ndim()) {
    // Leading dims of size 1 beyond the indices' rank are dropped (as MLX).
    Shape tail(upd.shape().end() - static_cast<long>(indices.ndim()), upd.shape().end());
    for (size_t i = 0; i < upd.ndim() - indices.ndim(); ++i) {
      if (upd.shape(static_cast<int>(i)) != 1) {
        throw std::invalid_argument(op_prefix(op) + "values of shape " +
                                    detail::shape_str(values.shape()) +
                                    " cannot be broadcast to indices of shape " +
                                    detail::shape_str(indices.shape()));
      }
    }
    upd = reshape(upd, tail, s);
  }
  Shape iu = detail::broadcast_shapes(op, indices.shape(), upd.shape());
  auto inputs = broadcast_except_axis(
      op, {a, broadcast_to(indices, iu, s), broadcast_to(upd, iu, s)}, axis, s);
  auto shape = inputs[0].shape();
  return array(std::move(shape), a.dtype(),
               std::make_shared<ScatterAxis>(to_stream(s), reduce, axis), std::move(inputs));
}

const char* scatter_name(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::None: return "scatter";
    case ScatterReduce::Sum: return "scatter_add";
    case ScatterReduce::Prod: return "scatter_prod";
    case ScatterReduce::Max: return "scatter_max";
    case ScatterReduce::Min: return "scatter_min";
  }
  return "scatter";
}

}  // namespace detail::idx

using namespace detail::idx;

// ---- slicing ----

array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s) {
  check_slice_args("slice", a, start, stop, strides);
  auto [out_shape, neg] = normalize_slice(a.shape(), start, stop, strides);
  if (!neg && out_shape == a.shape()) return a;
  return make_slice(a, std::move(start), std::move(strides), std::move(out_shape), s);
}

array slice(const array& a, Shape start, Shape stop, StreamOrDevice s) {
  Shape strides(a.ndim(), 1);
  return slice(a, std::move(start), std::move(stop), std::move(strides), s);
}

array slice_dynamic(const array& a, const array& start, std::vector<int> axes,
                    Shape slice_size, StreamOrDevice s) {
  if (start.ndim() > 1) {
    throw std::invalid_argument("[slice] the start array must be 0-d or 1-d, got shape " +
                                detail::shape_str(start.shape()));
  }
  if (start.size() != axes.size()) {
    throw std::invalid_argument("[slice] got " + std::to_string(start.size()) +
                                " start values for " + std::to_string(axes.size()) + " axes");
  }
  check_index_dtype("slice", start);
  for (auto& ax : axes) ax = detail::normalize_axis("slice", ax, static_cast<int>(a.ndim()));
  if (std::set<int>(axes.begin(), axes.end()).size() != axes.size()) {
    throw std::invalid_argument("[slice] repeated axis in the axes argument");
  }
  if (slice_size.size() != a.ndim()) {
    throw std::invalid_argument("[slice] slice_size " + detail::shape_str(slice_size) +
                                " does not have one entry per dimension of the array of shape " +
                                detail::shape_str(a.shape()));
  }
  for (size_t i = 0; i < a.ndim(); ++i) {
    if (slice_size[i] < 0 || slice_size[i] > a.shape(static_cast<int>(i))) {
      throw std::invalid_argument("[slice] slice_size " + detail::shape_str(slice_size) +
                                  " does not fit in the array of shape " +
                                  detail::shape_str(a.shape()));
    }
  }
  auto shape = slice_size;
  return array(std::move(shape), a.dtype(),
               std::make_shared<DynamicSlice>(to_stream(s), std::move(axes), slice_size),
               {a, start});
}

array slice_update(const array& src, const array& update, Shape start, Shape stop, Shape strides,
                   StreamOrDevice s) {
  check_slice_args("slice_update", src, start, stop, strides);
  auto [upd_shape, neg] = normalize_slice(src.shape(), start, stop, strides);
  auto upd = astype(update, src.dtype(), s);
  if (upd.shape() != upd_shape) {
    if (upd.ndim() > upd_shape.size()) {
      throw std::invalid_argument("[slice_update] update of shape " +
                                  detail::shape_str(update.shape()) +
                                  " cannot be broadcast to the slice of shape " +
                                  detail::shape_str(upd_shape));
    }
    auto b = detail::broadcast_shapes("slice_update", upd.shape(), upd_shape);
    if (b != upd_shape) {
      throw std::invalid_argument("[slice_update] update of shape " +
                                  detail::shape_str(update.shape()) +
                                  " cannot be broadcast to the slice of shape " +
                                  detail::shape_str(upd_shape));
    }
    upd = broadcast_to(upd, upd_shape, s);
  }
  if (!neg && upd_shape == src.shape()) return upd;
  return make_slice_update(src, upd, std::move(start), std::move(strides), s);
}

array slice_update(const array& src, const array& update, Shape start, Shape stop,
                   StreamOrDevice s) {
  Shape strides(src.ndim(), 1);
  return slice_update(src, update, std::move(start), std::move(stop), std::move(strides), s);
}

array slice_update_dynamic(const array& src, const array& update, const array& start,
                           std::vector<int> axes, StreamOrDevice s) {
  if (start.ndim() > 1) {
    throw std::invalid_argument("[slice_update] the start array must be 0-d or 1-d, got shape " +
                                detail::shape_str(start.shape()));
  }
  if (start.size() != axes.size()) {
    throw std::invalid_argument("[slice_update] got " + std::to_string(start.size()) +
                                " start values for " + std::to_string(axes.size()) + " axes");
  }
  check_index_dtype("slice_update", start);
  for (auto& ax : axes) {
    ax = detail::normalize_axis("slice_update", ax, static_cast<int>(src.ndim()));
  }
  if (std::set<int>(axes.begin(), axes.end()).size() != axes.size()) {
    throw std::invalid_argument("[slice_update] repeated axis in the axes argument");
  }
  if (update.ndim() > src.ndim()) {
    throw std::invalid_argument("[slice_update] update of shape " +
                                detail::shape_str(update.shape()) +
                                " has more dimensions than the source of shape " +
                                detail::shape_str(src.shape()));
  }
  // Missing leading dims cover the whole source except along `axes`; others are capped.
  const size_t diff = src.ndim() - update.ndim();
  Shape up_shape(src.shape().begin(), src.shape().begin() + static_cast<long>(diff));
  up_shape.insert(up_shape.end(), update.shape().begin(), update.shape().end());
  for (size_t d = diff; d < src.ndim(); ++d) {
    up_shape[d] = std::min(up_shape[d], src.shape(static_cast<int>(d)));
  }
  for (int ax : axes) {
    if (static_cast<size_t>(ax) < diff) up_shape[ax] = 1;
  }
  auto upd = broadcast_to(astype(update, src.dtype(), s), up_shape, s);
  auto shape = src.shape();
  return array(std::move(shape), src.dtype(),
               std::make_shared<DynamicSliceUpdate>(to_stream(s), std::move(axes)),
               {src, upd, start});
}

// ---- take / gather ----

array gather(const array& a, const std::vector<array>& indices, const std::vector<int>& axes_in,
             const Shape& slice_sizes, StreamOrDevice s) {
  return gather_as("gather", a, indices, axes_in, slice_sizes, s);
}

array take_along_axis(const array& a, const array& indices, int axis_in, StreamOrDevice s) {
  return take_along_axis_as("take_along_axis", a, indices, axis_in, s);
}

namespace detail::idx {

array gather_as(const char* op, const array& a, const std::vector<array>& indices,
                const std::vector<int>& axes_in, const Shape& slice_sizes, StreamOrDevice s) {
  if (indices.size() > a.ndim()) {
    throw std::invalid_argument("[gather] got " + std::to_string(indices.size()) +
                                " index arrays for an array with " + std::to_string(a.ndim()) +
                                " dimensions");
  }
  if (indices.size() != axes_in.size()) {
    throw std::invalid_argument("[gather] got " + std::to_string(indices.size()) +
                                " index arrays but " + std::to_string(axes_in.size()) + " axes");
  }
  std::vector<int> axes;
  for (int ax : axes_in) {
    axes.push_back(detail::normalize_axis("gather", ax, static_cast<int>(a.ndim())));
  }
  if (std::set<int>(axes.begin(), axes.end()).size() != axes.size()) {
    throw std::invalid_argument("[gather] repeated axis in the axes argument");
  }
  for (const auto& idx : indices) check_index_dtype("gather", idx);
  if (slice_sizes.size() != a.ndim()) {
    throw std::invalid_argument("[gather] slice_sizes " + detail::shape_str(slice_sizes) +
                                " does not have one entry per dimension of the array of shape " +
                                detail::shape_str(a.shape()));
  }
  Shape idx_shape = detail::broadcast_shapes("gather", indices);
  size_t n_idx = detail::shape_size(idx_shape);
  size_t slice_total = detail::shape_size(slice_sizes);
  if (a.size() == 0) {
    if (n_idx != 0 && slice_total != 0) {
      throw std::invalid_argument("[gather] the array of shape " + detail::shape_str(a.shape()) +
                                  " is empty: the indices (shape " + detail::shape_str(idx_shape) +
                                  ") or the slice_sizes " + detail::shape_str(slice_sizes) +
                                  " must be empty");
    }
  } else {
    for (size_t i = 0; i < a.ndim(); ++i) {
      if (slice_sizes[i] < 0 || slice_sizes[i] > a.shape(static_cast<int>(i))) {
        throw std::invalid_argument("[gather] slice_sizes " + detail::shape_str(slice_sizes) +
                                    " must lie in [0, a.shape] for the array of shape " +
                                    detail::shape_str(a.shape()));
      }
    }
  }
  std::vector<array> inputs{a};
  for (const auto& idx : indices) inputs.push_back(broadcast_to(idx, idx_shape, s));
  Shape out_shape = idx_shape;
  out_shape.insert(out_shape.end(), slice_sizes.begin(), slice_sizes.end());
  return array(std::move(out_shape), a.dtype(),
               std::make_shared<Gather>(to_stream(s), std::move(axes), slice_sizes, op),
               std::move(inputs));
}

array take_along_axis_as(const char* op, const array& a, const array& indices, int axis_in,
                         StreamOrDevice s) {
  int axis = detail::normalize_axis("take_along_axis", axis_in, static_cast<int>(a.ndim()));
  if (indices.ndim() != a.ndim()) {
    throw std::invalid_argument("[take_along_axis] indices of shape " +
                                detail::shape_str(indices.shape()) +
                                " must have as many dimensions as the array of shape " +
                                detail::shape_str(a.shape()));
  }
  check_index_dtype("take_along_axis", indices);
  auto inputs = broadcast_except_axis("take_along_axis", {a, indices}, axis, s);
  if (inputs[0].shape(axis) == 0 && inputs[1].size() != 0) {
    throw std::invalid_argument("[take_along_axis] cannot take from axis " +
                                std::to_string(axis_in) + " of size 0 (array shape " +
                                detail::shape_str(a.shape()) + ")");
  }
  auto shape = inputs[1].shape();
  return array(std::move(shape), a.dtype(),
               std::make_shared<GatherAxis>(to_stream(s), axis, op), std::move(inputs));
}

}  // namespace detail::idx

array take(const array& a, const array& indices, int axis_in, StreamOrDevice s) {
  int axis = detail::normalize_axis("take", axis_in, static_cast<int>(a.ndim()));
  check_index_dtype("take", indices);
  const int n = a.shape(axis);
  if (n == 0 && indices.size() != 0) {
    throw std::invalid_argument("[take] cannot take " + std::to_string(indices.size()) +
                                " elements from axis " + std::to_string(axis_in) +
                                " of size 0 (array shape " + detail::shape_str(a.shape()) + ")");
  }
  if (axis == 0) {
    // Whole trailing slices per index (memcpy when `a` is row-contiguous), then drop the size-1
    // dim (a view).
    Shape slice_sizes = a.shape();
    slice_sizes[0] = 1;
    return squeeze(gather_as("take", a, {indices}, {0}, slice_sizes, s),
                   static_cast<int>(indices.ndim()), s);
  }
  // Along an inner axis: one flat index vector broadcast over the other dims (rows are read in
  // order, unlike per-index strided slices), then the index shape is restored (a view).
  Shape out_shape(a.shape().begin(), a.shape().begin() + axis);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), a.shape().begin() + axis + 1, a.shape().end());
  Shape ishape(a.ndim(), 1);
  ishape[axis] = static_cast<int32_t>(indices.size());
  auto r = take_along_axis_as("take", a, reshape(indices, ishape, s), axis, s);
  return reshape(r, out_shape, s);
}

array take(const array& a, const array& indices, StreamOrDevice s) {
  return take(reshape(a, Shape{-1}, s), indices, 0, s);
}

array take(const array& a, int index, int axis_in, StreamOrDevice s) {
  int axis = detail::normalize_axis("take", axis_in, static_cast<int>(a.ndim()));
  const int n = a.shape(axis);
  if (index < -n || index >= n) {
    throw std::invalid_argument("[take] index " + std::to_string(index) +
                                " is out of bounds for axis " + std::to_string(axis_in) +
                                " with size " + std::to_string(n));
  }
  if (index < 0) index += n;
  Shape start(a.ndim(), 0);
  Shape strides(a.ndim(), 1);
  start[axis] = index;
  Shape sliced = a.shape();
  sliced[axis] = 1;
  Shape out_shape = a.shape();
  out_shape.erase(out_shape.begin() + axis);
  auto v = sliced == a.shape() ? a : make_slice(a, start, strides, sliced, s);
  return reshape(v, out_shape, s);
}

array take(const array& a, int index, StreamOrDevice s) {
  return take(reshape(a, Shape{-1}, s), index, 0, s);
}

array put_along_axis(const array& a, const array& indices, const array& values, int axis,
                     StreamOrDevice s) {
  return scatter_axis_impl("put_along_axis", ScatterReduce::None, a, indices, values, axis, s);
}

array scatter_add_axis(const array& a, const array& indices, const array& values, int axis,
                       StreamOrDevice s) {
  return scatter_axis_impl("scatter_add_axis", ScatterReduce::Sum, a, indices, values, axis, s);
}

// ---- scatter ----

array scatter(const array& a, const std::vector<array>& indices, const array& updates,
              const std::vector<int>& axes, StreamOrDevice s) {
  return scatter_impl("scatter", ScatterReduce::None, a, indices, updates, axes, s);
}
array scatter_add(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s) {
  return scatter_impl("scatter_add", ScatterReduce::Sum, a, indices, updates, axes, s);
}
array scatter_prod(const array& a, const std::vector<array>& indices, const array& updates,
                   const std::vector<int>& axes, StreamOrDevice s) {
  return scatter_impl("scatter_prod", ScatterReduce::Prod, a, indices, updates, axes, s);
}
array scatter_max(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s) {
  return scatter_impl("scatter_max", ScatterReduce::Max, a, indices, updates, axes, s);
}
array scatter_min(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s) {
  return scatter_impl("scatter_min", ScatterReduce::Min, a, indices, updates, axes, s);
}

// ---- equivalence ----

bool Slice::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Slice*>(&other);
  return o && o->start_ == start_ && o->strides_ == strides_ && o->out_shape_ == out_shape_;
}
std::vector<Shape> SliceUpdate::output_shapes(const std::vector<array>& inputs) {
  const Shape& src = inputs[0].shape();
  const Shape& upd = inputs[1].shape();
  bool fits = src.size() == upd.size() && src.size() == start_.size();
  for (size_t d = 0; fits && d < src.size(); ++d) {
    if (upd[d] == 0) continue;
    const int64_t last = int64_t{start_[d]} + int64_t{upd[d] - 1} * strides_[d];
    fits = start_[d] >= 0 && start_[d] < src[d] && last >= 0 && last < src[d];
  }
  if (!fits) {
    throw std::invalid_argument("[slice_update] an update of shape " + detail::shape_str(upd) +
                                " at start " + detail::shape_str(start_) +
                                " does not fit a source of shape " + detail::shape_str(src) +
                                " (a shapeless compile replayed with new shapes)");
  }
  return {src};
}

bool SliceUpdate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const SliceUpdate*>(&other);
  return o && o->start_ == start_ && o->strides_ == strides_;
}
bool DynamicSlice::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const DynamicSlice*>(&other);
  return o && o->axes_ == axes_ && o->slice_size_ == slice_size_;
}
bool DynamicSliceUpdate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const DynamicSliceUpdate*>(&other);
  return o && o->axes_ == axes_;
}
bool Gather::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Gather*>(&other);
  return o && o->axes_ == axes_ && o->slice_sizes_ == slice_sizes_;
}
bool Scatter::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Scatter*>(&other);
  return o && o->reduce_ == reduce_ && o->axes_ == axes_;
}
void Scatter::print(std::ostream& os) const { os << "Scatter(" << scatter_name(reduce_) << ")"; }
bool GatherAxis::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const GatherAxis*>(&other);
  return o && o->axis_ == axis_;
}
bool ScatterAxis::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ScatterAxis*>(&other);
  return o && o->reduce_ == reduce_ && o->axis_ == axis_;
}

std::vector<Shape> Gather::output_shapes(const std::vector<array>& inputs) {
  const array& a = inputs[0];
  for (size_t i = 0; i < slice_sizes_.size() && i < a.ndim(); ++i) {
    if (slice_sizes_[i] > a.shape(static_cast<int>(i))) {
      throw std::invalid_argument("[" + std::string(op_) + "] shapeless compile: the traced slice "
                                  "sizes " + detail::shape_str(slice_sizes_) +
                                  " do not fit an array of shape " + detail::shape_str(a.shape()));
    }
  }
  Shape out = inputs.size() > 1 ? inputs[1].shape() : Shape{};
  for (size_t k = 2; k < inputs.size(); ++k) {
    out = detail::broadcast_shapes(op_, out, inputs[k].shape());
  }
  out.insert(out.end(), slice_sizes_.begin(), slice_sizes_.end());
  return {out};
}

}  // namespace tessera
