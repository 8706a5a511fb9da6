// Front ends of the unary elementwise ops (dtype rules as MLX's ops.cpp) and the derivatives
// and batching rules of their primitives (tessera/primitives/elementwise.h; kernels in
// backend/cpu/unary.cpp).
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/object_pool.h"
#include "tessera/primitives/elementwise.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

// The dtype a floating op computes in: inexact dtypes stay, others become float32.
Dtype at_least_float(Dtype t) { return is_floating_point(t) ? t : promote_types(t, float32); }

template <typename P, typename... Args>
array make_unary(const array& in, Dtype out_dtype, StreamOrDevice s, Args... args) {
  auto shape = in.shape();
  return array(std::move(shape), out_dtype, detail::make_pooled<P>(to_stream(s), args...), {in});
}

void reject_complex(const char* op, const array& a) {
  if (a.dtype() == complex64) {
    throw std::invalid_argument(std::string("[") + op + "] not supported for complex64 input");
  }
}

// A floating op: integer and bool inputs are cast to float32 first.
template <typename P, typename... Args>
array float_unary(const array& a, StreamOrDevice s, Args... args) {
  auto dtype = at_least_float(a.dtype());
  return make_unary<P>(astype(a, dtype, s), dtype, s, args...);
}

array scalar_like(double v, const array& like) { return array(v, like.dtype()); }

}  // namespace

// ---- front ends ----

array abs(const array& a, StreamOrDevice s) {
  return make_unary<Abs>(a, a.dtype() == complex64 ? float32 : a.dtype(), s);
}

array positive(const array& a, StreamOrDevice) { return a; }

array negative(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_) {
    throw std::invalid_argument("[negative] not supported for bool; use logical_not instead");
  }
  return make_unary<Negative>(a, a.dtype(), s);
}
array operator-(const array& a) { return negative(a); }

array sign(const array& a, StreamOrDevice s) { return make_unary<Sign>(a, a.dtype(), s); }

array reciprocal(const array& a, StreamOrDevice s) {
  auto dtype = at_least_float(a.dtype());
  return divide(array(1.0f, dtype), a, s);
}

array square(const array& a, StreamOrDevice s) { return make_unary<Square>(a, a.dtype(), s); }
array sqrt(const array& a, StreamOrDevice s) { return float_unary<Sqrt>(a, s, false); }
array rsqrt(const array& a, StreamOrDevice s) { return float_unary<Sqrt>(a, s, true); }
array exp(const array& a, StreamOrDevice s) { return float_unary<Exp>(a, s); }
array expm1(const array& a, StreamOrDevice s) {
  reject_complex("expm1", a);
  return float_unary<Expm1>(a, s);
}
array log(const array& a, StreamOrDevice s) { return float_unary<Log>(a, s, Log::Base::e); }
array log2(const array& a, StreamOrDevice s) { return float_unary<Log>(a, s, Log::Base::two); }
array log10(const array& a, StreamOrDevice s) { return float_unary<Log>(a, s, Log::Base::ten); }
array log1p(const array& a, StreamOrDevice s) { return float_unary<Log1p>(a, s); }
array sin(const array& a, StreamOrDevice s) { return float_unary<Sin>(a, s); }
array cos(const array& a, StreamOrDevice s) { return float_unary<Cos>(a, s); }
array tan(const array& a, StreamOrDevice s) { return float_unary<Tan>(a, s); }
array arcsin(const array& a, StreamOrDevice s) { return float_unary<ArcSin>(a, s); }
array arccos(const array& a, StreamOrDevice s) { return float_unary<ArcCos>(a, s); }
array arctan(const array& a, StreamOrDevice s) { return float_unary<ArcTan>(a, s); }
array sinh(const array& a, StreamOrDevice s) { return float_unary<Sinh>(a, s); }
array cosh(const array& a, StreamOrDevice s) { return float_unary<Cosh>(a, s); }
array tanh(const array& a, StreamOrDevice s) { return float_unary<Tanh>(a, s); }
array arcsinh(const array& a, StreamOrDevice s) { return float_unary<ArcSinh>(a, s); }
array arccosh(const array& a, StreamOrDevice s) { return float_unary<ArcCosh>(a, s); }
array arctanh(const array& a, StreamOrDevice s) { return float_unary<ArcTanh>(a, s); }
array sigmoid(const array& a, StreamOrDevice s) {
  reject_complex("sigmoid", a);
  return float_unary<Sigmoid>(a, s);
}
array erf(const array& a, StreamOrDevice s) {
  reject_complex("erf", a);
  return float_unary<Erf>(a, s);
}
array erfinv(const array& a, StreamOrDevice s) {
  reject_complex("erfinv", a);
  return float_unary<ErfInv>(a, s);
}

