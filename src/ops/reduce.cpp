// Front ends of the reduce family (sum, prod, max, min, all, any, argmax, argmin), the
// composites built on them (mean, var, std, count_nonzero), and the derivatives of Reduce and
// ArgReduce. Reduce keeps reduced dims as size 1; keepdims=false reshapes them away.
#include <numeric>
#include <stdexcept>

#include "core/transforms_impl.h"
#include "tessera/primitives/reduce.h"
#include "ops/shape.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

struct ReducePlan {
  Shape keep_shape;       // reduced dims set to 1
  std::vector<int> axes;  // sorted, non-negative
  bool noop;              // every reduced dim already has size 1
};

// Sorted non-negative axes; as MLX, one outside the array is std::out_of_range and a repeated
// one std::invalid_argument.
std::vector<int> reduce_axes(const char* op, const std::vector<int>& axes, int ndim) {
  for (int a : axes) detail::normalize_axis_in_range(op, a, ndim);
  return detail::normalize_axes(op, axes, ndim);
}

// Validates and normalises `axes` for `op`; `needs_nonempty` rejects reducing a size-0 axis
// (ops without an identity).
ReducePlan plan_reduce(const char* op, const Shape& shape, const std::vector<int>& axes,
                       bool needs_nonempty) {
  ReducePlan p;
  int ndim = static_cast<int>(shape.size());
  p.axes = reduce_axes(op, axes, ndim);
  p.noop = true;
  size_t k = 0;
  for (int d = 0; d < ndim; ++d) {
    if (k < p.axes.size() && p.axes[k] == d) {
      ++k;
      if (needs_nonempty && shape[d] == 0) {
        throw std::invalid_argument(std::string("[") + op + "] cannot " + op +
                                    " reduce over axis " + std::to_string(d) +
                                    " of size 0 (array of shape " + detail::shape_str(shape) +
                                    ")");
      }
      p.noop &= shape[d] == 1;
      p.keep_shape.push_back(1);
    } else {
      p.keep_shape.push_back(shape[d]);
    }
  }
  return p;
}

std::vector<int> all_axes(const array& a) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

Dtype sum_dtype(Dtype t) {
  if (issubdtype(t, signedinteger)) return t.size() <= 4 ? int32 : int64;
  if (issubdtype(t, unsignedinteger)) return t.size() <= 4 ? uint32 : uint64;
  if (t == bool_) return int32;
  return t;
}

Dtype at_least_float(Dtype t) { return issubdtype(t, inexact) ? t : float32; }

array make_reduce(const array& a, const std::vector<int>& axes, bool keepdims, Reduce::ReduceType type,
                  Dtype out_dtype, const char* op, bool needs_nonempty, StreamOrDevice s) {
  auto p = plan_reduce(op, a.shape(), axes, needs_nonempty);
  // A reduction over dims of size 1 is a cast, except while compile traces: a shapeless replay
  // may give those dims other sizes (MLX's issue 3201 replayed stale values).
  if (detail::in_compile_trace()) p.noop = false;
  array out = p.noop ? astype(a, out_dtype, s)
                     : array(p.keep_shape, out_dtype,
                             std::make_shared<Reduce>(to_stream(s), type, p.axes), {a});
  // Squeeze, not a reshape to the traced shape: a shapeless compile replays it on new shapes.
  return keepdims ? out : squeeze(out, p.axes, s);
}

// Number of elements reduced by `axes` (already validated).
size_t reduced_count(const array& a, const std::vector<int>& axes) {
  size_t n = 1;
  for (int ax : axes) n *= static_cast<size_t>(a.shape(ax < 0 ? ax + static_cast<int>(a.ndim()) : ax));
  return n;
}

}  // namespace

// ---- all / any ----

array all(const array& a, bool keepdims, StreamOrDevice s) { return all(a, all_axes(a), keepdims, s); }
array all(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return make_reduce(a, axes, keepdims, Reduce::And, bool_, "all", false, s);
}
array all(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return all(a, std::vector<int>{axis}, keepdims, s);
}
array any(const array& a, bool keepdims, StreamOrDevice s) { return any(a, all_axes(a), keepdims, s); }
array any(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return make_reduce(a, axes, keepdims, Reduce::Or, bool_, "any", false, s);
}
array any(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return any(a, std::vector<int>{axis}, keepdims, s);
}

// ---- sum / prod / max / min ----

