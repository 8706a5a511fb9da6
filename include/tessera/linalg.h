// Matrix products (matmul, addmm, inner, outer, tensordot; namespace tessera, as in MLX's ops.h)
// and linear-algebra routines (namespace tessera::linalg, as in MLX's linalg.h). Front ends in
// src/ops/matmul.cpp and src/ops/linalg.cpp, the BLAS kernel in src/backend/cpu/matmul.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// Matrix product with NumPy semantics: a 1-D `a` is a row vector, a 1-D `b` a column vector (the
// added dim is removed from the result); leading (batch) dims broadcast. Inputs are promoted to a
// common dtype, which must be floating point or complex64 (integer products raise, as in MLX).
array matmul(const array& a, const array& b, StreamOrDevice s = {});

// beta * c + alpha * (a @ b); `c` broadcasts to the product's shape. Real floating types only.
array addmm(array c, array a, array b, const float& alpha = 1.f, const float& beta = 1.f,
            StreamOrDevice s = {});

// Sum over the last axis of a and b (a 0-d input multiplies elementwise).
array inner(const array& a, const array& b, StreamOrDevice s = {});
// flatten(a)[:, None] * flatten(b)[None, :].
array outer(const array& a, const array& b, StreamOrDevice s = {});
// Contract the last `axis` dims of a with the first `axis` dims of b.
array tensordot(const array& a, const array& b, const int axis = 2, StreamOrDevice s = {});
// Contract a's axes_a with b's axes_b (pairwise; sizes must agree).
array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s = {});

namespace linalg {

// Vector or matrix norms, as numpy.linalg.norm / mlx.core.linalg.norm:
// - no axis and no ord: the 2-norm of the flattened input;
// - ord without axis: the input must be 1-D or 2-D;
// - at most 2 axes; vector ords: inf, -inf, 0, any p; matrix ords: 1, -1, inf, -inf, "fro", and
//   (needing an SVD, not available yet) 2, -2, "nuc" raise.
array norm(const array& a, const double ord,
           const std::optional<std::vector<int>>& axis = std::nullopt, bool keepdims = false,
           StreamOrDevice s = {});
inline array norm(const array& a, const double ord, int axis, bool keepdims = false,
                  StreamOrDevice s = {}) {
  return norm(a, ord, std::vector<int>{axis}, keepdims, s);
}
array norm(const array& a, const std::string& ord,
           const std::optional<std::vector<int>>& axis = std::nullopt, bool keepdims = false,
           StreamOrDevice s = {});
inline array norm(const array& a, const std::string& ord, int axis, bool keepdims = false,
                  StreamOrDevice s = {}) {
  return norm(a, ord, std::vector<int>{axis}, keepdims, s);
}
array norm(const array& a, const std::optional<std::vector<int>>& axis = std::nullopt,
           bool keepdims = false, StreamOrDevice s = {});
inline array norm(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {}) {
  return norm(a, std::vector<int>{axis}, keepdims, s);
}

}  // namespace linalg

}  // namespace tessera
