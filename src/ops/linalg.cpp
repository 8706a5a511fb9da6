// Composite linear-algebra ops: tensordot, inner, outer (in namespace tessera) and linalg::norm,
// built from matmul and the elementwise / reduce / shape families (no primitive of their own).
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "ops/utils.h"
#include "tessera/linalg.h"
#include "tessera/ops.h"
#include "tessera/transforms.h"

namespace tessera {

array tensordot(const array& a, const array& b, const int axis, StreamOrDevice s) {
  if (axis < 0) {
    throw std::invalid_argument("[tensordot] axis must be >= 0; got " + std::to_string(axis));
  }
  if (axis > static_cast<int>(std::min(a.ndim(), b.ndim()))) {
    throw std::invalid_argument("[tensordot] axis " + std::to_string(axis) +
                                " exceeds the rank of a " + detail::shape_str(a.shape()) +
                                " or b " + detail::shape_str(b.shape()));
  }
  std::vector<int> axes_a, axes_b;
  for (int i = 0; i < axis; ++i) {
    axes_a.push_back(static_cast<int>(a.ndim()) - axis + i);
    axes_b.push_back(i);
  }
  return tensordot(a, b, axes_a, axes_b, s);
}

array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s) {
  if (axes_a.size() != axes_b.size()) {
    throw std::invalid_argument("[tensordot] axes_a and axes_b must have the same length; got " +
                                std::to_string(axes_a.size()) + " and " +
                                std::to_string(axes_b.size()));
  }
  const int nda = static_cast<int>(a.ndim()), ndb = static_cast<int>(b.ndim());
  std::vector<int> ca, cb;
  for (size_t i = 0; i < axes_a.size(); ++i) {
    ca.push_back(detail::normalize_axis("tensordot", axes_a[i], nda));
    cb.push_back(detail::normalize_axis("tensordot", axes_b[i], ndb));
  }
  // Duplicates are rejected by normalize_axes.
  detail::normalize_axes("tensordot", ca, nda);
  detail::normalize_axes("tensordot", cb, ndb);
  int contracted = 1;
  for (size_t i = 0; i < ca.size(); ++i) {
    if (a.shape(ca[i]) != b.shape(cb[i])) {
      throw std::invalid_argument(
          "[tensordot] a " + detail::shape_str(a.shape()) + " and b " +
          detail::shape_str(b.shape()) + " differ on contracted axes " + std::to_string(ca[i]) +
          " (" + std::to_string(a.shape(ca[i])) + ") and " + std::to_string(cb[i]) + " (" +
          std::to_string(b.shape(cb[i])) + ")");
    }
    contracted *= a.shape(ca[i]);
  }
  std::vector<bool> in_a(nda, false), in_b(ndb, false);
  for (int x : ca) in_a[x] = true;
  for (int x : cb) in_b[x] = true;
  // a -> (free_a..., contracted...), b -> (contracted..., free_b...).
  std::vector<int> perm_a, perm_b;
  Shape out_shape;
  int free_a = 1, free_b = 1;
  for (int i = 0; i < nda; ++i) {
    if (!in_a[i]) {
      perm_a.push_back(i);
      free_a *= a.shape(i);
      out_shape.push_back(a.shape(i));
    }
  }
  perm_a.insert(perm_a.end(), ca.begin(), ca.end());
  perm_b = cb;
  for (int i = 0; i < ndb; ++i) {
    if (!in_b[i]) {
      perm_b.push_back(i);
      free_b *= b.shape(i);
      out_shape.push_back(b.shape(i));
    }
  }
  array x = reshape(transpose(a, perm_a, s), {free_a, contracted}, s);
  array y = reshape(transpose(b, perm_b, s), {contracted, free_b}, s);
  return reshape(matmul(x, y, s), out_shape, s);
}

array outer(const array& a, const array& b, StreamOrDevice s) {
  return multiply(reshape(a, {static_cast<int>(a.size()), 1}, s), flatten(b, s), s);
}

array inner(const array& a, const array& b, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) return multiply(a, b, s);
  if (a.shape(-1) != b.shape(-1)) {
    throw std::invalid_argument("[inner] a " + detail::shape_str(a.shape()) + " and b " +
                                detail::shape_str(b.shape()) +
                                " must have the same last dimension");
  }
  return tensordot(a, b, {-1}, {-1}, s);
}

