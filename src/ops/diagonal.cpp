// diagonal, diag and trace: composites of arange, gather, scatter and sum (no primitive of their
// own, so autodiff and vmap come from those ops).
#include <algorithm>
#include <stdexcept>

#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

// The two axes of a diagonal, normalised; MLX's error types (out_of_range for a bad axis).
std::pair<int, int> diagonal_axes(const char* op, const array& a, int axis1, int axis2) {
  const int nd = static_cast<int>(a.ndim());
  if (nd < 2) {
    throw std::invalid_argument(std::string("[") + op + "] the array must have at least 2 "
                                "dimensions, got shape " + detail::shape_str(a.shape()));
  }
  auto norm = [&](int ax) {
    if (ax < -nd || ax >= nd) {
      throw std::out_of_range(std::string("[") + op + "] axis " + std::to_string(ax) +
                              " is out of range for an array of " + std::to_string(nd) +
                              " dimensions");
    }
    return ax < 0 ? ax + nd : ax;
  };
  int a1 = norm(axis1), a2 = norm(axis2);
  if (a1 == a2) {
    throw std::invalid_argument(std::string("[") + op + "] axis1 and axis2 are the same axis (" +
                                std::to_string(a1) + ")");
  }
  return {a1, a2};
}

}  // namespace

array diagonal(const array& a, int offset, int axis1, int axis2, StreamOrDevice s) {
  auto [a1, a2] = diagonal_axes("diagonal", a, axis1, axis2);
  const int row0 = std::max(-offset, 0), col0 = std::max(offset, 0);
  const int len = std::max(0, std::min(a.shape(a1) - row0, a.shape(a2) - col0));
  array rows = arange(row0, row0 + len, s), cols = arange(col0, col0 + len, s);
  Shape slice_sizes = a.shape();
  slice_sizes[a1] = 1;
  slice_sizes[a2] = 1;
  array g = gather(a, {rows, cols}, {a1, a2}, slice_sizes, s);  // (len, *slice_sizes)
  g = squeeze(g, std::vector<int>{a1 + 1, a2 + 1}, s);
  return moveaxis(g, 0, -1, s);
}

array diag(const array& a, int k, StreamOrDevice s) {
  if (a.ndim() == 2) return diagonal(a, k, 0, 1, s);
  if (a.ndim() != 1) {
    throw std::invalid_argument("[diag] the array must be 1-D or 2-D, got shape " +
                                detail::shape_str(a.shape()));
  }
  const int n = a.shape(0);
  const int side = detail::checked_dim("diag", static_cast<int64_t>(n) + std::abs(int64_t{k}),
                                       "the matrix side");
  array out = zeros({side, side}, a.dtype(), s);
  if (n == 0) return out;
  const int row0 = std::max(-k, 0), col0 = std::max(k, 0);
  return scatter(out, {arange(row0, row0 + n, s), arange(col0, col0 + n, s)},
                 reshape(a, {n, 1, 1}, s), {0, 1}, s);
}

array trace(const array& a, int offset, int axis1, int axis2, Dtype dtype, StreamOrDevice s) {
  diagonal_axes("trace", a, axis1, axis2);  // checks first, with trace's name
  return sum(astype(diagonal(a, offset, axis1, axis2, s), dtype, s), -1, false, s);
}
array trace(const array& a, int offset, int axis1, int axis2, StreamOrDevice s) {
  return trace(a, offset, axis1, axis2, a.dtype(), s);
}
array trace(const array& a, StreamOrDevice s) { return trace(a, 0, 0, 1, a.dtype(), s); }

}  // namespace tessera
