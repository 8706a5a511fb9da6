// A user's own operation as a Tessera primitive: z = alpha * x + beta * y, with NumPy
// broadcasting and inputs promoted to a floating type. The front end (axpby) builds the lazy
// node; the Axpby primitive evaluates it on the CPU and tells the transforms (grad, jvp, vmap)
// how to go through it.
#pragma once

#include <tessera/ops.h>
#include <tessera/primitive.h>

namespace tessera_ext {

namespace mx = tessera;

mx::array axpby(const mx::array& x, const mx::array& y, float alpha, float beta,
                mx::StreamOrDevice s = {});

class Axpby : public mx::UnaryPrimitive {
 public:
  Axpby(mx::Stream stream, float alpha, float beta)
      : mx::UnaryPrimitive(stream), alpha_(alpha), beta_(beta) {}

  // The output is shaped and typed, without data: the kernel allocates it.
  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;

  std::vector<mx::array> vjp(const std::vector<mx::array>& primals,
                             const std::vector<mx::array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<mx::array>& outputs) override;
  std::vector<mx::array> jvp(const std::vector<mx::array>& primals,
                             const std::vector<mx::array>& tangents,
                             const std::vector<int>& argnums) override;
  std::pair<std::vector<mx::array>, std::vector<int>> vmap(const std::vector<mx::array>& inputs,
                                                           const std::vector<int>& axes) override;

  const char* name() const override { return "Axpby"; }
  // compile merges two nodes only when this says they compute the same thing.
  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  float alpha_;
  float beta_;
};

}  // namespace tessera_ext
