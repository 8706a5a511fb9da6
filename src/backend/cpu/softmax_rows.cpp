#include "backend/cpu/softmax_rows.h"

#include "backend/cpu/half_gemm.h"
#include "backend/cpu/vector_math.h"

namespace tessera::cpu {

namespace {

[[gnu::always_inline]] inline float exp_shift_sum_body(float* y, int n, float m) {
  for (int j = 0; j < n; ++j) y[j] = vexp(y[j] - m);
  float lanes[16] = {};
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    for (int t = 0; t < 16; ++t) lanes[t] += y[j + t];
  }
  float sum = 0;
  for (; j < n; ++j) sum += y[j];
  for (float lane : lanes) sum += lane;
  return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) float exp_shift_sum_avx512(
    float* y, int n, float m) {
  return exp_shift_sum_body(y, n, m);
}
__attribute__((target("avx2,fma"))) float exp_shift_sum_avx2(float* y, int n, float m) {
  return exp_shift_sum_body(y, n, m);
}
#endif

}  // namespace

float row_max(const float* y, int n, float m) {
  float lanes[16];
  for (float& lane : lanes) lane = m;
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    for (int t = 0; t < 16; ++t) lanes[t] = lanes[t] > y[j + t] ? lanes[t] : y[j + t];
  }
  for (; j < n; ++j) m = m > y[j] ? m : y[j];
  for (float lane : lanes) m = m > lane ? m : lane;
  return m;
}

float exp_shift_sum(float* y, int n, float m) {
#if defined(__x86_64__) && defined(__GNUC__)
  const HalfIsa isa = half_isa();  // fast.cpp's copy_isa() chooses from the same
  if (isa == HalfIsa::avx512 || isa == HalfIsa::avx512_bf16) return exp_shift_sum_avx512(y, n, m);
  if (isa == HalfIsa::avx2) return exp_shift_sum_avx2(y, n, m);
#endif
  return exp_shift_sum_body(y, n, m);
}

}  // namespace tessera::cpu
