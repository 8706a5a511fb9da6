// Primitives of the quantization family (front ends and derivatives in src/ops/quantized.cpp,
// kernels in src/backend/cpu/quantized.cpp): MLX's affine and fp formats (see
// tessera/ops/quantized.h).
#pragma once

#include "tessera/primitive.h"

namespace tessera {

enum class QuantMode { Affine, Mxfp4, Mxfp8, Nvfp4 };
// "affine", "mxfp4", ... ; and back (an unknown name raises, naming `op` and the modes).
const char* quant_mode_name(QuantMode mode);
QuantMode quant_mode(const char* op, const std::string& name);

// The packing shared by the kernels: `bits` per element, LSB first, a little-endian bit stream.
class QuantizedPrimitive {
 public:
  QuantizedPrimitive(int group_size, int bits, QuantMode mode = QuantMode::Affine)
      : group_size_(group_size), bits_(bits), mode_(mode) {}
  int group_size() const { return group_size_; }
  int bits() const { return bits_; }
  QuantMode mode() const { return mode_; }

 protected:
  bool same_format(const QuantizedPrimitive& o) const {
    return group_size_ == o.group_size_ && bits_ == o.bits_ && mode_ == o.mode_;
  }
  int group_size_, bits_;
  QuantMode mode_;
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
  TESSERA_STATE(group_size_, bits_)
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
  TESSERA_STATE(group_size_, bits_)
  bool is_equivalent(const Primitive& other) const override;
};

// MLX's fp modes. {w (..., K)[, global_scale (nvfp4)]} -> {wq, scales (..., K / group_size)
// uint8}, computed as MLX's CPU composition of ops computes them (each step rounded to its dtype).
class FPQuantize : public Primitive, public QuantizedPrimitive {
 public:
  FPQuantize(Stream s, int group_size, int bits, QuantMode mode)
      : Primitive(s), QuantizedPrimitive(group_size, bits, mode) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "FPQuantize"; }
  TESSERA_STATE(group_size_, bits_, mode_)
  bool is_equivalent(const Primitive& other) const override;
};

// {wq, scales (uint8)[, global_scale]} -> the encoded values (..., K) in the output's dtype.
class FPDequantize : public UnaryPrimitive, public QuantizedPrimitive {
 public:
  FPDequantize(Stream s, int group_size, int bits, QuantMode mode, Dtype out)
      : UnaryPrimitive(s), QuantizedPrimitive(group_size, bits, mode), out_(out) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "FPDequantize"; }
  TESSERA_STATE(group_size_, bits_, mode_, out_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  Dtype out_;
};

// {x (..., K), wq, scales[, biases (affine)]} -> x @ dequantize(w).T (transpose; w (N, K
// packed)) or x @ dequantize(w) (w (K, N packed)); x (and affine's scales and biases) of the
// output's dtype.
class QuantizedMatmul : public UnaryPrimitive, public QuantizedPrimitive {
 public:
  QuantizedMatmul(Stream s, int group_size, int bits, QuantMode mode, bool transpose)
      : UnaryPrimitive(s), QuantizedPrimitive(group_size, bits, mode), transpose_(transpose) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "QuantizedMatmul"; }
  TESSERA_STATE(group_size_, bits_, mode_, transpose_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  bool transpose_;
};

// {x (..., M, K), wq, scales[, biases], lhs (uint32), rhs (uint32)} -> out (idx..., M, N): for
// each position of the (equal-shaped) index arrays, x's matrix lhs times w's matrix rhs as
// QuantizedMatmul multiplies them.
class GatherQMM : public UnaryPrimitive, public QuantizedPrimitive {
 public:
  GatherQMM(Stream s, int group_size, int bits, QuantMode mode, bool transpose)
      : UnaryPrimitive(s), QuantizedPrimitive(group_size, bits, mode), transpose_(transpose) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VJP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "GatherQMM"; }
  TESSERA_STATE(group_size_, bits_, mode_, transpose_)
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
  TESSERA_STATE(to_, out_)
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const ConvertFP8*>(&other);
    return o && o->to_ == to_ && o->out_ == out_;
  }

 private:
  bool to_;
  Dtype out_;
};

}  // namespace tessera