array degrees(const array& a, StreamOrDevice s) {
  return multiply(a, array(180.0 / M_PI, at_least_float(a.dtype())), s);
}
array radians(const array& a, StreamOrDevice s) {
  return multiply(a, array(M_PI / 180.0, at_least_float(a.dtype())), s);
}

array floor(const array& a, StreamOrDevice s) {
  reject_complex("floor", a);
  return make_unary<Floor>(a, a.dtype(), s);
}
array ceil(const array& a, StreamOrDevice s) {
  reject_complex("ceil", a);
  return make_unary<Ceil>(a, a.dtype(), s);
}
array trunc(const array& a, StreamOrDevice s) {
  reject_complex("trunc", a);
  if (!is_floating_point(a.dtype())) return a;
  return where(less(a, array(0, a.dtype()), s), ceil(a, s), floor(a, s), s);
}

array round(const array& a, int decimals, StreamOrDevice s) {
  if (is_complex(a.dtype())) {  // the real and imaginary parts on their own, as MLX
    const array im = multiply(round(imag(a, s), decimals, s), array(complex64_t(0.0f, 1.0f)), s);
    return add(astype(round(real(a, s), decimals, s), complex64, s), im, s);
  }
  if (decimals == 0) return make_unary<Round>(a, a.dtype(), s);
  auto dtype = at_least_float(a.dtype());
  const double scale = std::pow(10.0, decimals);
  auto r = multiply(a, array(scale, dtype), s);
  r = round(r, 0, s);
  r = multiply(r, array(1.0 / scale, dtype), s);
  return astype(r, a.dtype(), s);
}

array logical_not(const array& a, StreamOrDevice s) {
  return make_unary<LogicalNot>(astype(a, bool_, s), bool_, s);
}

array bitwise_invert(const array& a, StreamOrDevice s) {
  if (is_floating_point(a.dtype())) {
    throw std::invalid_argument(
        "[bitwise_invert] only integer and bool dtypes are supported, got " +
        dtype_name(a.dtype()));
  }
  if (a.dtype() == bool_) return logical_not(a, s);
  return make_unary<BitwiseInvert>(a, a.dtype(), s);
}
array operator~(const array& a) { return bitwise_invert(a); }

array isnan(const array& a, StreamOrDevice s) {
  if (!is_floating_point(a.dtype())) return full(a.shape(), false, bool_, s);
  return not_equal(a, a, s);
}

array isposinf(const array& a, StreamOrDevice s) {
  if (!is_floating_point(a.dtype())) return full(a.shape(), false, bool_, s);
  return equal(a, array(std::numeric_limits<float>::infinity(), a.dtype()), s);
}

array isneginf(const array& a, StreamOrDevice s) {
  if (!is_floating_point(a.dtype())) return full(a.shape(), false, bool_, s);
  return equal(a, array(-std::numeric_limits<float>::infinity(), a.dtype()), s);
}

array isinf(const array& a, StreamOrDevice s) {
  if (!is_floating_point(a.dtype())) return full(a.shape(), false, bool_, s);
  if (a.dtype() == complex64) return logical_or(isinf(real(a, s), s), isinf(imag(a, s), s), s);
  return logical_or(isposinf(a, s), isneginf(a, s), s);
}

