// Ops of the indexing family (see tessera/ops.h): slicing views, slice updates, take/gather and
// the scatter family. Names, argument orders and semantics follow MLX's mlx/ops.h.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// A strided view a[start:stop:strides] (one entry per dim). Negative start/stop count from the
// end; out-of-range values are clamped as NumPy does; negative strides walk backwards.
array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s = {});
array slice(const array& a, Shape start, Shape stop, StreamOrDevice s = {});
// A slice of `slice_size` whose start along `axes` is read from the integer array `start` at
// evaluation time (negative starts count from the end; starts are clamped so the slice fits).
// (A template so that braced lists in slice(a, {..}, {..}, {..}) pick the static overload.)
array slice_dynamic(const array& a, const array& start, std::vector<int> axes, Shape slice_size,
                    StreamOrDevice s = {});
template <typename A, typename = std::enable_if_t<std::is_same_v<A, array>>>
array slice(const array& a, const A& start, std::vector<int> axes, Shape slice_size,
            StreamOrDevice s = {}) {
  return slice_dynamic(a, start, std::move(axes), std::move(slice_size), s);
}

// A copy of `src` with the region src[start:stop:strides] replaced by `update` (broadcast to the
// region's shape and cast to src's dtype).
array slice_update(const array& src, const array& update, Shape start, Shape stop, Shape strides,
                   StreamOrDevice s = {});
array slice_update(const array& src, const array& update, Shape start, Shape stop,
                   StreamOrDevice s = {});
// The region of update's shape (broadcast as MLX: leading dims of src prepended, size 1 along
// those of `axes`) starting at `start` (an integer array, read at evaluation time, wrapped when
// negative and clamped so the region fits) along `axes` and at 0 elsewhere.
array slice_update_dynamic(const array& src, const array& update, const array& start,
                           std::vector<int> axes, StreamOrDevice s = {});
template <typename A, typename = std::enable_if_t<std::is_same_v<A, array>>>
array slice_update(const array& src, const array& update, const A& start, std::vector<int> axes,
                   StreamOrDevice s = {}) {
  return slice_update_dynamic(src, update, start, std::move(axes), s);
}

// Elements of `a` along `axis` at `indices` (any integer dtype; negative indices count from the
// end). The output shape is a.shape[:axis] + indices.shape + a.shape[axis+1:].
array take(const array& a, const array& indices, int axis, StreamOrDevice s = {});
// Take from the flattened `a`.
array take(const array& a, const array& indices, StreamOrDevice s = {});
array take(const array& a, int index, int axis, StreamOrDevice s = {});
array take(const array& a, int index, StreamOrDevice s = {});

// out[..., i, ...] = a[..., indices[..., i, ...], ...] along `axis`; a and indices broadcast
// against each other except along `axis`.
array take_along_axis(const array& a, const array& indices, int axis, StreamOrDevice s = {});
// A copy of `a` with values written at `indices` along `axis` (last write wins on duplicates).
array put_along_axis(const array& a, const array& indices, const array& values, int axis,
                     StreamOrDevice s = {});
// As put_along_axis, but values are added (duplicates accumulate).
array scatter_add_axis(const array& a, const array& indices, const array& values, int axis,
                       StreamOrDevice s = {});

// Slices of `slice_sizes` starting at the positions given by `indices` (broadcast together) along
// `axes` (0 elsewhere). Output shape: broadcast(indices).shape + slice_sizes.
array gather(const array& a, const std::vector<array>& indices, const std::vector<int>& axes,
             const Shape& slice_sizes, StreamOrDevice s = {});
inline array gather(const array& a, const array& indices, int axis, const Shape& slice_sizes,
                    StreamOrDevice s = {}) {
  return gather(a, std::vector<array>{indices}, std::vector<int>{axis}, slice_sizes, s);
}

// Scatter `updates` (shape: broadcast(indices).shape + a slice shape of a.ndim() dims) into a copy
// of `a` at the positions given by `indices` along `axes`. Updates are applied in order: plain
// scatter keeps the last write; the others combine with the value already there.
array scatter(const array& a, const std::vector<array>& indices, const array& updates,
              const std::vector<int>& axes, StreamOrDevice s = {});
