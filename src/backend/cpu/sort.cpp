// CPU kernels of the sort family. Every line along the axis is gathered into a scratch buffer
// (or sorted in place in the output when the axis is innermost), ordered with NaNs last, and
// written back. Partition goes through its index permutation so that it always agrees with
// ArgPartition (their derivatives rely on it).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <type_traits>

#include "backend/cpu/copy.h"
#include "backend/cpu/elementwise.h"
#include "core/thread_pool.h"
#include "ops/sort.h"

namespace tessera {

namespace {

// Strict weak order with NaN after every number (complex: lexicographic, NaN in either part last).
template <typename T>
inline bool nan_less(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, complex64_t>) {
    bool an = std::isnan(a.real()) || std::isnan(a.imag());
    bool bn = std::isnan(b.real()) || std::isnan(b.imag());
    if (an || bn) return !an && bn;
    return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    return nan_less(static_cast<float>(a), static_cast<float>(b));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (a != a || b != b) return a == a && b != b;
    return a < b;
  } else {
    return a < b;
  }
}

struct Lines {
  size_t outer, n, inner;
};
Lines lines_of(const array& a, int axis) {
  Lines l{1, static_cast<size_t>(a.shape(axis)), 1};
  for (int d = 0; d < axis; ++d) l.outer *= static_cast<size_t>(a.shape(d));
  for (int d = axis + 1; d < static_cast<int>(a.ndim()); ++d) l.inner *= static_cast<size_t>(a.shape(d));
  return l;
}

// Calls f(values, n, out_line_index) for every line, in parallel; values is a scratch copy of
// the line, and (o, j) = out_line_index identifies where results go.
template <typename T, typename F>
void for_each_line(const array& in, const Lines& l, F&& f) {
  const T* x = in.data<T>();
  size_t nlines = l.outer * l.inner;
  size_t grain = std::max<size_t>(1, (size_t{1} << 12) / std::max<size_t>(l.n, 1));
  detail::parallel_for(nlines, grain, [&](size_t b, size_t e) {
    auto buf = std::make_unique<T[]>(l.n);
    for (size_t line = b; line < e; ++line) {
      size_t o = line / l.inner, j = line % l.inner;
      const T* src = x + o * l.n * l.inner + j;
      for (size_t i = 0; i < l.n; ++i) buf[i] = src[i * l.inner];
      f(buf.get(), o * l.n * l.inner + j);
    }
  });
}

template <typename T>
void sort_values(const array& in_any, array& out, int axis) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  array in = cpu::ensure_row_contiguous(in_any);
  Lines l = lines_of(in, axis);
  T* y = out.data<T>();
  for_each_line<T>(in, l, [&](T* v, size_t base) {
    std::stable_sort(v, v + l.n, nan_less<T>);
    for (size_t i = 0; i < l.n; ++i) y[base + i * l.inner] = v[i];
  });
}

// Fills idx[0..n) with the order of v (argsort, stable) or an argpartition around kth. Equal
// values are ordered by index in both, so a partition of ties is the stable sort's: the lowest
// indices before kth (MLX on the CPU, e.g. mlx-lm's top-k routing over tied expert scores).
template <typename T>
void order_indices(const T* v, uint32_t* idx, size_t n, int kth) {
  std::iota(idx, idx + n, 0u);
  if (kth < 0) {
    std::stable_sort(idx, idx + n, [v](uint32_t a, uint32_t b) { return nan_less(v[a], v[b]); });
  } else {
    std::nth_element(idx, idx + kth, idx + n, [v](uint32_t a, uint32_t b) {
      return nan_less(v[a], v[b]) || (!nan_less(v[b], v[a]) && a < b);
    });
  }
}

// kth < 0: argsort. Writes indices (as_values=false) or the values they select.
template <typename T>
void arg_kernel(const array& in_any, array& out, int axis, int kth, bool as_values) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  array in = cpu::ensure_row_contiguous(in_any);
  Lines l = lines_of(in, axis);
  size_t nlines = l.outer * l.inner;
  size_t grain = std::max<size_t>(1, (size_t{1} << 12) / std::max<size_t>(l.n, 1));
  const T* x = in.data<T>();
  detail::parallel_for(nlines, grain, [&](size_t b, size_t e) {
    auto buf = std::make_unique<T[]>(l.n);
    auto idx = std::make_unique<uint32_t[]>(l.n);
    for (size_t line = b; line < e; ++line) {
      size_t o = line / l.inner, j = line % l.inner;
      size_t base = o * l.n * l.inner + j;
      for (size_t i = 0; i < l.n; ++i) buf[i] = x[base + i * l.inner];
      order_indices(buf.get(), idx.get(), l.n, kth);
      if (as_values) {
        T* y = out.data<T>();
        for (size_t i = 0; i < l.n; ++i) y[base + i * l.inner] = buf[idx[i]];
      } else {
        uint32_t* y = out.data<uint32_t>();
        for (size_t i = 0; i < l.n; ++i) y[base + i * l.inner] = idx[i];
      }
    }
  });
}

}  // namespace

void Sort::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::dispatch_dtype(inputs[0].dtype(), [&](auto tag) {
    sort_values<decltype(tag)>(inputs[0], out, axis_);
  });
}

void ArgSort::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::dispatch_dtype(inputs[0].dtype(), [&](auto tag) {
    arg_kernel<decltype(tag)>(inputs[0], out, axis_, -1, false);
  });
}

void Partition::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::dispatch_dtype(inputs[0].dtype(), [&](auto tag) {
    arg_kernel<decltype(tag)>(inputs[0], out, axis_, kth_, true);
  });
}

void ArgPartition::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::dispatch_dtype(inputs[0].dtype(), [&](auto tag) {
    arg_kernel<decltype(tag)>(inputs[0], out, axis_, kth_, false);
  });
}

void SearchSorted::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array seq = cpu::ensure_row_contiguous(inputs[0]);
  const array vals = cpu::ensure_row_contiguous(inputs[1]);
  out.set_data(allocator::malloc(out.nbytes()));
  uint32_t* dst = out.data<uint32_t>();
  detail::dispatch_dtype(seq.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = seq.data<T>();
    const T* v = vals.data<T>();
    const size_t n = seq.size();
    cpu::parallel_blocks(vals.size(), 4096, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        const T* at = right_ ? std::upper_bound(a, a + n, v[i], nan_less<T>)
                             : std::lower_bound(a, a + n, v[i], nan_less<T>);
        dst[i] = static_cast<uint32_t>(at - a);
      }
    });
  });
}

}  // namespace tessera
