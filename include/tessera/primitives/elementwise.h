// Primitives of the elementwise family: front ends and derivatives in src/ops/unary.cpp and
// src/ops/binary.cpp, kernels in src/backend/cpu/{unary,binary,ternary}.cpp. Binary and ternary
// primitives always receive inputs already promoted to one dtype and broadcast to one shape.
//
// This file is also compile's fusion table: every primitive here names, in fused_functor(), the
// functor of backend/cpu/{unary,binary}_ops.h that computes its elements (the one its eager kernel
// runs). A primitive of this family that names none (DivMod: two outputs) is never fused.
#pragma once

#include "tessera/primitive.h"

namespace tessera {

namespace detail {
// The broadcast shape of the inputs (shapeless compile re-derives output shapes with it).
Shape elementwise_shape(const std::vector<array>& inputs);
}  // namespace detail

#define TESSERA_ELEMENTWISE_TRANSFORMS                                                     \
  TESSERA_DECLARE_TRANSFORMS                                                                \
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {             \
    return std::vector<Shape>(num_outputs(), detail::elementwise_shape(inputs));            \
  }

// The functor named FUNCTOR, as fused_functor() returns it: a bare name, which each device's code
// generator resolves among its own functors (the CPU's: backend/cpu/*_ops.h).
#define TESSERA_FUNCTOR(FUNCTOR) #FUNCTOR "{}"

// A parameterless one-output elementwise primitive with vjp/jvp/vmap.
#define TESSERA_ELEMENTWISE_PRIMITIVE(NAME)                                   \
  class NAME : public UnaryPrimitive {                                        \
   public:                                                                    \
    using UnaryPrimitive::UnaryPrimitive;                                     \
    void eval_cpu(const std::vector<array>& inputs, array& out) override;     \
    TESSERA_ELEMENTWISE_TRANSFORMS                                            \
    TESSERA_PRIMITIVE_NAME(NAME)                                              \
    const char* fused_functor() const override { return TESSERA_FUNCTOR(NAME##Op); } \
                                                                              \
   private:                                                                   \
    static constexpr size_t num_outputs() { return 1; }                       \
  };

// ---- unary ----
TESSERA_ELEMENTWISE_PRIMITIVE(Abs)
TESSERA_ELEMENTWISE_PRIMITIVE(Negative)
TESSERA_ELEMENTWISE_PRIMITIVE(Sign)
TESSERA_ELEMENTWISE_PRIMITIVE(Square)
TESSERA_ELEMENTWISE_PRIMITIVE(Exp)
TESSERA_ELEMENTWISE_PRIMITIVE(Expm1)
TESSERA_ELEMENTWISE_PRIMITIVE(Log1p)
TESSERA_ELEMENTWISE_PRIMITIVE(Sin)
TESSERA_ELEMENTWISE_PRIMITIVE(Cos)
TESSERA_ELEMENTWISE_PRIMITIVE(Tan)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcSin)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcCos)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcTan)
TESSERA_ELEMENTWISE_PRIMITIVE(Sinh)
TESSERA_ELEMENTWISE_PRIMITIVE(Cosh)
TESSERA_ELEMENTWISE_PRIMITIVE(Tanh)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcSinh)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcCosh)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcTanh)
TESSERA_ELEMENTWISE_PRIMITIVE(Sigmoid)
TESSERA_ELEMENTWISE_PRIMITIVE(Erf)
TESSERA_ELEMENTWISE_PRIMITIVE(ErfInv)
TESSERA_ELEMENTWISE_PRIMITIVE(Floor)
TESSERA_ELEMENTWISE_PRIMITIVE(Ceil)
TESSERA_ELEMENTWISE_PRIMITIVE(Round)
TESSERA_ELEMENTWISE_PRIMITIVE(LogicalNot)
TESSERA_ELEMENTWISE_PRIMITIVE(BitwiseInvert)
TESSERA_ELEMENTWISE_PRIMITIVE(StopGradient)
TESSERA_ELEMENTWISE_PRIMITIVE(Conjugate)
TESSERA_ELEMENTWISE_PRIMITIVE(Real)
TESSERA_ELEMENTWISE_PRIMITIVE(Imag)

// sqrt, or 1/sqrt when `recip`.
class Sqrt : public UnaryPrimitive {
 public:
  explicit Sqrt(Stream s, bool recip = false) : UnaryPrimitive(s), recip_(recip) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_ELEMENTWISE_TRANSFORMS
  const char* name() const override { return recip_ ? "Rsqrt" : "Sqrt"; }
  TESSERA_STATE(recip_)
  const char* fused_functor() const override {
    return recip_ ? TESSERA_FUNCTOR(RsqrtOp) : TESSERA_FUNCTOR(SqrtOp);
  }
  bool is_equivalent(const Primitive& other) const override;

