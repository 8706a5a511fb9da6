// Front ends of the binary and ternary elementwise ops (promotion and broadcasting as MLX's
// ops.cpp), the C++ operators, and the derivatives and batching rules of their primitives
// (tessera/primitives/elementwise.h; kernels in backend/cpu/binary.cpp and ternary.cpp).
#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "core/object_pool.h"
#include "tessera/primitives/elementwise.h"
#include "ops/shape.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace detail {
Shape elementwise_shape(const std::vector<array>& inputs) {
  return broadcast_shapes("elementwise", inputs);
}
}  // namespace detail

namespace {

Dtype at_least_float(Dtype t) { return is_floating_point(t) ? t : promote_types(t, float32); }

// Cast both inputs to `dtype` and broadcast them to their common shape (into `shape`); a
// mismatch names `op`.
std::vector<array> prepare(const char* op, const array& a, const array& b, Dtype dtype,
                           StreamOrDevice s, Shape& shape) {
  shape = detail::broadcast_shapes(op, a.shape(), b.shape());
  const array ca = astype(a, dtype, s), cb = astype(b, dtype, s);
  std::vector<array> inputs;
  inputs.reserve(2);
  inputs.push_back(detail::broadcast_for_elementwise(ca, shape, {&cb}, s));
  inputs.push_back(detail::broadcast_for_elementwise(cb, shape, {&ca}, s));
  return inputs;
}

template <typename P, typename... Args>
array make_binary(const char* op, const array& a, const array& b, Dtype in_dtype, Dtype out_dtype,
                  StreamOrDevice s, Args... args) {
  Shape shape;
  auto inputs = prepare(op, a, b, in_dtype, s, shape);
  return array(std::move(shape), out_dtype, detail::make_pooled<P>(to_stream(s), args...),
               std::move(inputs));
}

// An arithmetic op whose output dtype is the promoted input dtype.
template <typename P>
array promoted(const char* op, const array& a, const array& b, StreamOrDevice s) {
  auto dtype = promote_types(a.dtype(), b.dtype());
  return make_binary<P>(op, a, b, dtype, dtype, s);
}

template <typename P, typename... Args>
array comparison(const char* op, const array& a, const array& b, StreamOrDevice s,
                 Args... args) {
  return make_binary<P>(op, a, b, promote_types(a.dtype(), b.dtype()), bool_, s, args...);
}

void reject_complex(const char* op, const array& a, const array& b) {
  if (a.dtype() == complex64 || b.dtype() == complex64) {
    throw std::invalid_argument(std::string("[") + op + "] not supported for complex64 input (got " +
                                dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) + ")");
  }
}

array bitwise(const char* op, const array& a, const array& b, BitwiseBinary::Op kind,
              StreamOrDevice s, bool shift) {
  auto dtype = promote_types(a.dtype(), b.dtype());
  if (is_floating_point(dtype)) {
    throw std::invalid_argument(std::string("[") + op +
                                "] only integer and bool dtypes are supported, got " +
                                dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
  }
  if (shift && dtype == bool_) dtype = uint8;
  return make_binary<BitwiseBinary>(op, a, b, dtype, dtype, s, kind);
}

array scalar_like(double v, const array& like) { return array(v, like.dtype()); }

}  // namespace

// ---- arithmetic ----

