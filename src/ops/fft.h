// The FFT primitive (front ends and derivatives in src/ops/fft.cpp, the kernel and its plans in
// src/backend/cpu/fft.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/primitive.h"

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
  TESSERA_STATE(axes_, inverse_, real_, real_length_)
  bool is_equivalent(const Primitive& other) const override;

  // The transform of x by this primitive's parameters (axes shifted by `axis_shift`).
  array apply(const array& x, int axis_shift = 0) const;

 private:
  std::vector<int> axes_;
  bool inverse_, real_;
  int real_length_;
};

// The Hadamard transform of the last axis, times `scale`. The axis has n = m * 2^k entries with
// m in {1, 12, 20, 28}: viewed as [m, 2^k], it is (H_m kron H_2^k) x, H_2^k Sylvester's matrix and
// H_m the one from Sloane's library that MLX uses. H_20 and H_28 are not symmetric, so the vjp is
// the transposed transform (`transposed`); MLX differentiates with H itself.
class Hadamard : public UnaryPrimitive {
 public:
  Hadamard(Stream s, float scale, bool transposed = false)
      : UnaryPrimitive(s), scale_(scale), transposed_(transposed) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  const char* name() const override { return "Hadamard"; }
  TESSERA_STATE(scale_, transposed_)
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Hadamard*>(&other);
    return o && o->scale_ == scale_ && o->transposed_ == transposed_;
  }

 private:
  float scale_;
  bool transposed_;
};

// The factor m of n = m * 2^k (1, 12, 20 or 28); throws naming n when there is none.
int hadamard_factor(int64_t n);

// Row i of H_m (m = 12, 20, 28) as a bit mask: bit j set where the entry is +1.
const uint32_t* hadamard_rows(int m);

}  // namespace tessera
