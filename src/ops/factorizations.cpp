// Front ends of the LAPACK-backed linalg routines (qr, svd, inv, tri_inv, cholesky, eig, eigh,
// lu, lu_factor, solve) and the derivatives of their primitives: Inverse, Cholesky, Eigh and
// Solve have vjps (MLX has none); every primitive vmaps. Kernels in
// backend/cpu/factorizations.cpp.
#include <optional>
#include <stdexcept>
#include <string>

#include "ops/factorizations.h"
#include "ops/utils.h"
#include "tessera/linalg.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

// The checks every factorization shares: a batch of matrices of float32 or float64.
void check_matrix(const char* op, const array& a, bool square, bool complex_ok = false) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(std::string("[linalg::") + op +
                                "] needs an array of matrices (2 or more dims); got shape " +
                                detail::shape_str(a.shape()));
  }
  if (a.dtype() != float32 && a.dtype() != float64 && !(complex_ok && a.dtype() == complex64)) {
    throw std::invalid_argument(std::string("[linalg::") + op + "] supports " +
                                (complex_ok ? "float32, float64 and complex64" : "float32 and float64") + "; got " +
                                dtype_name(a.dtype()) + " (convert with astype)");
  }
  if (square && a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument(std::string("[linalg::") + op +
                                "] needs square matrices; got shape " +
                                detail::shape_str(a.shape()));
  }
}

Shape with_last(Shape s, std::initializer_list<int> last, int drop) {
  s.erase(s.end() - drop, s.end());
  s.insert(s.end(), last.begin(), last.end());
  return s;
}

array batch_first(const array& x, int axis, const Stream& s) {
  return axis > 0 ? moveaxis(x, axis, 0, s) : x;
}

array mT(const array& x, const Stream& s) { return swapaxes(x, -1, -2, s); }

// The lower (upper) triangle of x, its diagonal included, the rest zero.
array triangle(const array& x, bool upper, const Stream& s) {
  return upper ? triu(x, 0, s) : tril(x, 0, s);
}

// x with everything but the diagonal of its last two dims zeroed.
array diag_matrix(const array& x, const Stream& s) {
  return multiply(x, identity(x.shape(-1), x.dtype(), s), s);
}

// The gradient of a function that reads only the lower triangle of its input, given the gradient
// `g` it would have as a function of a symmetric input: each off-diagonal entry read stands for
// two entries of the symmetric matrix.
array lower_read_gradient(const array& g, const Stream& s) {
  array sym = add(g, mT(g, s), s);
  return subtract(tril(sym, 0, s), multiply(array(0.5, g.dtype()), diag_matrix(sym, s), s), s);
}

}  // namespace

namespace linalg {

std::pair<array, array> qr(const array& a, StreamOrDevice s) {
  check_matrix("qr", a, false);
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto out = array::make_arrays({with_last(a.shape(), {m, k}, 2), with_last(a.shape(), {k, n}, 2)},
                                {a.dtype(), a.dtype()}, std::make_shared<QRF>(to_stream(s)), {a});
  return {out[0], out[1]};
}

std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s) {
  check_matrix("svd", a, false, true);
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  Shape s_shape = with_last(a.shape(), {k}, 2);
  const Dtype real = a.dtype() == complex64 ? float32 : a.dtype();
  auto prim = std::make_shared<SVD>(to_stream(s), compute_uv);
  if (!compute_uv) return {array(std::move(s_shape), real, prim, {a})};
  return array::make_arrays(
      {with_last(a.shape(), {m, m}, 2), std::move(s_shape), with_last(a.shape(), {n, n}, 2)},
      {a.dtype(), real, a.dtype()}, prim, {a});
}

array inv(const array& a, StreamOrDevice s) {
  check_matrix("inv", a, true);
  return array(a.shape(), a.dtype(), std::make_shared<Inverse>(to_stream(s), false, false), {a});
}

array tri_inv(const array& a, bool upper, StreamOrDevice s) {
  check_matrix("tri_inv", a, true);
  return array(a.shape(), a.dtype(), std::make_shared<Inverse>(to_stream(s), true, upper), {a});
}

array cholesky(const array& a, bool upper, StreamOrDevice s) {
  check_matrix("cholesky", a, true);
  return array(a.shape(), a.dtype(), std::make_shared<Cholesky>(to_stream(s), upper), {a});
}

