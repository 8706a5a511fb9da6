// Primitives of the transforms machinery (front ends in ops/transforms.cpp, kernels in
// backend/cpu/custom.cpp): CustomTransforms (custom_function / custom_vjp / checkpoint) and
// VmapPlaceholder (the unbatched stand-in that vmap traces the user's function on).
#pragma once

#include "tessera/primitive.h"
#include "tessera/transforms.h"

namespace tessera {

// Inputs are the function's arguments followed by its outputs (already computed by the traced
// function); eval forwards those outputs. vjp/jvp/vmap call the user's rules with the arguments
// only, so the transforms never differentiate or batch through the forwarded outputs.
class CustomTransforms : public Primitive {
 public:
  CustomTransforms(Stream s, int num_outputs, CustomVjpFn vjp_fun, CustomJvpFn jvp_fun,
                   CustomVmapFn vmap_fun)
      : Primitive(s),
        num_outputs_(num_outputs),
        vjp_fun_(std::move(vjp_fun)),
        jvp_fun_(std::move(jvp_fun)),
        vmap_fun_(std::move(vmap_fun)) {}

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "CustomTransforms"; }

  // How many trailing inputs are forwarded outputs (not arguments of the function).
  int num_outputs() const { return num_outputs_; }

 private:
  int num_outputs_;
  CustomVjpFn vjp_fun_;
  CustomJvpFn jvp_fun_;
  CustomVmapFn vmap_fun_;
};

// What the traced function sees in vmap for a batched input: its shape without the batch axis
// `axis`. It has no value; evaluating it is an error (see eval_cpu).
class VmapPlaceholder : public UnaryPrimitive {
 public:
  VmapPlaceholder(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "VmapPlaceholder"; }
  int axis() const { return axis_; }

 private:
  int axis_;
};

}  // namespace tessera
