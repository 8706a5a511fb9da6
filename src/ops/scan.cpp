// Front ends of the scan family (cumsum, cumprod, cummax, cummin, logcumsumexp) and the
// derivatives of Scan. Versions without an axis scan the flattened array.
#include <limits>
#include <stdexcept>

#include "tessera/primitives/reduce.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

array flat(const array& a, StreamOrDevice s) {
  return reshape(a, Shape{static_cast<int32_t>(a.size())}, s);
}

array make_scan(const char* op, const array& x, int axis, Scan::ReduceType type, bool reverse,
                bool inclusive, Dtype out_dtype, StreamOrDevice s) {
  int ax = detail::normalize_axis(op, axis, static_cast<int>(x.ndim()));
  Shape shape = x.shape();
  return array(std::move(shape), out_dtype,
               std::make_shared<Scan>(to_stream(s), type, ax, reverse, inclusive), {x});
}

}  // namespace

array cumsum(const array& a, int axis, bool reverse, bool inclusive, std::optional<Dtype> dtype,
             StreamOrDevice s) {
  auto x = dtype ? astype(a, *dtype, s) : a;
  Dtype out = x.dtype() == bool_ ? int32 : x.dtype();
  return make_scan("cumsum", x, axis, Scan::Sum, reverse, inclusive, out, s);
}
array cumsum(const array& a, bool reverse, bool inclusive, std::optional<Dtype> dtype,
             StreamOrDevice s) {
  return cumsum(flat(a, s), 0, reverse, inclusive, dtype, s);
}

array cumprod(const array& a, int axis, bool reverse, bool inclusive, std::optional<Dtype> dtype,
              StreamOrDevice s) {
  auto x = dtype ? astype(a, *dtype, s) : a;
  return make_scan("cumprod", x, axis, Scan::Prod, reverse, inclusive, x.dtype(), s);
}
array cumprod(const array& a, bool reverse, bool inclusive, std::optional<Dtype> dtype,
              StreamOrDevice s) {
  return cumprod(flat(a, s), 0, reverse, inclusive, dtype, s);
}

array cummax(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return make_scan("cummax", a, axis, Scan::Max, reverse, inclusive, a.dtype(), s);
}
array cummax(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return cummax(flat(a, s), 0, reverse, inclusive, s);
}
array cummin(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return make_scan("cummin", a, axis, Scan::Min, reverse, inclusive, a.dtype(), s);
}
array cummin(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return cummin(flat(a, s), 0, reverse, inclusive, s);
}

array logcumsumexp(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  if (is_complex(a.dtype())) {
    // log(cumsum(exp(a - c))) + c, c the largest real part along the axis (a constant for the
    // derivatives), so that exp neither overflows nor underflows for the largest terms.
    const int ax = detail::normalize_axis("logcumsumexp", axis, static_cast<int>(a.ndim()));
    const array c = astype(stop_gradient(max(real(a, s), ax, true, s), s), a.dtype(), s);
    return add(log(cumsum(exp(subtract(a, c, s), s), ax, reverse, inclusive, s), s), c, s);
  }
  return make_scan("logcumsumexp", a, axis, Scan::LogAddExp, reverse, inclusive, a.dtype(), s);
}
array logcumsumexp(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return logcumsumexp(flat(a, s), 0, reverse, inclusive, s);
}

// ---- Scan: name, equivalence, derivatives ----

const char* Scan::name() const {
  switch (type_) {
    case Sum: return "CumSum";
    case Prod: return "CumProd";
    case Max: return "CumMax";
    case Min: return "CumMin";
    case LogAddExp: return "CumLogAddExp";
  }
  return "Scan";
}

bool Scan::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Scan*>(&other);
  return o && o->type_ == type_ && o->axis_ == axis_ && o->reverse_ == reverse_ &&
         o->inclusive_ == inclusive_;
}

namespace {
// For an inclusive cummax/cummin: the index (uint32, along `axis`) of the input element that
// holds the running extreme at every position (the latest one in scan order on ties).
array running_owner(const array& in, const array& out, int axis, bool reverse, const Stream& s) {
  int n = in.shape(axis);
  Shape ishape(in.ndim(), 1);
  ishape[axis] = n;
  auto iota = reshape(arange(0, n, s), ishape, s);
  auto masked = where(equal(in, out, s), iota, array(reverse ? n : -1, int32), s);
  auto owner = reverse ? cummin(masked, axis, true, true, s) : cummax(masked, axis, false, true, s);
  return stop_gradient(astype(owner, uint32, s), s);
}

// `a` moved one place along `axis` in scan order (forward: toward the start), the vacated end
// zero: position i of an exclusive scan reads what position i - 1 of the inclusive one holds.
array shift_along(const array& a, int axis, bool toward_start, const Stream& s) {
  const int n = a.shape(axis);
  Shape start(a.ndim(), 0), stop = a.shape();
  if (toward_start) start[axis] = 1; else stop[axis] = n - 1;
  return pad(slice(a, start, stop, s), {axis}, {toward_start ? 0 : 1}, {toward_start ? 1 : 0},
             array(0, a.dtype()), "constant", s);
}
}  // namespace