array add(const array& a, const array& b, StreamOrDevice s) { return promoted<Add>("add", a, b, s); }
array subtract(const array& a, const array& b, StreamOrDevice s) {
  return promoted<Subtract>("subtract", a, b, s);
}
array multiply(const array& a, const array& b, StreamOrDevice s) {
  return promoted<Multiply>("multiply", a, b, s);
}
array divide(const array& a, const array& b, StreamOrDevice s) {
  auto dtype = at_least_float(promote_types(a.dtype(), b.dtype()));
  return make_binary<Divide>("divide", a, b, dtype, dtype, s);
}
array floor_divide(const array& a, const array& b, StreamOrDevice s) {
  auto dtype = promote_types(a.dtype(), b.dtype());
  if (is_floating_point(dtype)) {
    reject_complex("floor_divide", a, b);
    return floor(divide(a, b, s), s);
  }
  return make_binary<Divide>("floor_divide", a, b, dtype, dtype, s);
}
array remainder(const array& a, const array& b, StreamOrDevice s) {
  reject_complex("remainder", a, b);
  return promoted<Remainder>("remainder", a, b, s);
}
std::vector<array> divmod(const array& a, const array& b, StreamOrDevice s) {
  reject_complex("divmod", a, b);
  auto dtype = promote_types(a.dtype(), b.dtype());
  Shape shape;
  auto inputs = prepare("divmod", a, b, dtype, s, shape);
  return array::make_arrays({shape, shape}, {dtype, dtype},
                            std::make_shared<DivMod>(to_stream(s)), inputs);
}
array power(const array& a, const array& b, StreamOrDevice s) {
  return promoted<Power>("power", a, b, s);
}
array maximum(const array& a, const array& b, StreamOrDevice s) {
  return promoted<Maximum>("maximum", a, b, s);
}
array minimum(const array& a, const array& b, StreamOrDevice s) {
  return promoted<Minimum>("minimum", a, b, s);
}
array arctan2(const array& a, const array& b, StreamOrDevice s) {
  reject_complex("arctan2", a, b);
  auto dtype = at_least_float(promote_types(a.dtype(), b.dtype()));
  return make_binary<ArcTan2>("arctan2", a, b, dtype, dtype, s);
}
array logaddexp(const array& a, const array& b, StreamOrDevice s) {
  auto dtype = at_least_float(promote_types(a.dtype(), b.dtype()));
  return make_binary<LogAddExp>("logaddexp", a, b, dtype, dtype, s);
}

// ---- comparisons and logic ----

array equal(const array& a, const array& b, StreamOrDevice s) {
  return comparison<Equal>("equal", a, b, s, false);
}
array not_equal(const array& a, const array& b, StreamOrDevice s) {
  return comparison<NotEqual>("not_equal", a, b, s);
}
array less(const array& a, const array& b, StreamOrDevice s) {
  return comparison<Less>("less", a, b, s);
}
array less_equal(const array& a, const array& b, StreamOrDevice s) {
  return comparison<LessEqual>("less_equal", a, b, s);
}
array greater(const array& a, const array& b, StreamOrDevice s) {
  return comparison<Greater>("greater", a, b, s);
}
array greater_equal(const array& a, const array& b, StreamOrDevice s) {
  return comparison<GreaterEqual>("greater_equal", a, b, s);
}
array logical_and(const array& a, const array& b, StreamOrDevice s) {
  return make_binary<LogicalAnd>("logical_and", a, b, bool_, bool_, s);
}
array logical_or(const array& a, const array& b, StreamOrDevice s) {
  return make_binary<LogicalOr>("logical_or", a, b, bool_, bool_, s);
}
array logical_xor(const array& a, const array& b, StreamOrDevice s) {
  return not_equal(astype(a, bool_, s), astype(b, bool_, s), s);
}

array bitwise_and(const array& a, const array& b, StreamOrDevice s) {
  return bitwise("bitwise_and", a, b, BitwiseBinary::Op::And, s, false);
}
array bitwise_or(const array& a, const array& b, StreamOrDevice s) {
  return bitwise("bitwise_or", a, b, BitwiseBinary::Op::Or, s, false);
}
array bitwise_xor(const array& a, const array& b, StreamOrDevice s) {
  return bitwise("bitwise_xor", a, b, BitwiseBinary::Op::Xor, s, false);
}
array left_shift(const array& a, const array& b, StreamOrDevice s) {
  return bitwise("left_shift", a, b, BitwiseBinary::Op::LeftShift, s, true);
}
array right_shift(const array& a, const array& b, StreamOrDevice s) {
  return bitwise("right_shift", a, b, BitwiseBinary::Op::RightShift, s, true);
}

