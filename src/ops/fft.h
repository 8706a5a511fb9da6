// The FFT primitive (front ends and derivatives in src/ops/fft.cpp, the kernel and its plans in
// src/backend/cpu/fft.cpp).
#pragma once

#include <vector>

#include "core/primitive.h"

namespace tessera {

// Unnormalised forward transforms, inverse ones scaled by 1/n, over `axes` (distinct, in
// order). real: a real-to-complex forward (the last axis' real_length reals keep
// real_length/2+1 frequencies) or a complex-to-real inverse (real_length reals out).
class FFT : public UnaryPrimitive {
 public:
  FFT(Stream s, std::vector<int> axes, bool inverse, bool real, int real_length)
      : UnaryPrimitive(s),
        axes_(std::move(axes)),
        inverse_(inverse),
        real_(real),
        real_length_(real_length) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "FFT"; }
  bool is_equivalent(const Primitive& other) const override;

  // The transform of x by this primitive's parameters (axes shifted by `axis_shift`).
  array apply(const array& x, int axis_shift = 0) const;

 private:
  std::vector<int> axes_;
  bool inverse_, real_;
  int real_length_;
};

// The Walsh-Hadamard transform of the last axis (a power of two), times `scale`.
class Hadamard : public UnaryPrimitive {
 public:
  Hadamard(Stream s, float scale) : UnaryPrimitive(s), scale_(scale) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  const char* name() const override { return "Hadamard"; }
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Hadamard*>(&other);
    return o && o->scale_ == scale_;
  }

 private:
  float scale_;
};

}  // namespace tessera
