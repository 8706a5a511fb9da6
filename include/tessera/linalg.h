// Matrix products (matmul, addmm, inner, outer, tensordot; namespace tessera, as in MLX's ops.h)
// and linear-algebra routines (namespace tessera::linalg, as in MLX's linalg.h). Front ends in
// src/ops/matmul.cpp, src/ops/linalg.cpp (composites) and src/ops/factorizations.cpp (the LAPACK
// primitives); kernels in src/backend/cpu/matmul.cpp and src/backend/cpu/factorizations.cpp.
//
// The factorizations take float32 or float64 matrices in the last two dims, batched over the
// leading dims (each matrix on its own thread of the pool). A matrix the routine cannot handle
// (singular, not positive definite) raises std::invalid_argument naming the op, the matrix's
// batch index and why, when the result is evaluated.
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

// a's matrices at lhs_indices times b's at rhs_indices (MLX's gather_mm): the indices (integers,
// broadcast together; default: every matrix in order) number the flattened batches (all but the
// last two dims); output broadcast(lhs, rhs).shape + (M, N). A 1-D a or b is a row / column
// vector, its dim removed again. Real floating types; an index past its batch raises.
// sorted_indices is MLX's hint; the result does not depend on it. No indices: matmul.
array gather_mm(const array& a, const array& b,
                const std::optional<array>& lhs_indices = std::nullopt,
                const std::optional<array>& rhs_indices = std::nullopt,
                bool sorted_indices = false, StreamOrDevice s = {});

// One product per segment of the shared dim (MLX's segmented_mm): a (M, K), b (K, N), segments
// (..., 2) integer [start, end) pairs in [0, K]; out (..., M, N), out[i] = a[:, s0:s1] @
// b[s0:s1, :] (zeros for an empty segment). Real floating types; no gradients (as MLX).
array segmented_mm(const array& a, const array& b, const array& segments, StreamOrDevice s = {});

// a @ b with block masks (MLX's block_masked_mm): the matrices are cut into block_size x
// block_size tiles (32 or 64; the last tiles may be partial); mask_lhs (..., M/bs, K/bs) and
// mask_rhs (..., K/bs, N/bs) select (bool: keep / zero) or scale (floating) the operands' tiles,
// mask_out (..., M/bs, N/bs) the product's. Masks broadcast against the batch. No masks: matmul.
array block_masked_mm(const array& a, const array& b, int block_size = 64,
                      const std::optional<array>& mask_out = std::nullopt,
                      const std::optional<array>& mask_lhs = std::nullopt,
                      const std::optional<array>& mask_rhs = std::nullopt, StreamOrDevice s = {});

// Sum over the last axis of a and b (a 0-d input multiplies elementwise).
array inner(const array& a, const array& b, StreamOrDevice s = {});
// flatten(a)[:, None] * flatten(b)[None, :].
array outer(const array& a, const array& b, StreamOrDevice s = {});
// Contract the last `axis` dims of a with the first `axis` dims of b.
array tensordot(const array& a, const array& b, const int axis = 2, StreamOrDevice s = {});
// Contract a's axes_a with b's axes_b (pairwise; sizes must agree).
array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s = {});

// The Kronecker product (both non-empty; the lower-rank one gains leading dims of size 1).
array kron(const array& a, const array& b, StreamOrDevice s = {});
// sum(conj(a) * b) along `axis` (the arrays broadcast).
array vecdot(const array& a, const array& b, int axis = -1, StreamOrDevice s = {});

namespace linalg {

// Vector or matrix norms, as numpy.linalg.norm / mlx.core.linalg.norm:
// - no axis and no ord: the 2-norm of the flattened input;
// - ord without axis: the input must be 1-D or 2-D;
// - at most 2 axes; vector ords: inf, -inf, 0, any p; matrix ords: 1, -1, inf, -inf, "fro", and
//   2, -2 (largest / smallest singular value), "nuc" (their sum).
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

// a = q @ r with q (..., M, K) orthonormal columns and r (..., K, N) upper triangular,
// K = min(M, N).
std::pair<array, array> qr(const array& a, StreamOrDevice s = {});
// a = u @ diag(s) @ vt: {u (..., M, M), s (..., K), vt (..., N, N)}, singular values descending;
// {s} alone without compute_uv.
std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s = {});
inline std::vector<array> svd(const array& a, StreamOrDevice s = {}) { return svd(a, true, s); }
array inv(const array& a, StreamOrDevice s = {});
// The inverse of a lower (upper) triangular matrix; the other triangle of `a` is not read.
array tri_inv(const array& a, bool upper = false, StreamOrDevice s = {});
// l with a = l @ l^T (upper: u with a = u^T @ u); only that triangle of `a` is read.
array cholesky(const array& a, bool upper = false, StreamOrDevice s = {});
// The Moore-Penrose pseudo-inverse (through the SVD; singular values below
// 10 * max(M, N) * eps * the largest count as zero).
array pinv(const array& a, StreamOrDevice s = {});
// inv(a) from a's Cholesky factor `l` (lower, or upper with upper = true).
array cholesky_inv(const array& l, bool upper = false, StreamOrDevice s = {});
// {p, l, u} with l[p] @ u == a: p (..., M) uint32 row indices, l (..., M, K) unit lower,
// u (..., K, N) upper.
std::vector<array> lu(const array& a, StreamOrDevice s = {});
// {lu, pivots}: LAPACK's packed factors and 0-based row swaps (row i swapped with pivots[i]).
std::pair<array, array> lu_factor(const array& a, StreamOrDevice s = {});
// x with a @ x == b; b (..., N) or (..., N, K); batch dims broadcast.
array solve(const array& a, const array& b, StreamOrDevice s = {});
array solve_triangular(const array& a, const array& b, bool upper = false, StreamOrDevice s = {});
// The cross product of vectors of size 2 or 3 along `axis` (size-2 vectors have z = 0).
array cross(const array& a, const array& b, int axis = -1, StreamOrDevice s = {});
// Eigenvalues and right eigenvectors (columns) of a general matrix, complex64.
std::pair<array, array> eig(const array& a, StreamOrDevice s = {});
array eigvals(const array& a, StreamOrDevice s = {});
// Eigenvalues (ascending) and orthonormal eigenvectors (columns) of a symmetric matrix, of which
// the UPLO ("L" or "U") triangle is read.
std::pair<array, array> eigh(const array& a, std::string UPLO = "L", StreamOrDevice s = {});
array eigvalsh(const array& a, std::string UPLO = "L", StreamOrDevice s = {});
array det(const array& a, StreamOrDevice s = {});
// {sign, log|det|}; a singular matrix gives {0, -inf}.
std::pair<array, array> slogdet(const array& a, StreamOrDevice s = {});

}  // namespace linalg

}  // namespace tessera