array isfinite(const array& a, StreamOrDevice s) {
  if (!is_floating_point(a.dtype())) return full(a.shape(), true, bool_, s);
  return logical_not(logical_or(isinf(a, s), isnan(a, s), s), s);
}

array nan_to_num(const array& a, float nan, const std::optional<float> posinf,
                 const std::optional<float> neginf, StreamOrDevice s) {
  const Dtype dtype = a.dtype();
  if (!is_floating_point(dtype)) return a;
  double big = 0;
  switch (dtype.val()) {
    case Dtype::Val::float16: big = 65504.0; break;
    case Dtype::Val::bfloat16: big = static_cast<float>(bfloat16_t::from_bits(0x7f7f)); break;
    case Dtype::Val::float32: big = std::numeric_limits<float>::max(); break;
    case Dtype::Val::float64: big = std::numeric_limits<double>::max(); break;
    default:
      throw std::invalid_argument("[nan_to_num] not supported for dtype " + dtype_name(dtype));
  }
  const double hi = posinf ? static_cast<double>(*posinf) : big;
  const double lo = neginf ? static_cast<double>(*neginf) : -big;
  auto out = where(isnan(a, s), array(static_cast<double>(nan), dtype), a, s);
  out = where(isposinf(a, s), array(hi, dtype), out, s);
  return where(isneginf(a, s), array(lo, dtype), out, s);
}

array clip(const array& a, const std::optional<array>& a_min, const std::optional<array>& a_max,
           StreamOrDevice s) {
  if (!a_min && !a_max) {
    throw std::invalid_argument("[clip] at least one of a_min and a_max must be given");
  }
  std::vector<array> all{a};  // checked under clip's name, not maximum's
  if (a_min) all.push_back(*a_min);
  if (a_max) all.push_back(*a_max);
  detail::broadcast_shapes("clip", all);
  array out = a;
  if (a_min) out = maximum(out, *a_min, s);
  if (a_max) out = minimum(out, *a_max, s);
  return out;
}

array stop_gradient(const array& a, StreamOrDevice s) {
  return make_unary<StopGradient>(a, a.dtype(), s);
}

array conjugate(const array& a, StreamOrDevice s) {
  if (a.dtype() != complex64) return a;
  return make_unary<Conjugate>(a, complex64, s);
}

array real(const array& a, StreamOrDevice s) {
  if (a.dtype() != complex64) return a;
  return make_unary<Real>(a, float32, s);
}

array imag(const array& a, StreamOrDevice s) {
  if (a.dtype() != complex64) return zeros_like(a, s);
  return make_unary<Imag>(a, float32, s);
}

// ---- derivatives and batching ----
// x: the primal input, t: its tangent, s: the stream. These functions are linear in t, so the
// vjp is the jvp applied to the cotangent (conjugated around it for complex input, see
// detail::conj_if_complex).

namespace {

template <class P>
std::vector<array> holomorphic_vjp(P& p, const std::vector<array>& primals,
                                   const std::vector<array>& cotangents,
                                   const std::vector<int>& argnums) {
  const Stream s = p.stream();
  auto t = p.jvp(primals, {detail::conj_if_complex(cotangents[0], s)}, argnums);
  return {detail::conj_if_complex(t[0], s)};
}

}  // namespace

#define TESSERA_UNARY_RULES(PRIM, FORWARD, DERIV)                                                 \
  std::vector<array> PRIM::jvp(const std::vector<array>& primals,                                \
                               const std::vector<array>& tangents, const std::vector<int>&) {    \
    [[maybe_unused]] const array& x = primals[0];                                                 \
    [[maybe_unused]] const array& t = tangents[0];                                                \
    [[maybe_unused]] const Stream s = stream();                                                   \
    return {DERIV};                                                                               \
  }                                                                                               \
  std::vector<array> PRIM::vjp(const std::vector<array>& primals,                                \
                               const std::vector<array>& cotangents,                             \
                               const std::vector<int>& argnums, const std::vector<array>&) {     \
    return holomorphic_vjp(*this, primals, cotangents, argnums);                                  \
  }                                                                                               \
  std::pair<std::vector<array>, std::vector<int>> PRIM::vmap(const std::vector<array>& inputs,   \
                                                             const std::vector<int>& axes) {     \
    const array& x = inputs[0];                                                                   \
    [[maybe_unused]] const Stream s = stream();                                                   \
    return {{FORWARD}, axes};                                                                     \
  }

