// 16-lane float32 forms of elementwise functors, for builds for AVX-512 CPUs: the eager float32
// kernels run them on contiguous runs (elementwise.h) and the fused kernels on contiguous and
// scalar inputs (compiled/codegen.cpp). Vec16<Op>::apply(x...) gives, lane by lane, the bits of
// Op{}(x...) on float; an op whose fast form covers part of its domain (sin, cos) also has ok(x),
// the lanes where apply is right (the callers take Op{} on the others).
#pragma once

#include <utility>

#include "backend/cpu/binary_ops.h"
#include "backend/cpu/unary_ops.h"

namespace tessera::cpu::ops {

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

#endif

template <typename Op>
inline constexpr bool has_vec16 = Vec16<Op>::kHas;

}  // namespace tessera::cpu::ops
