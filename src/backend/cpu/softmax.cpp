// CPU kernels of Softmax and LogSumExp along the last axis (rows of a row-contiguous view).
// Halves compute in float; NaN propagates; rows of -inf give -inf (logsumexp) / NaN (softmax).
// Float rows use the vectorisable exp of vector_math.h and lane-wise max/sum accumulators, so
// each pass over a row compiles to SIMD loops; rows are split over the thread pool.

// The NaN-aware selects compare floats; without this g++ keeps them as branches (a comparison
// might raise an FP flag) and the loops do not vectorise. Tessera never reads FP flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
// 64-byte vectors where the CPU has them (g++ prefers 32 bytes by default on AVX-512 parts);
// the math kernels here are compute-bound and run about 1.4x faster.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/cpu/copy.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/vector_math.h"
#include "core/thread_pool.h"
#include "tessera/primitives/reduce.h"

namespace tessera {

namespace {

template <typename T>
using ComputeOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// f(row, n, r) for every row r of the last axis, on the pool, in the widest ISA copy of the loop
// (f is always-inline, so it compiles into each copy).
template <typename T, typename F>
void for_rows(const array& in_any, array& out, F&& f) {
  array in = cpu::ensure_row_contiguous(in_any);
  size_t n = in.ndim() == 0 ? 1 : static_cast<size_t>(in.shape(-1));
  if (in.size() == 0 || n == 0) return;
  size_t rows = in.size() / n;
  const T* x = in.data<T>();
  size_t grain = std::max<size_t>(1, (size_t{1} << 14) / n);
  cpu::parallel_blocks(rows, grain, [&](size_t b, size_t e) {
    cpu::run_widest([&]() __attribute__((always_inline)) {
      for (size_t r = b; r < e; ++r) f(x + r * n, n, r);
    });
  });
}

constexpr size_t kLanes = 16;

// y[i] = exp(x[i] - m); returns the sum of the y[i] (kLanes partial sums, then pairwise).
[[gnu::always_inline]] inline float exp_shifted_sum(const float* x, float* y, size_t n, float m) {
  float s[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) {
      const float e = cpu::vexp(x[i + l] - m);
      y[i + l] = e;
      s[l] += e;
    }
  }
  float tail = 0.0f;
  for (; i < n; ++i) {
    y[i] = cpu::vexp(x[i] - m);
    tail += y[i];
  }
  for (size_t w = kLanes / 2; w > 0; w /= 2) {
    for (size_t l = 0; l < w; ++l) s[l] += s[l + w];
  }
  return s[0] + tail;
}

// Sum of exp(x[i] - m) without storing the terms.
[[gnu::always_inline]] inline float exp_shifted_total(const float* x, size_t n, float m) {
  float s[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) s[l] += cpu::vexp(x[i + l] - m);
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += cpu::vexp(x[i] - m);
  for (size_t w = kLanes / 2; w > 0; w /= 2) {
    for (size_t l = 0; l < w; ++l) s[l] += s[l + w];
  }
  return s[0] + tail;
}

template <typename C, typename T>
C row_max(const T* x, size_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return cpu::minmax_run<true>(x, n);
  }
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
      for_rows<T>(inputs[0], out, [&](const T* x, size_t n, size_t r) __attribute__((always_inline)) {
        T* yr = y + r * n;
        C m = row_max<C>(x, n);
        C total = 0;
        if constexpr (std::is_same_v<T, float>) {
          const float inv = 1.0f / exp_shifted_sum(x, yr, n, m);
          for (size_t i = 0; i < n; ++i) yr[i] *= inv;
        } else if constexpr (std::is_same_v<T, C>) {
          for (size_t i = 0; i < n; ++i) {
            yr[i] = std::exp(x[i] - m);
            total += yr[i];
          }
          C inv = C(1) / total;
          for (size_t i = 0; i < n; ++i) yr[i] *= inv;
        } else {
          // 16-bit floats: exp evaluated twice rather than kept in a float scratch row.
          for (size_t i = 0; i < n; ++i) total += cpu::vexp(static_cast<C>(x[i]) - m);
          C inv = C(1) / total;
          for (size_t i = 0; i < n; ++i) yr[i] = T(cpu::vexp(static_cast<C>(x[i]) - m) * inv);
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
      for_rows<T>(inputs[0], out, [&](const T* x, size_t n, size_t r) __attribute__((always_inline)) {
        C m = row_max<C>(x, n);
        if (std::isinf(m) || m != m) {
          y[r] = T(m);
          return;
        }
        C total = 0;
        if constexpr (std::is_same_v<T, float>) {
          total = exp_shifted_total(x, n, m);
        } else if constexpr (std::is_same_v<C, float>) {
          for (size_t i = 0; i < n; ++i) total += cpu::vexp(static_cast<C>(x[i]) - m);
        } else {
          for (size_t i = 0; i < n; ++i) total += std::exp(static_cast<C>(x[i]) - m);
        }
        y[r] = T(m + std::log(total));
      });
    } else {
      throw std::invalid_argument("[logsumexp] expects a floating point input, got " +
                                  dtype_name(out.dtype()));
    }
  });
}

}  // namespace tessera