std::pair<array, array> eig(const array& a, StreamOrDevice s) {
  check_matrix("eig", a, true, true);
  auto out = array::make_arrays({with_last(a.shape(), {a.shape(-1)}, 2), a.shape()},
                                {complex64, complex64}, std::make_shared<Eig>(to_stream(s), true),
                                {a});
  return {out[0], out[1]};
}

array eigvals(const array& a, StreamOrDevice s) {
  check_matrix("eigvals", a, true, true);
  return array(with_last(a.shape(), {a.shape(-1)}, 2), complex64,
               std::make_shared<Eig>(to_stream(s), false), {a});
}

namespace {

void check_uplo(const char* op, const std::string& uplo) {
  if (uplo != "L" && uplo != "U") {
    throw std::invalid_argument(std::string("[linalg::") + op + "] UPLO must be 'L' or 'U'; got '" +
                                uplo + "'");
  }
}

}  // namespace

std::pair<array, array> eigh(const array& a, std::string UPLO, StreamOrDevice s) {
  check_matrix("eigh", a, true, true);
  check_uplo("eigh", UPLO);
  auto out = array::make_arrays({with_last(a.shape(), {a.shape(-1)}, 2), a.shape()},
                                {a.dtype() == complex64 ? float32 : a.dtype(), a.dtype()},
                                std::make_shared<Eigh>(to_stream(s), UPLO, true), {a});
  return {out[0], out[1]};
}

array eigvalsh(const array& a, std::string UPLO, StreamOrDevice s) {
  check_matrix("eigvalsh", a, true, true);
  check_uplo("eigvalsh", UPLO);
  return array(with_last(a.shape(), {a.shape(-1)}, 2), a.dtype() == complex64 ? float32 : a.dtype(),
               std::make_shared<Eigh>(to_stream(s), UPLO, false), {a});
}

namespace {

std::vector<array> lu_outputs(const char* op, const array& a, StreamOrDevice s) {
  check_matrix(op, a, false);
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  return array::make_arrays({a.shape(), with_last(a.shape(), {k}, 2), with_last(a.shape(), {m}, 2)},
                            {a.dtype(), uint32, uint32}, std::make_shared<LUF>(to_stream(s)), {a});
}

}  // namespace

std::vector<array> lu(const array& a, StreamOrDevice s) {
  auto out = lu_outputs("lu", a, s);
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  array l = tril(out[0], -1, s), u = triu(out[0], 0, s);
  Shape start(a.ndim(), 0);
  if (n > k) {
    Shape stop = l.shape();
    stop.back() = k;
    l = slice(l, start, stop, s);
  } else if (m > k) {
    Shape stop = u.shape();
    stop[u.ndim() - 2] = k;
    u = slice(u, start, stop, s);
  }
  l = add(l, eye(m, k, 0, a.dtype(), s), s);
  return {out[2], l, u};
}

std::pair<array, array> lu_factor(const array& a, StreamOrDevice s) {
  auto out = lu_outputs("lu_factor", a, s);
  return {out[0], out[1]};
}

array solve(const array& a, const array& b, StreamOrDevice s) {
  if (a.ndim() < 2 || a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument("[linalg::solve] a must be square matrices (..., N, N); got shape " +
                                detail::shape_str(a.shape()));
  }
  if (b.ndim() < 1) {
    throw std::invalid_argument("[linalg::solve] b must have 1 or more dims; got a scalar");
  }
  const bool vec = b.ndim() == 1;
  const int n = a.shape(-1);
  if (b.shape(vec ? -1 : -2) != n) {
    throw std::invalid_argument("[linalg::solve] a " + detail::shape_str(a.shape()) +
                                " needs b with " + std::to_string(n) +
                                (vec ? " elements" : " rows") + "; got shape " +
                                detail::shape_str(b.shape()));
  }
  const Dtype dt = promote_types(a.dtype(), b.dtype());
  if (dt != float32 && dt != float64) {
    throw std::invalid_argument("[linalg::solve] a and b must promote to float32 or float64; got " +
                                dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
  }
  array bm = vec ? reshape(b, {n, 1}, s) : b;
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(bm.shape().begin(), bm.shape().end() - 2);
  Shape batch = detail::broadcast_shapes("linalg::solve", ab, bb);
  const int k = bm.shape(-1);
  array a2 = broadcast_to(astype(a, dt, s), with_last(batch, {n, n}, 0), s);
  array b2 = broadcast_to(astype(bm, dt, s), with_last(batch, {n, k}, 0), s);
  array x(b2.shape(), dt, std::make_shared<Solve>(to_stream(s)), {a2, b2});
  return vec ? reshape(x, with_last(batch, {n}, 0), s) : x;
}

}  // namespace linalg

