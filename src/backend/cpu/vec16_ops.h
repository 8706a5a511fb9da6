// 16-lane float32 forms of elementwise functors, for builds for AVX-512 CPUs: the eager float32
// kernels run them on contiguous runs (elementwise.h) and the fused kernels on contiguous and
// scalar inputs (compiled/codegen.cpp). Vec16<Op>::apply(x...) gives, lane by lane, the bits of
// Op{}(x...) on float; an op whose fast form covers part of its domain (sin, cos) also has ok(x),
// the lanes where apply is right (the callers take Op{} on the others).
#pragma once

#include <cstdint>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/binary_ops.h"
#include "backend/cpu/unary_ops.h"

namespace tessera::cpu::ops {

#if defined(__x86_64__)
// The bfloat16 lanes below carry their own target, so kernels of builds for any x86-64 CPU can
// use them in functions compiled for AVX-512 (the fused kernels, built for the CPU they run on,
// and the per-ISA copies of fast.cpp).
#define TESSERA_BF16_LANES \
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline

// bfloat16 in the 16-lane loop: values held as float32 (exact), rounded where a step of that
// dtype rounds, with detail::float_to_bf16_bits's bits (nearest even; a NaN keeps its sign and
// top payload bits and is made quiet).
TESSERA_BF16_LANES __m512 round_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512i r = _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x00400000));
  return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(int32_t(0xffff0000u))));
}
TESSERA_BF16_LANES __m512 load_bf16(__mmask16 m, const tessera::bfloat16_t* p) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
// x already rounded (round_bf16): its top halves.
TESSERA_BF16_LANES void store_bf16(tessera::bfloat16_t* p, __mmask16 m, __m512 x) {
  const __m256i h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(x), 16));
  _mm256_mask_storeu_epi16(p, m, h);
}

#undef TESSERA_BF16_LANES
#endif  // __x86_64__

template <typename Op>
struct Vec16 {
  static constexpr bool kHas = false;
  static constexpr bool kPartial = false;
};

#if defined(__AVX512F__)

#define TESSERA_VEC16(OP, ARGS, EXPR)                                 \
  template <>                                                         \
  struct Vec16<OP> {                                                  \
    static constexpr bool kHas = true;                                \
    static constexpr bool kPartial = false;                           \
    static __m512 apply ARGS { return EXPR; }                         \
  };

TESSERA_VEC16(ExpOp, (__m512 x), v16::exp(x))
TESSERA_VEC16(TanhOp, (__m512 x), v16::tanh(x))
TESSERA_VEC16(SigmoidOp, (__m512 x), v16::sigmoid(x))
TESSERA_VEC16(NegativeOp, (__m512 x), _mm512_xor_ps(x, _mm512_set1_ps(-0.0f)))
TESSERA_VEC16(AbsOp, (__m512 x), _mm512_abs_ps(x))
TESSERA_VEC16(SquareOp, (__m512 x), _mm512_mul_ps(x, x))
TESSERA_VEC16(SqrtOp, (__m512 x), v16::sqrt(x))
TESSERA_VEC16(AddOp, (__m512 x, __m512 y), _mm512_add_ps(x, y))
TESSERA_VEC16(SubtractOp, (__m512 x, __m512 y), _mm512_sub_ps(x, y))
TESSERA_VEC16(MultiplyOp, (__m512 x, __m512 y), _mm512_mul_ps(x, y))
TESSERA_VEC16(DivideOp, (__m512 x, __m512 y), _mm512_div_ps(x, y))

#undef TESSERA_VEC16

#define TESSERA_VEC16_TRIG(OP, FAST)                                                         \
  template <>                                                                                \
  struct Vec16<OP> {                                                                         \
    static constexpr bool kHas = true;                                                       \
    static constexpr bool kPartial = true;                                                   \
    static __mmask16 ok(__m512 x) { return v16::trig_fast_ok(x); }                           \
    static __m512 apply(__m512 x) { return FAST(x); }                                        \
  };

TESSERA_VEC16_TRIG(SinOp, v16::sin_fast)
TESSERA_VEC16_TRIG(CosOp, v16::cos_fast)

