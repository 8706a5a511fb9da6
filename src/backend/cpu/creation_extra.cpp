// CPU kernels of the creation extras (see ops/creation_extra.h).
#include <algorithm>
#include <cstring>

#include "backend/cpu/copy.h"
#include "backend/cpu/shape_util.h"
#include "backend/cpu/strided.h"
#include "core/thread_pool.h"
#include "ops/creation_extra.h"

namespace tessera {

void Linspace::eval_cpu(const std::vector<array>&, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  const size_t n = out.size();
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    // Same arithmetic as MLX: (1 - t) * start + t * stop with t = i / (n - 1), in float32
    // unless the output is float64.
    auto fill = [&](auto zero) {
      using C = decltype(zero);
      const C start = static_cast<C>(start_), stop = static_cast<C>(stop_);
      if (n == 1) {
        o[0] = detail::cast_scalar<T, C>(start);
        return;
      }
      const C denom = static_cast<C>(endpoint_ ? n - 1 : n);
      for (size_t i = 0; i < n; ++i) {
        C t = static_cast<C>(i) / denom;
        o[i] = detail::cast_scalar<T, C>((C(1) - t) * start + t * stop);
      }
    };
    if (out.dtype() == float64) {
      fill(double{});
    } else {
      fill(float{});
    }
  });
}

void Eye::eval_cpu(const std::vector<array>&, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t n = out.shape()[0], m = out.shape()[1];
  std::memset(out.raw_data(), 0, out.nbytes());
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T one = detail::cast_scalar<T, int>(1);
    for (int64_t i = 0; i < n; ++i) {
      if (lower_triangle_) {
        // Columns j <= i + k.
        int64_t end = std::clamp<int64_t>(i + k_ + 1, 0, m);
        std::fill(o + i * m, o + i * m + end, one);
      } else {
        int64_t j = i + k_;
        if (j >= 0 && j < m) o[i * m + j] = one;
      }
    }
  });
}

void Triangular::eval_cpu(const std::vector<array>& inputs, array& out) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t rows = out.shape(-2), cols = out.shape(-1);
  const size_t total_rows = out.size() / static_cast<size_t>(cols);
  const size_t isz = out.itemsize();
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  detail::parallel_for(total_rows, std::max<size_t>(1, cpu::kElementwiseGrain / cols),
                       [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      const int64_t i = static_cast<int64_t>(r % static_cast<size_t>(rows));
      // Kept columns [lo, hi): tril keeps j <= i + k, triu keeps j >= i + k.
      int64_t lo = upper_ ? std::clamp<int64_t>(i + k_, 0, cols) : 0;
      int64_t hi = upper_ ? cols : std::clamp<int64_t>(i + k_ + 1, 0, cols);
      char* d = dst + r * cols * isz;
      const char* s = src + r * cols * isz;
      std::memset(d, 0, static_cast<size_t>(lo) * isz);
      if (hi > lo) std::memcpy(d + lo * isz, s + lo * isz, static_cast<size_t>(hi - lo) * isz);
      std::memset(d + hi * isz, 0, static_cast<size_t>(cols - hi) * isz);
    }
  });
}

void View::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  const int64_t ib = static_cast<int64_t>(in.itemsize()), ob = static_cast<int64_t>(out.itemsize());
  // Sharing needs every stride but the last and the offset to land on whole output items, and
  // (when sizes differ) the last axis to be dense.
  auto shareable = [&](const array& x) {
    if (x.size() == 0) return true;
    if ((x.offset() * ib) % ob != 0) return false;
    if (ib == ob) return true;
    if (x.strides().back() != 1) return false;
    for (size_t i = 0; i + 1 < x.ndim(); ++i) {
      if ((x.strides()[i] * ib) % ob != 0) return false;
    }
    return true;
  };
  array src = shareable(in) ? in : cpu::ensure_row_contiguous(in);
  Strides st = src.strides();
  for (size_t i = 0; i + 1 < st.size(); ++i) st[i] = st[i] * ib / ob;
  if (ib != ob && out.size() > 0) st.back() = 1;
  if (out.size() == 0) st = detail::row_strides(out.shape());
  cpu::make_view(out, src, st, src.offset() * ib / ob);
}

void AsStrided::eval_cpu(const std::vector<array>& inputs, array& out) {
  array src = cpu::ensure_row_contiguous(inputs[0]);
  cpu::make_view(out, src, strides_, src.offset() + static_cast<int64_t>(offset_));
}

void Contiguous::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  // Share only when the input's buffer is not much larger than the result (a small view must
  // not keep a big buffer alive).
  constexpr size_t kSlackBytes = 16384;
  bool layout_ok = in.flags().row_contiguous || (allow_col_major_ && in.flags().col_contiguous);
  if (layout_ok && in.buffer_size() <= out.nbytes() + kSlackBytes) {
    out.copy_shared_buffer(in);
    return;
  }
  cpu::copy_contiguous(in, out);
}

}  // namespace tessera
