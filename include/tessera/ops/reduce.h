// Reductions (sum, prod, max, min, mean, var, std, all, any, argmax/argmin, logsumexp,
// softmax, count_nonzero) and scans (cumsum, cumprod, cummax, cummin, logcumsumexp), as in
// MLX's mlx/ops.h (see tessera/ops.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// ---- reductions: (a, keepdims), (a), (a, axes, keepdims), (a, axis, keepdims) ----
// An empty axes list returns the input unchanged (sum/prod/max/min, as MLX).

array all(const array& a, bool keepdims, StreamOrDevice s = {});
inline array all(const array& a, StreamOrDevice s = {}) { return all(a, false, s); }
array all(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array all(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

array any(const array& a, bool keepdims, StreamOrDevice s = {});
inline array any(const array& a, StreamOrDevice s = {}) { return any(a, false, s); }
array any(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array any(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// Integer/bool inputs sum into int32/uint32 (int64/uint64 for 8-byte ints), as MLX.
array sum(const array& a, bool keepdims, StreamOrDevice s = {});
inline array sum(const array& a, StreamOrDevice s = {}) { return sum(a, false, s); }
array sum(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array sum(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// Number of non-zero elements (int32).
array count_nonzero(const array& a, bool keepdims = false, StreamOrDevice s = {});
array count_nonzero(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array count_nonzero(const array& a, const std::vector<int>& axes, bool keepdims = false,
                    StreamOrDevice s = {});

// Integer inputs give float32.
array mean(const array& a, bool keepdims, StreamOrDevice s = {});
inline array mean(const array& a, StreamOrDevice s = {}) { return mean(a, false, s); }
array mean(const array& a, const std::vector<int>& axes, bool keepdims = false,
           StreamOrDevice s = {});
array mean(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

array var(const array& a, bool keepdims, int ddof = 0, StreamOrDevice s = {});
inline array var(const array& a, StreamOrDevice s = {}) { return var(a, false, 0, s); }
array var(const array& a, const std::vector<int>& axes, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array var(const array& a, int axis, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});

array std(const array& a, bool keepdims, int ddof = 0, StreamOrDevice s = {});
inline array std(const array& a, StreamOrDevice s = {}) { return std(a, false, 0, s); }
array std(const array& a, const std::vector<int>& axes, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array std(const array& a, int axis, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});

array prod(const array& a, bool keepdims, StreamOrDevice s = {});
inline array prod(const array& a, StreamOrDevice s = {}) { return prod(a, false, s); }
array prod(const array& a, const std::vector<int>& axes, bool keepdims = false,
           StreamOrDevice s = {});
array prod(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// NaN propagates. Reducing an axis of size 0 throws (max/min have no identity).
array max(const array& a, bool keepdims, StreamOrDevice s = {});
inline array max(const array& a, StreamOrDevice s = {}) { return max(a, false, s); }
array max(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array max(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

array min(const array& a, bool keepdims, StreamOrDevice s = {});
inline array min(const array& a, StreamOrDevice s = {}) { return min(a, false, s); }
array min(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array min(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// Index (uint32) of the first minimum/maximum; the whole-array versions index the flattened
// array.
array argmin(const array& a, bool keepdims, StreamOrDevice s = {});
inline array argmin(const array& a, StreamOrDevice s = {}) { return argmin(a, false, s); }
array argmin(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array argmax(const array& a, bool keepdims, StreamOrDevice s = {});
inline array argmax(const array& a, StreamOrDevice s = {}) { return argmax(a, false, s); }
array argmax(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

array logsumexp(const array& a, bool keepdims, StreamOrDevice s = {});
inline array logsumexp(const array& a, StreamOrDevice s = {}) { return logsumexp(a, false, s); }
array logsumexp(const array& a, const std::vector<int>& axes, bool keepdims = false,
                StreamOrDevice s = {});
array logsumexp(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// precise: accumulate half-precision inputs in float32.
array softmax(const array& a, const std::vector<int>& axes, bool precise = false,
              StreamOrDevice s = {});
array softmax(const array& a, bool precise = false, StreamOrDevice s = {});
inline array softmax(const array& a, int axis, bool precise = false, StreamOrDevice s = {}) {
  return softmax(a, std::vector<int>{axis}, precise, s);
}

// ---- scans: whole-array versions scan the flattened array ----

array cumsum(const array& a, bool reverse = false, bool inclusive = true,
             std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});
inline array cumsum(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return cumsum(a, reverse, inclusive, std::nullopt, s);
}
array cumsum(const array& a, int axis, bool reverse = false, bool inclusive = true,
             std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});
inline array cumsum(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return cumsum(a, axis, reverse, inclusive, std::nullopt, s);
}

array cumprod(const array& a, bool reverse = false, bool inclusive = true,
              std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});
inline array cumprod(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return cumprod(a, reverse, inclusive, std::nullopt, s);
}
array cumprod(const array& a, int axis, bool reverse = false, bool inclusive = true,
              std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});
inline array cumprod(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return cumprod(a, axis, reverse, inclusive, std::nullopt, s);
}

array cummax(const array& a, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
array cummax(const array& a, int axis, bool reverse = false, bool inclusive = true,
             StreamOrDevice s = {});
array cummin(const array& a, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
array cummin(const array& a, int axis, bool reverse = false, bool inclusive = true,
             StreamOrDevice s = {});
array logcumsumexp(const array& a, bool reverse = false, bool inclusive = true,
                   StreamOrDevice s = {});
array logcumsumexp(const array& a, int axis, bool reverse = false, bool inclusive = true,
                   StreamOrDevice s = {});

// The median over the axes (every axis by default; the mean of the two middle values for an even
// count), NaN where the input has one. Integer inputs give float32.
array median(const array& a, bool keepdims, StreamOrDevice s = {});
array median(const array& a, const std::vector<int>& axes, bool keepdims = false,
             StreamOrDevice s = {});
array median(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

}  // namespace tessera
