// AMX's bfloat16 tile product (tdpbf16ps: 16 x 16 float32 results from 16 x 32 by 32 x 16
// bfloat16 values): the instructions, the one tile configuration Tessera loads, and a small
// single-threaded product on operands already in the tiles' layouts (attention's products). The
// GEMM's kernel (gemm.cpp) uses the same instructions. x86-64 only; the caller checks
// hgemm_supported(HalfKernel::Tiles) (gemm.h), which asks Linux for the tile state.
#pragma once

#include <cstdint>

#include "tessera/types.h"

namespace tessera::cpu {

#if defined(__x86_64__)

// The instructions as inline assembly with memory clobbers (GCC 12's intrinsics declare no memory
// effects, so the compiler may move stores across them). A tile is 16 rows of 64 bytes.
#define TESSERA_TILE_LOAD(t, base, stride) \
  asm volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"(int64_t{stride}) : "memory")
#define TESSERA_TILE_STORE(t, base, stride) \
  asm volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"(int64_t{stride}) : "memory")
#define TESSERA_TILE_ZERO(t) asm volatile("tilezero %%tmm" #t ::)
#define TESSERA_TILE_DP(c, a, b) asm volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

// Palette 1, eight tiles of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// This thread's tiles configured for a run of products (ldtilecfg, ~70 ns: once per task, not
// per product; reading the configuration back in every product drained the tile pipeline, 17% of
// the GEMM kernel's time) and released after it (the thread's saved state shrinks back).
inline void configure_tiles() {
  static const TileConfig config;
  asm volatile("ldtilecfg %0" ::"m"(config) : "memory");
}
inline void release_tiles() { asm volatile("tilerelease" ::: "memory"); }

class TileScope {
 public:
  TileScope() { configure_tiles(); }
  ~TileScope() { release_tiles(); }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};

// The register block of the tile products: C[16 RM x 16 RN] (RM, RN = 1 or 2; float32, rows
// ldc apart) = A @ B, or C += A @ B with `accumulate`, over kp values of K (a multiple of 32),
// inside a TileScope. A (bfloat16): 16 RM rows lda values apart, step s (K values 32 s ..) at
// a + s * a_step; B: pairs (below), rows ldb words apart. Tiles 0-3 hold C, 4-5 A, 6-7 B.
template <int RM, int RN>
[[gnu::always_inline]] inline void tile_block(int64_t kp, const bfloat16_t* a, int64_t lda,
                                              int64_t a_step, const uint32_t* b, int64_t ldb,
                                              bool accumulate, float* c, int64_t ldc) {
  const int64_t ca = ldc * 4, aa = lda * 2, ba = ldb * 4;  // strides in bytes
  float* c1 = c + 16 * ldc;
  if (accumulate) {
    TESSERA_TILE_LOAD(0, c, ca);
    if constexpr (RN == 2) TESSERA_TILE_LOAD(1, c + 16, ca);
    if constexpr (RM == 2) TESSERA_TILE_LOAD(2, c1, ca);
    if constexpr (RM == 2 && RN == 2) TESSERA_TILE_LOAD(3, c1 + 16, ca);
  } else {
    TESSERA_TILE_ZERO(0);
    TESSERA_TILE_ZERO(1);
    TESSERA_TILE_ZERO(2);
    TESSERA_TILE_ZERO(3);
  }
  for (int64_t s = 0; s < kp / 32; ++s) {
    const uint32_t* bs = b + s * 16 * ldb;
    const bfloat16_t* as = a + s * a_step;
    TESSERA_TILE_LOAD(6, bs, ba);
    if constexpr (RN == 2) TESSERA_TILE_LOAD(7, bs + 16, ba);
    TESSERA_TILE_LOAD(4, as, aa);
    TESSERA_TILE_DP(0, 4, 6);
    if constexpr (RN == 2) TESSERA_TILE_DP(1, 4, 7);
    if constexpr (RM == 2) {
      TESSERA_TILE_LOAD(5, as + 16 * lda, aa);
      TESSERA_TILE_DP(2, 5, 6);
      if constexpr (RN == 2) TESSERA_TILE_DP(3, 5, 7);
    }
  }
  TESSERA_TILE_STORE(0, c, ca);
  if constexpr (RN == 2) TESSERA_TILE_STORE(1, c + 16, ca);
  if constexpr (RM == 2) TESSERA_TILE_STORE(2, c1, ca);
  if constexpr (RM == 2 && RN == 2) TESSERA_TILE_STORE(3, c1 + 16, ca);
}

// c (mp x np float32, rows ldc apart) = a @ b, or c += a @ b with `accumulate`, inside a
// TileScope: a bfloat16, mp x kp, rows lda apart; b as pairs, kp / 2 rows of np 32-bit words
// (rows ldb words apart), word j of row q holding b[2q][j] in its low half and b[2q + 1][j] in
// its high half. mp and np are multiples of 16, kp of 32. Each product of two values is exact;
// they are summed in float32 into c, inputs and results below float32's normal range flushed to
// zero.
void tile_product(int mp, int np, int kp, const bfloat16_t* a, int64_t lda, const uint32_t* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc);

// The pairs of b^T for tile_product, b given as its `rows` rows of k values (ld apart): word j of
// dst row q (ldd words apart, kp / 2 rows) holds b[j][2q], b[j][2q + 1]; zero past rows and k,
// up to np words and kp values.
void pairs_of_transpose(const bfloat16_t* b, int64_t ld, int rows, int k, int np, int kp,
                        uint32_t* dst, int64_t ldd);
// The pairs of b (k rows of `cols` values, ld apart): word j of dst row q holds b[2q][j],
// b[2q + 1][j]; zero past k and cols, up to kp / 2 rows and np words.
void pairs_of_rows(const bfloat16_t* b, int64_t ld, int k, int cols, int np, int kp,
                   uint32_t* dst, int64_t ldd);

#endif

}  // namespace tessera::cpu
