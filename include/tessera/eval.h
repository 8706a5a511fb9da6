// Evaluation: eval, async_eval (MLX declares them in transforms.h, which includes this header).
// The core layer's own entry points: the array and the scheduler use them, the transformations
// (tessera/transforms.h) sit above the ops.
#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/array.h"

namespace tessera {

template <typename... T>
using enable_for_arrays_t =
    std::enable_if_t<(std::is_same_v<std::decay_t<T>, array> && ...)>;

// Schedule the graphs behind `outputs` and return at once; array::wait() blocks for a result.
void async_eval(std::vector<array> outputs);
template <typename... Arrays, typename = enable_for_arrays_t<Arrays...>>
void async_eval(Arrays&&... outputs) {
  async_eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}
// Compute `outputs`; rethrows the first kernel error.
void eval(std::vector<array> outputs);
namespace detail {
void eval_one(const array& a);  // eval of one array without building a vector for it
}
template <typename... Arrays, typename = enable_for_arrays_t<Arrays...>>
void eval(Arrays&&... outputs) {
  if constexpr (sizeof...(Arrays) == 1) {
    detail::eval_one(outputs...);
  } else {
    eval(std::vector<array>{std::forward<Arrays>(outputs)...});
  }
}

}  // namespace tessera