inline array scatter(const array& a, const array& indices, const array& updates, int axis,
                     StreamOrDevice s = {}) {
  return scatter(a, std::vector<array>{indices}, updates, std::vector<int>{axis}, s);
}
array scatter_add(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s = {});
inline array scatter_add(const array& a, const array& indices, const array& updates, int axis,
                         StreamOrDevice s = {}) {
  return scatter_add(a, std::vector<array>{indices}, updates, std::vector<int>{axis}, s);
}
array scatter_prod(const array& a, const std::vector<array>& indices, const array& updates,
                   const std::vector<int>& axes, StreamOrDevice s = {});
inline array scatter_prod(const array& a, const array& indices, const array& updates, int axis,
                          StreamOrDevice s = {}) {
  return scatter_prod(a, std::vector<array>{indices}, updates, std::vector<int>{axis}, s);
}
array scatter_max(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s = {});
inline array scatter_max(const array& a, const array& indices, const array& updates, int axis,
                         StreamOrDevice s = {}) {
  return scatter_max(a, std::vector<array>{indices}, updates, std::vector<int>{axis}, s);
}
array scatter_min(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s = {});
inline array scatter_min(const array& a, const array& indices, const array& updates, int axis,
                         StreamOrDevice s = {}) {
  return scatter_min(a, std::vector<array>{indices}, updates, std::vector<int>{axis}, s);
}

// ---- slice updates that combine, and masked_scatter (composites, as MLX's results) ----
// src with its [start, stop) slice (with strides) replaced by slice op update: update is cast to
// src's dtype and broadcast to the slice's shape.
array slice_update_add(const array& src, const array& update, Shape start, Shape stop,
                       Shape strides, StreamOrDevice s = {});
array slice_update_add(const array& src, const array& update, Shape start, Shape stop,
                       StreamOrDevice s = {});
array slice_update_prod(const array& src, const array& update, Shape start, Shape stop,
                        Shape strides, StreamOrDevice s = {});
array slice_update_prod(const array& src, const array& update, Shape start, Shape stop,
                        StreamOrDevice s = {});
array slice_update_max(const array& src, const array& update, Shape start, Shape stop,
                       Shape strides, StreamOrDevice s = {});
array slice_update_max(const array& src, const array& update, Shape start, Shape stop,
                       StreamOrDevice s = {});
array slice_update_min(const array& src, const array& update, Shape start, Shape stop,
                       Shape strides, StreamOrDevice s = {});
array slice_update_min(const array& src, const array& update, Shape start, Shape stop,
                       StreamOrDevice s = {});
// a with the positions where mask (bool, a's leading dims, broadcast over the rest) is true
// replaced by src's elements in order (src cast to a's dtype). Too few src elements is an
// error when evaluated.
array masked_scatter(const array& a, const array& mask, const array& src, StreamOrDevice s = {});

// ---- diagonals (composites of gather / scatter, as MLX) ----
// The offset-th diagonal of the (axis1, axis2) planes, as a new last axis. Throws
// std::invalid_argument for ndim < 2 or equal axes, std::out_of_range for an axis outside a.
array diagonal(const array& a, int offset = 0, int axis1 = 0, int axis2 = 1,
               StreamOrDevice s = {});
// 1-D a: the square matrix with a on its k-th diagonal; 2-D a: its k-th diagonal.
array diag(const array& a, int k = 0, StreamOrDevice s = {});
// Sum of the offset-th diagonal, accumulated in `dtype` (default: a's dtype; sum's promotion of
// small integers applies).
array trace(const array& a, int offset, int axis1, int axis2, Dtype dtype, StreamOrDevice s = {});
array trace(const array& a, int offset, int axis1, int axis2, StreamOrDevice s = {});
array trace(const array& a, StreamOrDevice s = {});

}  // namespace tessera