TESSERA_UNARY_RULES(Negative, negative(x, s), negative(t, s))
TESSERA_UNARY_RULES(Sign, sign(x, s), zeros_like(x, s))
TESSERA_UNARY_RULES(Square, square(x, s), multiply(t, multiply(scalar_like(2.0, x), x, s), s))
TESSERA_UNARY_RULES(Exp, exp(x, s), multiply(t, exp(x, s), s))
TESSERA_UNARY_RULES(Expm1, expm1(x, s), multiply(t, exp(x, s), s))
TESSERA_UNARY_RULES(Log1p, log1p(x, s), divide(t, add(x, scalar_like(1.0, x), s), s))
TESSERA_UNARY_RULES(Sin, sin(x, s), multiply(t, cos(x, s), s))
TESSERA_UNARY_RULES(Cos, cos(x, s), negative(multiply(t, sin(x, s), s), s))
TESSERA_UNARY_RULES(Tan, tan(x, s), divide(t, square(cos(x, s), s), s))
TESSERA_UNARY_RULES(ArcSin, arcsin(x, s),
                    multiply(t, rsqrt(subtract(scalar_like(1.0, x), square(x, s), s), s), s))
TESSERA_UNARY_RULES(ArcCos, arccos(x, s),
                    negative(multiply(t, rsqrt(subtract(scalar_like(1.0, x), square(x, s), s), s),
                                      s),
                             s))
TESSERA_UNARY_RULES(ArcTan, arctan(x, s),
                    divide(t, add(scalar_like(1.0, x), square(x, s), s), s))
TESSERA_UNARY_RULES(Sinh, sinh(x, s), multiply(t, cosh(x, s), s))
TESSERA_UNARY_RULES(Cosh, cosh(x, s), multiply(t, sinh(x, s), s))
TESSERA_UNARY_RULES(Tanh, tanh(x, s),
                    multiply(t, subtract(scalar_like(1.0, x), square(tanh(x, s), s), s), s))
TESSERA_UNARY_RULES(ArcSinh, arcsinh(x, s),
                    multiply(t, rsqrt(add(square(x, s), scalar_like(1.0, x), s), s), s))
TESSERA_UNARY_RULES(ArcCosh, arccosh(x, s),
                    multiply(t, rsqrt(subtract(square(x, s), scalar_like(1.0, x), s), s), s))
TESSERA_UNARY_RULES(ArcTanh, arctanh(x, s),
                    divide(t, subtract(scalar_like(1.0, x), square(x, s), s), s))
TESSERA_UNARY_RULES(Sigmoid, sigmoid(x, s),
                    multiply(t,
                             multiply(sigmoid(x, s),
                                      subtract(scalar_like(1.0, x), sigmoid(x, s), s), s),
                             s))
TESSERA_UNARY_RULES(Erf, erf(x, s),
                    multiply(t,
                             multiply(scalar_like(2.0 / std::sqrt(M_PI), x),
                                      exp(negative(square(x, s), s), s), s),
                             s))
TESSERA_UNARY_RULES(ErfInv, erfinv(x, s),
                    multiply(t,
                             multiply(scalar_like(std::sqrt(M_PI) / 2.0, x),
                                      exp(square(erfinv(x, s), s), s), s),
                             s))
