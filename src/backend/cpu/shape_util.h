// Layout helpers of the shape family's CPU kernels, shared with the creation extras: same-dtype
// block copy, fill; the views themselves are device-neutral (backend/common/views.h).
#pragma once

#include "backend/common/views.h"
#include "tessera/array.h"

namespace tessera::cpu {

using common::make_view;
using common::view_layout;
using common::ViewLayout;

// Copy `src` (any layout) into `dst` (same dtype) at element strides `dst_strides`, walking
// src's shape; contiguous runs use memcpy. Parallel for large copies.
void copy_block(const array& src, char* dst, const Strides& dst_strides);
// Fill `out` (row-contiguous, allocated) with the itemsize() bytes at `value`.
void fill_bytes(array& out, const void* value);

}  // namespace tessera::cpu
