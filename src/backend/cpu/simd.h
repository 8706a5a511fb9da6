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

// Max (IsMax) or min of x[0, n) for float or double; NaN if any element is NaN, -inf (max) or
// +inf (min) when n is 0. Four accumulators hide the compare-select latency; NaNs are tracked in
// a separate mask, as a select keeps whichever operand its comparison prefers.
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
  for (; i + 4 * W <= n; i += 4 * W) {
    for (int k = 0; k < 4; ++k) {
      V b;
      std::memcpy(&b, x + i + k * W, sizeof(V));
      if constexpr (IsMax) {
        a[k] = b > a[k] ? b : a[k];
      } else {
        a[k] = b < a[k] ? b : a[k];
      }
      nan |= b != b;
    }
  }
  T r = init;
  bool any_nan = false;
  auto pick = [&](T v) {
    any_nan |= v != v;
    r = IsMax ? (v > r ? v : r) : (v < r ? v : r);
  };
  for (int k = 0; k < 4; ++k)
    for (size_t l = 0; l < W; ++l) pick(a[k][l]);
  for (size_t l = 0; l < W; ++l) any_nan |= nan[l] != 0;
  for (; i < n; ++i) pick(x[i]);
  return any_nan ? std::numeric_limits<T>::quiet_NaN() : r;
}

}  // namespace tessera::cpu