array kron(const array& a, const array& b, StreamOrDevice s) {
  if (a.size() == 0 || b.size() == 0) {
    throw std::invalid_argument("[kron] the inputs must not be empty; got shapes " +
                                detail::shape_str(a.shape()) + " and " + detail::shape_str(b.shape()));
  }
  // out[i * nb + j] = a[i] * b[j] per dim: a's dims interleaved with size-1 ones, b's after.
  const int nd = static_cast<int>(std::max(a.ndim(), b.ndim()));
  Shape as(2 * nd, 1), bs(2 * nd, 1), out(nd, 1);
  std::vector<int64_t> wide(nd, 1);
  for (int i = nd - 1, j = static_cast<int>(a.ndim()) - 1; j >= 0; --i, --j) {
    as[2 * i] = a.shape(j);
    wide[i] *= a.shape(j);
  }
  for (int i = nd - 1, j = static_cast<int>(b.ndim()) - 1; j >= 0; --i, --j) {
    bs[2 * i + 1] = b.shape(j);
    wide[i] *= b.shape(j);
  }
  for (int i = 0; i < nd; ++i) {
    if (wide[i] > INT32_MAX) {
      throw std::overflow_error("[kron] output axis " + std::to_string(i) + " would have " +
                                std::to_string(wide[i]) +
                                " elements, more than a dimension holds (2147483647)");
    }
    out[i] = static_cast<int32_t>(wide[i]);
  }
  return reshape(multiply(reshape(a, as, s), reshape(b, bs, s), s), out, s);
}

array vecdot(const array& a, const array& b, int axis, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) {
    throw std::invalid_argument("[vecdot] the inputs must have 1 or more dims");
  }
  const int ax_a = detail::normalize_axis("vecdot", axis, static_cast<int>(a.ndim()));
  const int ax_b = detail::normalize_axis("vecdot", axis, static_cast<int>(b.ndim()));
  if (a.shape(ax_a) != b.shape(ax_b)) {
    throw std::invalid_argument("[vecdot] a " + detail::shape_str(a.shape()) + " and b " +
                                detail::shape_str(b.shape()) + " differ along axis " +
                                std::to_string(axis));
  }
  array prod = multiply(a.dtype() == complex64 ? conjugate(a, s) : a, b, s);
  return sum(prod, detail::normalize_axis("vecdot", axis, static_cast<int>(prod.ndim())), false, s);
}

