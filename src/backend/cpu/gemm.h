// Tessera's own float32 matrix product (x86-64 with AVX2 + FMA, or AVX-512): the right operand
// packed once per call into panels that every pool thread shares, a register tile (6 x 16 with
// AVX2, 12 x 32 with AVX-512) over blocks of kGemmKBlock along K, any split of the output over
// the pool. Every output element is one chain of fused multiply-adds per K block, in K order,
// starting from zero, and each block is added into C with one more:
//   first block   c = alpha * acc           (beta == 0: C is never read)
//                 c = fma(alpha, acc, beta * c)
//   later blocks  c = fma(alpha, acc, c)
// so the bits depend on the shapes and the operands alone: not on the pool size, the blocking,
// or the vector width (AVX2 and AVX-512 give equal bytes). OpenBLAS cannot promise that (its
// kernels differ per CPU), and it repacks the right operand for every block of output rows.
#pragma once

#include <cstdint>

#include "tessera/types.h"

namespace tessera::cpu {

// The K block: part of the result's definition (changing it changes the bits).
inline constexpr int64_t kGemmKBlock = 256;

enum class GemmIsa { Best, Avx2, Avx512 };

// Whether this CPU runs the kernel for `isa` (Best: any of them).
bool gemm_supported(GemmIsa isa = GemmIsa::Best);

// Whether Tessera's kernel serves an m x n product: a function of the shape only, so that every
// machine with a kernel takes the same path (matvec-like products stay with BLAS).
inline bool gemm_serves(int64_t m, int64_t n) { return m >= 8 && n >= 16; }

// Row-major c (m x n, rows ldc apart) = alpha * op(a) @ op(b) + beta * c, op transposing when
// ta / tb (a is m x k, or k x m when ta; b is k x n, or n x k when tb), on the intra-op pool.
// Requires gemm_supported(isa) and k > 0.
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           GemmIsa isa = GemmIsa::Best);

// Half-precision operands (float16_t or bfloat16_t), a float32 result: the contract of sgemm with
// c in float32 (the caller rounds it once). `pairs`: bfloat16 through AVX512_BF16's vdpbf16ps,
// K taken in pairs (each pair's two exact products and the running sum added in float32, inputs
// and results below float32's normal range flushed to zero), the pair sums chained in K order per
// K block; otherwise each value is widened to float32 as it is packed and the float32 kernel runs,
// giving sgemm's bits on the widened operands. Requires gemm_supported() and, for `pairs`,
// hgemm_pairs_supported().
bool hgemm_pairs_supported();
// Whether bfloat16 products should take `pairs` on this CPU: where it has them and they are the
// faster kernel. On Intel cores vdpbf16ps issues one per 2 cycles against two FMAs per cycle
// (measured on a Sapphire Rapids-class Xeon: 16 against 32 products per cycle), so there the
// widened float32 kernel wins (the 111 M model's bf16 prefill 635-641 -> 785-795 tok/s); AMD's
// Zen 4 runs 32 bfloat16 products per vdpbf16ps at FMA's issue rate. A property of the CPU, so
// a machine gives the same bits from run to run.
bool hgemm_pairs_preferred();
template <typename T>
void hgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
           const T* b, int64_t ldb, float beta, float* c, int64_t ldc, bool pairs);

}  // namespace tessera::cpu
