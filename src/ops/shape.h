// Primitives of the shape family (front ends in shape.cpp, kernels in backend/cpu/shape.cpp).
#pragma once

#include "ops/primitive.h"

namespace tessera {

// View of the input with 0 strides along broadcast dims.
class Broadcast : public UnaryPrimitive {
 public:
  Broadcast(Stream s, Shape shape) : UnaryPrimitive(s), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "Broadcast"; }
  bool is_equivalent(const Primitive& other) const override;

 private:
  Shape shape_;
};

// View when the input's strides allow it, else a row-contiguous copy.
class Reshape : public UnaryPrimitive {
 public:
  Reshape(Stream s, Shape shape) : UnaryPrimitive(s), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "Reshape"; }
  bool is_equivalent(const Primitive& other) const override;

 private:
  Shape shape_;
};

}  // namespace tessera
