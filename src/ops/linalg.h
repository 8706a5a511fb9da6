// Primitives of the linalg family: Matmul, AddMM, GatherMM and SegmentedMM (front ends and derivatives in
// src/ops/matmul.cpp, the BLAS kernel in src/backend/cpu/matmul.cpp).
#pragma once

#include "tessera/primitive.h"

namespace tessera {

// out[..., M, N] = a[..., M, K] @ b[..., K, N]. The front end gives both inputs the output's batch
// dims (broadcast views) or a 2-D b with a 2-D a; dtypes already equal and inexact.
class Matmul : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  TESSERA_PRIMITIVE_NAME(Matmul)
};

// out = alpha * (a @ b) + beta * c, inputs {a, b, c}; c already has the output's shape
// (possibly a broadcast view) and dtype.
class AddMM : public UnaryPrimitive {
 public:
  AddMM(Stream s, float alpha, float beta) : UnaryPrimitive(s), alpha_(alpha), beta_(beta) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "AddMM"; }
  TESSERA_STATE(alpha_, beta_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  float alpha_, beta_;
};

// {a (..., M, K), b (..., K, N), lhs (uint32), rhs (uint32)} -> out (idx..., M, N): for each
// position of the (equal-shaped) index arrays, a's matrix lhs times b's matrix rhs.
class GatherMM : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VJP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  TESSERA_PRIMITIVE_NAME(GatherMM)
};

// {a (M, K), b (K, N), segments (..., 2) uint32} -> out (..., M, N): per segment [s0, s1) the
// product of a's columns and b's rows s0..s1.
class SegmentedMM : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  TESSERA_PRIMITIVE_NAME(SegmentedMM)
};

}  // namespace tessera
