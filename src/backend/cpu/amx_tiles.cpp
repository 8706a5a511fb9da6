// amx_tiles.h's product and packers.
#include "backend/cpu/amx_tiles.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace tessera::cpu {

// g++ 12 takes the unmasked AVX-512 intrinsics' pass-through operand for a read of an undefined
// register; every lane they read is defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

// r[i] = row i of a 16 x 16 block of 32-bit words in, column i out.
__attribute__((target("avx512f"))) inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + c], lane L: column 4L + c of rows 4i .. 4i + 3
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i w0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i w2 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
    const __m512i w3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(w0, w1, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(w0, w1, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(w2, w3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(w2, w3, 0xDD);
  }
}

inline __mmask16 first(int n) {
  return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << std::max(n, 0)) - 1);
}

}  // namespace

void tile_product(int mp, int np, int kp, const bfloat16_t* a, int64_t lda, const uint32_t* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  for (int i = 0; i < mp; i += 32) {
    const bool two_rows = mp - i >= 32;
    for (int j = 0; j < np; j += 32) {
      const bfloat16_t* ai = a + int64_t{i} * lda;
      float* cij = c + int64_t{i} * ldc + j;
      const bool two_cols = np - j >= 32;
      if (two_rows && two_cols) {
        tile_block<2, 2>(kp, ai, lda, 32, b + j, ldb, accumulate, cij, ldc);
      } else if (two_rows) {
        tile_block<2, 1>(kp, ai, lda, 32, b + j, ldb, accumulate, cij, ldc);
      } else if (two_cols) {
        tile_block<1, 2>(kp, ai, lda, 32, b + j, ldb, accumulate, cij, ldc);
      } else {
        tile_block<1, 1>(kp, ai, lda, 32, b + j, ldb, accumulate, cij, ldc);
      }
    }
  }
}

__attribute__((target("avx512f"))) void pairs_of_transpose(const bfloat16_t* b, int64_t ld,
                                                           int rows, int k, int np, int kp,
                                                           uint32_t* dst, int64_t ldd) {
  const int words = k / 2;  // whole pairs; an odd k's last value below
  const bool aligned = ld % 2 == 0 && reinterpret_cast<uintptr_t>(b) % 4 == 0;
  for (int j0 = 0; j0 < np; j0 += 16) {
    for (int q0 = 0; q0 < kp / 2; q0 += 16) {
      __m512i r[16];
      const __mmask16 m = first(words - q0);
      for (int i = 0; i < 16; ++i) {
        const int j = j0 + i;
        if (j >= rows || !aligned) {
          r[i] = _mm512_setzero_si512();
          continue;
        }
        r[i] = _mm512_maskz_loadu_epi32(m, reinterpret_cast<const uint32_t*>(b + j * ld) + q0);
      }
      transpose16(r);
      for (int q = 0; q < 16; ++q) _mm512_storeu_si512(dst + (q0 + q) * ldd + j0, r[q]);
    }
  }
  if (aligned && k % 2 == 0) return;
  // Unaligned rows, or the last value of an odd k (its pair's other half zero): word by word.
  for (int q = aligned ? words : 0; q < (k + 1) / 2; ++q) {
    for (int j = 0; j < std::min(rows, np); ++j) {
      const uint32_t lo = b[j * ld + 2 * q].bits;
      const uint32_t hi = 2 * q + 1 < k ? b[j * ld + 2 * q + 1].bits : 0u;
      dst[q * ldd + j] = lo | (hi << 16);
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void pairs_of_rows(
    const bfloat16_t* b, int64_t ld, int k, int cols, int np, int kp, uint32_t* dst, int64_t ldd) {
  for (int q = 0; q < kp / 2; ++q) {
    for (int j = 0; j < np; j += 16) {
      const __mmask16 m = first(cols - j);
      const __m256i lo = 2 * q < k ? _mm256_maskz_loadu_epi16(m, b + 2 * q * ld + j)
                                   : _mm256_setzero_si256();
      const __m256i hi = 2 * q + 1 < k ? _mm256_maskz_loadu_epi16(m, b + (2 * q + 1) * ld + j)
                                       : _mm256_setzero_si256();
      const __m512i w = _mm512_or_si512(_mm512_cvtepu16_epi32(lo),
                                        _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
      _mm512_storeu_si512(dst + q * ldd + j, w);
    }
  }
}

#pragma GCC diagnostic pop

}  // namespace tessera::cpu

#endif
