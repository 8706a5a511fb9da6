// CPU kernels of the creation family.
#include <cstring>

#include "backend/cpu/copy.h"
#include "backend/cpu/strided.h"
#include "core/thread_pool.h"
#include "ops/creation.h"

namespace tessera {

void Full::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = *inputs[0].data<T>();
    T* o = out.data<T>();
    detail::parallel_for(out.size(), cpu::kElementwiseGrain, [&](size_t b, size_t e) {
      std::fill(o + b, o + e, v);
    });
  });
}

void Arange::eval_cpu(const std::vector<array>&, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    if constexpr (std::is_integral_v<T>) {
      // As MLX: start and start + step in the output type, then a running sum of their
      // difference (arange(0, 5, 0.5, int32) is all zeros, not 0, 0, 1, 1, ...).
      T v = detail::cast_scalar<T, double>(start_);
      const T step = detail::cast_scalar<T, double>(start_ + step_) - v;
      for (size_t i = 0; i < out.size(); ++i, v += step) o[i] = v;
    } else {
      // Each element from start + i * step in double: no running error (MLX accumulates).
      for (size_t i = 0; i < out.size(); ++i) {
        o[i] = detail::cast_scalar<T, double>(start_ + static_cast<double>(i) * step_);
      }
    }
  });
}

void AsType::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::copy_contiguous(inputs[0], out);
}

void Copy::eval_cpu(const std::vector<array>& inputs, array& out) {
  if (share_) {
    out.copy_shared_buffer(inputs[0]);
  } else {
    cpu::copy_contiguous(inputs[0], out);
  }
}

}  // namespace tessera