array isclose(const array& a, const array& b, double rtol, double atol, bool equal_nan,
              StreamOrDevice s) {
  // |a - b| <= atol + rtol * |b|, computed in the promoted (at least float) dtype.
  auto dtype = at_least_float(promote_types(a.dtype(), b.dtype()));
  auto fa = astype(a, dtype, s);
  auto fb = astype(b, dtype, s);
  auto tol_dtype = dtype == complex64 ? float32 : dtype;
  auto rhs = add(array(atol, tol_dtype), multiply(array(rtol, tol_dtype), abs(fb, s), s), s);
  auto out = less_equal(abs(subtract(fa, fb, s), s), rhs, s);
  // Infinities are close only to an infinity of the same sign.
  auto a_pos = isposinf(fa, s), a_neg = isneginf(fa, s);
  auto b_pos = isposinf(fb, s), b_neg = isneginf(fb, s);
  auto any_inf = logical_or(logical_or(a_pos, a_neg, s), logical_or(b_pos, b_neg, s), s);
  auto both_inf = logical_or(logical_and(a_pos, b_pos, s), logical_and(a_neg, b_neg, s), s);
  out = logical_or(logical_and(out, logical_not(any_inf, s), s), both_inf, s);
  if (equal_nan) out = logical_or(out, logical_and(isnan(fa, s), isnan(fb, s), s), s);
  return out;
}

array allclose(const array& a, const array& b, double rtol, double atol, bool equal_nan,
               StreamOrDevice s) {
  return all(isclose(a, b, rtol, atol, equal_nan, s), false, s);
}

array array_equal(const array& a, const array& b, bool equal_nan, StreamOrDevice s) {
  if (a.shape() != b.shape()) return array(false);
  auto dtype = promote_types(a.dtype(), b.dtype());
  equal_nan = equal_nan && is_floating_point(dtype);
  auto shape = a.shape();
  auto eq = array(std::move(shape), bool_, std::make_shared<Equal>(to_stream(s), equal_nan),
                  {astype(a, dtype, s), astype(b, dtype, s)});
  return all(eq, false, s);
}

// ---- ternary ----

array where(const array& condition, const array& x, const array& y, StreamOrDevice s) {
  auto dtype = promote_types(x.dtype(), y.dtype());
  auto shape = detail::broadcast_shapes(
      "where", detail::broadcast_shapes("where", condition.shape(), x.shape()), y.shape());
  const array c = astype(condition, bool_, s), cx = astype(x, dtype, s), cy = astype(y, dtype, s);
  std::vector<array> inputs{detail::broadcast_for_elementwise(c, shape, {&cx, &cy}, s),
                            detail::broadcast_for_elementwise(cx, shape, {&c, &cy}, s),
                            detail::broadcast_for_elementwise(cy, shape, {&c, &cx}, s)};
  return array(std::move(shape), dtype, std::make_shared<Select>(to_stream(s)), std::move(inputs));
}

// ---- operators ----

array operator+(const array& a, const array& b) { return add(a, b); }
array operator-(const array& a, const array& b) { return subtract(a, b); }
array operator*(const array& a, const array& b) { return multiply(a, b); }
array operator/(const array& a, const array& b) { return divide(a, b); }
array operator%(const array& a, const array& b) { return remainder(a, b); }
array operator==(const array& a, const array& b) { return equal(a, b); }
array operator!=(const array& a, const array& b) { return not_equal(a, b); }
array operator<(const array& a, const array& b) { return less(a, b); }
array operator<=(const array& a, const array& b) { return less_equal(a, b); }
array operator>(const array& a, const array& b) { return greater(a, b); }
array operator>=(const array& a, const array& b) { return greater_equal(a, b); }
array operator&&(const array& a, const array& b) { return logical_and(a, b); }
array operator||(const array& a, const array& b) { return logical_or(a, b); }
array operator&(const array& a, const array& b) { return bitwise_and(a, b); }
array operator|(const array& a, const array& b) { return bitwise_or(a, b); }
array operator^(const array& a, const array& b) { return bitwise_xor(a, b); }
array operator<<(const array& a, const array& b) { return left_shift(a, b); }
array operator>>(const array& a, const array& b) { return right_shift(a, b); }