array sum(const array& a, bool keepdims, StreamOrDevice s) { return sum(a, all_axes(a), keepdims, s); }
array sum(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  if (axes.empty()) return a;
  return make_reduce(a, axes, keepdims, Reduce::Sum, sum_dtype(a.dtype()), "sum", false, s);
}
array sum(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return sum(a, std::vector<int>{axis}, keepdims, s);
}

array prod(const array& a, bool keepdims, StreamOrDevice s) { return prod(a, all_axes(a), keepdims, s); }
array prod(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  if (axes.empty()) return a;
  return make_reduce(a, axes, keepdims, Reduce::Prod, sum_dtype(a.dtype()), "prod", false, s);
}
array prod(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return prod(a, std::vector<int>{axis}, keepdims, s);
}

array max(const array& a, bool keepdims, StreamOrDevice s) { return max(a, all_axes(a), keepdims, s); }
array max(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  if (axes.empty()) return a;
  return make_reduce(a, axes, keepdims, Reduce::Max, a.dtype(), "max", true, s);
}
array max(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return max(a, std::vector<int>{axis}, keepdims, s);
}

array min(const array& a, bool keepdims, StreamOrDevice s) { return min(a, all_axes(a), keepdims, s); }
array min(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  if (axes.empty()) return a;
  return make_reduce(a, axes, keepdims, Reduce::Min, a.dtype(), "min", true, s);
}
array min(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return min(a, std::vector<int>{axis}, keepdims, s);
}

// ---- argmin / argmax ----

namespace {
array make_arg_reduce(const array& a, int axis, bool keepdims, ArgReduce::ReduceType type,
                      const char* op, StreamOrDevice s) {
  if (a.size() == 0) {
    throw std::invalid_argument(std::string("[") + op + "] cannot " + op +
                                " reduce an array of size 0 (shape " +
                                detail::shape_str(a.shape()) + ")");
  }
  auto p = plan_reduce(op, a.shape(), {axis}, true);
  if (detail::in_compile_trace()) p.noop = false;  // as make_reduce
  array out = p.noop ? zeros(p.keep_shape, uint32, s)
                     : array(p.keep_shape, uint32,
                             std::make_shared<ArgReduce>(to_stream(s), type, p.axes[0]), {a});
  return keepdims ? out : squeeze(out, p.axes, s);
}

array whole_arg_reduce(const array& a, bool keepdims, ArgReduce::ReduceType type, const char* op,
                       StreamOrDevice s) {
  auto flat = reshape(a, Shape{-1}, s);  // -1: a shapeless replay recomputes the length
  auto r = make_arg_reduce(flat, 0, false, type, op, s);
  return keepdims ? reshape(r, Shape(a.ndim(), 1), s) : r;
}
}  // namespace

array argmin(const array& a, bool keepdims, StreamOrDevice s) {
  return whole_arg_reduce(a, keepdims, ArgReduce::ArgMin, "argmin", s);
}
array argmin(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return make_arg_reduce(a, axis, keepdims, ArgReduce::ArgMin, "argmin", s);
}
array argmax(const array& a, bool keepdims, StreamOrDevice s) {
  return whole_arg_reduce(a, keepdims, ArgReduce::ArgMax, "argmax", s);
}
array argmax(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return make_arg_reduce(a, axis, keepdims, ArgReduce::ArgMax, "argmax", s);
}

// ---- composites ----

array count_nonzero(const array& a, bool keepdims, StreamOrDevice s) {
  return count_nonzero(a, all_axes(a), keepdims, s);
}
array count_nonzero(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return count_nonzero(a, std::vector<int>{axis}, keepdims, s);
}
array count_nonzero(const array& a, const std::vector<int>& axes, bool keepdims,
                    StreamOrDevice s) {
  auto nz = astype(not_equal(a, array(0, a.dtype()), s), int32, s);
  return sum(nz, axes, keepdims, s);
}

namespace {
// The number of elements along `axes` of `a` (its reciprocal when `inverted`) as a scalar of
// `dtype`: a constant, or while compile traces a node that a shapeless replay recomputes.
array element_count(const array& a, const std::vector<int>& axes, bool inverted, Dtype dtype,
                    StreamOrDevice s) {
  std::vector<int> norm = reduce_axes("element count", axes, static_cast<int>(a.ndim()));
  auto prim = std::make_shared<NumberOfElements>(to_stream(s), std::move(norm), inverted, dtype);
  if (!detail::in_compile_trace()) return array(prim->value(a.shape()), dtype);
  return array(Shape{}, dtype, std::move(prim), {stop_gradient(a, s)});
}
}  // namespace

