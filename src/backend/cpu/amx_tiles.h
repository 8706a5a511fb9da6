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