 private:
  static constexpr size_t num_outputs() { return 1; }
  bool recip_;
};

class Log : public UnaryPrimitive {
 public:
  enum class Base { e, two, ten };
  Log(Stream s, Base base) : UnaryPrimitive(s), base_(base) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_ELEMENTWISE_TRANSFORMS
  const char* name() const override;
  TESSERA_STATE(base_)
  bool is_equivalent(const Primitive& other) const override;
  const char* fused_functor() const override {
    switch (base_) {
      case Base::two: return TESSERA_FUNCTOR(Log2Op);
      case Base::ten: return TESSERA_FUNCTOR(Log10Op);
      default: return TESSERA_FUNCTOR(LogOp);
    }
  }

 private:
  static constexpr size_t num_outputs() { return 1; }
  Base base_;
};

// ---- binary ----
TESSERA_ELEMENTWISE_PRIMITIVE(Add)
TESSERA_ELEMENTWISE_PRIMITIVE(Subtract)
TESSERA_ELEMENTWISE_PRIMITIVE(Multiply)
// True division for inexact dtypes; floor division for integers (floor_divide).
TESSERA_ELEMENTWISE_PRIMITIVE(Divide)
TESSERA_ELEMENTWISE_PRIMITIVE(Remainder)
TESSERA_ELEMENTWISE_PRIMITIVE(Power)
TESSERA_ELEMENTWISE_PRIMITIVE(Maximum)
TESSERA_ELEMENTWISE_PRIMITIVE(Minimum)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcTan2)
TESSERA_ELEMENTWISE_PRIMITIVE(LogAddExp)
TESSERA_ELEMENTWISE_PRIMITIVE(NotEqual)
TESSERA_ELEMENTWISE_PRIMITIVE(Less)
TESSERA_ELEMENTWISE_PRIMITIVE(LessEqual)
TESSERA_ELEMENTWISE_PRIMITIVE(Greater)
TESSERA_ELEMENTWISE_PRIMITIVE(GreaterEqual)
TESSERA_ELEMENTWISE_PRIMITIVE(LogicalAnd)
TESSERA_ELEMENTWISE_PRIMITIVE(LogicalOr)

// a == b; with equal_nan, two NaNs compare equal (array_equal).
class Equal : public UnaryPrimitive {
 public:
  explicit Equal(Stream s, bool equal_nan = false) : UnaryPrimitive(s), equal_nan_(equal_nan) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_ELEMENTWISE_TRANSFORMS
  const char* name() const override { return equal_nan_ ? "NaNEqual" : "Equal"; }
  TESSERA_STATE(equal_nan_)
  const char* fused_functor() const override {
    return equal_nan_ ? TESSERA_FUNCTOR(NaNEqualOp) : TESSERA_FUNCTOR(EqualOp);
  }
  bool is_equivalent(const Primitive& other) const override;

 private:
  static constexpr size_t num_outputs() { return 1; }
  bool equal_nan_;
};

class BitwiseBinary : public UnaryPrimitive {
 public:
  enum class Op { And, Or, Xor, LeftShift, RightShift };
  BitwiseBinary(Stream s, Op op) : UnaryPrimitive(s), op_(op) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_ELEMENTWISE_TRANSFORMS
  const char* name() const override;
  TESSERA_STATE(op_)
  bool is_equivalent(const Primitive& other) const override;
  const char* fused_functor() const override {
    switch (op_) {
      case Op::And: return TESSERA_FUNCTOR(BitwiseAndOp);
      case Op::Or: return TESSERA_FUNCTOR(BitwiseOrOp);
      case Op::Xor: return TESSERA_FUNCTOR(BitwiseXorOp);
      case Op::LeftShift: return TESSERA_FUNCTOR(LeftShiftOp);
      default: return TESSERA_FUNCTOR(RightShiftOp);
    }
  }

 private:
  static constexpr size_t num_outputs() { return 1; }
  Op op_;
};

// Two outputs: floor quotient and remainder.
class DivMod : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_ELEMENTWISE_TRANSFORMS
  TESSERA_PRIMITIVE_NAME(DivMod)

 private:
  static constexpr size_t num_outputs() { return 2; }
};

// ---- ternary ----
// where(condition, x, y): inputs are bool condition, x, y of the output dtype.
TESSERA_ELEMENTWISE_PRIMITIVE(Select)

#undef TESSERA_ELEMENTWISE_PRIMITIVE
#undef TESSERA_FUNCTOR

}  // namespace tessera
