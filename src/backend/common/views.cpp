#include "backend/common/views.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tessera::common {

ViewLayout view_layout(const Shape& shape, const Strides& strides) {
  ViewLayout v{{true, true, true}, 0};
  size_t size = detail::shape_size(shape);
  if (size == 0) return v;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    v.flags.row_contiguous = v.flags.row_contiguous && strides[i] == expected;
    expected *= shape[i];
  }
  expected = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    v.flags.col_contiguous = v.flags.col_contiguous && strides[i] == expected;
    expected *= shape[i];
  }
  // Contiguous as MLX means it: the elements the view reads fill one dense block of data_size
  // elements, in some order, broadcast (stride 0) dims aside. The non-zero strides, sorted, are
  // then the running products of their dims; data_size < size() when the view broadcasts.
  std::vector<std::pair<int64_t, int32_t>> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1 && strides[i] != 0) dims.emplace_back(strides[i], shape[i]);
  }
  std::sort(dims.begin(), dims.end());
  expected = 1;
  bool dense = true;
  for (auto& [st, n] : dims) {
    dense = dense && st == expected;
    expected *= n;
  }
  v.flags.contiguous = dense;
  if (dense) {
    v.data_size = static_cast<size_t>(expected);
  } else {
    // Span between the lowest and highest element (a broadcast scalar spans 1).
    int64_t span = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      span += static_cast<int64_t>(shape[i] - 1) * (strides[i] < 0 ? -strides[i] : strides[i]);
    }
    v.data_size = static_cast<size_t>(span);
  }
  return v;
}

void make_view(array& out, const array& in, const Strides& strides, int64_t offset) {
  auto v = view_layout(out.shape(), strides);
  out.copy_shared_buffer(in, strides, v.flags, v.data_size, offset);
}

}  // namespace tessera::common