array mean(const array& a, bool keepdims, StreamOrDevice s) { return mean(a, all_axes(a), keepdims, s); }
array mean(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  reduce_axes("mean", axes, static_cast<int>(a.ndim()));
  auto dtype = at_least_float(a.dtype());
  // 1/0 = inf makes the mean of an empty reduction 0 * inf = nan, as NumPy.
  return multiply(sum(a, axes, keepdims, s), element_count(a, axes, true, dtype, s), s);
}
array mean(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return mean(a, std::vector<int>{axis}, keepdims, s);
}

array var(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, all_axes(a), keepdims, ddof, s);
}
array var(const array& a, const std::vector<int>& axes, bool keepdims, int ddof, StreamOrDevice s) {
  reduce_axes("var", axes, static_cast<int>(a.ndim()));
  auto dtype = at_least_float(a.dtype());
  auto d = subtract(a, mean(a, axes, true, s), s);
  // Complex variance is the mean squared magnitude (a real number).
  bool cplx = issubdtype(dtype, complexfloating);
  auto sq = cplx ? real(multiply(d, conjugate(d, s), s), s) : square(d, s);
  if (cplx) dtype = float32;
  auto v = sum(sq, axes, keepdims, s);
  if (ddof == 0) return multiply(v, element_count(a, axes, true, dtype, s), s);
  if (!detail::in_compile_trace()) {
    double n = static_cast<double>(reduced_count(a, axes));
    return divide(v, array(std::max(n - static_cast<double>(ddof), 0.0), dtype), s);
  }
  auto n = element_count(a, axes, false, float64, s);
  auto denom = maximum(subtract(n, array(static_cast<double>(ddof), float64), s),
                       array(0.0, float64), s);
  return divide(v, astype(denom, dtype, s), s);
}
array var(const array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, std::vector<int>{axis}, keepdims, ddof, s);
}

array std(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, all_axes(a), keepdims, ddof, s);
}
array std(const array& a, const std::vector<int>& axes, bool keepdims, int ddof, StreamOrDevice s) {
  return sqrt(var(a, axes, keepdims, ddof, s), s);
}
array std(const array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, std::vector<int>{axis}, keepdims, ddof, s);
}

// ---- Reduce: name, equivalence, derivatives, batching ----

const char* Reduce::name() const {
  switch (type_) {
    case And: return "All";
    case Or: return "Any";
    case Sum: return "Sum";
    case Prod: return "Prod";
    case Min: return "Min";
    case Max: return "Max";
  }
  return "Reduce";
}

bool Reduce::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Reduce*>(&other);
  return o && o->type_ == type_ && o->axes_ == axes_;
}

std::vector<Shape> Reduce::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  for (int ax : axes_) out[ax] = 1;
  return {out};
}

namespace {
// Product of all the other elements along `axes` for every element of x (exact with zeros):
// the axes are moved last and flattened, then an exclusive cumprod from each side.
array exclusive_prod(const array& x, const std::vector<int>& axes, const Stream& s) {
  if (axes.size() == 1) {
    return multiply(cumprod(x, axes[0], false, false, s), cumprod(x, axes[0], true, false, s), s);
  }
  std::vector<int> perm;
  Shape flat;
  for (int d = 0; d < static_cast<int>(x.ndim()); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      perm.push_back(d);
      flat.push_back(x.shape(d));
    }
  }
  for (int ax : axes) perm.push_back(ax);
  flat.push_back(-1);
  std::vector<int> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int>(i);
  auto xt = transpose(x, perm, s);
  auto moved_shape = xt.shape();
  auto xf = reshape(xt, flat, s);
  auto e = multiply(cumprod(xf, -1, false, false, s), cumprod(xf, -1, true, false, s), s);
  return transpose(reshape(e, moved_shape, s), inv, s);
}
}  // namespace

std::vector<array> Reduce::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents, const std::vector<int>&,
                               const std::vector<array>& outputs) {
  const array& in = primals[0];
  const array& cotan = cotangents[0];
  auto s = stream();
  switch (type_) {
    // The broadcast follows the input's shape (shapeless compile replays it on new shapes).
    case Sum: return {detail::broadcast_for_elementwise(cotan, in.shape(), {&in}, s)};
    case Prod: return {multiply(conjugate(exclusive_prod(in, axes_, s), s), cotan, s)};
    case Max:
    case Min: {
      // Ties share the cotangent equally.
      auto mask = equal(in, outputs[0], s);
      auto count = sum(mask, axes_, true, s);
      return {multiply(divide(cotan, count, s), mask, s)};
    }
    default: return {zeros_like(in, s)};
  }
}