namespace linalg {

namespace {

Dtype at_least_float(Dtype t) { return issubdtype(t, inexact) ? t : promote_types(t, float32); }

array l2_norm(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  if (a.dtype() == complex64) {
    array m = abs(a, s);
    return sqrt(sum(multiply(m, m, s), axes, keepdims, s), s);
  }
  array x = issubdtype(a.dtype(), inexact) ? a : astype(a, at_least_float(a.dtype()), s);
  return sqrt(sum(square(x, s), axes, keepdims, s), s);
}

array vector_norm(const array& a, double ord, const std::vector<int>& axes, bool keepdims,
                  StreamOrDevice s) {
  Dtype dt = at_least_float(a.dtype());
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (ord == 0.0) return astype(sum(not_equal(a, array(0), s), axes, keepdims, s), dt, s);
  if (ord == 1.0) return astype(sum(abs(a, s), axes, keepdims, s), dt, s);
  if (ord == 2.0) return l2_norm(a, axes, keepdims, s);
  if (ord == kInf) return astype(max(abs(a, s), axes, keepdims, s), dt, s);
  if (ord == -kInf) return astype(min(abs(a, s), axes, keepdims, s), dt, s);
  Dtype real_dt = dt == complex64 ? float32 : dt;
  array m = astype(abs(a, s), real_dt, s);
  return power(sum(power(m, array(ord, real_dt), s), axes, keepdims, s),
               array(1.0 / ord, real_dt), s);
}

// The largest ("max") or smallest ("min") singular value, or their sum ("sum"), of the matrices
// in dims row and col.
array singular_value_norm(const array& a, int row, int col, bool keepdims, const std::string& how,
                          StreamOrDevice s) {
  const int nd = static_cast<int>(a.ndim());
  std::vector<int> perm;
  for (int i = 0; i < nd; ++i) {
    if (i != row && i != col) perm.push_back(i);
  }
  perm.push_back(row);
  perm.push_back(col);
  array m = transpose(a, perm, s);
  if (m.dtype() != float64) m = astype(m, float32, s);
  array sv = svd(m, false, s)[0];
  array out = how == "max" ? max(sv, -1, false, s) : how == "min" ? min(sv, -1, false, s)
                                                                  : sum(sv, -1, false, s);
  if (keepdims) out = expand_dims(out, std::vector<int>{std::min(row, col), std::max(row, col)}, s);
  return out;
}

array matrix_norm(const array& a, double ord, const std::vector<int>& axes, bool keepdims,
                  StreamOrDevice s) {
  Dtype dt = at_least_float(a.dtype());
  constexpr double kInf = std::numeric_limits<double>::infinity();
  int row = detail::normalize_axis("linalg::norm", axes[0], static_cast<int>(a.ndim()));
  int col = detail::normalize_axis("linalg::norm", axes[1], static_cast<int>(a.ndim()));
  if (row == col) {
    throw std::invalid_argument("[linalg::norm] the two matrix axes must differ; got " +
                                std::to_string(axes[0]) + " and " + std::to_string(axes[1]));
  }
  if (ord == 1.0 || ord == -1.0) {
    // Column sums (over rows), then the extreme over columns.
    int c = col - (!keepdims && col > row ? 1 : 0);
    array sums = sum(abs(a, s), row, keepdims, s);
    return astype(ord > 0 ? max(sums, c, keepdims, s) : min(sums, c, keepdims, s), dt, s);
  }
  if (ord == kInf || ord == -kInf) {
    int r = row - (!keepdims && row > col ? 1 : 0);
    array sums = sum(abs(a, s), col, keepdims, s);
    return astype(ord > 0 ? max(sums, r, keepdims, s) : min(sums, r, keepdims, s), dt, s);
  }
  if (ord == 2.0 || ord == -2.0) {
    return singular_value_norm(a, row, col, keepdims, ord > 0 ? "max" : "min", s);
  }
  throw std::invalid_argument("[linalg::norm] invalid ord " + std::to_string(ord) +
                              " for a matrix norm (valid: 1, -1, 2, -2, inf, -inf, \"fro\", "
                              "\"nuc\")");
}

std::vector<int> all_axes(const array& a) {
  std::vector<int> ax(a.ndim());
  std::iota(ax.begin(), ax.end(), 0);
  return ax;
}

}  // namespace

array norm(const array& a, const std::optional<std::vector<int>>& axis, bool keepdims,
           StreamOrDevice s) {
  if (!axis) {
    array out = l2_norm(flatten(a, s), {0}, false, s);
    return keepdims ? reshape(out, Shape(a.ndim(), 1), s) : out;
  }
  if (axis->size() > 2) {
    throw std::invalid_argument("[linalg::norm] at most 2 axes are supported; got " +
                                std::to_string(axis->size()));
  }
  return l2_norm(a, *axis, keepdims, s);
}

array norm(const array& a, const double ord, const std::optional<std::vector<int>>& axis,
           bool keepdims, StreamOrDevice s) {
  std::vector<int> ax = axis ? *axis : all_axes(a);
  if (ax.size() == 1) return vector_norm(a, ord, ax, keepdims, s);
  if (ax.size() == 2) return matrix_norm(a, ord, ax, keepdims, s);
  throw std::invalid_argument("[linalg::norm] ord norms take 1 axis (vector) or 2 (matrix); got " +
                              std::to_string(ax.size()) +
                              (axis ? std::string(" axes") : " (the input's rank " +
                                                                std::to_string(a.ndim()) + ")"));
}

array norm(const array& a, const std::string& ord, const std::optional<std::vector<int>>& axis,
           bool keepdims, StreamOrDevice s) {
  std::vector<int> ax = axis ? *axis : all_axes(a);
  if (ax.size() != 2) {
    throw std::invalid_argument("[linalg::norm] norm '" + ord +
                                "' is only defined for matrices (2 axes); got " +
                                std::to_string(ax.size()) + " axes");
  }
  if (ord == "f" || ord == "fro") {
    int r = detail::normalize_axis("linalg::norm", ax[0], static_cast<int>(a.ndim()));
    int c = detail::normalize_axis("linalg::norm", ax[1], static_cast<int>(a.ndim()));
    if (r == c) {
      throw std::invalid_argument("[linalg::norm] the two matrix axes must differ; got " +
                                  std::to_string(ax[0]) + " and " + std::to_string(ax[1]));
    }
    return l2_norm(a, ax, keepdims, s);
  }
  if (ord == "nuc") {
    int r = detail::normalize_axis("linalg::norm", ax[0], static_cast<int>(a.ndim()));
    int c = detail::normalize_axis("linalg::norm", ax[1], static_cast<int>(a.ndim()));
    if (r == c) {
      throw std::invalid_argument("[linalg::norm] the two matrix axes must differ; got " +
                                  std::to_string(ax[0]) + " and " + std::to_string(ax[1]));
    }
    return singular_value_norm(a, r, c, keepdims, "sum", s);
  }
  throw std::invalid_argument("[linalg::norm] invalid ord '" + ord +
                              "' for a matrix norm (valid: 'fro', 'f', 'nuc')");
}

namespace {

void check_square_float(const char* op, const array& a) {
  if (a.ndim() < 2 || a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument(std::string("[linalg::") + op +
                                "] needs square matrices (..., N, N); got shape " +
                                detail::shape_str(a.shape()));
  }
}

}  // namespace

array pinv(const array& a, StreamOrDevice s) {
  if (a.ndim() < 2) {
    throw std::invalid_argument("[linalg::pinv] needs an array of matrices (2 or more dims); got "
                                "shape " + detail::shape_str(a.shape()));
  }
  Shape t = a.shape();
  std::swap(t[t.size() - 1], t[t.size() - 2]);
  if (a.size() == 0) return zeros(t, a.dtype(), s);
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto usv = svd(a, true, s);
  // Thin factors: the first k columns of u, the first k rows of vt.
  Shape start(a.ndim(), 0), stop_u = usv[0].shape(), stop_v = usv[2].shape();
  stop_u.back() = k;
  stop_v[stop_v.size() - 2] = k;
  array u = slice(usv[0], start, stop_u, s), vt = slice(usv[2], start, stop_v, s);
  array sv = usv[1];
  const double eps = a.dtype() == float64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
  array cutoff = multiply(array(10.0 * std::max(m, n) * eps, a.dtype()), max(sv, -1, true, s), s);
  array inv_s = where(greater(sv, cutoff, s), reciprocal(sv, s), array(0.0, a.dtype()), s);
  return matmul(multiply(swapaxes(vt, -1, -2, s), expand_dims(inv_s, -2, s), s),
                swapaxes(u, -1, -2, s), s);
}

array cholesky_inv(const array& l, bool upper, StreamOrDevice s) {
  check_square_float("cholesky_inv", l);
  array li = tri_inv(l, upper, s);
  array lt = swapaxes(li, -1, -2, s);
  return upper ? matmul(li, lt, s) : matmul(lt, li, s);
}

array solve_triangular(const array& a, const array& b, bool upper, StreamOrDevice s) {
  check_square_float("solve_triangular", a);
  const Dtype dt = promote_types(a.dtype(), b.dtype());
  if (dt != float32 && dt != float64) {
    throw std::invalid_argument("[linalg::solve_triangular] a and b must promote to float32 or "
                                "float64; got " + dtype_name(a.dtype()) + " and " +
                                dtype_name(b.dtype()));
  }
  const int n = a.shape(-1);
  if (b.ndim() < 1 || b.shape(b.ndim() == 1 ? -1 : -2) != n) {
    throw std::invalid_argument("[linalg::solve_triangular] a " + detail::shape_str(a.shape()) +
                                " needs b with " + std::to_string(n) + " rows; got shape " +
                                detail::shape_str(b.shape()));
  }
  return matmul(tri_inv(astype(a, dt, s), upper, s), astype(b, dt, s), s);
}

array cross(const array& a, const array& b, int axis, StreamOrDevice s) {
  const int ax_a = detail::normalize_axis("linalg::cross", axis, static_cast<int>(a.ndim()));
  const int ax_b = detail::normalize_axis("linalg::cross", axis, static_cast<int>(b.ndim()));
  const int na = a.shape(ax_a), nb = b.shape(ax_b);
  if (na < 2 || na > 3 || nb < 2 || nb > 3) {
    throw std::invalid_argument("[linalg::cross] the vectors along axis " + std::to_string(axis) +
                                " must have 2 or 3 elements; got " + std::to_string(na) +
                                " and " + std::to_string(nb));
  }
  const Dtype dt = promote_types(a.dtype(), b.dtype());
  // Size-2 vectors get z = 0; then the usual formula on broadcast components.
  auto padded = [&](const array& x, int ax, int size) {
    array y = astype(x, dt, s);
    if (size == 3) return y;
    std::vector<std::pair<int, int>> widths(x.ndim(), {0, 0});
    widths[ax] = {0, 1};
    return pad(y, widths, array(0, dt), "constant", s);
  };
  array x = padded(a, ax_a, na), y = padded(b, ax_b, nb);
  auto comp = [&](const array& v, int i) {
    const int vax = detail::normalize_axis("linalg::cross", axis, static_cast<int>(v.ndim()));
    Shape start(v.ndim(), 0), stop = v.shape();
    start[vax] = i;
    stop[vax] = i + 1;
    return slice(v, start, stop, s);
  };
  array x0 = comp(x, 0), x1 = comp(x, 1), x2 = comp(x, 2);
  array y0 = comp(y, 0), y1 = comp(y, 1), y2 = comp(y, 2);
  std::vector<array> parts{subtract(multiply(x1, y2, s), multiply(x2, y1, s), s),
                           subtract(multiply(x2, y0, s), multiply(x0, y2, s), s),
                           subtract(multiply(x0, y1, s), multiply(x1, y0, s), s)};
  const int out_nd = static_cast<int>(std::max(x.ndim(), y.ndim()));
  return concatenate(parts, detail::normalize_axis("linalg::cross", axis, out_nd), s);
}

namespace {

// sign and log|det| of square float matrices x through the LU factorization.
std::pair<array, array> slogdet_of(const array& x, StreamOrDevice s) {
  Shape batch(x.shape().begin(), x.shape().end() - 2);
  if (x.shape(-1) == 0) {
    return {ones(batch, x.dtype(), s), zeros(batch, x.dtype(), s)};
  }
  auto [lu, pivots] = lu_factor(x, s);
  array d = diagonal(lu, 0, -2, -1, s);
  const int n = x.shape(-1);
  // Row swaps and negative pivots each flip the sign.
  array swaps = sum(not_equal(pivots, arange(0, n, uint32, s), s), -1, false, s);
  array negs = sum(less(d, array(0.0, x.dtype()), s), -1, false, s);
  array odd = equal(remainder(add(astype(swaps, int32, s), astype(negs, int32, s), s),
                              array(2, int32), s),
                    array(1, int32), s);
  array sign = where(odd, array(-1.0, x.dtype()), array(1.0, x.dtype()), s);
  array singular = any(equal(d, array(0.0, x.dtype()), s), -1, false, s);
  array logabs = sum(log(abs(d, s), s), -1, false, s);
  return {where(singular, array(0.0, x.dtype()), sign, s), logabs};
}

}  // namespace

// d log|det A| = tr(A^-1 dA): the gradient of logabs is A^-T (the sign's is zero), so det's is
// det(A) A^-T. (MLX's det and slogdet have no derivatives.)
std::pair<array, array> slogdet(const array& a, StreamOrDevice s) {
  check_square_float("slogdet", a);
  if (a.dtype() == complex64) {
    throw std::invalid_argument("[linalg::slogdet] complex inputs are not supported");
  }
  array x = a.dtype() == float64 ? a : astype(a, float32, s);
  auto fn = custom_function(
      [s](const std::vector<array>& in) {
        auto [sign, logabs] = slogdet_of(in[0], s);
        return std::vector<array>{sign, logabs};
      },
      [s](const std::vector<array>& primals, const std::vector<array>& cotangents,
          const std::vector<array>&) {
        array g = expand_dims(cotangents[1], std::vector<int>{-2, -1}, s);
        return std::vector<array>{multiply(g, swapaxes(inv(primals[0], s), -1, -2, s), s)};
      },
      [s](const std::vector<array>& primals, const std::vector<array>& tangents,
          const std::vector<int>&) {
        array t = sum(multiply(swapaxes(inv(primals[0], s), -1, -2, s), tangents[0], s),
                      std::vector<int>{-2, -1}, false, s);
        return std::vector<array>{zeros_like(t, s), t};
      });
  auto out = fn({x});
  return {out[0], out[1]};
}

array det(const array& a, StreamOrDevice s) {
  auto [sign, logabs] = slogdet(a, s);
  return multiply(sign, exp(logabs, s), s);
}

}  // namespace linalg

}  // namespace tessera
