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
#include <functional>

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
// c in float32 (the caller rounds it once), by one of three kernels:
enum class HalfKernel {
  // Each value widened to float32 as it is packed, then the float32 kernel: sgemm's bits on the
  // widened operands.
  Widen,
  // bfloat16 through AVX512_BF16's vdpbf16ps, K taken in pairs (each pair's two exact products
  // and the running sum added in float32, inputs and results below float32's normal range
  // flushed to zero), the pair sums chained in K order per K block, each block's sum added into
  // C as sgemm does.
  Pairs,
  // bfloat16 through AMX's tile product tdpbf16ps (16 x 16 results per instruction, 32 values of
  // K each): the same products and flushing as Pairs, with alpha == 1 summed in K order straight
  // into C (c = beta * c, or 0, then every pair added in turn: no per-block sum); other alpha as
  // Pairs. Needs AMX-TILE and AMX-BF16 and Linux's permission for the tile state (asked once).
  Tiles,
};
// Whether this CPU (and, for Tiles, its kernel) runs `kernel` on bfloat16 operands.
bool hgemm_supported(HalfKernel kernel);
// The kernel T's products take: Widen unless T is bfloat16 and half_isa() allows AVX512_BF16;
// then Tiles where the CPU has AMX, else Pairs where vdpbf16ps is the faster kernel (not on
// Intel cores: vdpbf16ps issues one per 2 cycles against two FMAs per cycle there, measured on a
// Sapphire Rapids-class Xeon: 16 against 32 products per cycle; AMD's Zen 4 runs 32 bfloat16
// products per vdpbf16ps at FMA's rate), else Widen. A property of the CPU and TESSERA_CPU_ISA,
// so a machine gives the same bits from run to run.
template <typename T>
HalfKernel hgemm_kernel();
// Requires gemm_supported() and hgemm_supported(kernel) for Pairs and Tiles (bfloat16 only).
template <typename T>
void hgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
           const T* b, int64_t ldb, float beta, float* c, int64_t ldc, HalfKernel kernel);

// Writes rows [j0, j0 + rows) of an n x k matrix, values [k0, k0 + len) of each, into dst (row
// r at dst + r * ld). Called from the pool's threads at once, with rows <= 32 and k0 a multiple
// of 256.
template <typename T>
using RowsFn = std::function<void(int64_t j0, int64_t rows, int64_t k0, int64_t len, T* dst,
                                  int64_t ld)>;
// c (m x n) = a (m x k, rows lda apart) @ w^T, hgemm's contract with alpha 1 and beta 0, w (n x k)
// given by `rows` as the GEMM packs it: a dequantized weight is written a panel at a time and
// never held whole.
template <typename T>
void hgemm_rows(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const RowsFn<T>& rows,
                float* c, int64_t ldc, HalfKernel kernel);

// hgemm and hgemm_rows for bfloat16 with alpha 1 and beta 0 whose float32 results are rounded to
// bfloat16 into out (rows ldo apart) as each tile is done, with no float32 copy of c: the
// products that run on tiles (hgemm_kernel) with k <= 2048 (one K block). False, with nothing
// done, for the others.
bool hgemm_rounded(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const bfloat16_t* a,
                   int64_t lda, const bfloat16_t* b, int64_t ldb, bfloat16_t* out, int64_t ldo);
bool hgemm_rows_rounded(int64_t m, int64_t n, int64_t k, const bfloat16_t* a, int64_t lda,
                        const RowsFn<bfloat16_t>& rows, bfloat16_t* out, int64_t ldo);

}  // namespace tessera::cpu
