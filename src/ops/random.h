// Primitives of the random family (front ends in random.cpp, kernel in backend/cpu/random.cpp).
#pragma once

#include "tessera/primitive.h"

namespace tessera {

// Random bits from Threefry-2x32 keys. The input holds keys of shape (N1, ..., NK, 2); the
// output, of shape (N1, ..., NK, M1, M2, ...), gives each key its own block of `width`-byte
// words (uint8/uint16/uint32 for width 1/2/4), laid out exactly as MLX's CPU kernel does.
class RandomBits : public UnaryPrimitive {
 public:
  RandomBits(Stream s, Shape shape, int width)
      : UnaryPrimitive(s), shape_(std::move(shape)), width_(width) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VMAP
  const char* name() const override { return "RandomBits"; }
  TESSERA_STATE(shape_, width_)
  bool is_equivalent(const Primitive& other) const override;
  const Shape& shape() const { return shape_; }
  int width() const { return width_; }

 private:
  Shape shape_;
  int width_;
};

}  // namespace tessera
