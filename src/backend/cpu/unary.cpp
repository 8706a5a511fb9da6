// CPU kernels of the unary elementwise primitives (tessera/primitives/elementwise.h): one
// functor per op, run by unary_kernel (backend/cpu/elementwise.h). The front ends cast inputs
// first, so a kernel sees only the dtypes its op accepts.

// The kernels' selects (NaN and range checks) compare floats; without this g++ keeps them as
// branches (a comparison might raise an FP flag) and the loops do not vectorise. Tessera never
// reads FP exception flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
// 64-byte vectors where the CPU has them (g++ prefers 32 bytes by default on AVX-512 parts);
// the math kernels here are compute-bound and run about 1.4x faster.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <cmath>
#include <complex>
#include <limits>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/unary_ops.h"
#include "tessera/primitives/elementwise.h"

namespace tessera {

namespace {

using cpu::compute_t;
using cpu::is_complex_v;
using cpu::is_half_v;
using namespace cpu::ops;

// Run `op` with input and output of the same dtype, for every dtype.
template <typename Op>
void same_type_all(const array& in, array& out, Op op) {
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cpu::unary_kernel<T, T>(in, out, op);
  });
}

// Run `op` on an inexact input (the front end promoted it).
template <bool Complex, typename Op>
void same_type_inexact(const array& in, array& out, const char* name, Op op) {
  cpu::dispatch_inexact<Complex>(out.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    cpu::unary_kernel<T, T>(in, out, op);
  });
}

}  // namespace

// ---- kernels ----

void Abs::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (in.dtype() == complex64) {
    cpu::unary_kernel<complex64_t, float>(in, out, AbsOp{});
    return;
  }
  same_type_all(in, out, AbsOp{});
}

void Negative::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs[0], out, NegativeOp{});
}

void Sign::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs[0], out, SignOp{});
}

void Square::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs[0], out, SquareOp{});
}

#define TESSERA_FLOAT_KERNEL(PRIM, OP, COMPLEX)                                 \
  void PRIM::eval_cpu(const std::vector<array>& inputs, array& out) {            \
    same_type_inexact<COMPLEX>(inputs[0], out, #PRIM, OP{});                     \
  }

TESSERA_FLOAT_KERNEL(Exp, ExpOp, true)
TESSERA_FLOAT_KERNEL(Expm1, Expm1Op, false)
TESSERA_FLOAT_KERNEL(Log1p, Log1pOp, true)
TESSERA_FLOAT_KERNEL(Sin, SinOp, true)
TESSERA_FLOAT_KERNEL(Cos, CosOp, true)
TESSERA_FLOAT_KERNEL(Tan, TanOp, true)
TESSERA_FLOAT_KERNEL(ArcSin, ArcSinOp, true)
TESSERA_FLOAT_KERNEL(ArcCos, ArcCosOp, true)
TESSERA_FLOAT_KERNEL(ArcTan, ArcTanOp, true)
TESSERA_FLOAT_KERNEL(Sinh, SinhOp, true)
TESSERA_FLOAT_KERNEL(Cosh, CoshOp, true)
TESSERA_FLOAT_KERNEL(Tanh, TanhOp, true)
TESSERA_FLOAT_KERNEL(ArcSinh, ArcSinhOp, true)
TESSERA_FLOAT_KERNEL(ArcCosh, ArcCoshOp, true)
TESSERA_FLOAT_KERNEL(ArcTanh, ArcTanhOp, true)
TESSERA_FLOAT_KERNEL(Sigmoid, SigmoidOp, false)
TESSERA_FLOAT_KERNEL(Erf, ErfOp, false)
TESSERA_FLOAT_KERNEL(ErfInv, ErfInvOp, false)

#undef TESSERA_FLOAT_KERNEL

void Sqrt::eval_cpu(const std::vector<array>& inputs, array& out) {
  if (recip_) {
    same_type_inexact<true>(inputs[0], out, "Rsqrt", RsqrtOp{});
  } else {
    same_type_inexact<true>(inputs[0], out, "Sqrt", SqrtOp{});
  }
}

void Log::eval_cpu(const std::vector<array>& inputs, array& out) {
  switch (base_) {
    case Base::e: same_type_inexact<true>(inputs[0], out, "Log", LogOp{}); break;
    case Base::two: same_type_inexact<true>(inputs[0], out, "Log2", Log2Op{}); break;
    case Base::ten: same_type_inexact<true>(inputs[0], out, "Log10", Log10Op{}); break;
  }
}

// Floor, ceil and round leave integers as they are.
#define TESSERA_ROUNDING_KERNEL(PRIM, OP)                                         \
  void PRIM::eval_cpu(const std::vector<array>& inputs, array& out) {            \
    if (!is_floating_point(out.dtype())) {                                       \
      out.copy_shared_buffer(inputs[0]);                                         \
      return;                                                                    \
    }                                                                            \
    same_type_inexact<false>(inputs[0], out, #PRIM, OP{});                       \
  }

TESSERA_ROUNDING_KERNEL(Floor, FloorOp)
TESSERA_ROUNDING_KERNEL(Ceil, CeilOp)
TESSERA_ROUNDING_KERNEL(Round, RoundOp)

#undef TESSERA_ROUNDING_KERNEL

void LogicalNot::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::unary_kernel<bool, bool>(inputs[0], out, LogicalNotOp{});
}

void BitwiseInvert::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::dispatch_integral(out.dtype(), "BitwiseInvert", [&](auto tag) {
    using T = decltype(tag);
    cpu::unary_kernel<T, T>(inputs[0], out, BitwiseInvertOp{});
  });
}

void StopGradient::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.copy_shared_buffer(inputs[0]);
}

void Conjugate::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::unary_kernel<complex64_t, complex64_t>(inputs[0], out, ConjugateOp{});
}

void Real::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::unary_kernel<complex64_t, float>(inputs[0], out, RealOp{});
}

void Imag::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::unary_kernel<complex64_t, float>(inputs[0], out, ImagOp{});
}

}  // namespace tessera
