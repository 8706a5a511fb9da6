// Primitives of the creation extras: linspace, eye, tri, tril/triu, view (bit reinterpretation),
// as_strided, contiguous. Front ends and derivatives in creation_extra.cpp, kernels in
// backend/cpu/creation_extra.cpp.
#pragma once

#include "tessera/primitive.h"

namespace tessera {

// `num` evenly spaced samples from start to stop inclusive (computed in float32, or float64 for
// a float64 output, then converted).
class Linspace : public UnaryPrimitive {
 public:
  // endpoint: the last sample is `stop` (t = i / (n - 1)); otherwise t = i / n.
  Linspace(Stream s, double start, double stop, bool endpoint = true)
      : UnaryPrimitive(s), start_(start), stop_(stop), endpoint_(endpoint) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "Linspace"; }
  TESSERA_STATE(start_, stop_, endpoint_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  double start_, stop_;
  bool endpoint_;
};

// An (n, m) matrix of ones on the k-th diagonal (eye) or on and below it (tri).
class Eye : public UnaryPrimitive {
 public:
  Eye(Stream s, int k, bool lower_triangle)
      : UnaryPrimitive(s), k_(k), lower_triangle_(lower_triangle) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return lower_triangle_ ? "Tri" : "Eye"; }
  TESSERA_STATE(k_, lower_triangle_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  int k_;
  bool lower_triangle_;
};

// Zero the elements of the last two dims above the k-th diagonal (tril) or below it (triu).
class Triangular : public UnaryPrimitive {
 public:
  Triangular(Stream s, int k, bool upper) : UnaryPrimitive(s), k_(k), upper_(upper) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return upper_ ? "Triu" : "Tril"; }
  TESSERA_STATE(k_, upper_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  int k_;
  bool upper_;
};

// The input's bytes read as another dtype (a view when the layout allows, else a copy first).
class View : public UnaryPrimitive {
 public:
  View(Stream s, Dtype dtype) : UnaryPrimitive(s), dtype_(dtype) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VMAP
  const char* name() const override { return "View"; }
  TESSERA_STATE(dtype_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  Dtype dtype_;
};

// A view of the (row-contiguous) input with arbitrary shape, element strides and offset.
class AsStrided : public UnaryPrimitive {
 public:
  AsStrided(Stream s, Shape shape, Strides strides, size_t offset)
      : UnaryPrimitive(s), shape_(std::move(shape)), strides_(std::move(strides)), offset_(offset) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VJP
  TESSERA_DECLARE_JVP
  const char* name() const override { return "AsStrided"; }
  TESSERA_STATE(shape_, strides_, offset_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  Shape shape_;
  Strides strides_;
  size_t offset_;
};

// The input itself when row-contiguous (or column-contiguous, if allowed), else a dense copy.
class Contiguous : public UnaryPrimitive {
 public:
  Contiguous(Stream s, bool allow_col_major) : UnaryPrimitive(s), allow_col_major_(allow_col_major) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Contiguous"; }
  TESSERA_STATE(allow_col_major_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  bool allow_col_major_;
};

}  // namespace tessera
