// Composite linear-algebra ops: tensordot, inner, outer (in namespace tessera) and linalg::norm,
// built from matmul and the elementwise / reduce / shape families (no primitive of their own).
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "ops/utils.h"
#include "tessera/linalg.h"
#include "tessera/ops.h"

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
    throw std::invalid_argument("[linalg::norm] matrix norm ord " + std::to_string(ord) +
                                " needs singular values (linalg::svd), which Tessera does not "
                                "have yet; use ord 1, -1, inf, -inf or \"fro\"");
  }
  throw std::invalid_argument("[linalg::norm] invalid ord " + std::to_string(ord) +
                              " for a matrix norm (valid: 1, -1, inf, -inf, \"fro\")");
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
    throw std::invalid_argument("[linalg::norm] the nuclear norm needs singular values "
                                "(linalg::svd), which Tessera does not have yet");
  }
  throw std::invalid_argument("[linalg::norm] invalid ord '" + ord +
                              "' for a matrix norm (valid: 'fro', 'f')");
}

}  // namespace linalg

}  // namespace tessera
