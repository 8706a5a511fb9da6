// CPU kernels of Softmax and LogSumExp along the last axis (rows of a row-contiguous view).
// Halves compute in float; NaN propagates; rows of -inf give -inf (logsumexp) / NaN (softmax).
#include <cmath>
#include <limits>
#include <type_traits>

#include "backend/cpu/copy.h"
#include "core/thread_pool.h"
#include "ops/reduce.h"

namespace tessera {

namespace {

template <typename T>
using ComputeOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T, typename F>
void for_rows(const array& in_any, array& out, F&& f) {
  array in = cpu::ensure_row_contiguous(in_any);
  size_t n = in.ndim() == 0 ? 1 : static_cast<size_t>(in.shape(-1));
  if (in.size() == 0 || n == 0) return;
  size_t rows = in.size() / n;
  const T* x = in.data<T>();
  size_t grain = std::max<size_t>(1, (size_t{1} << 14) / n);
  detail::parallel_for(rows, grain, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) f(x + r * n, n, r);
  });
}

template <typename C, typename T>
C row_max(const T* x, size_t n) {
  C m = -std::numeric_limits<C>::infinity();
  bool nan = false;
  for (size_t i = 0; i < n; ++i) {
    C v = static_cast<C>(x[i]);
    nan |= v != v;
    m = v > m ? v : m;
  }
  return nan ? std::numeric_limits<C>::quiet_NaN() : m;
}

}  // namespace

void Softmax::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      using C = ComputeOf<T>;
      T* y = out.data<T>();
      for_rows<T>(inputs[0], out, [&](const T* x, size_t n, size_t r) {
        T* yr = y + r * n;
        C m = row_max<C>(x, n);
        C total = 0;
        if constexpr (std::is_same_v<T, C>) {
          for (size_t i = 0; i < n; ++i) {
            yr[i] = std::exp(x[i] - m);
            total += yr[i];
          }
          C inv = C(1) / total;
          for (size_t i = 0; i < n; ++i) yr[i] *= inv;
        } else {
          for (size_t i = 0; i < n; ++i) total += std::exp(static_cast<C>(x[i]) - m);
          C inv = C(1) / total;
          for (size_t i = 0; i < n; ++i) yr[i] = T(std::exp(static_cast<C>(x[i]) - m) * inv);
        }
      });
    } else {
      throw std::invalid_argument("[softmax] expects a floating point input, got " +
                                  dtype_name(out.dtype()));
    }
  });
}

void LogSumExp::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      using C = ComputeOf<T>;
      T* y = out.data<T>();
      for_rows<T>(inputs[0], out, [&](const T* x, size_t n, size_t r) {
        C m = row_max<C>(x, n);
        if (std::isinf(m) || m != m) {
          y[r] = T(m);
          return;
        }
        C total = 0;
        for (size_t i = 0; i < n; ++i) total += std::exp(static_cast<C>(x[i]) - m);
        y[r] = T(m + std::log(total));
      });
    } else {
      throw std::invalid_argument("[logsumexp] expects a floating point input, got " +
                                  dtype_name(out.dtype()));
    }
  });
}

}  // namespace tessera
