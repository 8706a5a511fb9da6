// Primitives of the convolution family (front ends and derivatives in src/ops/conv.cpp, kernels in
// src/backend/cpu/conv.cpp). All three share one geometry: for a convolution y = conv(x, w),
// ConvWeightGrad(x, dy) is the derivative of <dy, y> in w and ConvInputGrad(dy, w) the derivative
// in x, so each one's derivatives are the other two (the map (x, w) -> y is bilinear).
#pragma once

#include <vector>

#include "core/primitive.h"

namespace tessera {

// The geometry of a convolution, one entry per spatial dim (see conv_general).
struct ConvParams {
  std::vector<int> stride, padding_lo, padding_hi, kernel_dilation, input_dilation;
  int groups = 1;
  bool flip = false;
  bool operator==(const ConvParams&) const = default;
};

// The base of the three: the parameters, equivalence and printing.
class ConvPrimitive : public UnaryPrimitive {
 public:
  ConvPrimitive(Stream s, ConvParams p) : UnaryPrimitive(s), params_(std::move(p)) {}
  const ConvParams& params() const { return params_; }
  bool is_equivalent(const Primitive& other) const override;
  void print(std::ostream& os) const override;

 protected:
  ConvParams params_;
};

// y (N, out..., O) = conv(x (N, in..., C), w (O, k..., C / groups)); dtypes equal, floating.
class Convolution : public ConvPrimitive {
 public:
  using ConvPrimitive::ConvPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "Convolution"; }
};

// dw (O, k..., C / groups) from x (N, in..., C) and dy (N, out..., O); k is the kernel's
// spatial shape.
class ConvWeightGrad : public ConvPrimitive {
 public:
  ConvWeightGrad(Stream s, ConvParams p, Shape kernel)
      : ConvPrimitive(s, std::move(p)), kernel_(std::move(kernel)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "ConvWeightGrad"; }
  bool is_equivalent(const Primitive& other) const override;

 private:
  Shape kernel_;
};

// dx (N, in..., C) from dy (N, out..., O) and w (O, k..., C / groups); `input` is the input's
// spatial shape.
class ConvInputGrad : public ConvPrimitive {
 public:
  ConvInputGrad(Stream s, ConvParams p, Shape input)
      : ConvPrimitive(s, std::move(p)), input_(std::move(input)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "ConvInputGrad"; }
  bool is_equivalent(const Primitive& other) const override;

 private:
  Shape input_;
};

namespace detail {

// The output shape of conv(x, w) with parameters p (already one entry per spatial dim);
// invalid parameters and an input too small for the kernel raise std::invalid_argument.
Shape conv_output_shape(const Shape& x, const Shape& w, const ConvParams& p);

}  // namespace detail

}  // namespace tessera
