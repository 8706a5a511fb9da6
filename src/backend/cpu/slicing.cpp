// CPU kernels of slicing: Slice (a view with shifted offset and scaled strides), SliceUpdate (a
// copy of the source, donated when possible, with a strided region overwritten) and
// DynamicSlice (a copy of a region whose start is read from an array).
#include <cstring>
#include <string>

#include "backend/common/dispatch.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/shape_util.h"
#include "backend/cpu/strided.h"
#include "core/thread_pool.h"
#include "ops/indexing.h"

namespace tessera {

namespace {

// Copy elements between two strided layouts of `shape` (same dtype), element size `size`.
template <typename T>
void strided_copy(const T* src, const Strides& src_st, T* dst, const Strides& dst_st,
                  const Shape& shape) {
  size_t n = detail::shape_size(shape);
  if (n == 0) return;
  auto v = cpu::collapse<2>(shape, {src_st, dst_st});
  detail::parallel_for(n, cpu::kElementwiseGrain, [&](size_t b, size_t e) {
    cpu::for_each_run<2>(v, b, e, [&](const std::array<int64_t, 2>& off, int64_t len,
                                      const std::array<int64_t, 2>& st) {
      const T* s = src + off[0];
      T* d = dst + off[1];
      if (st[0] == 1 && st[1] == 1) {
        std::memcpy(d, s, static_cast<size_t>(len) * sizeof(T));
      } else {
        for (int64_t i = 0; i < len; ++i) d[i * st[1]] = s[i * st[0]];
      }
    });
  });
}

}  // namespace

void Slice::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  int64_t offset = in.offset();
  Strides strides(in.ndim());
  for (size_t i = 0; i < in.ndim(); ++i) {
    offset += static_cast<int64_t>(start_[i]) * in.strides()[i];
    strides[i] = in.strides()[i] * strides_[i];
  }
  auto v = cpu::view_layout(out.shape(), strides);
  out.copy_shared_buffer(in, strides, v.flags, v.data_size, offset);
}

void SliceUpdate::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& src = inputs[0];
  const array& upd = inputs[1];
  if (src.is_donatable() && src.flags().row_contiguous && src.data_size() == src.size() &&
      src.itemsize() == out.itemsize()) {
    out.copy_shared_buffer(src, detail::row_strides(out.shape()), src.flags(), src.size(),
                           src.offset());
  } else {
    cpu::copy_contiguous(src, out);
  }
  if (upd.size() == 0) return;
  const Strides& ost = out.strides();
  int64_t offset = 0;
  Strides dst_st(out.ndim());
  for (size_t i = 0; i < out.ndim(); ++i) {
    offset += static_cast<int64_t>(start_[i]) * ost[i];
    dst_st[i] = ost[i] * strides_[i];
  }
  common::dispatch_itemsize(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    strided_copy<T>(upd.data<T>(), upd.strides(), out.data<T>() + offset, dst_st, upd.shape());
  });
}

// Element offset (in `strides` units) of a region of `region` shape whose start along `axes` is
// read from `start` (wrapped when negative, clamped so the region fits).
static int64_t dynamic_offset(const array& start, const std::vector<int>& axes, const Shape& shape,
                       const Shape& region, const Strides& strides, const char* op) {
  auto starts = detail::dispatch_dtype(start.dtype(), [&](auto tag) {
    using I = decltype(tag);
    std::vector<int64_t> v(start.size());
    if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
      auto c = cpu::ensure_row_contiguous(start);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(c.template data<I>()[i]);
    } else {
      throw std::invalid_argument(std::string("[") + op +
                                  "] start indices must have an integer dtype");
    }
    return v;
  });
  int64_t offset = 0;
  for (size_t k = 0; k < axes.size(); ++k) {
    int ax = axes[k];
    int64_t n = shape[ax], size = region[ax];
    int64_t st = starts[k] < 0 ? starts[k] + n : starts[k];
    st = std::clamp<int64_t>(st, 0, std::max<int64_t>(n - size, 0));
    offset += st * strides[ax];
  }
  return offset;
}

void DynamicSlice::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  int64_t offset =
      dynamic_offset(inputs[1], axes_, a.shape(), out.shape(), a.strides(), "slice");
  common::dispatch_itemsize(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    strided_copy<T>(a.data<T>() + offset, a.strides(), out.data<T>(), out.strides(), out.shape());
  });
}

void DynamicSliceUpdate::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& src = inputs[0];
  const array& upd = inputs[1];
  if (src.is_donatable() && src.flags().row_contiguous && src.data_size() == src.size()) {
    out.copy_shared_buffer(src, detail::row_strides(out.shape()), src.flags(), src.size(),
                           src.offset());
  } else {
    cpu::copy_contiguous(src, out);
  }
  if (upd.size() == 0) return;
  int64_t offset = dynamic_offset(inputs[2], axes_, out.shape(), upd.shape(), out.strides(),
                                  "slice_update");
  common::dispatch_itemsize(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    strided_copy<T>(upd.data<T>(), upd.strides(), out.data<T>() + offset, out.strides(),
                    upd.shape());
  });
}

}  // namespace tessera
