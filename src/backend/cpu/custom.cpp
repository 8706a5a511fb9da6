// Kernels of the transforms machinery's primitives (ops/transform_primitives.h): CustomTransforms
// forwards values already computed by the traced function; VmapPlaceholder refuses evaluation.
#include <stdexcept>

#include "ops/transform_primitives.h"

namespace tessera {

void CustomTransforms::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  size_t first = inputs.size() - outputs.size();
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i].copy_shared_buffer(inputs[first + i]);
}

// The stand-in has no single value: evaluating it (or anything computed from it) inside the
// traced function would give element 0's value to every element of the batch. As MLX, it is an
// error; arrays that do not depend on a batched input evaluate as usual.
void VmapPlaceholder::eval_cpu(const std::vector<array>&, array&) {
  throw std::invalid_argument(
      "[vmap] cannot evaluate an array computed from a batched input inside the vmapped "
      "function (eval, item or data while tracing): its value differs across the batch. Return "
      "it from the function instead, or evaluate it outside vmap.");
}

}  // namespace tessera