// ---- the primitives ----

bool SVD::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const SVD*>(&other);
  return o && o->compute_uv_ == compute_uv_;
}
bool Inverse::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Inverse*>(&other);
  return o && o->triangular_ == triangular_ && o->upper_ == upper_;
}
bool Cholesky::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Cholesky*>(&other);
  return o && o->upper_ == upper_;
}
bool Eig::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Eig*>(&other);
  return o && o->vectors_ == vectors_;
}
bool Eigh::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Eigh*>(&other);
  return o && o->vectors_ == vectors_ && o->uplo_ == uplo_;
}

std::vector<Shape> QRF::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  const int m = a[a.size() - 2], n = a.back(), k = std::min(m, n);
  return {with_last(a, {m, k}, 2), with_last(a, {k, n}, 2)};
}
std::vector<Shape> SVD::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  const int m = a[a.size() - 2], n = a.back();
  Shape sv = with_last(a, {std::min(m, n)}, 2);
  if (!compute_uv_) return {sv};
  return {with_last(a, {m, m}, 2), sv, with_last(a, {n, n}, 2)};
}
std::vector<Shape> Inverse::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}
std::vector<Shape> Cholesky::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}
std::vector<Shape> Eig::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  if (!vectors_) return {with_last(a, {a.back()}, 2)};
  return {with_last(a, {a.back()}, 2), a};
}
std::vector<Shape> Eigh::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  if (!vectors_) return {with_last(a, {a.back()}, 2)};
  return {with_last(a, {a.back()}, 2), a};
}
std::vector<Shape> LUF::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  const int m = a[a.size() - 2], n = a.back();
  return {a, with_last(a, {std::min(m, n)}, 2), with_last(a, {m}, 2)};
}
std::vector<Shape> Solve::output_shapes(const std::vector<array>& inputs) {
  return {inputs[1].shape()};
}

// vmap: the batch axis moved in front is one more batch dim.
std::pair<std::vector<array>, std::vector<int>> QRF::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  auto [q, r] = linalg::qr(batch_first(inputs[0], axes[0], stream()), stream());
  return {{q, r}, {0, 0}};
}
std::pair<std::vector<array>, std::vector<int>> SVD::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  auto out = linalg::svd(batch_first(inputs[0], axes[0], stream()), compute_uv_, stream());
  return {out, std::vector<int>(out.size(), 0)};
}
std::pair<std::vector<array>, std::vector<int>> Inverse::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  array a = batch_first(inputs[0], axes[0], stream());
  return {{triangular_ ? linalg::tri_inv(a, upper_, stream()) : linalg::inv(a, stream())}, {0}};
}
std::pair<std::vector<array>, std::vector<int>> Cholesky::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  return {{linalg::cholesky(batch_first(inputs[0], axes[0], stream()), upper_, stream())}, {0}};
}
std::pair<std::vector<array>, std::vector<int>> Eig::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  array a = batch_first(inputs[0], axes[0], stream());
  if (!vectors_) return {{linalg::eigvals(a, stream())}, {0}};
  auto [w, v] = linalg::eig(a, stream());
  return {{w, v}, {0, 0}};
}
std::pair<std::vector<array>, std::vector<int>> Eigh::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  array a = batch_first(inputs[0], axes[0], stream());
  if (!vectors_) return {{linalg::eigvalsh(a, uplo_, stream())}, {0}};
  auto [w, v] = linalg::eigh(a, uplo_, stream());
  return {{w, v}, {0, 0}};
}
std::pair<std::vector<array>, std::vector<int>> LUF::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  auto out = linalg::lu_outputs("lu_factor", batch_first(inputs[0], axes[0], stream()), stream());
  return {out, {0, 0, 0}};
}
std::pair<std::vector<array>, std::vector<int>> Solve::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  array a = batch_first(inputs[0], axes[0], stream());
  array b = batch_first(inputs[1], axes[1], stream());
  // An unbatched operand broadcasts against the new leading dim.
  if (axes[0] < 0) a = expand_dims(a, 0, stream());
  if (axes[1] < 0) b = expand_dims(b, 0, stream());
  return {{linalg::solve(a, b, stream())}, {0}};
}

