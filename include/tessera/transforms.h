// Function transformations: vjp, jvp, grad, value_and_grad, vmap, custom_function / custom_vjp,
// checkpoint; eval and async_eval through tessera/eval.h, as MLX's transforms.h declares them.
// Same signatures as MLX.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/eval.h"

namespace tessera {

using VecFn = std::function<std::vector<array>(const std::vector<array>&)>;

std::pair<std::vector<array>, std::vector<array>> vjp(const VecFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& cotangents);
std::pair<array, array> vjp(const std::function<array(const array&)>& fun, const array& primal,
                            const array& cotangent);
std::pair<std::vector<array>, std::vector<array>> jvp(const VecFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& tangents);
std::pair<array, array> jvp(const std::function<array(const array&)>& fun, const array& primal,
                            const array& tangent);

using ValueAndGradFn =
    std::function<std::pair<std::vector<array>, std::vector<array>>(const std::vector<array>&)>;
using SimpleValueAndGradFn =
    std::function<std::pair<array, std::vector<array>>(const std::vector<array>&)>;

// Gradients of the first output (which must be a scalar) w.r.t. the inputs in argnums.
ValueAndGradFn value_and_grad(const VecFn& fun, const std::vector<int>& argnums);
inline ValueAndGradFn value_and_grad(const VecFn& fun, int argnum = 0) {
  return value_and_grad(fun, std::vector<int>{argnum});
}
std::function<std::pair<array, array>(const array&)> value_and_grad(
    const std::function<array(const array&)>& fun);
SimpleValueAndGradFn value_and_grad(const std::function<array(const std::vector<array>&)>& fun,
                                    const std::vector<int>& argnums);
inline SimpleValueAndGradFn value_and_grad(
    const std::function<array(const std::vector<array>&)>& fun, int argnum = 0) {
  return value_and_grad(fun, std::vector<int>{argnum});
}
VecFn grad(const std::function<array(const std::vector<array>&)>& fun,
           const std::vector<int>& argnums);
inline VecFn grad(const std::function<array(const std::vector<array>&)>& fun, int argnum = 0) {
  return grad(fun, std::vector<int>{argnum});
}
std::function<array(const array&)> grad(const std::function<array(const array&)>& fun);

std::function<array(const array&)> vmap(const std::function<array(const array&)>& fun,
                                        int in_axis = 0, int out_axis = 0);
std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun, int in_axis_a = 0,
    int in_axis_b = 0, int out_axis = 0);
VecFn vmap(const VecFn& fun, const std::vector<int>& in_axes = {},
           const std::vector<int>& out_axes = {});

using CustomVjpFn = std::function<std::vector<array>(
    const std::vector<array>& primals, const std::vector<array>& cotangents,
    const std::vector<array>& outputs)>;
using CustomJvpFn = std::function<std::vector<array>(
    const std::vector<array>& primals, const std::vector<array>& tangents,
    const std::vector<int>& argnums)>;
using CustomVmapFn = std::function<std::pair<std::vector<array>, std::vector<int>>(
    const std::vector<array>& inputs, const std::vector<int>& axes)>;

VecFn custom_function(VecFn fun, std::optional<CustomVjpFn> fun_vjp = std::nullopt,
                      std::optional<CustomJvpFn> fun_jvp = std::nullopt,
                      std::optional<CustomVmapFn> fun_vmap = std::nullopt);
VecFn custom_vjp(VecFn fun, CustomVjpFn fun_vjp);
// Recompute `fun`'s intermediates during the backward pass instead of keeping them.
VecFn checkpoint(VecFn fun);

}  // namespace tessera
