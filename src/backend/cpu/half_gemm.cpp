// Half-precision products with few rows (half_gemm.h). Two layouts of b:
//  - rows are n (a Linear weight W (n, k) read as W.T, what mlx-lm's layers multiply by): dot
//    products of a's rows with W's rows, each weight byte read once from memory (one W row at a
//    time for one or two rows of a, blocks of 4 W rows x 4 a rows in registers for more);
//  - row-major (k, n): a's values broadcast against 32-column strips of b's rows.
// Every path accumulates float32 products of the exact half values (bfloat16 pairs through
// vdpbf16ps with AVX512_BF16; otherwise the weights widened to float32 and multiplied with FMA), so
// the paths differ only in summation order. The result is rounded to the half type once.
#include "backend/cpu/half_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/scratch.h"
#include "core/thread_pool.h"

namespace tessera::cpu {

namespace {

template <typename T>
struct Job {
  int m, k;
  float alpha, beta;
  const T* a;
  int64_t lda;
  const float* xf;  // a's rows widened to float32, pitch k
  const T* b;
  int64_t ldb;
  T* out;
  int64_t ldo;

  void store(int i, int j, float sum) const {
    float v = alpha * sum;
    if (beta != 0.0f) v += beta * static_cast<float>(out[i * ldo + j]);
    out[i * ldo + j] = T(v);
  }
};

// ---- plain C++ ----

template <typename T>
void dot_scalar(const Job<T>& J, int j0, int j1) {
  for (int j = j0; j < j1; ++j) {
    const T* w = J.b + j * J.ldb;
    for (int i = 0; i < J.m; ++i) {
      const float* x = J.xf + static_cast<int64_t>(i) * J.k;
      float s = 0.0f;
      for (int p = 0; p < J.k; ++p) s += x[p] * static_cast<float>(w[p]);
      J.store(i, j, s);
    }
  }
}

template <typename T>
void axpy_scalar(const Job<T>& J, int j0, int j1) {
  std::vector<float> acc(j1 - j0);
  for (int i = 0; i < J.m; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const float* x = J.xf + static_cast<int64_t>(i) * J.k;
    for (int p = 0; p < J.k; ++p) {
      const T* row = J.b + p * J.ldb;
      for (int j = j0; j < j1; ++j) acc[j - j0] += x[p] * static_cast<float>(row[j]);
    }
    for (int j = j0; j < j1; ++j) J.store(i, j, acc[j - j0]);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TESSERA_HALF_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TESSERA_HALF_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))
#define TESSERA_HALF_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")))

// ---- AVX2: 8 lanes ----

template <typename T>
TESSERA_HALF_AVX2 inline __m256 widen8(const T* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (std::is_same_v<T, float16_t>) {
    return _mm256_cvtph_ps(h);
  } else {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

TESSERA_HALF_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Rows [j, j + NB) of W against a's rows [i0, i0 + MB).
template <typename T, int MB, int NB>
TESSERA_HALF_AVX2 void dot_block_avx2(const Job<T>& J, int i0, int j) {
  __m256 acc[MB][NB];
  for (int r = 0; r < MB; ++r) {
    for (int c = 0; c < NB; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  const int k8 = J.k & ~7;
  for (int p = 0; p < k8; p += 8) {
    __m256 w[NB];
    for (int c = 0; c < NB; ++c) w[c] = widen8(J.b + (j + c) * J.ldb + p);
    for (int r = 0; r < MB; ++r) {
      __m256 x = _mm256_loadu_ps(J.xf + static_cast<int64_t>(i0 + r) * J.k + p);
      for (int c = 0; c < NB; ++c) acc[r][c] = _mm256_fmadd_ps(x, w[c], acc[r][c]);
    }
  }
  for (int r = 0; r < MB; ++r) {
    const float* x = J.xf + static_cast<int64_t>(i0 + r) * J.k;
    for (int c = 0; c < NB; ++c) {
      float s = hsum8(acc[r][c]);
      const T* w = J.b + (j + c) * J.ldb;
      for (int p = k8; p < J.k; ++p) s += x[p] * static_cast<float>(w[p]);
      J.store(i0 + r, j + c, s);
    }
  }
}

// ---- AVX-512: 16 lanes ----

template <typename T>
TESSERA_HALF_AVX512 inline __m512 widen16(const T* p, __mmask16 mask) {
  __m256i h = _mm256_maskz_loadu_epi16(mask, p);
  // The masked forms: g++ 12 warns that the plain ones read an undefined register.
  if constexpr (std::is_same_v<T, float16_t>) {
    return _mm512_maskz_cvtph_ps(mask, h);
  } else {
    return _mm512_castsi512_ps(
        _mm512_maskz_slli_epi32(mask, _mm512_maskz_cvtepu16_epi32(mask, h), 16));
  }
}

// g++ 12 warns that _mm512_reduce_add_ps's helpers read an undefined register (their pass-through
// operand); the lanes they read are all defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
TESSERA_HALF_AVX512 inline float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }
#pragma GCC diagnostic pop

template <typename T, int MB, int NB>
TESSERA_HALF_AVX512 void dot_block_avx512(const Job<T>& J, int i0, int j) {
  __m512 acc[MB][NB];
  for (int r = 0; r < MB; ++r) {
    for (int c = 0; c < NB; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  for (int p = 0; p < J.k; p += 16) {
    const __mmask16 mask = J.k - p >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (J.k - p)) - 1);
    __m512 w[NB];
    for (int c = 0; c < NB; ++c) w[c] = widen16(J.b + (j + c) * J.ldb + p, mask);
    for (int r = 0; r < MB; ++r) {
      __m512 x = _mm512_maskz_loadu_ps(mask, J.xf + static_cast<int64_t>(i0 + r) * J.k + p);
      for (int c = 0; c < NB; ++c) acc[r][c] = _mm512_fmadd_ps(x, w[c], acc[r][c]);
    }
  }
  for (int r = 0; r < MB; ++r) {
    for (int c = 0; c < NB; ++c) J.store(i0 + r, j + c, hsum16(acc[r][c]));
  }
}

// How far ahead of its reads a one-row-at-a-time pass asks for W's bytes (into the next rows when
// W is contiguous). 1 x 2048 x 8192 over 1 GiB of weights on 2 threads (Xeon, 31.7 GB/s read
// sweep): 27.6 -> 30.5 GB/s; 1-2 KiB ahead alike, 4 KiB no gain.
constexpr int64_t kRowPrefetchBytes = 2048;

// bfloat16 pairs straight from memory: 32 values of each row per instruction.
template <int MB, int NB>
TESSERA_HALF_BF16 void dot_block_bf16(const Job<bfloat16_t>& J, int i0, int j) {
  __m512 acc[MB][NB];
  for (int r = 0; r < MB; ++r) {
    for (int c = 0; c < NB; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  for (int p = 0; p < J.k; p += 32) {
    const __mmask32 mask =
        J.k - p >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << (J.k - p)) - 1);
    __m512i w[NB];
    if constexpr (NB == 1) {
      _mm_prefetch(reinterpret_cast<const char*>(J.b + j * J.ldb + p) + kRowPrefetchBytes,
                   _MM_HINT_T0);
    }
    for (int c = 0; c < NB; ++c) w[c] = _mm512_maskz_loadu_epi16(mask, J.b + (j + c) * J.ldb + p);
    for (int r = 0; r < MB; ++r) {
      __m512i x = _mm512_maskz_loadu_epi16(mask, J.a + (i0 + r) * J.lda + p);
      for (int c = 0; c < NB; ++c) {
        acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)x, (__m512bh)w[c]);
      }
    }
  }
  for (int r = 0; r < MB; ++r) {
    for (int c = 0; c < NB; ++c) J.store(i0 + r, j + c, hsum16(acc[r][c]));
  }
}

// Row-major b: 32 columns (one 64-byte line of b's row) x up to 8 rows of a per pass.
template <typename T>
TESSERA_HALF_AVX512 void axpy_avx512(const Job<T>& J, int j0, int j1) {
  for (int j = j0; j < j1; j += 32) {
    const int cols = std::min(32, j1 - j);
    const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
    const __mmask16 m1 = cols >= 32 ? __mmask16(0xFFFF)
                         : cols > 16 ? __mmask16((1u << (cols - 16)) - 1) : __mmask16(0);
    for (int i0 = 0; i0 < J.m; i0 += 8) {
      const int rows = std::min(8, J.m - i0);
      __m512 acc[8][2];
      for (int r = 0; r < 8; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
      for (int p = 0; p < J.k; ++p) {
        const T* row = J.b + p * J.ldb + j;
        const __m512 w0 = widen16(row, m0), w1 = widen16(row + 16, m1);
        for (int r = 0; r < rows; ++r) {
          const __m512 x = _mm512_set1_ps(J.xf[static_cast<int64_t>(i0 + r) * J.k + p]);
          acc[r][0] = _mm512_fmadd_ps(x, w0, acc[r][0]);
          acc[r][1] = _mm512_fmadd_ps(x, w1, acc[r][1]);
        }
      }
      alignas(64) float tmp[32];
      for (int r = 0; r < rows; ++r) {
        _mm512_store_ps(tmp, acc[r][0]);
        _mm512_store_ps(tmp + 16, acc[r][1]);
        for (int c = 0; c < cols; ++c) J.store(i0 + r, j + c, tmp[c]);
      }
    }
  }
}

template <typename T>
TESSERA_HALF_AVX2 void axpy_avx2(const Job<T>& J, int j0, int j1) {
  for (int j = j0; j < j1; j += 16) {
    const int cols = std::min(16, j1 - j);
    for (int i0 = 0; i0 < J.m; i0 += 6) {
      const int rows = std::min(6, J.m - i0);
      __m256 acc[6][2];
      for (int r = 0; r < 6; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
      alignas(32) T edge[16] = {};
      for (int p = 0; p < J.k; ++p) {
        const T* row = J.b + p * J.ldb + j;
        if (cols < 16) {
          std::copy(row, row + cols, edge);
          row = edge;
        }
        const __m256 w0 = widen8(row), w1 = widen8(row + 8);
        for (int r = 0; r < rows; ++r) {
          const __m256 x = _mm256_set1_ps(J.xf[static_cast<int64_t>(i0 + r) * J.k + p]);
          acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
        }
      }
      alignas(32) float tmp[16];
      for (int r = 0; r < rows; ++r) {
        _mm256_store_ps(tmp, acc[r][0]);
        _mm256_store_ps(tmp + 8, acc[r][1]);
        for (int c = 0; c < cols; ++c) J.store(i0 + r, j + c, tmp[c]);
      }
    }
  }
}
#endif  // x86-64

// Rows [j0, j1) of W against every row of a through Block<MB, NB>: blocks of NB W rows x MB <= 4
// a rows. One or two rows of a (decode) read W one row after the other: a single sequential
// stream, which the hardware prefetchers follow (measured on one core, 1 x 576 x 1536 bf16: 4
// or 8 rows interleaved 11-16 GB/s, row by row 26 GB/s, as fast as a plain sum over memory).
template <typename T, template <int, int> class Block, int NB>
void dot_rows_by(const Job<T>& J, int& j, int j1) {
  for (; j + NB <= j1; j += NB) {
    int i0 = 0;
    for (; i0 + 4 <= J.m; i0 += 4) Block<4, NB>::run(J, i0, j);
    switch (J.m - i0) {
      case 3: Block<3, NB>::run(J, i0, j); break;
      case 2: Block<2, NB>::run(J, i0, j); break;
      case 1: Block<1, NB>::run(J, i0, j); break;
      default: break;
    }
  }
}

template <typename T, template <int, int> class Block>
void dot_rows(const Job<T>& J, int j0, int j1) {
  int j = j0;
  if (J.m <= 2) dot_rows_by<T, Block, 1>(J, j, j1);
  dot_rows_by<T, Block, 4>(J, j, j1);
  dot_rows_by<T, Block, 1>(J, j, j1);
}

#if defined(__x86_64__) && defined(__GNUC__)
template <typename T>
struct Avx2Blocks {
  template <int MB, int NB>
  struct B {
    static void run(const Job<T>& J, int i0, int j) { dot_block_avx2<T, MB, NB>(J, i0, j); }
  };
};
template <typename T>
struct Avx512Blocks {
  template <int MB, int NB>
  struct B {
    static void run(const Job<T>& J, int i0, int j) { dot_block_avx512<T, MB, NB>(J, i0, j); }
  };
};
template <int MB, int NB>
struct Bf16Block {
  static void run(const Job<bfloat16_t>& J, int i0, int j) { dot_block_bf16<MB, NB>(J, i0, j); }
};
#endif

template <typename T>
void run_range(HalfIsa isa, bool b_rows_are_n, const Job<T>& J, int j0, int j1) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (b_rows_are_n) {
    if constexpr (std::is_same_v<T, bfloat16_t>) {
      if (isa == HalfIsa::avx512_bf16) return dot_rows<T, Bf16Block>(J, j0, j1);
    }
    if (isa == HalfIsa::avx512 || isa == HalfIsa::avx512_bf16) {
      return dot_rows<T, Avx512Blocks<T>::template B>(J, j0, j1);
    }
    if (isa == HalfIsa::avx2) return dot_rows<T, Avx2Blocks<T>::template B>(J, j0, j1);
  } else {
    if (isa == HalfIsa::avx512 || isa == HalfIsa::avx512_bf16) return axpy_avx512(J, j0, j1);
    if (isa == HalfIsa::avx2) return axpy_avx2(J, j0, j1);
  }
#endif
  if (b_rows_are_n) return dot_scalar(J, j0, j1);
  axpy_scalar(J, j0, j1);
}

HalfIsa choose_isa() {
  const RequestedIsa want = requested_isa();
#if defined(__x86_64__) && defined(__GNUC__)
  const bool avx2 = cpu_has_avx2_fma() && cpu_has_f16c();
  const bool avx512 = avx2 && cpu_has_avx512_skx();
  if (want == RequestedIsa::baseline) return HalfIsa::scalar;
  if (want == RequestedIsa::avx2) return HalfIsa::avx2;
  if (avx512 && cpu_has_avx512_bf16()) return HalfIsa::avx512_bf16;
  return avx512 ? HalfIsa::avx512 : avx2 ? HalfIsa::avx2 : HalfIsa::scalar;
#else
  return HalfIsa::scalar;
#endif
}

}  // namespace

HalfIsa half_isa() {
  static const HalfIsa isa = choose_isa();
  return isa;
}

const char* half_isa_name(HalfIsa isa) {
  switch (isa) {
    case HalfIsa::scalar: return "baseline";
    case HalfIsa::avx2: return "avx2";
    case HalfIsa::avx512: return "avx512";
    case HalfIsa::avx512_bf16: return "avx512_bf16";
  }
  return "?";
}

template <typename T>
void half_skinny_gemm(HalfIsa isa, int m, int n, int k, float alpha, const T* a, int64_t lda,
                      const T* b, int64_t ldb, bool b_rows_are_n, float beta, T* out,
                      int64_t ldo) {
  if (m <= 0 || n <= 0) return;
  Scratch<float> xf(static_cast<size_t>(m) * k);
  for (int i = 0; i < m; ++i) {
    for (int p = 0; p < k; ++p) {
      xf[static_cast<size_t>(i) * k + p] = static_cast<float>(a[i * lda + p]);
    }
  }
  const Job<T> J{m, k, alpha, beta, a, lda, xf.data(), b, ldb, out, ldo};
  // Columns in blocks of 64 (whole 64-byte lines of a row-major b) that the pool's threads take in
  // turn (a thread that starts late does fewer); one thread for a weight the caches hold anyway.
  constexpr int kBlock = 64;
  const double bytes = static_cast<double>(n) * k * sizeof(T);
  auto columns = [&](size_t j0, size_t j1) {
    run_range(isa, b_rows_are_n, J, static_cast<int>(j0), static_cast<int>(j1));
  };
  if (bytes < (1 << 16)) {
    columns(0, static_cast<size_t>(n));
  } else {
    parallel_blocks(static_cast<size_t>(n), kBlock, columns);
  }
}

template <typename T>
void half_skinny_gemm(int m, int n, int k, float alpha, const T* a, int64_t lda, const T* b,
                      int64_t ldb, bool b_rows_are_n, float beta, T* out, int64_t ldo) {
  half_skinny_gemm(half_isa(), m, n, k, alpha, a, lda, b, ldb, b_rows_are_n, beta, out, ldo);
}

#define TESSERA_INSTANTIATE(T)                                                                   \
  template void half_skinny_gemm<T>(HalfIsa, int, int, int, float, const T*, int64_t, const T*, \
                                    int64_t, bool, float, T*, int64_t);                        \
  template void half_skinny_gemm<T>(int, int, int, float, const T*, int64_t, const T*, int64_t, \
                                    bool, float, T*, int64_t);
TESSERA_INSTANTIATE(float16_t)
TESSERA_INSTANTIATE(bfloat16_t)
#undef TESSERA_INSTANTIATE

}  // namespace tessera::cpu
