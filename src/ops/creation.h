// Primitives of the creation family (front ends in creation.cpp, kernels in
// backend/cpu/creation.cpp).
#pragma once

#include "tessera/primitive.h"

namespace tessera {

// Broadcast a 0-d input (already of the output dtype) to the output shape.
// Input: the 0-d fill value; output: `shape` filled with it.
// `shape` filled with the 0-d input. One made by a *_like op follows the shape of the array it
// was made like (its shape source, for shapeless compile).
class Full : public UnaryPrimitive {
 public:
  Full(Stream s, Shape shape) : UnaryPrimitive(s), shape_(std::move(shape)) {}
  Full(Stream s, const array& like);
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Full"; }
  TESSERA_STATE(shape_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> shape_sources() const override { return sources_; }
  void clear_shape_sources() override { sources_.clear(); }
  std::vector<Shape> shapeless_output_shapes(const std::vector<array>& inputs,
                                             const std::vector<Shape>& source_shapes) override;

 private:
  Shape shape_;
  std::vector<array> sources_;  // while compile traces (see Broadcast)
};

class Arange : public UnaryPrimitive {
 public:
  Arange(Stream s, double start, double stop, double step)
      : UnaryPrimitive(s), start_(start), stop_(stop), step_(step) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "Arange"; }
  TESSERA_STATE(start_, stop_, step_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  double start_, stop_, step_;
};

class AsType : public UnaryPrimitive {
 public:
  AsType(Stream s, Dtype dtype) : UnaryPrimitive(s), dtype_(dtype) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "AsType"; }
  TESSERA_STATE(dtype_)
  bool is_equivalent(const Primitive& other) const override;
  // Fusion table entry: CastOp<T> of backend/cpu/unary_ops.h, T the target's C++ type.
  const char* fused_functor() const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  Dtype dtype_;
};

// A row-contiguous copy; or, with `share` (the tracers vjp / jvp / vmap put in front of their
// inputs), the input's buffer itself: a shared buffer is never donated, so it stays intact.
class Copy : public UnaryPrimitive {
 public:
  explicit Copy(Stream s, bool share = false) : UnaryPrimitive(s), share_(share) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Copy"; }
  TESSERA_STATE(share_)
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const Copy*>(&other);
    return o && o->share_ == share_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  bool share_;
};

}  // namespace tessera
