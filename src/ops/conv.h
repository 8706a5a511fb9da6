// Primitives of the convolution family (front ends and derivatives in src/ops/conv.cpp, kernels in
// src/backend/cpu/conv.cpp). All three share one geometry: for a convolution y = conv(x, w),
// ConvWeightGrad(x, dy) is the derivative of <dy, y> in w and ConvInputGrad(dy, w) the derivative
// in x, so each one's derivatives are the other two (the map (x, w) -> y is bilinear).
#pragma once

#include <tuple>
#include <vector>

#include "tessera/primitive.h"

namespace tessera {

// The geometry of a convolution, one entry per spatial dim (see conv_general).
struct ConvParams {
  std::vector<int> stride, padding_lo, padding_hi, kernel_dilation, input_dilation;
  int groups = 1;
  bool flip = false;
  bool operator==(const ConvParams&) const = default;
};

// ConvParams in exported files (export_state.h): its fields in declaration order.
namespace export_detail {
template <>
struct Codec<ConvParams> {
  using Fields = std::tuple<std::vector<int>, std::vector<int>, std::vector<int>, std::vector<int>,
                            std::vector<int>, int, bool>;
  static void put(StateWriter& w, const ConvParams& p) {
    export_detail::put(w, Fields(p.stride, p.padding_lo, p.padding_hi, p.kernel_dilation,
                                 p.input_dilation, p.groups, p.flip));
  }
  static ConvParams get(StateReader& r) {
    auto [stride, lo, hi, kernel_dilation, input_dilation, groups, flip] =
        export_detail::get<Fields>(r);
    return ConvParams{std::move(stride), std::move(lo), std::move(hi), std::move(kernel_dilation),
                      std::move(input_dilation), groups, flip};
  }
};
}  // namespace export_detail

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
  TESSERA_STATE(params_)
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
  TESSERA_STATE(params_, kernel_)
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
  TESSERA_STATE(params_, input_)
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