std::vector<array> Reduce::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents, const std::vector<int>&) {
  const array& in = primals[0];
  const array& tan = tangents[0];
  auto s = stream();
  switch (type_) {
    case Sum: return {sum(tan, axes_, true, s)};
    case Prod: return {sum(multiply(exclusive_prod(in, axes_, s), tan, s), axes_, true, s)};
    case Max:
    case Min: {
      auto out = array(output_shapes(primals)[0], in.dtype(),
                       std::make_shared<Reduce>(s, type_, axes_), {in});
      auto mask = equal(in, out, s);
      return {divide(sum(multiply(tan, mask, s), axes_, true, s), sum(mask, axes_, true, s), s)};
    }
    default: return {zeros(output_shapes(primals)[0], bool_, s)};
  }
}

std::pair<std::vector<array>, std::vector<int>> Reduce::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  int bax = axes[0];
  std::vector<int> raxes = axes_;
  if (bax >= 0) {
    for (auto& a : raxes) {
      if (a >= bax) ++a;
    }
  }
  const array& in = inputs[0];
  Shape out_shape = in.shape();
  for (int a : raxes) out_shape[a] = 1;
  Dtype dt = (type_ == And || type_ == Or) ? bool_
             : (type_ == Sum || type_ == Prod) ? sum_dtype(in.dtype())
                                               : in.dtype();
  return {{array(out_shape, dt, std::make_shared<Reduce>(stream(), type_, raxes), {in})}, {bax}};
}

// ---- NumberOfElements ----

double NumberOfElements::value(const Shape& shape) const {
  double n = 1;
  for (int ax : axes_) n *= static_cast<double>(shape[ax]);
  return inverted_ ? 1.0 / n : n;
}

bool NumberOfElements::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const NumberOfElements*>(&other);
  return o && o->axes_ == axes_ && o->inverted_ == inverted_ && o->dtype_ == dtype_ &&
         o->bound_ == bound_;
}

std::shared_ptr<Primitive> NumberOfElements::bind_input_shapes(
    const std::vector<Shape>& shapes) const {
  auto p = std::make_shared<NumberOfElements>(stream(), axes_, inverted_, dtype_);
  p->bound_ = value(shapes.at(0));
  return p;
}

std::vector<array> NumberOfElements::vjp(const std::vector<array>& primals,
                                         const std::vector<array>&, const std::vector<int>&,
                                         const std::vector<array>&) {
  return {zeros_like(primals[0], stream())};
}

std::vector<array> NumberOfElements::jvp(const std::vector<array>&, const std::vector<array>&,
                                         const std::vector<int>&) {
  return {zeros(Shape{}, dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> NumberOfElements::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  std::vector<int> counted = axes_;
  if (axes[0] >= 0) {
    for (auto& a : counted) a += a >= axes[0] ? 1 : 0;
  }
  auto prim = std::make_shared<NumberOfElements>(stream(), std::move(counted), inverted_, dtype_);
  return {{array(Shape{}, dtype_, std::move(prim), {inputs[0]})}, {-1}};
}

// ---- ArgReduce ----

bool ArgReduce::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ArgReduce*>(&other);
  return o && o->type_ == type_ && o->axis_ == axis_;
}

std::vector<array> ArgReduce::vjp(const std::vector<array>& primals, const std::vector<array>&,
                                  const std::vector<int>&, const std::vector<array>&) {
  return {zeros_like(primals[0], stream())};
}

std::vector<array> ArgReduce::jvp(const std::vector<array>& primals, const std::vector<array>&,
                                  const std::vector<int>&) {
  Shape out = primals[0].shape();
  out[axis_] = 1;
  return {zeros(out, uint32, stream())};
}


std::pair<std::vector<array>, std::vector<int>> ArgReduce::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  int bax = axes[0];
  int ax = axis_ + ((bax >= 0 && bax <= axis_) ? 1 : 0);
  Shape out = inputs[0].shape();
  out[ax] = 1;
  return {{array(out, uint32, std::make_shared<ArgReduce>(stream(), type_, ax), {inputs[0]})},
          {bax}};
}

}  // namespace tessera
