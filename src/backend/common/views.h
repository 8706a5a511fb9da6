// Views and strides, the same on every device: the flags of a strided view of a buffer, making
// one array a view of another's buffer, the strides of a broadcast. The op front ends (shape.cpp)
// and every back end's kernels use them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/array.h"

namespace tessera::common {

struct ViewLayout {
  array::Flags flags;
  // size() when dense; otherwise the span from the lowest to the highest element.
  size_t data_size;
};

// Flags of an array of `shape` with element `strides` (size-1 dims ignored; empty: all true).
ViewLayout view_layout(const Shape& shape, const Strides& strides);
// Make `out` a view of `in`'s buffer with `strides` and element `offset` (flags computed).
void make_view(array& out, const array& in, const Strides& strides, int64_t offset);

// Strides of `a` broadcast to `shape` (0 along broadcast and new leading dims).
inline Strides broadcast_strides(const array& a, const Shape& shape) {
  Strides s(shape.size(), 0);
  size_t off = shape.size() - a.ndim();
  for (size_t i = 0; i < a.ndim(); ++i) {
    s[off + i] = a.shape()[i] == 1 ? 0 : a.strides()[i];  // as MLX: every size-1 dim reads 0
  }
  return s;
}

}  // namespace tessera::common
