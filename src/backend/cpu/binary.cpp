// CPU kernels of the binary elementwise primitives (tessera/primitives/elementwise.h): one
// functor per op, run by binary_kernel (backend/cpu/elementwise.h) on inputs already promoted
// to one dtype.
// The kernels' selects (NaN and range checks) compare floats; without this g++ keeps them as
// branches (a comparison might raise an FP flag) and the loops do not vectorise. Tessera never
// reads FP exception flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <cmath>
#include <complex>
#include <limits>

#include "backend/cpu/binary_ops.h"
#include "backend/cpu/elementwise.h"
#include "tessera/primitives/elementwise.h"

namespace tessera {

namespace {

using cpu::compute_t;
using cpu::is_complex_v;
using cpu::is_half_v;
using cpu::is_nan;
using cpu::less_than;
using namespace cpu::ops;

template <typename Op>
void same_type_all(const std::vector<array>& in, array& out, Op op) {
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cpu::binary_kernel<T, T>(in[0], in[1], out, op);
  });
}

// Inputs of any dtype (the inputs' dtype), bool output.
template <typename Op>
void to_bool(const std::vector<array>& in, array& out, Op op) {
  detail::dispatch_dtype(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    cpu::binary_kernel<T, bool>(in[0], in[1], out, op);
  });
}

}  // namespace

// ---- kernels ----

void Add::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs, out, AddOp{});
}
void Subtract::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs, out, SubtractOp{});
}
void Multiply::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs, out, MultiplyOp{});
}
void Divide::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs, out, DivideOp{});
}

void Remainder::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_complex_v<T>) {
      throw std::logic_error("[Remainder] kernel called with complex64");
    } else {
      cpu::binary_kernel<T, T>(inputs[0], inputs[1], out, RemainderOp{});
    }
  });
}

void DivMod::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  detail::dispatch_dtype(outputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_complex_v<T>) {
      throw std::logic_error("[DivMod] kernel called with complex64");
    } else {
      // The inputs are read twice, so neither output may take over an input buffer.
      cpu::binary_kernel<T, T>(inputs[0], inputs[1], outputs[0], FloorQuotientOp{}, false);
      cpu::binary_kernel<T, T>(inputs[0], inputs[1], outputs[1], RemainderOp{}, false);
    }
  });
}

void Power::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs, out, PowerOp{});
}
void Maximum::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs, out, MaximumOp{});
}
void Minimum::eval_cpu(const std::vector<array>& inputs, array& out) {
  same_type_all(inputs, out, MinimumOp{});
}

void ArcTan2::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::dispatch_inexact<false>(out.dtype(), "ArcTan2", [&](auto tag) {
    using T = decltype(tag);
    cpu::binary_kernel<T, T>(inputs[0], inputs[1], out, ArcTan2Op{});
  });
}

void LogAddExp::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::dispatch_inexact(out.dtype(), "LogAddExp", [&](auto tag) {
    using T = decltype(tag);
    cpu::binary_kernel<T, T>(inputs[0], inputs[1], out, LogAddExpOp{});
  });
}

void Equal::eval_cpu(const std::vector<array>& inputs, array& out) {
  if (equal_nan_) {
    to_bool(inputs, out, NaNEqualOp{});
  } else {
    to_bool(inputs, out, EqualOp{});
  }
}
void NotEqual::eval_cpu(const std::vector<array>& inputs, array& out) {
  to_bool(inputs, out, NotEqualOp{});
}
void Less::eval_cpu(const std::vector<array>& inputs, array& out) {
  to_bool(inputs, out, LessOp{});
}
void LessEqual::eval_cpu(const std::vector<array>& inputs, array& out) {
  to_bool(inputs, out, LessEqualOp{});
}
void Greater::eval_cpu(const std::vector<array>& inputs, array& out) {
  to_bool(inputs, out, GreaterOp{});
}
void GreaterEqual::eval_cpu(const std::vector<array>& inputs, array& out) {
  to_bool(inputs, out, GreaterEqualOp{});
}

void LogicalAnd::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::binary_kernel<bool, bool>(inputs[0], inputs[1], out, LogicalAndOp{});
}
void LogicalOr::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::binary_kernel<bool, bool>(inputs[0], inputs[1], out, LogicalOrOp{});
}

void BitwiseBinary::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::dispatch_integral(out.dtype(), name(), [&](auto tag) {
    using T = decltype(tag);
    const array& a = inputs[0];
    const array& b = inputs[1];
    switch (op_) {
      case Op::And:
        cpu::binary_kernel<T, T>(a, b, out, BitwiseAndOp{});
        break;
      case Op::Or:
        cpu::binary_kernel<T, T>(a, b, out, BitwiseOrOp{});
        break;
      case Op::Xor:
        cpu::binary_kernel<T, T>(a, b, out, BitwiseXorOp{});
        break;
      case Op::LeftShift:
      case Op::RightShift:
        if constexpr (std::is_same_v<T, bool>) {
          throw std::logic_error("[BitwiseBinary] shift kernel called with bool");
        } else if (op_ == Op::LeftShift) {
          cpu::binary_kernel<T, T>(a, b, out, LeftShiftOp{});
        } else {
          cpu::binary_kernel<T, T>(a, b, out, RightShiftOp{});
        }
        break;
    }
  });
}

}  // namespace tessera
