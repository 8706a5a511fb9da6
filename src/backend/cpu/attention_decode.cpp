// Attention for decoding (attention_decode.h).
#include "backend/cpu/attention_decode.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/half_gemm.h"
#include "backend/cpu/scratch.h"
#include "backend/cpu/softmax_rows.h"
#include "core/thread_pool.h"
#include "tessera/types.h"

namespace tessera::cpu {

namespace {

constexpr int kChunk = 128;   // keys per task
constexpr int kMaxRows = 8;   // query rows per key/value head
constexpr int kMaxWidth = 256;

#if defined(__x86_64__) && defined(__GNUC__)

// Per task and row: the chunk's maximum score m, its sum l of exp(score - m), and
// sum_j exp(score_j - m) v_j (Dv values).
int part_stride(const DecodeAttention& a) { return a.Dv + 2; }

#define TESSERA_DECODE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

// 16 values of T widened to float32.
template <typename T>
TESSERA_DECODE_AVX512 [[gnu::always_inline]] inline __m512 load16(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_loadu_ps(p);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (std::is_same_v<T, float16_t>) {
      return _mm512_cvtph_ps(h);
    } else {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The sums of 16 vectors of 16 floats (x[16 j .. 16 j + 16) for j = 0..15), as one vector:
// halves, then quarters of the vectors added pairwise while they are interleaved (15 adds).
TESSERA_DECODE_AVX512 [[gnu::always_inline]] inline __m512 sum16(const float* x) {
  __m512 t[8], u[4];
  for (int i = 0; i < 8; ++i) {  // t[i]'s 128-bit lanes: x[2i] lanes 0+2, 1+3; x[2i+1] the same
    const __m512 a = _mm512_load_ps(x + 32 * i), b = _mm512_load_ps(x + 32 * i + 16);
    t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  for (int i = 0; i < 4; ++i) {  // u[i]'s 128-bit lane L: four floats summing to x[4i + L]
    const __m512 a = t[2 * i], b = t[2 * i + 1];
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
  }
  // Within each 128-bit lane L: element e becomes the sum of u[e]'s four, that is x[4e + L].
  const __m512 p = _mm512_add_ps(_mm512_unpacklo_ps(u[0], u[1]), _mm512_unpackhi_ps(u[0], u[1]));
  const __m512 q = _mm512_add_ps(_mm512_unpacklo_ps(u[2], u[3]), _mm512_unpackhi_ps(u[2], u[3]));
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(p, q, 0x44), _mm512_shuffle_ps(p, q, 0xEE));
  // Element 4L + e holds x[4e + L]: put x[j] at j.
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(order, r);
}

// part[rr * (Dv + 2) + 2 + d ..] = sum_j p[rr][j] v_j[d .. d + 16 W) for the chunk's n keys.
template <typename T, int Rows, int W>
TESSERA_DECODE_AVX512 [[gnu::always_inline]] inline void weighted_values(
    const T* v, int64_t row_stride, int n, const float* p, int d, float* part, int stride) {
  __m512 o[Rows][W];
  for (int rr = 0; rr < Rows; ++rr) {
    for (int w = 0; w < W; ++w) o[rr][w] = _mm512_setzero_ps();
  }
  for (int j = 0; j < n; ++j) {
    for (int w = 0; w < W; ++w) {
      const __m512 vv = load16(v + j * row_stride + d + 16 * w);
      for (int rr = 0; rr < Rows; ++rr) {
        o[rr][w] = _mm512_fmadd_ps(_mm512_set1_ps(p[rr * kChunk + j]), vv, o[rr][w]);
      }
    }
  }
  for (int rr = 0; rr < Rows; ++rr) {
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(part + rr * stride + 2 + d + 16 * w, o[rr][w]);
  }
}

// Task (b, g, c): rows R * Lq of head g's queries (row r * Lq + i: query head g * R + r,
// position i) against keys [c * kChunk, ...), written to part (rows x part_stride).
template <typename T, int Rows>
TESSERA_DECODE_AVX512 void decode_task(const DecodeAttention& a, int b, int g, int c,
                                       float* part) {
  const int D = a.D, Dv = a.Dv, R = a.Hq / a.Hkv;
  const int j0 = c * kChunk, n = std::min(kChunk, a.Lk - j0);
  const T* q = static_cast<const T*>(a.q);
  const T* k = static_cast<const T*>(a.k) + b * a.ks[0] + g * a.ks[1] + j0 * a.ks[2];
  const T* v = static_cast<const T*>(a.v) + b * a.vs[0] + g * a.vs[1] + j0 * a.vs[2];

  alignas(64) float qf[Rows * kMaxWidth];  // the rows times the scale, as float32
  for (int rr = 0; rr < Rows; ++rr) {
    const int h = g * R + rr / a.Lq, i = rr % a.Lq;
    const T* src = q + b * a.qs[0] + h * a.qs[1] + i * a.qs[2];
    for (int d = 0; d < D; ++d) qf[rr * D + d] = static_cast<float>(src[d]) * a.scale;
  }

  // Scores, 16 keys at a time: each key's row widened once and multiplied with every query row
  // (a vector of 16 partial sums per row and key), then each row's 16 vectors summed at once.
  alignas(64) float s[Rows * kChunk];
  alignas(64) float lanes[Rows * 16 * 16];
  for (int jb = 0; jb < n; jb += 16) {
    const int kb = std::min(16, n - jb);
    for (int j = 0; j < 16; ++j) {
      __m512 acc[Rows];
      for (int rr = 0; rr < Rows; ++rr) acc[rr] = _mm512_setzero_ps();
      if (j < kb) {
        const T* kr = k + (jb + j) * a.ks[2];
        for (int d = 0; d < D; d += 16) {
          const __m512 kv = load16(kr + d);
          for (int rr = 0; rr < Rows; ++rr) {
            acc[rr] = _mm512_fmadd_ps(_mm512_load_ps(qf + rr * D + d), kv, acc[rr]);
          }
        }
      }
      for (int rr = 0; rr < Rows; ++rr) _mm512_store_ps(lanes + (rr * 16 + j) * 16, acc[rr]);
    }
    for (int rr = 0; rr < Rows; ++rr) {
      _mm512_mask_storeu_ps(s + rr * kChunk + jb, static_cast<__mmask16>((1u << kb) - 1),
                            sum16(lanes + rr * 256));
    }
  }

  // The chunk's softmax numerators: p = exp(s - m), l = sum(p).
  const int stride = part_stride(a);
  for (int rr = 0; rr < Rows; ++rr) {
    float* sr = s + rr * kChunk;
    const float m = row_max(sr, n, -std::numeric_limits<float>::infinity());
    part[rr * stride] = m;
    part[rr * stride + 1] = exp_shift_sum(sr, n, m);
  }

  // sum_j p_j v_j over W blocks of 16 columns of every row at a time (Rows * W independent sums,
  // enough to cover the multiply-add's latency).
  constexpr int W = Rows >= 8 ? 1 : Rows >= 4 ? 2 : 4;
  int d = 0;
  for (; d + 16 * W <= Dv; d += 16 * W) {
    weighted_values<T, Rows, W>(v, a.vs[2], n, s, d, part, stride);
  }
  for (; d < Dv; d += 16) weighted_values<T, Rows, 1>(v, a.vs[2], n, s, d, part, stride);
}

#pragma GCC diagnostic pop

using TaskFn = void (*)(const DecodeAttention&, int, int, int, float*);

template <typename T>
TaskFn task_for(int rows) {
  switch (rows) {
    case 1: return decode_task<T, 1>;
    case 2: return decode_task<T, 2>;
    case 3: return decode_task<T, 3>;
    case 4: return decode_task<T, 4>;
    case 5: return decode_task<T, 5>;
    case 6: return decode_task<T, 6>;
    case 7: return decode_task<T, 7>;
    default: return decode_task<T, 8>;
  }
}

template <typename T>
void run(const DecodeAttention& a) {
  static_assert(kMaxRows == 8, "decode_task is instantiated for 1 to 8 rows");
  const int R = a.Hq / a.Hkv, rows = R * a.Lq;
  const int chunks = (a.Lk + kChunk - 1) / kChunk;
  const int stride = part_stride(a);
  const size_t tasks = static_cast<size_t>(a.B) * a.Hkv * chunks;
  const size_t task_floats = static_cast<size_t>(rows) * stride;
  Scratch<float> parts(tasks * task_floats);
  const TaskFn fn = task_for<T>(rows);
  detail::parallel_for(tasks, 1, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const int c = static_cast<int>(t % chunks);
      const int g = static_cast<int>(t / chunks % a.Hkv);
      const int b = static_cast<int>(t / chunks / a.Hkv);
      fn(a, b, g, c, parts.data() + t * task_floats);
    }
  });
  // Merge each row's chunks in order: weights exp(m_c - M) for the row's maximum M.
  T* out = static_cast<T*>(a.out);
  Scratch<float> acc(static_cast<size_t>(a.Dv));
  for (int b = 0; b < a.B; ++b) {
    for (int g = 0; g < a.Hkv; ++g) {
      const float* first = parts.data() + (static_cast<size_t>(b) * a.Hkv + g) * chunks *
                                              task_floats;
      for (int rr = 0; rr < rows; ++rr) {
        float M = -std::numeric_limits<float>::infinity();
        for (int c = 0; c < chunks; ++c) M = std::max(M, first[c * task_floats + rr * stride]);
        float L = 0.0f;
        std::fill(acc.data(), acc.data() + a.Dv, 0.0f);
        for (int c = 0; c < chunks; ++c) {
          const float* p = first + c * task_floats + rr * stride;
          const float w = chunks == 1 ? 1.0f : std::exp(p[0] - M);
          L += w * p[1];
          for (int d = 0; d < a.Dv; ++d) acc[d] += w * p[2 + d];
        }
        const int h = g * R + rr / a.Lq, i = rr % a.Lq;
        T* o = out + ((static_cast<size_t>(b) * a.Hq + h) * a.Lq + i) * a.Dv;
        for (int d = 0; d < a.Dv; ++d) o[d] = static_cast<T>(acc[d] / L);
      }
    }
  }
}

#endif  // x86-64 with GNU C

}  // namespace

bool attention_decode(Dtype dtype, const DecodeAttention& a) {
#if defined(__x86_64__) && defined(__GNUC__)
  const HalfIsa isa = half_isa();
  if (isa != HalfIsa::avx512 && isa != HalfIsa::avx512_bf16) return false;
  if (a.Hkv <= 0 || a.Hq % a.Hkv != 0 || a.Lk < 1 || a.Lq < 1) return false;
  if (a.Hq / a.Hkv * a.Lq > kMaxRows) return false;
  if (a.D < 16 || a.Dv < 16 || a.D % 16 != 0 || a.Dv % 16 != 0) return false;
  if (a.D > kMaxWidth || a.Dv > kMaxWidth) return false;
  switch (dtype) {
    case Dtype::Val::float32: return run<float>(a), true;
    case Dtype::Val::float16: return run<float16_t>(a), true;
    case Dtype::Val::bfloat16: return run<bfloat16_t>(a), true;
    default: return false;
  }
#else
  (void)dtype;
  (void)a;
  return false;
#endif
}

}  // namespace tessera::cpu
