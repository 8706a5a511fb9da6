// Primitives of the factorization family: the LAPACK routines behind linalg (front ends and
// derivatives in src/ops/factorizations.cpp, kernels in src/backend/cpu/factorizations.cpp).
// Each works on the matrices in the last two dims of one float32 / float64 input, batched over
// the leading dims.
#pragma once

#include <string>

#include "tessera/primitive.h"

namespace tessera {

// {q (..., M, K), r (..., K, N)}.
class QRF : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  TESSERA_PRIMITIVE_NAME(QRF)
};

// {u (..., M, M), s (..., K), vt (..., N, N)}, or {s} without compute_uv.
class SVD : public Primitive {
 public:
  SVD(Stream s, bool compute_uv) : Primitive(s), compute_uv_(compute_uv) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "SVD"; }
  TESSERA_STATE(compute_uv_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  bool compute_uv_;
};

// The inverse of a square matrix; of its lower / upper triangle when triangular.
class Inverse : public UnaryPrimitive {
 public:
  Inverse(Stream s, bool triangular, bool upper)
      : UnaryPrimitive(s), triangular_(triangular), upper_(upper) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "Inverse"; }
  TESSERA_STATE(triangular_, upper_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  bool triangular_, upper_;
};

// The Cholesky factor (lower, or upper), the other triangle zero.
class Cholesky : public UnaryPrimitive {
 public:
  Cholesky(Stream s, bool upper) : UnaryPrimitive(s), upper_(upper) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VJP
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "Cholesky"; }
  TESSERA_STATE(upper_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  bool upper_;
};

// {values (..., N), vectors (..., N, N)} complex64 of a general matrix; {values} alone.
class Eig : public Primitive {
 public:
  Eig(Stream s, bool vectors) : Primitive(s), vectors_(vectors) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "Eig"; }
  TESSERA_STATE(vectors_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  bool vectors_;
};

// {values (..., N) ascending, vectors (..., N, N)} of a symmetric matrix; {values} alone.
class Eigh : public Primitive {
 public:
  Eigh(Stream s, std::string uplo, bool vectors)
      : Primitive(s), uplo_(std::move(uplo)), vectors_(vectors) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_VJP
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "Eigh"; }
  TESSERA_STATE(uplo_, vectors_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  std::string uplo_;
  bool vectors_;
};

// {lu (..., M, N), pivots (..., K) uint32, row indices (..., M) uint32} (see linalg::lu).
class LUF : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  TESSERA_PRIMITIVE_NAME(LUF)
};

// x = solve(a (..., N, N), b (..., N, K)); both already broadcast to the output's batch dims.
class Solve : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  TESSERA_PRIMITIVE_NAME(Solve)
};

}  // namespace tessera
