// Front ends of softmax and logsumexp, and the derivatives of their last-axis primitives.
// Reductions over trailing axes use the fused kernels (merging the axes into one); others are
// composed from max/exp/sum.
#include <limits>
#include <numeric>
#include <stdexcept>

#include "tessera/primitives/reduce.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

Dtype at_least_float(Dtype t) { return issubdtype(t, inexact) ? t : float32; }

// True when the sorted, normalised `axes` are exactly the last axes.size() dims.
bool trailing_axes(const std::vector<int>& axes, int ndim) {
  if (axes.empty()) return false;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != ndim - static_cast<int>(axes.size()) + static_cast<int>(i)) return false;
  }
  return true;
}

// `a` with its last k dims merged into one.
array merge_trailing(const array& a, size_t k, StreamOrDevice s) {
  if (k <= 1) return a;
  Shape shape(a.shape().begin(), a.shape().end() - static_cast<long>(k));
  shape.push_back(-1);
  if (a.size() == 0) {
    int32_t m = 1;
    for (size_t i = a.ndim() - k; i < a.ndim(); ++i) m *= a.shape()[i];
    shape.back() = m;
  }
  return reshape(a, shape, s);
}

}  // namespace

array softmax(const array& a, const std::vector<int>& axes_in, bool precise, StreamOrDevice s) {
  if (a.size() == 0) return a;
  int ndim = static_cast<int>(a.ndim());
  if (ndim == 0 && !axes_in.empty()) {
    throw std::invalid_argument("[softmax] received axes for an array with 0 dimensions");
  }
  auto axes = detail::normalize_axes("softmax", axes_in, ndim);
  bool cplx = issubdtype(a.dtype(), complexfloating);
  if (!cplx && trailing_axes(axes, ndim)) {
    auto dtype = at_least_float(a.dtype());
    auto x = merge_trailing(astype(a, dtype, s), axes.size(), s);
    Shape shape = x.shape();
    auto out = array(std::move(shape), dtype, std::make_shared<Softmax>(to_stream(s), precise),
                     {x});
    return axes.size() > 1 ? reshape(out, a.shape(), s) : out;
  }
  auto in = (precise && !cplx) ? astype(a, float32, s) : a;
  auto m = stop_gradient(max(in, axes, true, s), s);
  auto ex = exp(subtract(in, m, s), s);
  return astype(divide(ex, sum(ex, axes, true, s), s), cplx ? a.dtype() : at_least_float(a.dtype()),
                s);
}

array softmax(const array& a, bool precise, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return softmax(a, axes, precise, s);
}

array logsumexp(const array& a, bool keepdims, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return logsumexp(a, axes, keepdims, s);
}

array logsumexp(const array& a, const std::vector<int>& axes_in, bool keepdims, StreamOrDevice s) {
  if (a.size() == 0) {
    throw std::invalid_argument("[logsumexp] received an empty array of shape " +
                                detail::shape_str(a.shape()));
  }
  int ndim = static_cast<int>(a.ndim());
  if (ndim == 0 && !axes_in.empty()) {
    throw std::invalid_argument("[logsumexp] received axes for an array with 0 dimensions");
  }
  auto axes = detail::normalize_axes("logsumexp", axes_in, ndim);
  Shape keep = a.shape(), squeezed;
  for (int d = 0; d < ndim; ++d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) {
      keep[d] = 1;
    } else {
      squeezed.push_back(a.shape(d));
    }
  }
  bool cplx = issubdtype(a.dtype(), complexfloating);
  if (!cplx && trailing_axes(axes, ndim)) {
    auto dtype = at_least_float(a.dtype());
    auto x = merge_trailing(astype(a, dtype, s), axes.size(), s);
    Shape shape = x.shape();
    shape.back() = 1;
    auto out = array(std::move(shape), dtype, std::make_shared<LogSumExp>(to_stream(s)), {x});
    // One axis: keep / squeeze it (no reshape to the traced shape: shapeless compile replays it).
    if (axes.size() == 1) return keepdims ? out : squeeze(out, axes, s);
    return reshape(out, keepdims ? keep : squeezed, s);
  }
  if (axes.empty()) return astype(a, at_least_float(a.dtype()), s);
  auto m = stop_gradient(max(a, axes, true, s), s);
  auto out = add(log(sum(exp(subtract(a, m, s), s), axes, true, s), s), m, s);
  // A max of +-inf would give inf - inf = nan above; the answer is the max itself.
  out = where(isinf(m, s), m, out, s);
  return keepdims ? out : squeeze(out, axes, s);
}

array logsumexp(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return logsumexp(a, std::vector<int>{axis}, keepdims, s);
}

// ---- derivatives ----

bool Softmax::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Softmax*>(&other);
  return o && o->precise_ == precise_;
}

std::vector<array> Softmax::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                const std::vector<int>&, const std::vector<array>& outputs) {
  auto s = stream();
  const array& y = outputs[0];
  auto yc = multiply(y, cotangents[0], s);
  return {subtract(yc, multiply(y, sum(yc, std::vector<int>{-1}, true, s), s), s)};
}

std::vector<array> Softmax::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents, const std::vector<int>&) {
  auto s = stream();
  auto y = softmax(primals[0], std::vector<int>{-1}, precise_, s);
  auto yt = multiply(y, tangents[0], s);
  return {subtract(yt, multiply(y, sum(yt, std::vector<int>{-1}, true, s), s), s)};
}

std::vector<array> LogSumExp::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>&) {
  auto s = stream();
  return {multiply(cotangents[0], softmax(primals[0], std::vector<int>{-1}, true, s), s)};
}

std::vector<array> LogSumExp::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents, const std::vector<int>&) {
  auto s = stream();
  auto p = softmax(primals[0], std::vector<int>{-1}, true, s);
  return {sum(multiply(tangents[0], p, s), std::vector<int>{-1}, true, s)};
}


namespace {
// The kernels work on the last axis: a batch axis there moves to the front first.
std::pair<array, int> batch_off_last(const array& in, int bax, const Stream& s) {
  int last = static_cast<int>(in.ndim()) - 1;
  if (bax >= 0 && bax == last) return {moveaxis(in, bax, 0, s), 0};
  return {in, bax};
}
}  // namespace

std::pair<std::vector<array>, std::vector<int>> Softmax::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  auto [x, bax] = batch_off_last(inputs[0], axes[0], stream());
  Shape shape = x.shape();
  return {{array(std::move(shape), x.dtype(), std::make_shared<Softmax>(stream(), precise_), {x})},
          {bax}};
}

std::pair<std::vector<array>, std::vector<int>> LogSumExp::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  auto [x, bax] = batch_off_last(inputs[0], axes[0], stream());
  Shape shape = x.shape();
  shape.back() = 1;
  return {{array(std::move(shape), x.dtype(), std::make_shared<LogSumExp>(stream()), {x})}, {bax}};
}

}  // namespace tessera
