// quantized_matmul's few-rows product for mlx-lm's quantized models: affine 4-bit weights with
// bfloat16 x, scales and biases, the 4-bit values times x rounded to 16-bit integers by
// AVX512_VNNI's vpdpwssd (quantized_bf16.cpp says how and how exact). quantized.cpp's other paths
// serve everything else.
#pragma once

#include <cstdint>

#include "tessera/types.h"

namespace tessera::cpu {

// Rows of x up to which affine4_pairs_product serves (decode, batched and speculative decode).
inline constexpr int64_t kPairRows = 8;

// Whether affine4_pairs_product serves an affine product of `bits`-bit weights in groups of
// `group_size` with m rows of x on this CPU (TESSERA_CPU_ISA's choice).
bool affine4_pairs_serve(int bits, int group_size, int64_t m);

// out (m, n) = x (m, k) @ W^T, W (n, k) packed four bits per value with a bfloat16 scale and bias
// per group; columns in blocks of 64 over the pool. Requires affine4_pairs_serve. False, with out
// untouched, where x holds a NaN or an infinity (the caller's float path takes it).
bool affine4_pairs_product(const bfloat16_t* x, const uint8_t* packed, const bfloat16_t* scales,
                           const bfloat16_t* biases, bfloat16_t* out, int64_t m, int64_t n,
                           int64_t k, int group_size);

// Whether affine4_dequantize_bf16 serves groups of group_size here (AVX-512 as TESSERA_CPU_ISA
// allows; groups of whole 16-value vectors).
bool affine4_dequantize_serves(int group_size);

// Values [k0, k0 + len) of a row of 4-bit affine weights (`row`, packed two per byte, the low
// nibble first) as bfloat16: each fma(scale, q, bias) in float32 rounded once, sc and bi the
// float scales and biases of the groups from k0 / group_size on. k0 and len are multiples of
// group_size. (The quantized prefill's weights, a panel of rows at a time.)
void affine4_dequantize_bf16(const uint8_t* row, int64_t k0, int64_t len, int group_size,
                             const float* sc, const float* bi, bfloat16_t* dst);

}  // namespace tessera::cpu
