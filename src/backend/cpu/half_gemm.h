// Half-precision (float16 / bfloat16) products with few rows: an LLM's decode step (one row),
// batched and speculative decode (a few). They read the weight once, in its own dtype, and
// accumulate in float32, as MLX does; the instruction set is chosen at run time (half_isa).
#pragma once

#include <cstdint>

#include "tessera/types.h"

namespace tessera::cpu {

// Products with at most this many rows go through half_skinny_gemm.
constexpr int kHalfSkinnyRows = 16;

enum class HalfIsa {
  scalar,      // plain C++ (TESSERA_CPU_ISA=baseline)
  avx2,        // AVX2 + FMA + F16C: 8 lanes, weights widened to float32
  avx512,      // AVX-512 F / BW / VL: 16 lanes, weights widened to float32
  avx512_bf16  // as avx512, and bfloat16 pairs through vdpbf16ps (AVX512_BF16)
};

// The widest this CPU has, or what TESSERA_CPU_ISA asks for (avx512 takes AVX512_BF16 when the
// CPU has it). Chosen once per process.
HalfIsa half_isa();
const char* half_isa_name(HalfIsa isa);

// out[i, j] = alpha * sum_p a[i, p] * b(p, j) + beta * out[i, j] for i < m (m <= kHalfSkinnyRows),
// j < n, p < k; a row-major with row pitch lda. b(p, j) is b[j * ldb + p] when `b_rows_are_n`
// (a Linear weight W of shape (n, k) read as W.T) and b[p * ldb + j] otherwise. out is row-major
// with pitch ldo; with beta == 0 it is not read. Splits n over the thread pool when the weight is
// large. `isa` defaults to half_isa() (tests pass each one).
template <typename T>
void half_skinny_gemm(int m, int n, int k, float alpha, const T* a, int64_t lda, const T* b,
                      int64_t ldb, bool b_rows_are_n, float beta, T* out, int64_t ldo);
template <typename T>
void half_skinny_gemm(HalfIsa isa, int m, int n, int k, float alpha, const T* a, int64_t lda,
                      const T* b, int64_t ldb, bool b_rows_are_n, float beta, T* out, int64_t ldo);

}  // namespace tessera::cpu
