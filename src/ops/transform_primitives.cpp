// The derivative and batching rules of CustomTransforms (declared in ops/transform_primitives.h)
// defer to the user's functions; the kernels are in backend/cpu/custom.cpp.
#include "ops/transform_primitives.h"

#include <sstream>
#include <stdexcept>

#include "core/shape_checks.h"

namespace tessera {

std::vector<array> CustomTransforms::vjp(const std::vector<array>& primals,
                                         const std::vector<array>& cotangents,
                                         const std::vector<int>& argnums,
                                         const std::vector<array>& outputs) {
  std::vector<array> args(primals.begin(), primals.end() - num_outputs_);
  auto all = vjp_fun_(args, cotangents, outputs);
  if (all.size() != args.size()) {
    std::ostringstream msg;
    msg << "[custom_vjp] the vjp function returned " << all.size()
        << " cotangents for a function of " << args.size() << " inputs; it must return one per input";
    throw std::invalid_argument(msg.str());
  }
  std::vector<array> out;
  out.reserve(argnums.size());
  for (int a : argnums) {
    if (all[a].shape() != args[a].shape()) {
      std::ostringstream msg;
      msg << "[custom_vjp] the vjp function returned a cotangent of shape "
          << detail::shape_str(all[a].shape()) << " for input " << a << " of shape "
          << detail::shape_str(args[a].shape());
      throw std::invalid_argument(msg.str());
    }
    out.push_back(all[a]);
  }
  return out;
}

std::vector<array> CustomTransforms::jvp(const std::vector<array>& primals,
                                         const std::vector<array>& tangents,
                                         const std::vector<int>& argnums) {
  std::vector<array> args(primals.begin(), primals.end() - num_outputs_);
  auto out = jvp_fun_(args, tangents, argnums);
  if (out.size() != static_cast<size_t>(num_outputs_)) {
    std::ostringstream msg;
    msg << "[custom_function] the jvp function returned " << out.size()
        << " tangents for a function of " << num_outputs_ << " outputs";
    throw std::invalid_argument(msg.str());
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> CustomTransforms::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  std::vector<array> args(inputs.begin(), inputs.end() - num_outputs_);
  std::vector<int> arg_axes(axes.begin(), axes.end() - num_outputs_);
  auto res = vmap_fun_(args, arg_axes);
  if (res.first.size() != static_cast<size_t>(num_outputs_) ||
      res.second.size() != res.first.size()) {
    std::ostringstream msg;
    msg << "[custom_function] the vmap function returned " << res.first.size() << " outputs and "
        << res.second.size() << " axes for a function of " << num_outputs_ << " outputs";
    throw std::invalid_argument(msg.str());
  }
  return res;
}

}  // namespace tessera