TESSERA_UNARY_RULES(Floor, floor(x, s), zeros_like(x, s))
TESSERA_UNARY_RULES(Ceil, ceil(x, s), zeros_like(x, s))
TESSERA_UNARY_RULES(Round, round(x, 0, s), zeros_like(x, s))
TESSERA_UNARY_RULES(LogicalNot, logical_not(x, s), zeros_like(x, s))
TESSERA_UNARY_RULES(BitwiseInvert, bitwise_invert(x, s), zeros_like(x, s))
TESSERA_UNARY_RULES(StopGradient, stop_gradient(x, s), zeros_like(x, s))
TESSERA_UNARY_RULES(Conjugate, conjugate(x, s), conjugate(t, s))

#undef TESSERA_UNARY_RULES

// |z| is real: d|z| = Re(conj(sign(z)) t), and the cotangent goes back as cotangent * sign(z).
std::vector<array> Abs::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  const Stream s = stream();
  auto d = sign(primals[0], s);
  if (primals[0].dtype() == complex64) return {real(multiply(tangents[0], conjugate(d, s), s), s)};
  return {multiply(tangents[0], d, s)};
}
std::vector<array> Abs::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                            const std::vector<int>&, const std::vector<array>&) {
  return {multiply(cotangents[0], sign(primals[0], stream()), stream())};
}
std::pair<std::vector<array>, std::vector<int>> Abs::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  return {{abs(inputs[0], stream())}, axes};
}

// sqrt: t / (2 sqrt(x)); rsqrt: -t / (2 x sqrt(x)).
std::vector<array> Sqrt::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  const array& x = primals[0];
  const array& t = tangents[0];
  const Stream s = stream();
  if (recip_) {
    auto d = multiply(scalar_like(-0.5, x), divide(rsqrt(x, s), x, s), s);
    return {multiply(t, d, s)};
  }
  return {divide(t, multiply(scalar_like(2.0, x), sqrt(x, s), s), s)};
}
std::vector<array> Sqrt::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>& argnums,
                             const std::vector<array>&) {
  return holomorphic_vjp(*this, primals, cotangents, argnums);
}
std::pair<std::vector<array>, std::vector<int>> Sqrt::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  return {{recip_ ? rsqrt(inputs[0], stream()) : sqrt(inputs[0], stream())}, axes};
}
bool Sqrt::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Sqrt*>(&other);
  return o && o->recip_ == recip_;
}

// d/dx log_b(x) = 1 / (x ln b).
std::vector<array> Log::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  const array& x = primals[0];
  const Stream s = stream();
  auto d = x;
  if (base_ == Base::two) d = multiply(x, scalar_like(M_LN2, x), s);
  if (base_ == Base::ten) d = multiply(x, scalar_like(M_LN10, x), s);
  return {divide(tangents[0], d, s)};
}
std::vector<array> Log::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents, const std::vector<int>& argnums,
                            const std::vector<array>&) {
  return holomorphic_vjp(*this, primals, cotangents, argnums);
}
std::pair<std::vector<array>, std::vector<int>> Log::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  return {{make_unary<Log>(inputs[0], inputs[0].dtype(), stream(), base_)}, axes};
}
const char* Log::name() const {
  switch (base_) {
    case Base::two: return "Log2";
    case Base::ten: return "Log10";
    default: return "Log";
  }
}
bool Log::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Log*>(&other);
  return o && o->base_ == base_;
}

// Real and Imag map complex64 to float32: the cotangent goes back as a complex number.
std::vector<array> Real::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {real(tangents[0], stream())};
}
std::vector<array> Real::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>&) {
  return {astype(cotangents[0], primals[0].dtype(), stream())};
}
std::pair<std::vector<array>, std::vector<int>> Real::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  return {{real(inputs[0], stream())}, axes};
}

std::vector<array> Imag::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {imag(tangents[0], stream())};
}
std::vector<array> Imag::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>&) {
  return {multiply(array(complex64_t{0.0f, 1.0f}, primals[0].dtype()), cotangents[0], stream())};
}
std::pair<std::vector<array>, std::vector<int>> Imag::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  return {{imag(inputs[0], stream())}, axes};
}

}  // namespace tessera
