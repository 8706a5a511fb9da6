// Copy kernels: strided -> row-contiguous with dtype conversion (used by contiguous(), astype,
// and every kernel that needs a dense input).
#pragma once

#include <initializer_list>

#include "tessera/array.h"

namespace tessera::cpu {

// Write `src` (any layout, any dtype) into `dst`, which already has a row-contiguous buffer of
// the same shape; converts to dst's dtype.
void copy_into(const array& src, array& dst);
// Allocate `out` row-contiguous and fill it from `src` (converting dtype).
void copy_contiguous(const array& src, array& out);
// Give `out` a fresh row-contiguous buffer, or the buffer of a donatable input of the same dtype
// and size (which is then moved, not copied).
void allocate_or_donate(array& out, std::initializer_list<const array*> candidates);
// A row-contiguous version of `a` (itself when already row-contiguous). Runs synchronously on
// the calling (worker) thread; no graph.
array ensure_row_contiguous(const array& a);
// n float32 values rounded to bfloat16 (the scalar cast's bits), 16 lanes at a time where
// TESSERA_CPU_ISA allows AVX-512.
void narrow_to_bf16(const float* src, bfloat16_t* dst, size_t n);
// The same for rows x cols values, rows lds (src) and ldd (dst) apart.
void narrow_rows_to_bf16(const float* src, int64_t lds, int64_t rows, int64_t cols,
                         bfloat16_t* dst, int64_t ldd);
// Each of n float32 values as the sum of two bfloat16 values: hi = bfloat16(x), lo =
// bfloat16(x - hi) (x - hi is exact; hi + lo is x to within 2^-16 of |x|).
void split_to_bf16(const float* src, bfloat16_t* hi, bfloat16_t* lo, size_t n);

}  // namespace tessera::cpu
