// Layout helpers of the shape family's CPU kernels, shared with the creation extras (views,
// block copies): flags of a strided view, sharing a buffer, same-dtype block copy, fill.
#pragma once

#include "tessera/array.h"

namespace tessera::cpu {

struct ViewLayout {
  array::Flags flags;
  // size() when dense; otherwise the span from the lowest to the highest element.
  size_t data_size;
};

// Flags of an array of `shape` with element `strides` (size-1 dims ignored; empty: all true).
ViewLayout view_layout(const Shape& shape, const Strides& strides);
// Make `out` a view of `in`'s buffer with `strides` and element `offset` (flags computed).
void make_view(array& out, const array& in, const Strides& strides, int64_t offset);
// Copy `src` (any layout) into `dst` (same dtype) at element strides `dst_strides`, walking
// src's shape; contiguous runs use memcpy. Parallel for large copies.
void copy_block(const array& src, char* dst, const Strides& dst_strides);
// Fill `out` (row-contiguous, allocated) with the itemsize() bytes at `value`.
void fill_bytes(array& out, const void* value);

}  // namespace tessera::cpu
