// scaled_dot_product_attention for decoding: a few query rows per key/value head (one new
// token, or two) against every key, no mask. The general kernel (fast.cpp) converts each block
// of 256 keys and values to float and multiplies them with BLAS; with 3 query rows per head that
// is mostly conversion, and a head's keys went to one thread. Here each task is one head and 128
// keys: its scores straight from the stored keys (widened in registers), the chunk's softmax,
// its weighted sum of values; the chunks of a head are then merged in order, so the result does
// not depend on how many threads ran them.
#pragma once

#include <cstdint>

#include "tessera/dtype.h"

namespace tessera::cpu {

struct DecodeAttention {
  int B, Hq, Hkv, Lq, Lk, D, Dv;
  float scale;
  // q (B, Hq, Lq, D), k (B, Hkv, Lk, D), v (B, Hkv, Lk, Dv): element strides of the first three
  // axes; the last axis is contiguous.
  const void* q;
  int64_t qs[3];
  const void* k;
  int64_t ks[3];
  const void* v;
  int64_t vs[3];
  void* out;  // (B, Hq, Lq, Dv), row-contiguous
};

// Runs the attention and returns true if it serves: float32, float16 or bfloat16; AVX-512 (as
// TESSERA_CPU_ISA allows); at most 8 query rows per key/value head (Hq / Hkv * Lq); D and Dv
// multiples of 16 up to 256; at least one key. Otherwise returns false, having done nothing.
bool attention_decode(Dtype dtype, const DecodeAttention& a);

}  // namespace tessera::cpu