std::vector<array> Scan::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>& outputs) {
  auto s = stream();
  const array& in = primals[0];
  const array& cot = cotangents[0];
  switch (type_) {
    case Sum: return {cumsum(cot, axis_, !reverse_, inclusive_, s)};
    case Prod: {
      // d out_i / d x_j = out_i / x_j (j in the window of i); the first zero of each line needs
      // the product without it, and everything after the first zero gets 0.
      auto excl = cumprod(in, axis_, reverse_, !inclusive_, s);
      auto incl = outputs[0];
      if (!inclusive_) std::swap(excl, incl);
      auto zero = array(0, in.dtype());
      auto incl_zero = equal(incl, zero, s);
      auto first_zero = logical_and(incl_zero, not_equal(excl, zero, s), s);
      auto back = [&](const array& prods) {
        return cumsum(multiply(prods, cot, s), axis_, !reverse_, inclusive_, s);
      };
      auto with_one = cumprod(where(first_zero, array(1, in.dtype()), in, s), axis_, reverse_,
                              inclusive_, s);
      auto regular = divide(back(outputs[0]), in, s);
      return {where(first_zero, back(with_one), where(incl_zero, zero, regular, s), s)};
    }
    case Max:
    case Min: {
      if (in.shape(axis_) == 0) return {zeros_like(in, s)};
      // Exclusive: position i holds the inclusive extreme of i - 1 (the first position holds
      // the identity and takes no gradient).
      auto incl = inclusive_ ? outputs[0]
                  : type_ == Max ? cummax(in, axis_, reverse_, true, s)
                                 : cummin(in, axis_, reverse_, true, s);
      auto owner = running_owner(in, incl, axis_, reverse_, s);
      auto c = inclusive_ ? cot : shift_along(cot, axis_, !reverse_, s);
      return {scatter_add_axis(zeros_like(in, s), owner, c, axis_, s)};
    }
    case LogAddExp: {
      // Split the cotangent by sign so that its log exists, then scan in log space.
      auto ninf = array(-std::numeric_limits<float>::infinity(), cot.dtype());
      auto zero = array(0, cot.dtype());
      auto log_abs = log(abs(cot, s), s);
      auto pos = where(greater(cot, zero, s), log_abs, ninf, s);
      auto neg = where(less(cot, zero, s), log_abs, ninf, s);
      auto part = [&](const array& lg) {
        return exp(add(logcumsumexp(subtract(lg, outputs[0], s), axis_, !reverse_, inclusive_, s),
                       in, s),
                   s);
      };
      return {subtract(part(pos), part(neg), s)};
    }
  }
  return {zeros_like(in, s)};
}

std::vector<array> Scan::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents, const std::vector<int>&) {
  auto s = stream();
  switch (type_) {
    case Sum: return {cumsum(tangents[0], axis_, reverse_, inclusive_, s)};
    case Max:
    case Min: {
      if (primals[0].shape(axis_) == 0) return {zeros_like(tangents[0], s)};
      auto out = type_ == Max ? cummax(primals[0], axis_, reverse_, true, s)
                              : cummin(primals[0], axis_, reverse_, true, s);
      auto owner = running_owner(primals[0], out, axis_, reverse_, s);
      auto d = take_along_axis(tangents[0], owner, axis_, s);
      return {inclusive_ ? d : shift_along(d, axis_, reverse_, s)};
    }
    case Prod: {
      // d out_i = out_i * sum_window(t / x) while the window holds no zero; past the first zero
      // only its own term survives: t_zero * product of the others.
      const array& x = primals[0];
      const array& t = tangents[0];
      auto zero = array(0, x.dtype());
      auto out = cumprod(x, axis_, reverse_, inclusive_, s);
      auto incl = cumprod(x, axis_, reverse_, true, s);
      auto excl = cumprod(x, axis_, reverse_, false, s);
      auto first_zero = logical_and(equal(incl, zero, s), not_equal(excl, zero, s), s);
      auto x_zero = equal(x, zero, s);
      auto safe_x = where(x_zero, array(1, x.dtype()), x, s);
      auto regular = multiply(out, cumsum(divide(t, safe_x, s), axis_, reverse_, inclusive_, s), s);
      auto with_one = cumprod(where(first_zero, array(1, x.dtype()), x, s), axis_, reverse_,
                              inclusive_, s);
      auto t_at_zero = cumsum(where(first_zero, t, zeros_like(t, s), s), axis_, reverse_,
                              inclusive_, s);
      return {where(equal(out, zero, s), multiply(with_one, t_at_zero, s), regular, s)};
    }
    case LogAddExp: {
      // d out_i = sum_window exp(x_j - out_i) t_j, done in log space per sign of t for stability.
      const array& x = primals[0];
      const array& t = tangents[0];
      auto out = logcumsumexp(x, axis_, reverse_, inclusive_, s);
      auto ninf = array(-std::numeric_limits<float>::infinity(), t.dtype());
      auto zero = array(0, t.dtype());
      auto log_abs = log(abs(t, s), s);
      auto part = [&](const array& mask) {
        auto lt = add(x, where(mask, log_abs, ninf, s), s);
        return exp(subtract(logcumsumexp(lt, axis_, reverse_, inclusive_, s), out, s), s);
      };
      auto d = subtract(part(greater(t, zero, s)), part(less(t, zero, s)), s);
      // An empty window (exclusive start) gives -inf - -inf = nan; its derivative is 0.
      return {where(isneginf(out, s), zeros_like(d, s), d, s)};
    }
    default: break;
  }
  throw std::invalid_argument(std::string("[jvp] not implemented for ") + name() +
                              (inclusive_ ? "" : " (exclusive)"));
}


std::pair<std::vector<array>, std::vector<int>> Scan::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  int bax = axes[0];
  int ax = axis_ + ((bax >= 0 && bax <= axis_) ? 1 : 0);
  const array& in = inputs[0];
  Shape shape = in.shape();
  Dtype dt = (type_ == Sum && in.dtype() == bool_) ? int32 : in.dtype();
  return {{array(std::move(shape), dt,
                 std::make_shared<Scan>(stream(), type_, ax, reverse_, inclusive_), {in})},
          {bax}};
}

}  // namespace tessera