// ---- batching ----

namespace {

// Give every input the same rank and move each batch axis to one position, `to_ax`; inputs
// without a batch axis (-1) gain a size-1 dim there (and leading ones) and broadcast.
std::pair<std::vector<array>, int> align_batch_axes(const std::vector<array>& inputs,
                                                    const std::vector<int>& axes,
                                                    const Stream& s) {
  bool any = false;
  size_t ndim = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    any = any || axes[i] >= 0;
    ndim = std::max(ndim, inputs[i].ndim() + (axes[i] < 0 ? 1 : 0));
  }
  if (!any) return {inputs, -1};
  // The first batched input fixes the destination axis.
  int to_ax = -1;
  for (size_t i = 0; i < inputs.size() && to_ax < 0; ++i) {
    if (axes[i] >= 0) to_ax = static_cast<int>(ndim - inputs[i].ndim()) + axes[i];
  }
  std::vector<array> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // Size-1 dims come in by expand_dims (which shapeless compile replays on new shapes).
    const int rank = static_cast<int>(inputs[i].ndim());
    if (axes[i] < 0) {
      // Its dims line up with the others' element dims (right-aligned); the batch axis is
      // a size-1 dim at to_ax, wherever that is.
      std::vector<int> ones{to_ax};
      for (int d = 0; d < static_cast<int>(ndim) - 1 - rank; ++d) ones.push_back(d < to_ax ? d : d + 1);
      out.push_back(expand_dims(inputs[i], ones, s));
      continue;
    }
    const int lead = static_cast<int>(ndim) - rank;
    std::vector<int> ones(static_cast<size_t>(lead));
    std::iota(ones.begin(), ones.end(), 0);
    array x = expand_dims(inputs[i], ones, s);
    if (axes[i] >= 0 && lead + axes[i] != to_ax) {
      std::vector<int> perm(ndim);
      std::iota(perm.begin(), perm.end(), 0);
      const int from_ax = lead + axes[i];
      perm.erase(perm.begin() + from_ax);
      perm.insert(perm.begin() + to_ax, from_ax);
      x = transpose(x, perm, s);
    }
    out.push_back(std::move(x));
  }
  return {out, to_ax};
}

}  // namespace

// ---- derivatives ----
// PARTIAL(arg, t) is the derivative along input `arg` applied to t; the ops are linear in t, so
// it serves both vjp (t = cotangent, conjugated around it for complex input: see
// detail::conj_if_complex) and jvp (summed over the tangents given). a, b: the (already
// broadcast) primals; s: the stream.