#undef TESSERA_VEC16_TRIG

// A cast between floating types: the value itself (the fused kernels' 16-lane loop rounds every
// step to its dtype, round16 below).
#define TESSERA_VEC16_CAST(T)                        \
  template <>                                        \
  struct Vec16<CastOp<T>> {                          \
    static constexpr bool kHas = true;               \
    static constexpr bool kPartial = false;          \
    static __m512 apply(__m512 x) { return x; }      \
  };
TESSERA_VEC16_CAST(float)
TESSERA_VEC16_CAST(tessera::bfloat16_t)
#undef TESSERA_VEC16_CAST

// apply(x...), clearing in `ok` the lanes outside the op's fast domain. For an op without a
// 16-lane form (float to float), the op lane by lane: it keeps generated code that names one
// compiling, though the fused kernels only take their 16-lane loop when every op has a form.
template <typename Op, typename... X>
inline __m512 vec16_apply(__mmask16& ok, X... x) {
  if constexpr (Vec16<Op>::kHas) {
    if constexpr (Vec16<Op>::kPartial) ok &= Vec16<Op>::ok(x...);
    return Vec16<Op>::apply(x...);
  } else {
    const __m512 args[] = {x...};
    float lanes[sizeof...(X)][16];
    for (size_t k = 0; k < sizeof...(X); ++k) _mm512_storeu_ps(lanes[k], args[k]);
    float r[16];
    for (int l = 0; l < 16; ++l) {
      r[l] = [&]<size_t... I>(std::index_sequence<I...>) {
        return static_cast<float>(Op{}(lanes[I][l]...));
      }(std::index_sequence_for<X...>{});
    }
    return _mm512_loadu_ps(r);
  }
}

// The 16-lane loop over [b, e) of the eager float32 kernels and the fused ones. head(i, m, carry)
// loads vector i (its lanes m) and runs the first part of its work into carry; tail(i, m, carry)
// runs the rest and stores, or returns false and writes nothing when a lane was outside an op's
// fast domain; exact(i0, i1) then computes [i0, i1) element by element. Software-pipelined:
// head(i + 16) runs before tail(i), so that the instructions in flight hold independent work (a
// long chain per element, as tanh(exp(..) + sin(..)), was limited by the core's window, not its
// units). In blocks of 64 vectors, the last one masked; the vectors to redo are done after their
// block, so that the vector loop holds no call (a call in it made g++ reload every constant on
// each pass). head and tail are lambdas marked always_inline.
template <typename Carry, typename Head, typename Tail, typename Exact>
[[gnu::always_inline]] inline void vec16_loop(int64_t b, int64_t e, const Head& head,
                                              const Tail& tail, const Exact& exact) {
  constexpr __mmask16 kAll = 0xffff;
  for (int64_t c = b; c < e; c += 1024) {
    const int64_t ce = c + 1024 < e ? c + 1024 : e;
    const int64_t nv = (ce - c) / 16;  // whole vectors
    uint64_t redo = 0;
    if (nv > 0) {
      Carry cur;
      head(c, kAll, cur);
      for (int64_t k = 0; k + 1 < nv; ++k) {
        Carry next;
        head(c + 16 * (k + 1), kAll, next);
        if (!tail(c + 16 * k, kAll, cur)) redo |= uint64_t{1} << k;
        cur = next;
      }
      if (!tail(c + 16 * (nv - 1), kAll, cur)) redo |= uint64_t{1} << (nv - 1);
    }
    if (c + 16 * nv < ce) {
      const auto m = static_cast<__mmask16>((1u << (ce - c - 16 * nv)) - 1);
      Carry last;
      head(c + 16 * nv, m, last);
      if (!tail(c + 16 * nv, m, last)) redo |= uint64_t{1} << nv;
    }
    for (; redo != 0; redo &= redo - 1) {
      const int64_t i0 = c + 16 * __builtin_ctzll(redo);
      exact(i0, i0 + 16 < ce ? i0 + 16 : ce);
    }
  }
}

#endif

template <typename Op>
inline constexpr bool has_vec16 = Vec16<Op>::kHas;

}  // namespace tessera::cpu::ops
