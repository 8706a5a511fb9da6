// Walking strided arrays on the CPU: merge dimensions that are contiguous for every operand,
// then visit the elements [begin, end) (row-major order) as runs of the innermost dimension.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backend/common/views.h"
#include "tessera/array.h"

namespace tessera::cpu {

using common::broadcast_strides;

// Operands of one shape with their own strides (0 along broadcast dims).
template <size_t N>
struct StridedView {
  Shape shape;
  std::array<Strides, N> strides;
};

// Merge adjacent dims i, i+1 whenever stride[i] == stride[i+1] * shape[i+1] for every operand;
// drop dims of size 1. Keeps at least one dim.
template <size_t N>
StridedView<N> collapse(const Shape& shape, const std::array<Strides, N>& strides) {
  StridedView<N> v;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !v.shape.empty();
    for (size_t k = 0; merge && k < N; ++k) {
      merge = v.strides[k].back() == strides[k][d] * shape[d];
    }
    if (merge) {
      v.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) v.strides[k].back() = strides[k][d];
    } else {
      v.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) v.strides[k].push_back(strides[k][d]);
    }
  }
  if (v.shape.empty()) {
    v.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) v.strides[k].push_back(0);
  }
  return v;
}

// Calls f(offsets, n, inner_strides): offsets[k] is operand k's element offset at the start of a
// run of n elements along the innermost dimension, stepping by inner_strides[k].
template <size_t N, typename F>
void for_each_run(const StridedView<N>& v, size_t begin, size_t end, F&& f) {
  if (begin >= end) return;
  const int nd = static_cast<int>(v.shape.size());
  const int64_t inner = v.shape[nd - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = v.strides[k][nd - 1];
  // Multi-index of `begin`.
  std::vector<int64_t> idx(nd, 0);
  size_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = static_cast<int64_t>(rem % static_cast<size_t>(v.shape[d]));
    rem /= static_cast<size_t>(v.shape[d]);
  }
  std::array<int64_t, N> off{};
  for (size_t k = 0; k < N; ++k)
    for (int d = 0; d < nd; ++d) off[k] += idx[d] * v.strides[k][d];
  size_t pos = begin;
  while (pos < end) {
    int64_t n = std::min<int64_t>(inner - idx[nd - 1], static_cast<int64_t>(end - pos));
    f(off, n, inner_strides);
    pos += static_cast<size_t>(n);
    // Advance the multi-index by n (we end a run either at the row end or at `end`).
    idx[nd - 1] += n;
    for (size_t k = 0; k < N; ++k) off[k] += n * inner_strides[k];
    for (int d = nd - 1; d > 0 && idx[d] == v.shape[d]; --d) {
      idx[d] = 0;
      idx[d - 1] += 1;
      for (size_t k = 0; k < N; ++k) {
        off[k] += v.strides[k][d - 1] - static_cast<int64_t>(v.shape[d]) * v.strides[k][d];
      }
    }
  }
}

// Elements per parallel chunk for cheap elementwise work.
inline constexpr size_t kElementwiseGrain = size_t{1} << 15;

}  // namespace tessera::cpu