#define TESSERA_BINARY_RULES(PRIM, FORWARD, PARTIAL)                                              \
  namespace {                                                                                     \
  array PRIM##_partial(const Stream& s, const std::vector<array>& primals, int arg,               \
                       const array& t) {                                                          \
    [[maybe_unused]] const array& a = primals[0];                                                 \
    [[maybe_unused]] const array& b = primals[1];                                                 \
    return PARTIAL;                                                                               \
  }                                                                                               \
  }                                                                                               \
  std::vector<array> PRIM::vjp(const std::vector<array>& primals,                                \
                               const std::vector<array>& cotangents,                             \
                               const std::vector<int>& argnums, const std::vector<array>&) {     \
    std::vector<array> out;                                                                       \
    const array ct = detail::conj_if_complex(cotangents[0], stream());                            \
    for (int arg : argnums) {                                                                     \
      out.push_back(detail::conj_if_complex(PRIM##_partial(stream(), primals, arg, ct), stream())); \
    }                                                                                             \
    return out;                                                                                   \
  }                                                                                               \
  std::vector<array> PRIM::jvp(const std::vector<array>& primals,                                \
                               const std::vector<array>& tangents,                               \
                               const std::vector<int>& argnums) {                                \
    array out = PRIM##_partial(stream(), primals, argnums[0], tangents[0]);                       \
    for (size_t i = 1; i < argnums.size(); ++i) {                                                 \
      out = add(out, PRIM##_partial(stream(), primals, argnums[i], tangents[i]), stream());      \
    }                                                                                             \
    return {out};                                                                                 \
  }                                                                                               \
  std::pair<std::vector<array>, std::vector<int>> PRIM::vmap(const std::vector<array>& inputs,   \
                                                             const std::vector<int>& axes) {     \
    auto [in, to_ax] = align_batch_axes(inputs, axes, stream());                                  \
    [[maybe_unused]] const Stream s = stream();                                                   \
    [[maybe_unused]] const array& a = in[0];                                                      \
    [[maybe_unused]] const array& b = in[1];                                                      \
    return {{FORWARD}, {to_ax}};                                                                  \
  }

TESSERA_BINARY_RULES(Add, add(a, b, s), t)
TESSERA_BINARY_RULES(Subtract, subtract(a, b, s), arg == 0 ? t : negative(t, s))
TESSERA_BINARY_RULES(Multiply, multiply(a, b, s), multiply(t, arg == 0 ? b : a, s))
TESSERA_BINARY_RULES(Divide,
                     is_floating_point(a.dtype()) ? divide(a, b, s) : floor_divide(a, b, s),
                     arg == 0 ? divide(t, b, s)
                              : negative(divide(multiply(t, a, s), square(b, s), s), s))
TESSERA_BINARY_RULES(Remainder, remainder(a, b, s),
                     arg == 0 ? t
                              : negative(multiply(t, floor(divide(a, b, s), s), s), s))
// d/da a^b = b a^(b-1); d/db a^b = a^b log(a), taken as 0 where a^b == 0.
TESSERA_BINARY_RULES(
    Power, power(a, b, s),
    arg == 0
        ? multiply(t, multiply(b, power(a, subtract(b, scalar_like(1.0, b), s), s), s), s)
        : multiply(t,
                   where(power(a, b, s), multiply(log(a, s), power(a, b, s), s),
                         scalar_like(0.0, a), s),
                   s))
TESSERA_BINARY_RULES(Maximum, maximum(a, b, s),
                     multiply(t, arg == 0 ? greater(a, b, s) : less_equal(a, b, s), s))
TESSERA_BINARY_RULES(Minimum, minimum(a, b, s),
                     multiply(t, arg == 0 ? less(a, b, s) : greater_equal(a, b, s), s))
// atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2).
TESSERA_BINARY_RULES(ArcTan2, arctan2(a, b, s),
                     divide(multiply(t, arg == 0 ? b : negative(a, s), s),
                            add(square(a, s), square(b, s), s), s))
TESSERA_BINARY_RULES(LogAddExp, logaddexp(a, b, s),
                     multiply(t, sigmoid(arg == 0 ? subtract(a, b, s) : subtract(b, a, s), s), s))

#undef TESSERA_BINARY_RULES

// Comparisons and logical/bitwise ops have zero derivatives.
#define TESSERA_ZERO_GRAD_BINARY(PRIM, FORWARD)                                                   \
  std::vector<array> PRIM::vjp(const std::vector<array>& primals, const std::vector<array>&,     \
                               const std::vector<int>& argnums, const std::vector<array>&) {     \
    std::vector<array> out;                                                                       \
    for (int arg : argnums) out.push_back(zeros_like(primals[arg], stream()));                    \
    return out;                                                                                   \
  }                                                                                               \
  std::vector<array> PRIM::jvp(const std::vector<array>& primals,                                \
                               const std::vector<array>& tangents, const std::vector<int>&) {    \
    return {zeros(primals[0].shape(), tangents[0].dtype(), stream())};                            \
  }                                                                                               \
  std::pair<std::vector<array>, std::vector<int>> PRIM::vmap(const std::vector<array>& inputs,   \
                                                             const std::vector<int>& axes) {     \
    auto [in, to_ax] = align_batch_axes(inputs, axes, stream());                                  \
    [[maybe_unused]] const Stream s = stream();                                                   \
    [[maybe_unused]] const array& a = in[0];                                                      \
    [[maybe_unused]] const array& b = in[1];                                                      \
    return {{FORWARD}, {to_ax}};                                                                  \
  }

TESSERA_ZERO_GRAD_BINARY(Equal, comparison<Equal>("equal", a, b, s, equal_nan_))
TESSERA_ZERO_GRAD_BINARY(NotEqual, not_equal(a, b, s))
TESSERA_ZERO_GRAD_BINARY(Less, less(a, b, s))
TESSERA_ZERO_GRAD_BINARY(LessEqual, less_equal(a, b, s))
TESSERA_ZERO_GRAD_BINARY(Greater, greater(a, b, s))
TESSERA_ZERO_GRAD_BINARY(GreaterEqual, greater_equal(a, b, s))
TESSERA_ZERO_GRAD_BINARY(LogicalAnd, logical_and(a, b, s))
TESSERA_ZERO_GRAD_BINARY(LogicalOr, logical_or(a, b, s))
TESSERA_ZERO_GRAD_BINARY(BitwiseBinary,
                         make_binary<BitwiseBinary>(name(), a, b, a.dtype(), a.dtype(), s, op_))

#undef TESSERA_ZERO_GRAD_BINARY

bool Equal::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Equal*>(&other);
  return o && o->equal_nan_ == equal_nan_;
}

const char* BitwiseBinary::name() const {
  switch (op_) {
    case Op::And: return "BitwiseAnd";
    case Op::Or: return "BitwiseOr";
    case Op::Xor: return "BitwiseXor";
    case Op::LeftShift: return "LeftShift";
    case Op::RightShift: return "RightShift";
  }
  return "BitwiseBinary";
}
bool BitwiseBinary::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const BitwiseBinary*>(&other);
  return o && o->op_ == op_;
}

std::vector<array> DivMod::vjp(const std::vector<array>& primals, const std::vector<array>&,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> out;
  for (int arg : argnums) out.push_back(zeros_like(primals[arg], stream()));
  return out;
}
std::vector<array> DivMod::jvp(const std::vector<array>& primals, const std::vector<array>&,
                               const std::vector<int>&) {
  auto z = zeros_like(primals[0], stream());
  return {z, z};
}
std::pair<std::vector<array>, std::vector<int>> DivMod::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  auto [in, to_ax] = align_batch_axes(inputs, axes, stream());
  return {divmod(in[0], in[1], stream()), {to_ax, to_ax}};
}

// where: the condition gets no gradient; x gets the cotangent where the condition holds, y
// where it does not.
std::vector<array> Select::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  const Stream s = stream();
  const array& c = primals[0];
  const array& cot = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(zeros_like(c, s));
    } else {
      auto zero = zeros_like(cot, s);
      out.push_back(arg == 1 ? where(c, cot, zero, s) : where(c, zero, cot, s));
    }
  }
  return out;
}
std::vector<array> Select::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  const Stream s = stream();
  const array& c = primals[0];
  std::optional<array> out;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) continue;
    auto zero = zeros_like(tangents[i], s);
    auto term = argnums[i] == 1 ? where(c, tangents[i], zero, s) : where(c, zero, tangents[i], s);
    out = out ? add(*out, term, s) : term;
  }
  if (!out) return {zeros(primals[1].shape(), primals[1].dtype(), s)};
  return {*out};
}
std::pair<std::vector<array>, std::vector<int>> Select::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  auto [in, to_ax] = align_batch_axes(inputs, axes, stream());
  return {{where(in[0], in[1], in[2], stream())}, {to_ax}};
}

}  // namespace tessera
