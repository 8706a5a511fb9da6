// Primitives of the quantization family (front ends and derivatives in src/ops/quantized.cpp,
// kernels in src/backend/cpu/quantized.cpp): MLX's affine format (see tessera/ops/quantized.h).
#pragma once

#include "core/primitive.h"

namespace tessera {

// The packing shared by the kernels: `bits` per element, LSB first, a little-endian bit stream.
class QuantizedPrimitive {
 public:
  QuantizedPrimitive(int group_size, int bits) : group_size_(group_size), bits_(bits) {}
  int group_size() const { return group_size_; }
  int bits() const { return bits_; }

 protected:
  bool same_format(const QuantizedPrimitive& o) const {
    return group_size_ == o.group_size_ && bits_ == o.bits_;
  }
  int group_size_, bits_;
};

// w (..., K) -> {wq (..., K * bits / 32) uint32, scales, biases (..., K / group_size)}.
class AffineQuantize : public Primitive, public QuantizedPrimitive {
 public:
  AffineQuantize(Stream s, int group_size, int bits)
      : Primitive(s), QuantizedPrimitive(group_size, bits) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "AffineQuantize"; }
  bool is_equivalent(const Primitive& other) const override;
};

// {wq, scales, biases} -> scales * q + biases (..., K), in the output's dtype, rounded after the
// product and after the sum (as MLX's separate multiply and add).
class AffineDequantize : public UnaryPrimitive, public QuantizedPrimitive {
 public:
  AffineDequantize(Stream s, int group_size, int bits)
      : UnaryPrimitive(s), QuantizedPrimitive(group_size, bits) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VJP
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "AffineDequantize"; }
  bool is_equivalent(const Primitive& other) const override;
};

// {x (..., K), wq, scales, biases} -> x @ dequantize(w).T (transpose; w (N, K packed)) or
// x @ dequantize(w) (w (K, N packed)); x, scales and biases of the output's dtype.
class QuantizedMatmul : public UnaryPrimitive, public QuantizedPrimitive {
 public:
  QuantizedMatmul(Stream s, int group_size, int bits, bool transpose)
      : UnaryPrimitive(s), QuantizedPrimitive(group_size, bits), transpose_(transpose) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "QuantizedMatmul"; }
  bool is_equivalent(const Primitive& other) const override;

 private:
  bool transpose_;
};

// float <-> fp8 e4m3 (the "fn" variant: bias 7, 3 mantissa bits, no infinities, 0x7F / 0xFF NaN,
// largest 448) stored as uint8. to: round to nearest even, saturating at +-448.
class ConvertFP8 : public UnaryPrimitive {
 public:
  ConvertFP8(Stream s, bool to, Dtype out) : UnaryPrimitive(s), to_(to), out_(out) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  const char* name() const override { return to_ ? "ToFP8" : "FromFP8"; }
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const ConvertFP8*>(&other);
    return o && o->to_ == to_ && o->out_ == out_;
  }

 private:
  bool to_;
  Dtype out_;
};

}  // namespace tessera