// Y = inv(A): dA = -Y^T G Y^T, dY = -Y dA Y. A triangular inverse reads one triangle only.
std::vector<array> Inverse::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>& outputs) {
  const Stream& s = stream();
  array yt = mT(outputs[0], s);
  array g = negative(matmul(matmul(yt, cotangents[0], s), yt, s), s);
  return {triangular_ ? triangle(g, upper_, s) : g};
}

std::vector<array> Inverse::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  const Stream& s = stream();
  array y = triangular_ ? linalg::tri_inv(primals[0], upper_, s) : linalg::inv(primals[0], s);
  array da = triangular_ ? triangle(tangents[0], upper_, s) : tangents[0];
  return {negative(matmul(matmul(y, da, s), y, s), s)};
}

// L = chol(A) reading A's lower triangle (Murray, "Differentiation of the Cholesky
// decomposition", 2016): P = Phi(L^T Lbar) (lower triangle, diagonal halved),
// S = L^-T P L^-1; as a function of a symmetric A the gradient is (S + S^T) / 2. The upper
// factor is the lower one of the transpose.
std::vector<array> Cholesky::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>& outputs) {
  const Stream& s = stream();
  array l = upper_ ? mT(outputs[0], s) : outputs[0];
  array lbar = upper_ ? mT(cotangents[0], s) : cotangents[0];
  array p = matmul(mT(l, s), lbar, s);
  p = subtract(tril(p, 0, s), multiply(array(0.5, p.dtype()), diag_matrix(p, s), s), s);
  array linv = linalg::tri_inv(l, false, s);
  array sm = matmul(matmul(mT(linv, s), p, s), linv, s);
  array g = lower_read_gradient(multiply(array(0.5, sm.dtype()), add(sm, mT(sm, s), s), s), s);
  return {upper_ ? mT(g, s) : g};
}

// A = V diag(w) V^T: as a function of a symmetric A, dA = V (diag(wbar) + F o (V^T Vbar)) V^T
// symmetrised, F_ij = 1 / (w_j - w_i) off the diagonal; then restricted to the triangle read.
std::vector<array> Eigh::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  const Stream& s = stream();
  if (primals[0].dtype() == complex64) {
    throw std::invalid_argument("[linalg::eigh] no derivative for complex (Hermitian) input yet");
  }
  array w = outputs[0];
  array v = vectors_ ? outputs[1] : linalg::eigh(primals[0], uplo_, s).second;
  const int n = w.shape(-1);
  array eye_n = identity(n, w.dtype(), s);
  array inner = multiply(expand_dims(cotangents[0], -2, s), eye_n, s);
  if (vectors_ && cotangents.size() > 1) {
    // F = (1 - I) / (w_j - w_i + I): zero on the diagonal, no division by zero there.
    array diff = subtract(expand_dims(w, -2, s), expand_dims(w, -1, s), s);
    array f = divide(subtract(array(1.0, w.dtype()), eye_n, s), add(diff, eye_n, s), s);
    inner = add(inner, multiply(f, matmul(mT(v, s), cotangents[1], s), s), s);
  }
  array g = matmul(matmul(v, inner, s), mT(v, s), s);
  g = multiply(array(0.5, g.dtype()), add(g, mT(g, s), s), s);
  array lower = lower_read_gradient(uplo_ == "U" ? mT(g, s) : g, s);
  return {uplo_ == "U" ? mT(lower, s) : lower};
}

// X = A^-1 B: Bbar = A^-T G, Abar = -Bbar X^T; dX = A^-1 (dB - dA X).
std::vector<array> Solve::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<int>& argnums,
                              const std::vector<array>& outputs) {
  const Stream& s = stream();
  array bbar = linalg::solve(mT(primals[0], s), cotangents[0], s);
  std::vector<array> out;
  for (int arg : argnums) {
    out.push_back(arg == 0 ? negative(matmul(bbar, mT(outputs[0], s), s), s) : bbar);
  }
  return out;
}

std::vector<array> Solve::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  const Stream& s = stream();
  array x = linalg::solve(primals[0], primals[1], s);
  std::optional<array> rhs;
  for (size_t i = 0; i < argnums.size(); ++i) {
    array term = argnums[i] == 0 ? negative(matmul(tangents[i], x, s), s) : tangents[i];
    rhs = rhs ? add(*rhs, term, s) : term;
  }
  return {linalg::solve(primals[0], *rhs, s)};
}

}  // namespace tessera
