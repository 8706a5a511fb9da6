// GCC/Clang vector types for the kernels the compilers do not vectorise by themselves (NaN-aware
// max/min, first-index arg reductions), as wide as the build's target allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tessera::cpu {

// A vector wider than the target has registers for is split through the stack: 32-byte vectors
// in the baseline (SSE2) build of the wheel made max over 16 Mi float32 take 20 ms instead of 2.
#if defined(__AVX512F__)
inline constexpr size_t kVecBytes = 64;
#elif defined(__AVX__)
inline constexpr size_t kVecBytes = 32;
#else
inline constexpr size_t kVecBytes = 16;
#endif

typedef float VecF __attribute__((vector_size(kVecBytes)));
typedef int32_t MaskF __attribute__((vector_size(kVecBytes)));
typedef uint32_t IdxF __attribute__((vector_size(kVecBytes)));
typedef double VecD __attribute__((vector_size(kVecBytes)));
typedef int64_t MaskD __attribute__((vector_size(kVecBytes)));
typedef uint64_t IdxD __attribute__((vector_size(kVecBytes)));

template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  using V = VecF;   // values
  using M = MaskF;  // comparison results
  using I = IdxF;   // indices, one per lane
};
template <>
struct VecOf<double> {
  using V = VecD;
  using M = MaskD;
  using I = IdxD;
};

// Rows of at least this many elements take minmax_run (below, a plain loop is faster: a row of
// 4 floats took 35 instead of 23 ns).
inline constexpr size_t kMinMaxVectorFrom = 16;

// Max (IsMax) or min of x[0, n) for float or double; NaN if any element is NaN, -inf (max) or
// +inf (min) when n is 0. Four accumulators hide the compare-select latency; NaNs are tracked in
// a separate mask, as a select keeps whichever operand its comparison prefers. Which of -0 and +0
// a max of both returns depends on where they lie (as a sequential max would on their order).
template <bool IsMax, typename T>
T minmax_run(const T* x, size_t n) {
  using V = typename VecOf<T>::V;
  using M = typename VecOf<T>::M;
  constexpr size_t W = kVecBytes / sizeof(T);
  const T init = IsMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  V a[4];
  for (size_t l = 0; l < W; ++l) a[0][l] = init;
  a[1] = a[2] = a[3] = a[0];
  M nan = {};
  size_t i = 0;
  auto take = [&](V& acc, const T* p) {
    V b;
    std::memcpy(&b, p, sizeof(V));
    if constexpr (IsMax) {
      acc = b > acc ? b : acc;
    } else {
      acc = b < acc ? b : acc;
    }
    nan |= b != b;
  };
  for (; i + 4 * W <= n; i += 4 * W) {
    for (int k = 0; k < 4; ++k) take(a[k], x + i + k * W);
  }
  // Whole vectors left, then the last W elements (some seen already: a max is idempotent), into
  // one accumulator. The four are combined lane by lane, and the lanes in a tree (they never
  // hold a NaN: the mask has them). A row of 31 floats picked 31 values one by one before, one of
  // 48 took 112.
  for (; i + W <= n; i += W) take(a[0], x + i);
  if (i < n && n >= W) take(a[0], x + n - W);
  auto better = [](T u, T v) { return IsMax ? (v > u ? v : u) : (v < u ? v : u); };
  T lanes[W];
  for (size_t l = 0; l < W; ++l) {
    lanes[l] = better(better(a[0][l], a[1][l]), better(a[2][l], a[3][l]));
  }
  for (size_t w = W / 2; w > 0; w /= 2) {
    for (size_t l = 0; l < w; ++l) lanes[l] = better(lanes[l], lanes[l + w]);
  }
  bool any_nan = false;
  for (size_t l = 0; l < W; ++l) any_nan |= nan[l] != 0;
  for (; n < W && i < n; ++i) {  // fewer than W elements in all
    any_nan |= x[i] != x[i];
    lanes[0] = better(lanes[0], x[i]);
  }
  return any_nan ? std::numeric_limits<T>::quiet_NaN() : lanes[0];
}

}  // namespace tessera::cpu
