"""tessera.core's array ops (python/src/ops.cpp) checked against NumPy: elementwise, shape,
creation, indexing, reductions, scans, sorting and matrix products, with the edges (0-d, empty,
non-contiguous, dtypes, negative axes) and the errors bad input raises."""

import math

import numpy as np
import pytest

import tessera.core as mx

RNG = np.random.default_rng(1234)

NP_OF = {mx.bool_: np.bool_, mx.uint8: np.uint8, mx.uint16: np.uint16, mx.uint32: np.uint32,
         mx.uint64: np.uint64, mx.int8: np.int8, mx.int16: np.int16, mx.int32: np.int32,
         mx.int64: np.int64, mx.float16: np.float16, mx.float32: np.float32,
         mx.float64: np.float64, mx.complex64: np.complex64}
MX_OF = {np.dtype(v): k for k, v in NP_OF.items()}
TOL = {np.float16: dict(rtol=5e-3, atol=5e-3), np.float32: dict(rtol=2e-5, atol=1e-6),
       np.complex64: dict(rtol=2e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def randint(lo, hi, shape, dtype=np.int32):
    return RNG.integers(lo, hi, shape).astype(dtype)


def check(out, ref, dtype=None, **tol):
    """`out` (a tessera array) equals NumPy's `ref`: shape, dtype (when given) and values."""
    got = np.array(out)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if dtype is not None:
        assert out.dtype == dtype, (out.dtype, dtype)
    if ref.dtype.kind in "fc" or got.dtype.kind in "fc":
        t = dict(TOL.get(got.dtype.type, TOL[np.float32]))
        t.update(tol)
        np.testing.assert_allclose(got.astype(np.complex128 if got.dtype.kind == "c" else
                                              np.float64), ref, equal_nan=True, **t)
    else:
        np.testing.assert_array_equal(got, ref)


# ============================================================== elementwise, unary

def _erfinv_ref(y):
    # Newton on math.erf, from a float64 start; independent of tessera.
    def one(v):
        if v <= -1:
            return -math.inf if v == -1 else math.nan
        if v >= 1:
            return math.inf if v == 1 else math.nan
        x = 0.0
        for _ in range(100):
            x -= (math.erf(x) - v) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
        return x
    return np.vectorize(one)(y.astype(np.float64))


# name, numpy reference, input domain (lo, hi)
UNARY_FLOAT = [
    ("abs", np.abs, (-3, 3)), ("sign", np.sign, (-3, 3)), ("negative", np.negative, (-3, 3)),
    ("positive", np.positive, (-3, 3)), ("square", np.square, (-3, 3)),
    ("sqrt", np.sqrt, (0, 5)), ("rsqrt", lambda x: 1 / np.sqrt(x), (0.1, 5)),
    ("reciprocal", np.reciprocal, (0.5, 4)), ("exp", np.exp, (-4, 4)),
    ("expm1", np.expm1, (-1e-3, 1e-3)), ("erf", np.vectorize(math.erf), (-3, 3)),
    ("erfinv", _erfinv_ref, (-0.99, 0.99)), ("sin", np.sin, (-6, 6)), ("cos", np.cos, (-6, 6)),
    ("tan", np.tan, (-1.2, 1.2)), ("arcsin", np.arcsin, (-1, 1)), ("arccos", np.arccos, (-1, 1)),
    ("arctan", np.arctan, (-5, 5)), ("sinh", np.sinh, (-3, 3)), ("cosh", np.cosh, (-3, 3)),
    ("tanh", np.tanh, (-4, 4)), ("arcsinh", np.arcsinh, (-5, 5)),
    ("arccosh", np.arccosh, (1, 5)), ("arctanh", np.arctanh, (-0.95, 0.95)),
    ("degrees", np.degrees, (-4, 4)), ("radians", np.radians, (-200, 200)),
    ("log", np.log, (0.01, 10)), ("log2", np.log2, (0.01, 10)), ("log10", np.log10, (0.01, 10)),
    ("log1p", np.log1p, (-1e-3, 1e-3)), ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), (-8, 8)),
    ("floor", np.floor, (-4, 4)), ("ceil", np.ceil, (-4, 4)), ("trunc", np.trunc, (-4, 4)),
    ("round", np.round, (-4, 4)), ("stop_gradient", lambda x: x, (-3, 3)),
    ("conj", np.conj, (-3, 3)), ("conjugate", np.conjugate, (-3, 3)),
    ("real", np.real, (-3, 3)), ("imag", np.imag, (-3, 3)),
]


@pytest.mark.parametrize("name,ref,dom", UNARY_FLOAT, ids=[u[0] for u in UNARY_FLOAT])
def test_unary_float32_matches_numpy(name, ref, dom):
    x = RNG.uniform(*dom, (3, 5)).astype(np.float32)
    out = getattr(mx, name)(mx.array(x))
    check(out, ref(x.astype(np.float64)), mx.float32, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("name,ref,dom", [u for u in UNARY_FLOAT if u[0] in
                                          ("exp", "sin", "sqrt", "tanh", "log", "sigmoid",
                                           "abs", "floor", "erf")])
def test_unary_float16_keeps_dtype_within_half_precision(name, ref, dom):
    x = RNG.uniform(*dom, (4, 3)).astype(np.float16)
    out = getattr(mx, name)(mx.array(x))
    check(out, ref(x.astype(np.float64)), mx.float16, rtol=3e-3, atol=3e-3)


@pytest.mark.parametrize("name", ["exp", "sqrt", "sin", "log1p", "abs", "square", "floor"])
def test_unary_on_non_contiguous_inputs(name):
    base = RNG.uniform(0.1, 3, (6, 4)).astype(np.float32)
    ref = getattr(np, name)
    # a transposed NumPy view, a strided NumPy view, and tessera's own views
    check(getattr(mx, name)(mx.array(base.T)), ref(base.T.astype(np.float64)))
    check(getattr(mx, name)(mx.array(base[::2, ::-1])), ref(base[::2, ::-1].astype(np.float64)))
    a = mx.array(base)
    check(getattr(mx, name)(a.T), ref(base.T.astype(np.float64)))
    check(getattr(mx, name)(a[::2]), ref(base[::2].astype(np.float64)))
    check(getattr(mx, name)(mx.broadcast_to(a[:1], (3, 4))),
          ref(np.broadcast_to(base[:1], (3, 4)).astype(np.float64)))


@pytest.mark.parametrize("name", ["exp", "abs", "negative", "sqrt", "sign"])
def test_unary_on_0d_and_empty_arrays(name):
    ref = getattr(np, name)
    out = getattr(mx, name)(mx.array(np.float32(2.0)))
    assert out.shape == ()
    check(out, ref(np.float64(2.0)))
    out = getattr(mx, name)(mx.zeros((0, 3)))
    assert out.shape == (0, 3) and out.dtype == mx.float32


def test_unary_accepts_python_scalars():
    check(mx.exp(1.0), np.exp(np.float32(1.0)), mx.float32)
    check(mx.abs(-3), np.int32(3), mx.int32)
    check(mx.round(2.5), 2.0)


@pytest.mark.parametrize("dt", [mx.int8, mx.int32, mx.int64, mx.uint8])
@pytest.mark.parametrize("name", ["abs", "sign", "negative", "positive", "square", "floor",
                                  "ceil", "trunc", "round"])
def test_integer_preserving_unary_ops_keep_integer_dtype(name, dt):
    npdt = NP_OF[dt]
    lo = 0 if np.issubdtype(npdt, np.unsignedinteger) else -9
    x = randint(lo, 10, (7,), npdt)
    ref = {"positive": np.positive, "round": np.round}.get(name, getattr(np, name))
    with np.errstate(over="ignore"):
        check(getattr(mx, name)(mx.array(x)), ref(x).astype(npdt), dt)


@pytest.mark.parametrize("dt", [mx.int32, mx.uint8, mx.bool_])
def test_integer_and_bool_inputs_to_float_unary_ops_give_float32(dt):
    x = np.array([0, 1, 1, 0, 1]).astype(NP_OF[dt])
    check(mx.exp(mx.array(x)), np.exp(x.astype(np.float64)), mx.float32)
    check(mx.sqrt(mx.array(x)), np.sqrt(x.astype(np.float64)), mx.float32)


def test_unary_special_values_follow_ieee():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0], np.float32)
    with np.errstate(all="ignore"):
        check(mx.log(mx.array(x)), np.log(x))
        check(mx.sqrt(mx.array(x)), np.sqrt(x))
        check(mx.exp(mx.array(x)), np.exp(x))
        check(mx.reciprocal(mx.array(x)), np.reciprocal(x))
        check(mx.sigmoid(mx.array(np.array([-100, 100], np.float32))), [0.0, 1.0])
        check(mx.sign(mx.array(x)), np.sign(x))


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite", "isposinf", "isneginf"])
def test_float_predicates_find_nan_and_infinities(name):
    x = np.array([[0.0, np.nan, np.inf], [-np.inf, -1.5, 6e4]], np.float32)
    check(getattr(mx, name)(mx.array(x)), getattr(np, name)(x), mx.bool_)
    check(getattr(mx, name)(mx.array(x.astype(np.float16))), getattr(np, name)(x.astype(
        np.float16)), mx.bool_)
    # integers are always finite
    ints = np.array([1, -2, 0], np.int32)
    check(getattr(mx, name)(mx.array(ints)), getattr(np, name)(ints), mx.bool_)


@pytest.mark.parametrize("name,ref", [("abs", np.abs), ("conj", np.conj), ("real", np.real),
                                      ("imag", np.imag), ("negative", np.negative),
                                      ("exp", np.exp), ("square", np.square),
                                      ("sqrt", np.sqrt), ("log", np.log), ("sin", np.sin),
                                      ("cos", np.cos)])
def test_unary_complex64_matches_numpy(name, ref):
    x = (randn(4, 3) + 1j * randn(4, 3)).astype(np.complex64)
    out = getattr(mx, name)(mx.array(x))
    r = ref(x.astype(np.complex128))
    check(out, r, MX_OF[np.asarray(ref(x)).dtype], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", [mx.bool_, mx.int8, mx.uint8, mx.int32, mx.int64])
def test_bitwise_invert_matches_numpy(dt):
    x = np.array([0, 1, 5, 127], np.int64).astype(NP_OF[dt])
    check(mx.bitwise_invert(mx.array(x)), np.invert(x), dt)


def test_bitwise_invert_rejects_floats():
    with pytest.raises(ValueError, match="integer|bool"):
        mx.bitwise_invert(mx.array([1.0]))


@pytest.mark.parametrize("dt", [mx.bool_, mx.int32, mx.float32])
def test_logical_not_gives_bool(dt):
    x = np.array([0, 1, 2, 0]).astype(NP_OF[dt])
    check(mx.logical_not(mx.array(x)), np.logical_not(x), mx.bool_)


@pytest.mark.parametrize("decimals", [0, 1, 2, -1])
def test_round_to_decimals_halves_to_even(decimals):
    # values whose float32 scaling by 10**decimals is exact at the halves (so no double rounding)
    x = np.array([0.5, 1.5, 2.5, -0.5, 12.3456, -7.25, 155.0, 0.375], np.float32)
    check(mx.round(mx.array(x), decimals), np.round(x.astype(np.float64), decimals), atol=1e-5)


def test_round_integer_input_with_negative_decimals():
    x = np.array([14, 15, 16, 25, -35], np.int32)
    check(mx.round(mx.array(x), -1), np.round(x, -1), mx.int32)


@pytest.mark.parametrize("kw", [{}, {"nan": 1.0}, {"nan": -2.0, "posinf": 7.0, "neginf": -7.0}])
@pytest.mark.parametrize("npdt", [np.float32, np.float16])
def test_nan_to_num_matches_numpy(kw, npdt):
    x = np.array([np.nan, np.inf, -np.inf, 1.25, -0.0], npdt)
    check(mx.nan_to_num(mx.array(x), **kw), np.nan_to_num(x, **kw), MX_OF[np.dtype(npdt)])


@pytest.mark.parametrize("lo,hi", [(-0.5, 0.5), (None, 0.2), (-0.1, None),
                                   ("array", "array")])
def test_clip_matches_numpy(lo, hi):
    x = randn(4, 5)
    if lo == "array":
        lo, hi = randn(5) - 1, randn(4, 1) + 1
        out = mx.clip(mx.array(x), mx.array(lo), mx.array(hi))
    else:
        out = mx.clip(mx.array(x), lo, hi)
    check(out, np.clip(x, lo, hi), mx.float32)


def test_clip_keeps_integer_dtype_with_scalar_bounds():
    x = np.arange(-5, 5, dtype=np.int8)
    check(mx.clip(mx.array(x), -2, 3), np.clip(x, -2, 3), mx.int8)


def test_clip_needs_a_bound():
    with pytest.raises(ValueError, match="min|max|bound"):
        mx.clip(mx.array([1.0]), None, None)


# ============================================================== elementwise, binary

BINARY_FLOAT = [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
    ("divide", np.divide), ("power", None), ("minimum", np.minimum), ("maximum", np.maximum),
    ("logaddexp", np.logaddexp), ("arctan2", np.arctan2), ("floor_divide", np.floor_divide),
    ("remainder", np.remainder), ("pow", None), ("atan2", np.arctan2),
]


@pytest.mark.parametrize("name,ref", BINARY_FLOAT, ids=[b[0] for b in BINARY_FLOAT])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)),
                                    ((), (3,)), ((0, 4), (1, 4))],
                         ids=["same", "outer", "trailing", "0d", "empty"])
def test_binary_float32_broadcasts_like_numpy(name, ref, shapes):
    a = randn(*shapes[0])
    b = randn(*shapes[1])
    if name in ("power", "pow"):
        a, ref = np.abs(a) + 0.1, np.power
    if name in ("divide", "floor_divide", "remainder"):
        b = np.where(np.abs(b) < 0.2, 0.5, b).astype(np.float32)
    out = getattr(mx, name)(mx.array(a), mx.array(b))
    check(out, ref(a.astype(np.float64), b.astype(np.float64)), mx.float32, rtol=1e-5,
          atol=1e-5)


def test_binary_non_contiguous_operands():
    a = randn(5, 6)
    b = randn(6, 5)
    check(mx.add(mx.array(a).T, mx.array(b)), a.T + b)
    check(mx.multiply(mx.array(a[::2, 1::2]), mx.array(b.T[::2, ::2])),
          a[::2, 1::2] * b.T[::2, ::2])
    x = mx.array(a)
    check(mx.subtract(x[:, ::-1], x[::-1]), a[:, ::-1] - a[::-1])


@pytest.mark.parametrize("npdt", [np.int8, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "floor_divide", "remainder",
                                  "minimum", "maximum"])
def test_binary_integer_ops_wrap_and_keep_dtype(name, npdt):
    signed = np.issubdtype(npdt, np.signedinteger)
    a = randint(-20 if signed else 0, 20, (12,), npdt)
    b = randint(-6 if signed else 1, 7, (12,), npdt)
    if name in ("floor_divide", "remainder"):
        b[b == 0] = 3
    with np.errstate(over="ignore"):
        ref = getattr(np, name)(a, b)
    check(getattr(mx, name)(mx.array(a), mx.array(b)), ref, MX_OF[np.dtype(npdt)])


def test_floor_divide_and_remainder_follow_python_signs():
    a = np.array([7, -7, 7, -7, 0], np.int32)
    b = np.array([2, 2, -2, -2, 3], np.int32)
    check(mx.floor_divide(mx.array(a), mx.array(b)), a // b)
    check(mx.remainder(mx.array(a), mx.array(b)), a % b)
    af, bf = a.astype(np.float32) + 0.5, b.astype(np.float32)
    check(mx.floor_divide(mx.array(af), mx.array(bf)), af // bf)
    check(mx.remainder(mx.array(af), mx.array(bf)), af % bf)


@pytest.mark.parametrize("npdt", [np.int32, np.float32])
def test_divmod_returns_floor_quotient_and_remainder(npdt):
    a = np.array([[7, -7], [9, -1]]).astype(npdt)
    b = np.array([2, -3]).astype(npdt)
    q, r = mx.divmod(mx.array(a), mx.array(b))
    check(q, a // b, MX_OF[np.dtype(npdt)])
    check(r, a % b, MX_OF[np.dtype(npdt)])


def test_integer_division_gives_float32():
    a = np.array([1, 2, 3], np.int32)
    b = np.array([2, 4, 7], np.int32)
    check(mx.divide(mx.array(a), mx.array(b)), a / b, mx.float32)


def test_integer_power_stays_integer():
    a = np.array([2, 3, -2, 5], np.int32)
    b = np.array([3, 0, 3, 2], np.int32)
    check(mx.power(mx.array(a), mx.array(b)), a ** b, mx.int32)


@pytest.mark.parametrize("a,b,dtype", [
    (np.int8, np.int32, mx.int32), (np.uint8, np.int8, mx.int16), (np.int32, np.int64, mx.int64),
    (np.uint8, np.uint32, mx.uint32), (np.bool_, np.int8, mx.int8),
    (np.int32, np.float32, mx.float32), (np.float16, np.float32, mx.float32),
    (np.float32, np.complex64, mx.complex64),
])
def test_binary_type_promotion_follows_mlx(a, b, dtype):
    x = np.array([1, 0, 1]).astype(a)
    y = np.array([2, 3, 1]).astype(b)
    out = mx.add(mx.array(x), mx.array(y))
    check(out, x.astype(np.float64) + y.astype(np.float64) if dtype != mx.complex64 else x + y,
          dtype)


@pytest.mark.parametrize("dt", [mx.int8, mx.uint8, mx.float16, mx.int64])
def test_python_scalars_take_the_array_dtype(dt):
    x = np.array([1, 2, 3]).astype(NP_OF[dt])
    check(mx.add(mx.array(x), 2), x + NP_OF[dt](2), dt)
    check(mx.multiply(3, mx.array(x)), NP_OF[dt](3) * x, dt)
    check(mx.maximum(mx.array(x), 2), np.maximum(x, NP_OF[dt](2)), dt)


def test_python_float_with_integer_array_gives_float32():
    x = np.array([1, 2, 3], np.int32)
    check(mx.add(mx.array(x), 0.5), x + 0.5, mx.float32)
    check(mx.add(1.5, 2.5), np.float32(4.0), mx.float32)


@pytest.mark.parametrize("name", ["minimum", "maximum"])
def test_minimum_and_maximum_propagate_nan(name):
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([0.0, np.nan, 1.0], np.float32)
    check(getattr(mx, name)(mx.array(a), mx.array(b)), getattr(np, name)(a, b))


def test_logaddexp_is_stable_for_large_and_infinite_inputs():
    a = np.array([1000.0, -1000.0, -np.inf, 5.0], np.float32)
    b = np.array([1000.0, -1000.0, -np.inf, -np.inf], np.float32)
    check(mx.logaddexp(mx.array(a), mx.array(b)), np.logaddexp(a.astype(np.float64), b))


def test_complex64_arithmetic_matches_numpy():
    a = (randn(5) + 1j * randn(5)).astype(np.complex64)
    b = (randn(5) + 1j * randn(5)).astype(np.complex64)
    for name in ("add", "subtract", "multiply", "divide"):
        check(getattr(mx, name)(mx.array(a), mx.array(b)), getattr(np, name)(a, b),
              mx.complex64, rtol=1e-5, atol=1e-5)
    check(mx.equal(mx.array(a), mx.array(a)), np.ones(5, bool))


def test_complex64_product_is_the_same_whatever_the_layout():
    # Each part is rounded once from the exact double-precision value, in the dense, the
    # broadcast and the strided kernels alike (a fused multiply-add in one copy of a loop would
    # make x * y depend on how y is laid out).
    a = (randn(3, 37) + 1j * randn(3, 37)).astype(np.complex64)
    b = (randn(37) + 1j * randn(37)).astype(np.complex64)
    exact = a.astype(np.complex128) * b.astype(np.complex128)
    want = (exact.real.astype(np.float32) + 1j * exact.imag.astype(np.float32)).astype(np.complex64)
    dense = np.asarray(mx.array(a) * mx.array(np.broadcast_to(b, a.shape).copy()))
    broadcast = np.asarray(mx.array(a) * mx.array(b))
    rows = np.stack([np.asarray(mx.array(a[i]) * mx.array(b)) for i in range(3)])
    strided = np.asarray(mx.array(a)[:, ::-1] * mx.array(b)[::-1])[:, ::-1]
    for got in (dense, broadcast, rows, strided):
        np.testing.assert_array_equal(got, want)


COMPARE = [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
           ("less_equal", np.less_equal), ("greater", np.greater),
           ("greater_equal", np.greater_equal)]


@pytest.mark.parametrize("name,ref", COMPARE, ids=[c[0] for c in COMPARE])
@pytest.mark.parametrize("npdt", [np.float32, np.int32, np.uint8, np.bool_, np.float16])
def test_comparisons_give_bool_and_match_numpy(name, ref, npdt):
    a = randint(0, 3, (4, 3)).astype(npdt)
    b = randint(0, 3, (3,)).astype(npdt)
    check(getattr(mx, name)(mx.array(a), mx.array(b)), ref(a, b), mx.bool_)
    check(getattr(mx, name)(mx.array(a), 1), ref(a, npdt(1)), mx.bool_)


def test_comparisons_with_nan_are_false_except_not_equal():
    a = mx.array([np.nan, 1.0])
    assert mx.equal(a, a).tolist() == [False, True]
    assert mx.not_equal(a, a).tolist() == [True, False]
    assert mx.less_equal(a, a).tolist() == [False, True]


BITWISE = [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
           ("bitwise_xor", np.bitwise_xor), ("left_shift", np.left_shift),
           ("right_shift", np.right_shift), ("bitwise_left_shift", np.left_shift),
           ("bitwise_right_shift", np.right_shift)]


@pytest.mark.parametrize("name,ref", BITWISE, ids=[b[0] for b in BITWISE])
@pytest.mark.parametrize("npdt", [np.uint8, np.int8, np.int32, np.int64, np.uint32])
def test_bitwise_ops_match_numpy(name, ref, npdt):
    a = randint(0, 100, (3, 4), npdt)
    b = randint(0, 7, (4,), npdt)
    check(getattr(mx, name)(mx.array(a), mx.array(b)), ref(a, b), MX_OF[np.dtype(npdt)])


def test_right_shift_of_negative_signed_is_arithmetic():
    a = np.array([-16, -1, -7], np.int32)
    check(mx.right_shift(mx.array(a), mx.array(np.array([2, 1, 1], np.int32))),
          a >> np.array([2, 1, 1], np.int32))


def test_bitwise_ops_on_bool():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        check(getattr(mx, name)(mx.array(a), mx.array(b)), getattr(np, name)(a, b), mx.bool_)


def test_bitwise_ops_reject_floats():
    with pytest.raises(ValueError, match="integer|bool|float"):
        mx.bitwise_and(mx.array([1.0]), mx.array([2.0]))


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
@pytest.mark.parametrize("npdt", [np.bool_, np.int32, np.float32])
def test_logical_binary_ops_give_bool(name, npdt):
    a = np.array([[0, 1, 2, 0]]).astype(npdt)
    b = np.array([[0], [3]]).astype(npdt)
    check(getattr(mx, name)(mx.array(a), mx.array(b)), getattr(np, name)(a, b), mx.bool_)
    check(getattr(mx, name)(mx.array(a), True), getattr(np, name)(a, True), mx.bool_)


@pytest.mark.parametrize("a,b,equal_nan", [
    ([1, 2, 3], [1, 2, 3], False), ([1, 2, 3], [1, 2, 4], False), ([1, 2], [1, 2, 3], False),
    ([1.0, np.nan], [1.0, np.nan], False), ([1.0, np.nan], [1.0, np.nan], True),
    ([[1, 2]], [1, 2], False),
])
def test_array_equal_matches_numpy(a, b, equal_nan):
    out = mx.array_equal(mx.array(np.array(a, np.float32)), mx.array(np.array(b, np.float32)),
                         equal_nan=equal_nan)
    assert out.dtype == mx.bool_ and out.shape == ()
    assert out.item() == np.array_equal(np.array(a), np.array(b), equal_nan=equal_nan)


def test_array_equal_compares_values_across_dtypes():
    assert mx.array_equal(mx.array([1, 2], dtype=mx.int32), mx.array([1.0, 2.0])).item()
    assert not mx.array_equal(mx.array([1, 2]), mx.array([1, 3], dtype=mx.int8)).item()


@pytest.mark.parametrize("kw", [{}, {"rtol": 1e-2}, {"atol": 0.1}, {"equal_nan": True}])
def test_isclose_and_allclose_match_numpy(kw):
    a = np.array([1.0, 1.001, 100.0, np.nan, np.inf, 0.0, 1e-9], np.float32)
    b = np.array([1.0, 1.0, 100.5, np.nan, np.inf, 0.05, 0.0], np.float32)
    check(mx.isclose(mx.array(a), mx.array(b), **kw), np.isclose(a, b, **kw), mx.bool_)
    out = mx.allclose(mx.array(a), mx.array(b), **kw)
    assert out.shape == () and out.item() == np.allclose(a, b, **kw)
    assert mx.allclose(mx.array(a[:3]), mx.array(a[:3])).item()


@pytest.mark.parametrize("xs,ys", [("array", "array"), ("array", "scalar"),
                                   ("scalar", "scalar")])
def test_where_broadcasts_condition_and_branches(xs, ys):
    c = RNG.random((3, 1, 4)) > 0.5
    x = randn(2, 4) if xs == "array" else 1.5
    y = randn(3, 2, 1) if ys == "array" else -2.0
    out = mx.where(mx.array(c), mx.array(x) if xs == "array" else x,
                   mx.array(y) if ys == "array" else y)
    check(out, np.where(c, x, y), mx.float32)


def test_where_integer_branches_and_python_scalar_keep_int_dtype():
    x = np.arange(6, dtype=np.int8)
    check(mx.where(mx.array(x > 2), mx.array(x), 0), np.where(x > 2, x, 0), mx.int8)


def test_binary_shape_mismatch_is_a_value_error():
    with pytest.raises(ValueError, match="broadcast"):
        mx.add(mx.zeros((2, 3)), mx.zeros((4,)))
    with pytest.raises(ValueError, match="broadcast"):
        mx.where(mx.array([True, False]), mx.zeros((3,)), 1.0)


# ============================================================== shape manipulation

@pytest.mark.parametrize("shape", [(6, 4), (-1, 2), (2, -1, 3), (24,), (1, 24, 1)])
def test_reshape_matches_numpy(shape):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    check(mx.reshape(mx.array(x), shape), x.reshape(shape))
    # from a non-contiguous view
    check(mx.reshape(mx.array(x).T, shape), x.T.reshape(shape))


def test_reshape_0d_and_empty():
    check(mx.reshape(mx.array(3.0), (1, 1)), np.full((1, 1), 3.0))
    check(mx.reshape(mx.array([[5]]), ()), np.int32(5))
    check(mx.reshape(mx.zeros((0, 4)), (2, 0, 4)), np.zeros((2, 0, 4)))
    check(mx.reshape(mx.zeros((0, 4)), (-1, 2)), np.zeros((0, 2)))


def test_reshape_errors():
    with pytest.raises(ValueError, match="reshape|size|shape"):
        mx.reshape(mx.zeros((2, 3)), (4, 2))
    with pytest.raises(ValueError, match="-1|infer"):
        mx.reshape(mx.zeros((2, 3)), (-1, -1))


@pytest.mark.parametrize("start,end", [(0, -1), (1, 2), (-2, -1), (0, 0), (2, 2)])
def test_flatten_matches_numpy_reshape(start, end):
    x = randn(2, 3, 4)
    s, e = start % 3, end % 3
    ref = x.reshape(x.shape[:s] + (-1,) + x.shape[e + 1:])
    check(mx.flatten(mx.array(x), start, end), ref)


def test_flatten_0d_gives_1d():
    check(mx.flatten(mx.array(7)), np.array([7]))


@pytest.mark.parametrize("axis,shape", [(0, (2, 3)), (1, (2, -1)), (-1, (4,)), (-1, (1, 4, 1))])
def test_unflatten_splits_one_axis(axis, shape):
    x = randn(6, 4)
    n = x.ndim
    ax = axis % n
    full = list(shape)
    if -1 in full:
        i = full.index(-1)
        full[i] = x.shape[ax] // -int(np.prod(full))
    check(mx.unflatten(mx.array(x), axis, shape), x.reshape(x.shape[:ax] + tuple(full) +
                                                              x.shape[ax + 1:]))


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
def test_squeeze_matches_numpy(axis):
    x = randn(1, 3, 1)
    check(mx.squeeze(mx.array(x), axis), np.squeeze(x, axis))


def test_squeeze_non_unit_axis_is_an_error():
    with pytest.raises(ValueError, match="squeeze|size"):
        mx.squeeze(mx.zeros((1, 3)), 1)


@pytest.mark.parametrize("axis", [0, 2, -1, (0, 1), (0, -1), (1, 3)])
def test_expand_dims_matches_numpy(axis):
    x = randn(2, 3)
    check(mx.expand_dims(mx.array(x), axis), np.expand_dims(x, axis))


def test_expand_dims_bad_axis():
    with pytest.raises((ValueError, IndexError), match="axis|range|bounds"):
        mx.expand_dims(mx.zeros((2, 3)), 4)


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), [1]])
def test_flip_matches_numpy(axis):
    x = randn(2, 3, 4)
    check(mx.flip(mx.array(x), axis), np.flip(x, axis if not isinstance(axis, list) else
                                              tuple(axis)))
    check(mx.flip(mx.array(x).T, axis), np.flip(x.T, axis if not isinstance(axis, list) else
                                                tuple(axis)))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unstack_removes_the_axis(axis):
    x = randn(2, 3, 4)
    parts = mx.unstack(mx.array(x), axis=axis)
    ref = np.moveaxis(x, axis, 0)
    assert len(parts) == ref.shape[0]
    for p, r in zip(parts, ref):
        check(p, r)


@pytest.mark.parametrize("src,dst", [(0, 2), (-1, 0), (1, -1), (2, 2)])
def test_moveaxis_matches_numpy(src, dst):
    x = randn(2, 3, 4)
    check(mx.moveaxis(mx.array(x), src, dst), np.moveaxis(x, src, dst))


@pytest.mark.parametrize("a1,a2", [(0, 2), (-1, 0), (1, 1)])
def test_swapaxes_matches_numpy(a1, a2):
    x = randn(2, 3, 4)
    check(mx.swapaxes(mx.array(x), a1, a2), np.swapaxes(x, a1, a2))


@pytest.mark.parametrize("fn", ["transpose", "permute_dims", "matrix_transpose"])
@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 0, 1), (-1, 0, 1)])
def test_transpose_matches_numpy(fn, axes):
    x = randn(2, 3, 4)
    check(getattr(mx, fn)(mx.array(x), axes), np.transpose(x, axes))


def test_transpose_0d_and_bad_permutation():
    check(mx.transpose(mx.array(2.0)), np.float32(2.0))
    with pytest.raises(ValueError, match="transpose|axes|permutation"):
        mx.transpose(mx.zeros((2, 3)), [0, 0])
    with pytest.raises(ValueError, match="transpose|axes"):
        mx.transpose(mx.zeros((2, 3)), [0])


@pytest.mark.parametrize("src,shape", [((3,), (2, 3)), ((1, 3), (4, 3)), ((), (2, 2)),
                                       ((2, 1), (3, 2, 5)), ((1,), (0,))])
def test_broadcast_to_matches_numpy(src, shape):
    x = randn(*src)
    check(mx.broadcast_to(mx.array(x), shape), np.broadcast_to(x, shape))


def test_broadcast_to_python_scalar_and_error():
    check(mx.broadcast_to(2.5, (2, 2)), np.full((2, 2), 2.5), mx.float32)
    with pytest.raises(ValueError, match="broadcast"):
        mx.broadcast_to(mx.zeros((3,)), (4,))


def test_broadcast_arrays_matches_numpy():
    a, b, c = randn(3, 1), randn(4), randn(2, 1, 1)
    outs = mx.broadcast_arrays(mx.array(a), mx.array(b), mx.array(c))
    refs = np.broadcast_arrays(a, b, c)
    assert len(outs) == 3
    for o, r in zip(outs, refs):
        check(o, r)
    with pytest.raises(ValueError, match="broadcast"):
        mx.broadcast_arrays(mx.zeros((2,)), mx.zeros((3,)))


@pytest.mark.parametrize("fn", ["concatenate", "concat"])
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_concatenate_matches_numpy(fn, axis):
    a, b = randn(2, 3), randn(2, 3)
    c = randn(2, 3)
    check(getattr(mx, fn)([mx.array(a), mx.array(b).T.T, mx.array(c)], axis=axis),
          np.concatenate([a, b, c], axis=axis))


def test_concatenate_promotes_dtypes_and_accepts_empty_parts():
    a = np.arange(3, dtype=np.int8)
    b = np.zeros(0, np.float32)
    c = np.arange(2, dtype=np.int32)
    out = mx.concatenate([mx.array(a), mx.array(b), mx.array(c)])
    check(out, np.concatenate([a, b, c]).astype(np.float32), mx.float32)


def test_concatenate_shape_mismatch_is_value_error():
    with pytest.raises(ValueError, match="concatenate|shape"):
        mx.concatenate([mx.zeros((2, 3)), mx.zeros((2, 4))], axis=0)
    with pytest.raises(ValueError, match="concatenate|dimensions|ndim"):
        mx.concatenate([mx.zeros((2, 3)), mx.zeros((3,))])


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack_matches_numpy(axis):
    xs = [randn(2, 3) for _ in range(3)]
    check(mx.stack([mx.array(x) for x in xs], axis=axis), np.stack(xs, axis=axis))


def test_stack_shape_mismatch_is_value_error():
    with pytest.raises(ValueError, match="stack|shape"):
        mx.stack([mx.zeros((2,)), mx.zeros((3,))])


@pytest.mark.parametrize("spec,axis", [(3, 0), (2, 1), ([1, 4], 0), ([0, 2, 2, 5], -1),
                                       ([], 0)])
def test_split_matches_numpy(spec, axis):
    x = randn(6, 6)
    outs = mx.split(mx.array(x), spec, axis=axis)
    refs = np.split(x, spec, axis=axis)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        check(o, r)


def test_split_uneven_sections_is_value_error():
    with pytest.raises(ValueError, match="split|equal|divide"):
        mx.split(mx.zeros((5,)), 2)


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid_matches_numpy(indexing, sparse):
    a, b, c = randn(3), randn(4), randn(2)
    outs = mx.meshgrid(mx.array(a), mx.array(b), mx.array(c), sparse=sparse, indexing=indexing)
    refs = np.meshgrid(a, b, c, sparse=sparse, indexing=indexing)
    assert isinstance(outs, tuple) and len(outs) == 3
    for o, r in zip(outs, refs):
        check(o, r)


def test_meshgrid_bad_indexing_is_value_error():
    with pytest.raises(ValueError, match="indexing|xy|ij"):
        mx.meshgrid(mx.zeros((2,)), mx.zeros((3,)), indexing="zz")


@pytest.mark.parametrize("repeats,axis", [(2, None), (3, 0), (2, -1), (0, 1), (1, 1)])
def test_repeat_matches_numpy(repeats, axis):
    x = randn(2, 3)
    check(mx.repeat(mx.array(x), repeats, axis), np.repeat(x, repeats, axis))


@pytest.mark.parametrize("reps", [2, [2, 1], [1, 3], [2, 2, 2], [0, 1]])
def test_tile_matches_numpy(reps):
    x = randn(2, 3)
    check(mx.tile(mx.array(x), reps), np.tile(x, reps))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize("width", [1, (2,), (1, 2), [(0, 1), (2, 0)]],
                         ids=["int", "tuple1", "pair", "per_axis"])
def test_pad_matches_numpy(mode, width):
    x = randn(3, 4)
    np_width = width if not isinstance(width, tuple) or len(width) != 2 else [width] * 2
    check(mx.pad(mx.array(x), width, mode=mode), np.pad(x, np_width, mode=mode))


@pytest.mark.parametrize("mode", ["reflect", "symmetric", "edge"])
@pytest.mark.parametrize("n,width", [(3, 4), (2, 3), (1, 3), (4, (7, 2))])
def test_pad_wider_than_the_axis_repeats_like_numpy(mode, n, width):
    x = np.arange(n, dtype=np.float32)
    check(mx.pad(mx.array(x), width, mode=mode), np.pad(x, width, mode=mode))


def test_pad_constant_value_takes_array_dtype():
    x = np.arange(4, dtype=np.int8).reshape(2, 2)
    check(mx.pad(mx.array(x), 1, constant_values=-3), np.pad(x, 1, constant_values=-3),
          mx.int8)
    xf = randn(2)
    check(mx.pad(mx.array(xf), (1, 2), constant_values=2.5),
          np.pad(xf, (1, 2), constant_values=2.5))


def test_pad_errors():
    with pytest.raises(ValueError, match="pad|negative"):
        mx.pad(mx.zeros((2, 2)), -1)
    with pytest.raises(ValueError, match="mode|pad"):
        mx.pad(mx.zeros((2, 2)), 1, mode="wrapz")


@pytest.mark.parametrize("shift,axis", [(2, None), (-1, None), (1, 0), (-2, -1), ((1, 2), (0, 1)),
                                        (5, 1), (0, 0)])
def test_roll_matches_numpy(shift, axis):
    x = randn(3, 4)
    check(mx.roll(mx.array(x), shift, axis), np.roll(x, shift, axis))


def test_roll_tuple_shift_on_one_axis_adds_the_shifts():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    check(mx.roll(mx.array(x), (1, 2), 0), np.roll(x, (1, 2), 0))
    check(mx.roll(mx.array(x), 1, (0, 1)), np.roll(x, 1, (0, 1)))
    check(mx.roll(mx.array(x).T, -5, None), np.roll(x.T, -5))


@pytest.mark.parametrize("fn", ["atleast_1d", "atleast_2d", "atleast_3d"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4)])
def test_atleast_nd_matches_numpy(fn, shape):
    x = randn(*shape)
    check(getattr(mx, fn)(mx.array(x)), getattr(np, fn)(x))
    outs = getattr(mx, fn)(mx.array(x), mx.array(np.float32(1.0)))
    refs = getattr(np, fn)(x, np.float32(1.0))
    assert isinstance(outs, list) and len(outs) == 2
    for o, r in zip(outs, refs):
        check(o, r)


def test_shape_ops_bad_axis_errors():
    with pytest.raises((ValueError, IndexError), match="axis|bounds|range"):
        mx.moveaxis(mx.zeros((2, 3)), 2, 0)
    with pytest.raises((ValueError, IndexError), match="axis|bounds|range"):
        mx.swapaxes(mx.zeros((2, 3)), 0, -3)
    with pytest.raises((ValueError, IndexError), match="axis|bounds|range"):
        mx.flip(mx.zeros((2, 3)), 2)
    with pytest.raises((ValueError, IndexError), match="axis|bounds|range"):
        mx.stack([mx.zeros((2,))], axis=3)


# ============================================================== creation

@pytest.mark.parametrize("args,kw", [((5,), {}), ((2, 7), {}), ((1, 10, 3), {}), ((5, 1, -1), {}),
                                     ((0.5, 3.0), {}), ((0, 1, 0.25), {}), ((3,), {"dtype": None}),
                                     ((0, 5), {"dtype": mx.float16}), ((10, 2), {}),
                                     ((-3, 3, 2), {"dtype": mx.int8})])
def test_arange_matches_numpy_and_infers_dtype(args, kw):
    out = mx.arange(*args, **kw)
    dtype = kw.get("dtype")
    if dtype is None:
        dtype = mx.float32 if any(isinstance(a, float) for a in args) else mx.int32
    ref = np.arange(*args).astype(NP_OF[dtype])
    check(out, ref, dtype)


def test_arange_keyword_forms():
    check(mx.arange(stop=4), np.arange(4))
    check(mx.arange(1, 8, step=3), np.arange(1, 8, 3))
    check(mx.arange(2.0, dtype=mx.int32), np.arange(2))


def test_arange_zero_step_is_an_error():
    with pytest.raises(ValueError, match="step|zero|0"):
        mx.arange(0, 5, 0)


@pytest.mark.parametrize("start,stop,num,endpoint", [(0, 1, 5, True), (-2, 3, 7, False),
                                                     (1, 1, 3, True), (0, 10, 1, True),
                                                     (0, 10, 0, True), (5, -5, 11, True)])
def test_linspace_matches_numpy(start, stop, num, endpoint):
    out = mx.linspace(start, stop, num, endpoint=endpoint)
    check(out, np.linspace(start, stop, num, endpoint=endpoint), mx.float32, atol=1e-6)


def test_linspace_dtype_and_negative_num():
    check(mx.linspace(0, 4, 5, dtype=mx.float16), np.linspace(0, 4, 5), mx.float16)
    with pytest.raises(ValueError, match="num|negative"):
        mx.linspace(0, 1, -1)


@pytest.mark.parametrize("shape,val,dtype,ref_dtype", [
    ((2, 3), 1.5, None, np.float32), (4, 7, None, np.int32), ((2, 2), True, None, np.bool_),
    ((), 2, mx.float16, np.float16), ((0, 3), 1.0, None, np.float32),
    ((3,), 3.7, mx.int32, np.int32), ((2,), 1 + 2j, None, np.complex64),
])
def test_full_matches_numpy(shape, val, dtype, ref_dtype):
    out = mx.full(shape, val, dtype)
    check(out, np.full(shape, int(val) if dtype is mx.int32 else val, ref_dtype),
          MX_OF[np.dtype(ref_dtype)])


def test_full_broadcasts_an_array_value():
    v = randn(3)
    check(mx.full((2, 3), mx.array(v)), np.broadcast_to(v, (2, 3)))
    with pytest.raises(ValueError, match="broadcast"):
        mx.full((2, 4), mx.array(v))


@pytest.mark.parametrize("fn,val", [("zeros", 0), ("ones", 1), ("empty", None)])
@pytest.mark.parametrize("dtype", [None, mx.int8, mx.bool_, mx.float16, mx.uint32, mx.complex64])
@pytest.mark.parametrize("shape", [(2, 3), 4, (), (0, 2)])
def test_zeros_ones_default_float32_and_honour_dtype(fn, val, dtype, shape):
    kw = {} if dtype is None else {"dtype": dtype}
    out = getattr(mx, fn)(shape, **kw)
    want = dtype or mx.float32
    assert out.dtype == want
    assert out.shape == ((shape,) if isinstance(shape, int) else shape)
    if val is not None:  # empty is an alias of zeros in tessera.core, but its values are free
        check(out, np.full(shape, val, NP_OF[want]))


@pytest.mark.parametrize("fn,val", [("zeros_like", 0), ("ones_like", 1), ("empty_like", 0)])
@pytest.mark.parametrize("dtype", [None, mx.int64, mx.float16])
def test_like_constructors_take_shape_and_dtype_from_input(fn, val, dtype):
    a = mx.array(randint(0, 5, (3, 2), np.int8)).T
    out = getattr(mx, fn)(a, dtype=dtype)
    want = dtype or mx.int8
    check(out, np.full((2, 3), val, NP_OF[want]), want)


@pytest.mark.parametrize("val,dtype", [(2.5, None), (3, None), (2.5, mx.int32), (7, mx.float16)])
def test_full_like_matches_numpy(val, dtype):
    a = np.zeros((2, 3), np.float32)
    out = mx.full_like(mx.array(a), val, dtype=dtype)
    ref = np.full_like(a, val, dtype=NP_OF[dtype] if dtype else None)
    check(out, ref, dtype or mx.float32)


@pytest.mark.parametrize("n,m,k", [(3, None, 0), (3, 5, 1), (4, 2, -1), (3, 3, 5), (0, None, 0)])
def test_eye_and_tri_match_numpy(n, m, k):
    check(mx.eye(n, m, k), np.eye(n, m, k), mx.float32)
    check(mx.tri(n, m, k), np.tri(n, m, k), mx.float32)
    check(mx.eye(n, m, k, dtype=mx.int32), np.eye(n, m, k, dtype=np.int32), mx.int32)


def test_identity_matches_numpy():
    check(mx.identity(4), np.identity(4), mx.float32)
    check(mx.identity(2, dtype=mx.bool_), np.identity(2, bool), mx.bool_)


@pytest.mark.parametrize("fn", ["tril", "triu"])
@pytest.mark.parametrize("k", [0, 1, -2])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 3, 4)])
def test_tril_triu_match_numpy(fn, k, shape):
    x = randn(*shape)
    check(getattr(mx, fn)(mx.array(x), k), getattr(np, fn)(x, k))


def test_tril_of_1d_is_an_error():
    with pytest.raises(ValueError, match="2|dim"):
        mx.tril(mx.zeros((3,)))


@pytest.mark.parametrize("src,dst", [(np.float32, mx.int32), (np.float32, mx.float16),
                                     (np.int32, mx.float32), (np.int32, mx.uint8),
                                     (np.float32, mx.bool_), (np.bool_, mx.int32),
                                     (np.int64, mx.int8), (np.float32, mx.complex64),
                                     (np.uint8, mx.int64)])
def test_astype_matches_numpy_casts(src, dst):
    x = (randn(12) * 50).astype(src) if src != np.bool_ else RNG.random(12) > 0.5
    if src == np.float32 and dst in (mx.int32,):
        x = x.astype(np.float32)
    ref = x.astype(NP_OF[dst]) if not (src == np.float32 and dst == mx.uint8) else None
    check(mx.astype(mx.array(x), dst), ref, dst)


@pytest.mark.parametrize("src,dst", [(np.float32, mx.int32), (np.float32, mx.uint8),
                                     (np.int32, mx.int16), (np.uint8, mx.int8),
                                     (np.float16, mx.uint16), (np.int32, mx.float32)])
def test_view_reinterprets_bytes_like_numpy(src, dst):
    x = (randn(2, 4) * 100).astype(src)
    check(mx.view(mx.array(x), dst), x.view(NP_OF[dst]), dst)


def test_view_of_non_contiguous_input():
    x = randn(4, 4)
    check(mx.view(mx.array(x).T, mx.int32), np.ascontiguousarray(x.T).view(np.int32))


def test_view_incompatible_last_axis_is_an_error():
    with pytest.raises(ValueError, match="view|size|divisible|last"):
        mx.view(mx.zeros((3,), dtype=mx.uint8), mx.int32)


@pytest.mark.parametrize("shape,strides,offset", [((2, 2), (1, 2), 0), ((3, 2), (2, 1), 1),
                                                  ((4,), (3,), 0), ((2, 3), (0, 1), 2),
                                                  (None, None, 0)])
def test_as_strided_matches_numpy(shape, strides, offset):
    x = np.arange(12, dtype=np.float32)
    item = x.itemsize
    npshape = shape or x.shape
    npstrides = tuple(s * item for s in strides) if strides else x.strides
    ref = np.lib.stride_tricks.as_strided(x[offset:], npshape, npstrides)
    check(mx.as_strided(mx.array(x), shape, strides, offset), ref)


@pytest.mark.parametrize("allow_col_major", [False, True])
def test_contiguous_keeps_values(allow_col_major):
    x = randn(3, 4)
    check(mx.contiguous(mx.array(x).T, allow_col_major), x.T)
    check(mx.contiguous(mx.array(x)[::2, ::-1]), x[::2, ::-1])


# ============================================================== indexing ops

@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take_with_array_indices_matches_numpy(axis):
    x = randn(4, 5)
    n = x.size if axis is None else x.shape[axis]
    idx = RNG.integers(-n, n, (2, 3)).astype(np.int32)
    check(mx.take(mx.array(x), mx.array(idx), axis=axis), np.take(x, idx, axis=axis))


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_take_with_int_index_drops_the_axis(axis):
    x = randn(3, 4)
    check(mx.take(mx.array(x), 2, axis=axis), np.take(x, 2, axis=axis))
    check(mx.take(mx.array(x), -1, axis=axis), np.take(x, -1, axis=axis))


@pytest.mark.parametrize("idx_dtype", [np.uint8, np.int64, np.uint32, np.int16])
def test_take_accepts_every_integer_index_dtype(idx_dtype):
    x = randn(6)
    idx = np.array([5, 0, 3], idx_dtype)
    check(mx.take(mx.array(x), mx.array(idx)), x[idx])


def test_take_from_empty_indices_and_float_indices_error():
    x = randn(3, 4)
    check(mx.take(mx.array(x), mx.array(np.zeros(0, np.int32)), axis=1), x[:, []])
    with pytest.raises(ValueError, match="integer|indices"):
        mx.take(mx.array(x), mx.array([0.5]))


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_take_along_axis_matches_numpy(axis):
    x = randn(3, 4)
    if axis is None:
        idx = RNG.integers(0, x.size, (5,)).astype(np.int32)
    else:
        shape = list(x.shape)
        shape[axis] = 2
        idx = RNG.integers(0, x.shape[axis], shape).astype(np.int32)
    check(mx.take_along_axis(mx.array(x), mx.array(idx), axis=axis),
          np.take_along_axis(x, idx, axis=axis))


def test_take_along_axis_broadcasts_indices_with_argsort():
    x = randn(3, 5)
    idx = np.argsort(x, axis=1).astype(np.int32)
    check(mx.take_along_axis(mx.array(x), mx.array(idx), axis=1), np.sort(x, axis=1))
    idx1 = np.array([[0], [4], [2]], np.int32)
    check(mx.take_along_axis(mx.array(x), mx.array(idx1), axis=1),
          np.take_along_axis(x, idx1, axis=1))


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_put_along_axis_matches_numpy(axis):
    x = randn(3, 4)
    if axis is None:
        idx = np.array([0, 5, 11], np.int32)
        vals = randn(3)
    else:
        shape = list(x.shape)
        shape[axis] = 1
        idx = RNG.integers(0, x.shape[axis], shape).astype(np.int32)
        vals = randn(*shape)
    ref = x.copy()
    np.put_along_axis(ref, idx, vals, axis=axis)
    out = mx.put_along_axis(mx.array(x), mx.array(idx), mx.array(vals), axis=axis)
    check(out, ref)


def test_put_along_axis_broadcasts_scalar_values():
    x = np.zeros((2, 3), np.int32)
    idx = np.array([[1], [2]], np.int32)
    ref = x.copy()
    np.put_along_axis(ref, idx, 9, axis=1)
    check(mx.put_along_axis(mx.array(x), mx.array(idx), mx.array(9), axis=1), ref, mx.int32)


def test_dynamic_slice_reads_start_from_array():
    x = randn(5, 6)
    out = mx.slice(mx.array(x), mx.array([1, 2]), [0, 1], [3, 2])
    check(out, x[1:4, 2:4])
    out = mx.slice(mx.array(x), mx.array([3]), [1], [5, 2])
    check(out, x[:, 3:5])


def test_dynamic_slice_update_writes_a_block():
    x = randn(4, 5)
    upd = randn(2, 3)
    ref = x.copy()
    ref[1:3, 2:5] = upd
    check(mx.slice_update(mx.array(x), mx.array(upd), mx.array([1, 2]), [0, 1]), ref)
    # axes not listed start at 0; the update's shape is the slice's
    ref = x.copy()
    ref[0:1, 1:3] = upd[:1, :2]
    check(mx.slice_update(mx.array(x), mx.array(upd[:1, :2]), mx.array([1]), [1]), ref)


@pytest.mark.parametrize("offset,a1,a2", [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (0, 1, 2),
                                          (1, -1, 0), (0, 0, 2), (9, 0, 1)])
def test_diagonal_matches_numpy(offset, a1, a2):
    x = randn(3, 4, 5)
    check(mx.diagonal(mx.array(x), offset, a1, a2), np.diagonal(x, offset, a1, a2))


@pytest.mark.parametrize("shape,k", [((4,), 0), ((3,), 1), ((3,), -2), ((3, 4), 0),
                                     ((3, 4), 1), ((4, 3), -1)])
def test_diag_matches_numpy(shape, k):
    x = randn(*shape)
    check(mx.diag(mx.array(x), k), np.diag(x, k))


def test_diag_of_3d_is_an_error():
    with pytest.raises(ValueError, match="1-D|2-D|diag"):
        mx.diag(mx.zeros((2, 2, 2)))


@pytest.mark.parametrize("offset,a1,a2", [(0, 0, 1), (1, 0, 1), (-1, 1, 2), (0, -1, 0)])
def test_trace_matches_numpy(offset, a1, a2):
    x = randn(3, 4, 5)
    check(mx.trace(mx.array(x), offset, a1, a2), np.trace(x, offset, a1, a2), atol=1e-5)


def test_trace_dtype_argument():
    x = np.arange(9, dtype=np.int8).reshape(3, 3)
    check(mx.trace(mx.array(x), dtype=mx.float32), np.trace(x).astype(np.float32), mx.float32)


# ============================================================== reductions

AXIS_SPECS = [None, 0, 1, -1, (0, 2), (-1, -3), [1], (), (0, 1, 2)]
REDUCE = [("sum", np.sum), ("prod", np.prod), ("min", np.min), ("max", np.max),
          ("mean", np.mean), ("var", np.var), ("std", np.std),
          ("logsumexp", None), ("all", np.all), ("any", np.any),
          ("count_nonzero", None)]


def _logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis if axis is not None else
                                           tuple(range(x.ndim)))


def _count_nonzero(x, axis=None, keepdims=False):
    return np.sum(x != 0, axis=axis, keepdims=keepdims)


def _np_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


@pytest.mark.parametrize("name,ref", REDUCE, ids=[r[0] for r in REDUCE])
@pytest.mark.parametrize("axis", AXIS_SPECS, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy_over_every_axis_spec(name, ref, axis, keepdims):
    x = RNG.uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    if name in ("all", "any", "count_nonzero"):
        x = (RNG.random((2, 3, 4)) > 0.3).astype(np.float32)
    ref = ref or {"logsumexp": _logsumexp, "count_nonzero": _count_nonzero}[name]
    out = getattr(mx, name)(mx.array(x), axis=axis, keepdims=keepdims)
    r = ref(x.astype(np.float64), axis=_np_axis(axis), keepdims=keepdims)
    check(out, np.asarray(r).astype(np.asarray(r).dtype), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,ref", [(n, r) for n, r in REDUCE if n not in
                                      ("logsumexp", "count_nonzero")])
def test_reductions_of_non_contiguous_input(name, ref):
    x = RNG.uniform(0.5, 1.5, (4, 6)).astype(np.float32)
    check(getattr(mx, name)(mx.array(x).T[::2], axis=0), ref(x.T[::2].astype(np.float64),
                                                            axis=0), rtol=1e-5)
    check(getattr(mx, name)(mx.array(x.T[:, ::-1]), axis=1),
          ref(x.T[:, ::-1].astype(np.float64), axis=1), rtol=1e-5)


@pytest.mark.parametrize("npdt,dtype", [(np.int8, mx.int32), (np.uint8, mx.uint32),
                                        (np.bool_, mx.int32), (np.int64, mx.int64),
                                        (np.float16, mx.float16), (np.int32, mx.int32)])
def test_sum_and_prod_accumulate_small_ints_in_32_bits(npdt, dtype):
    x = np.array([[100, 100, 100], [1, 1, 1]]).astype(npdt)
    check(mx.sum(mx.array(x)), x.astype(np.int64).sum().astype(NP_OF[dtype]), dtype)
    check(mx.sum(mx.array(x), axis=1), x.astype(np.int64).sum(1).astype(NP_OF[dtype]), dtype)
    if npdt != np.float16:
        check(mx.prod(mx.array(x), axis=0), x.astype(np.int64).prod(0).astype(NP_OF[dtype]),
              dtype)


@pytest.mark.parametrize("npdt", [np.int8, np.uint8, np.int32, np.float16, np.bool_])
def test_min_max_keep_input_dtype(npdt):
    x = randint(0, 100, (3, 4)).astype(npdt)
    check(mx.min(mx.array(x), axis=1), x.min(1), MX_OF[np.dtype(npdt)])
    check(mx.max(mx.array(x)), x.max(), MX_OF[np.dtype(npdt)])


def test_mean_var_of_integers_give_float32():
    x = randint(0, 10, (4, 5))
    check(mx.mean(mx.array(x), axis=0), x.mean(0), mx.float32)
    check(mx.var(mx.array(x)), x.var(), mx.float32, rtol=1e-5)


@pytest.mark.parametrize("ddof", [0, 1, 2])
def test_var_and_std_ddof(ddof):
    x = randn(5, 4)
    check(mx.var(mx.array(x), axis=0, ddof=ddof), np.var(x.astype(np.float64), 0, ddof=ddof),
          rtol=1e-5)
    check(mx.std(mx.array(x), axis=-1, ddof=ddof), np.std(x.astype(np.float64), -1, ddof=ddof),
          rtol=1e-5)


def test_reductions_of_empty_arrays_give_identities():
    e = np.zeros((0, 3), np.float32)
    check(mx.sum(mx.array(e), axis=0), e.sum(0))
    check(mx.prod(mx.array(e), axis=0), e.prod(0))
    check(mx.all(mx.array(e)), np.all(e), mx.bool_)
    check(mx.any(mx.array(e)), np.any(e), mx.bool_)
    check(mx.sum(mx.array(e), axis=1), e.sum(1))
    check(mx.count_nonzero(mx.array(e)), np.uint32(0))


def test_min_and_logsumexp_of_empty_are_errors():
    with pytest.raises(ValueError, match="size 0"):
        mx.min(mx.zeros((0,)))
    with pytest.raises(ValueError, match="empty"):  # as MLX
        mx.logsumexp(mx.zeros((0, 3)), axis=0)


def test_reductions_of_0d_input():
    a = mx.array(np.float32(3.0))
    for name in ("sum", "prod", "min", "max", "mean"):
        check(getattr(mx, name)(a), np.float32(3.0))
    check(mx.all(mx.array(True)), np.bool_(True))


def test_reductions_nan_propagate_in_min_max_sum():
    x = np.array([1.0, np.nan, 3.0], np.float32)
    for name in ("sum", "min", "max", "mean", "prod"):
        assert np.isnan(getattr(mx, name)(mx.array(x)).item()), name


def test_logsumexp_is_stable_and_handles_infinities():
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf], [np.inf, 1.0]], np.float32)
    with np.errstate(invalid="ignore"):
        ref = np.array([1000.0 + np.log(2), -np.inf, np.inf])
    check(mx.logsumexp(mx.array(x), axis=1), ref)


@pytest.mark.parametrize("fn", ["sum", "mean", "max"])
def test_float16_reductions_within_half_precision(fn):
    x = RNG.uniform(0, 1, (64, 8)).astype(np.float16)
    check(getattr(mx, fn)(mx.array(x), axis=0), getattr(np, fn)(x.astype(np.float64), axis=0),
          mx.float16, rtol=5e-3, atol=5e-2 if fn == "sum" else 5e-3)


def test_complex64_sum_and_prod():
    x = (randn(3, 4) + 1j * randn(3, 4)).astype(np.complex64)
    check(mx.sum(mx.array(x), axis=1), x.sum(1), mx.complex64, rtol=1e-5, atol=1e-5)
    check(mx.prod(mx.array(x), axis=0), x.astype(np.complex128).prod(0), mx.complex64,
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["sum", "max", "mean", "all"])
def test_reduction_bad_axis_raises(name):
    with pytest.raises((ValueError, IndexError), match="axis|bounds"):
        getattr(mx, name)(mx.zeros((2, 3)), axis=2)
    with pytest.raises((ValueError, IndexError), match="axis|bounds|duplicate|repeat"):
        getattr(mx, name)(mx.zeros((2, 3)), axis=(0, 0))


@pytest.mark.parametrize("name", ["argmin", "argmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmin_argmax_match_numpy_and_take_first(name, axis, keepdims):
    x = randint(0, 4, (3, 5)).astype(np.float32)  # many ties: the first index wins
    out = getattr(mx, name)(mx.array(x), axis=axis, keepdims=keepdims)
    ref = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    check(out, ref.astype(np.uint32), mx.uint32)


@pytest.mark.parametrize("npdt", [np.int8, np.uint8, np.bool_, np.float16])
def test_argmax_other_dtypes_and_non_contiguous(npdt):
    x = randint(0, 100, (4, 6)).astype(npdt)
    check(mx.argmax(mx.array(x).T, axis=1), np.argmax(x.T, axis=1).astype(np.uint32))
    check(mx.argmin(mx.array(x[:, ::-2]), axis=0), np.argmin(x[:, ::-2], 0).astype(np.uint32))


def test_argmax_of_empty_axis_is_an_error():
    with pytest.raises(ValueError, match="size 0"):
        mx.argmax(mx.zeros((0, 3)), axis=0)


def _softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [None, -1, 0, (0, 2), [1]])
def test_softmax_matches_formula(axis):
    x = randn(2, 3, 4) * 3
    check(mx.softmax(mx.array(x), axis=axis),
          _softmax(x.astype(np.float64), _np_axis(axis)), mx.float32, rtol=1e-5, atol=1e-6)


def test_softmax_is_stable_and_handles_masked_entries():
    x = np.array([[1000.0, 1001.0, -np.inf], [-1000.0, -1000.0, -1000.0]], np.float32)
    check(mx.softmax(mx.array(x), axis=-1), _softmax(x.astype(np.float64), -1))


@pytest.mark.parametrize("precise", [False, True])
def test_softmax_float16_precise(precise):
    x = (randn(4, 16) * 4).astype(np.float16)
    check(mx.softmax(mx.array(x), axis=-1, precise=precise),
          _softmax(x.astype(np.float64), -1), mx.float16, rtol=1e-2, atol=2e-3)


# ============================================================== scans

def _np_scan(fn, x, axis, reverse, inclusive, init):
    if axis is None:
        x, axis = x.reshape(-1), 0
    if reverse:
        x = np.flip(x, axis)
    out = fn(x, axis)
    if not inclusive:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        out = np.pad(out, pad, constant_values=init)
        out = np.take(out, np.arange(x.shape[axis]), axis=axis)
    if reverse:
        out = np.flip(out, axis)
    return out


SCANS = [("cumsum", lambda x, a: np.cumsum(x, a), 0.0),
         ("cumprod", lambda x, a: np.cumprod(x, a), 1.0),
         ("cummax", lambda x, a: np.maximum.accumulate(x, a), -np.inf),
         ("cummin", lambda x, a: np.minimum.accumulate(x, a), np.inf),
         ("logcumsumexp", lambda x, a: np.logaddexp.accumulate(x, a), -np.inf),
         ("cumulative_sum", lambda x, a: np.cumsum(x, a), 0.0),
         ("cumulative_prod", lambda x, a: np.cumprod(x, a), 1.0)]


@pytest.mark.parametrize("name,fn,init", SCANS, ids=[s[0] for s in SCANS])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("reverse,inclusive", [(False, True), (True, True), (False, False),
                                               (True, False)])
def test_scans_match_numpy(name, fn, init, axis, reverse, inclusive):
    x = RNG.uniform(0.5, 1.5, (3, 4)).astype(np.float32)
    if name in ("cummax", "cummin"):
        x = randn(3, 4)  # exclusive: the identity is -inf / +inf, as MLX
    out = getattr(mx, name)(mx.array(x), axis=axis, reverse=reverse, inclusive=inclusive)
    check(out, _np_scan(fn, x.astype(np.float64), axis, reverse, inclusive, init), mx.float32,
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,fn", [("cumsum", np.cumsum), ("cummax", np.maximum.accumulate)])
def test_scans_of_non_contiguous_input(name, fn):
    x = randn(5, 6)
    check(getattr(mx, name)(mx.array(x).T, axis=1), fn(x.T, 1), rtol=1e-5, atol=1e-5)
    check(getattr(mx, name)(mx.array(x)[::2, ::-1], axis=0), fn(x[::2, ::-1], 0),
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("npdt,dtype", [(np.int32, mx.int32), (np.bool_, mx.int32),
                                        (np.uint8, mx.uint8), (np.int64, mx.int64)])
def test_integer_cumsum_dtypes(npdt, dtype):
    x = randint(0, 3, (10,)).astype(npdt)
    check(mx.cumsum(mx.array(x)), np.cumsum(x.astype(np.int64)).astype(NP_OF[dtype]), dtype)


def test_cumsum_dtype_argument():
    x = np.full(300, 1, np.int8)
    check(mx.cumsum(mx.array(x), dtype=mx.int32), np.cumsum(x, dtype=np.int32), mx.int32)
    check(mx.cumprod(mx.array(np.arange(1, 6, dtype=np.int8)), dtype=mx.float32),
          np.cumprod(np.arange(1, 6)).astype(np.float32), mx.float32)


def test_cummax_integer_and_empty():
    x = randint(-50, 50, (4, 5), np.int8)
    check(mx.cummax(mx.array(x), axis=1), np.maximum.accumulate(x, 1), mx.int8)
    check(mx.cumsum(mx.zeros((0, 3)), axis=0), np.zeros((0, 3)))


def test_scan_bad_axis():
    with pytest.raises((ValueError, IndexError), match="axis|bounds"):
        mx.cumsum(mx.zeros((2, 3)), axis=2)


# ============================================================== sorting

@pytest.mark.parametrize("axis", [-1, 0, 1, None])
@pytest.mark.parametrize("npdt", [np.float32, np.int8, np.uint8, np.int64, np.float16])
def test_sort_and_argsort_match_numpy(axis, npdt):
    x = randint(0, 6, (4, 7)).astype(npdt)  # ties: argsort must be stable
    check(mx.sort(mx.array(x), axis=axis), np.sort(x, axis=axis), MX_OF[np.dtype(npdt)])
    check(mx.argsort(mx.array(x), axis=axis),
          np.argsort(x, axis=axis, kind="stable").astype(np.uint32), mx.uint32)


def test_sort_puts_nan_last_and_handles_non_contiguous():
    x = np.array([3.0, np.nan, -np.inf, 1.0, np.inf, -0.5], np.float32)
    check(mx.sort(mx.array(x)), np.sort(x))
    y = randn(5, 6)
    check(mx.sort(mx.array(y).T, axis=-1), np.sort(y.T, -1))
    check(mx.sort(mx.array(y[::-1, ::2]), axis=0), np.sort(y[::-1, ::2], 0))


def test_sort_0d_and_empty():
    check(mx.sort(mx.zeros((0,))), np.zeros(0))
    check(mx.argsort(mx.zeros((2, 0))), np.zeros((2, 0), np.uint32))


def _check_partition(part, x, kth, axis):
    ref = np.sort(x, axis=axis)
    n = x.shape[axis]
    kth = kth % n
    p = np.moveaxis(part, axis, -1)
    r = np.moveaxis(ref, axis, -1)
    np.testing.assert_array_equal(p[..., kth], r[..., kth])
    assert np.all(p[..., :kth] <= p[..., kth:kth + 1])
    assert np.all(p[..., kth + 1:] >= p[..., kth:kth + 1])
    np.testing.assert_array_equal(np.sort(p, -1), r)


@pytest.mark.parametrize("kth,axis", [(0, -1), (3, -1), (-1, 0), (2, 1), (5, None)])
def test_partition_and_argpartition_place_kth(kth, axis):
    x = randn(4, 6)
    part = np.array(mx.partition(mx.array(x), kth, axis=axis))
    idx = np.array(mx.argpartition(mx.array(x), kth, axis=axis))
    xs = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else axis
    _check_partition(part, xs, kth, ax)
    _check_partition(np.take_along_axis(xs, idx.astype(np.int64), ax), xs, kth, ax)


@pytest.mark.parametrize("k,axis", [(1, -1), (3, -1), (2, 0), (6, 1), (4, None)])
def test_topk_returns_the_k_largest(k, axis):
    x = randn(4, 6)
    out = np.array(mx.topk(mx.array(x), k, axis=axis))
    xs = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else axis
    ref = np.take(np.sort(xs, axis=ax), np.arange(xs.shape[ax] - k, xs.shape[ax]), axis=ax)
    np.testing.assert_array_equal(np.sort(out, axis=ax), ref)


def test_topk_and_partition_bad_k():
    with pytest.raises(ValueError, match="k|topk|range"):
        mx.topk(mx.zeros((3,)), 4)
    with pytest.raises(ValueError, match="kth|partition|range"):
        mx.partition(mx.zeros((3,)), 3)


# ============================================================== matrix products

@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)),
                                   ((4,), (4,)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                                   ((0, 4), (4, 3)), ((3, 0), (0, 2)), ((1, 1), (1, 1))])
def test_matmul_matches_numpy_rules(sa, sb):
    a, b = randn(*sa), randn(*sb)
    check(mx.matmul(mx.array(a), mx.array(b)), np.matmul(a.astype(np.float64), b),
          mx.float32, rtol=1e-5, atol=1e-5)


def test_matmul_non_contiguous_and_dtypes():
    a, b = randn(5, 3), randn(4, 5)
    check(mx.matmul(mx.array(a).T, mx.array(b).T), a.T @ b.T, rtol=1e-5, atol=1e-5)
    check(mx.matmul(mx.array(a.T), mx.array(b.T)), a.T @ b.T, rtol=1e-5, atol=1e-5)
    x = mx.array(randn(6, 6))
    check(mx.matmul(x[::2], x[:, ::3]), np.array(x)[::2] @ np.array(x)[:, ::3], rtol=1e-5,
          atol=1e-5)
    h = randn(8, 16).astype(np.float16)
    check(mx.matmul(mx.array(h), mx.array(h.T)), h.astype(np.float64) @ h.T, mx.float16,
          rtol=1e-2, atol=5e-2)
    c = (randn(3, 3) + 1j * randn(3, 3)).astype(np.complex64)
    check(mx.matmul(mx.array(c), mx.array(c)), c @ c, mx.complex64, rtol=1e-5, atol=1e-5)


def test_batched_rows_times_a_matrix_under_grad_and_vmap():
    # (..., M, K) @ (K, N) is one primitive on the batched operand as it is: its gradients (b's
    # summed over every row), and vmap with the matrix batched, the rows batched, or both.
    x, w, c = randn(2, 3, 4), randn(4, 5), randn(2, 3, 5)
    gx, gw = mx.grad(lambda a, b: mx.sum((a @ b) * mx.array(c)), argnums=(0, 1))(
        mx.array(x), mx.array(w))
    np.testing.assert_allclose(np.array(gx), c @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(gw), np.einsum("bmk,bmn->kn", x, c), rtol=1e-5, atol=1e-5)
    xs, ws = randn(3, 2, 3, 4), randn(3, 4, 5)
    np.testing.assert_allclose(np.array(mx.vmap(lambda a: a @ mx.array(w))(mx.array(xs))),
                               xs @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(mx.vmap(lambda b: mx.array(x) @ b)(mx.array(ws))),
                               np.stack([x @ wi for wi in ws]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(mx.vmap(lambda a, b: a @ b)(mx.array(xs), mx.array(ws))),
                               np.stack([xi @ wi for xi, wi in zip(xs, ws)]), rtol=1e-5, atol=1e-5)
    moved = mx.array(ws.transpose(1, 0, 2))  # the matrices' batch on axis 1
    np.testing.assert_allclose(np.array(mx.vmap(lambda b: mx.array(x) @ b, in_axes=1)(moved)),
                               np.stack([x @ wi for wi in ws]), rtol=1e-5, atol=1e-5)


def test_matmul_shape_errors():
    with pytest.raises(ValueError, match="matmul|shape|contract|inner"):
        mx.matmul(mx.zeros((3, 4)), mx.zeros((5, 2)))
    with pytest.raises(ValueError, match="matmul|0-d|scalar|dim"):
        mx.matmul(mx.array(1.0), mx.zeros((2,)))
    with pytest.raises(ValueError, match="broadcast|matmul"):
        mx.matmul(mx.zeros((2, 3, 4)), mx.zeros((3, 4, 5)))


@pytest.mark.parametrize("alpha,beta,cshape", [(1.0, 1.0, (3, 5)), (2.0, 0.5, (5,)),
                                               (0.0, 1.0, (3, 1)), (-1.0, 0.0, (3, 5))])
def test_addmm_matches_formula(alpha, beta, cshape):
    a, b, c = randn(3, 4), randn(4, 5), randn(*cshape)
    check(mx.addmm(mx.array(c), mx.array(a), mx.array(b), alpha, beta),
          alpha * (a.astype(np.float64) @ b) + beta * c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((2, 4), (3, 4)), ((2, 3, 4), (4,)),
                                   ((), (3,))])
def test_inner_matches_numpy(sa, sb):
    a, b = randn(*sa), randn(*sb)
    check(mx.inner(mx.array(a), mx.array(b)), np.inner(a.astype(np.float64), b),
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 2), (3,)), ((), (2,))])
def test_outer_matches_numpy(sa, sb):
    a, b = randn(*sa), randn(*sb)
    check(mx.outer(mx.array(a), mx.array(b)), np.outer(a, b), rtol=1e-6)


@pytest.mark.parametrize("axes", [0, 1, 2, [[1], [0]], [[0, 2], [1, 2]], [[-1], [-2]]])
def test_tensordot_matches_numpy(axes):
    a = randn(3, 4, 5)
    b = randn(4, 3, 5) if axes != 2 else randn(4, 5, 2)
    if axes == 1:
        b = randn(5, 2)
    if axes == 0:
        b = randn(2)
    if axes == [[-1], [-2]]:
        b = randn(2, 5, 3)
    check(mx.tensordot(mx.array(a), mx.array(b), axes), np.tensordot(a.astype(np.float64), b,
                                                                      axes), rtol=1e-5, atol=1e-5)


def test_tensordot_bad_axes():
    with pytest.raises(ValueError, match="two lists|axes"):
        mx.tensordot(mx.zeros((2, 2)), mx.zeros((2, 2)), [[0], [1], [0]])
    with pytest.raises(ValueError, match="tensordot|shape|match|size"):
        mx.tensordot(mx.zeros((2, 3)), mx.zeros((4, 2)), [[1], [0]])


# ============================================================== aliases

@pytest.mark.parametrize("alias,name", [("acos", "arccos"), ("acosh", "arccosh"),
                                        ("asin", "arcsin"), ("asinh", "arcsinh"),
                                        ("atan", "arctan"), ("atanh", "arctanh")])
def test_array_api_unary_aliases_match_numpy(alias, name):
    x = RNG.uniform(1.1, 2, (5,)).astype(np.float32)
    if name in ("arccos", "arcsin", "arctanh"):
        x = x - 1.5
    check(getattr(mx, alias)(mx.array(x)), getattr(np, name)(x.astype(np.float64)), rtol=1e-5,
          atol=1e-6)


@pytest.mark.parametrize("name,ref,args", [("add", np.add, 2), ("exp", np.exp, 1),
                                            ("sum", np.sum, 1), ("matmul", np.matmul, 2),
                                            ("sort", np.sort, 1), ("cumsum", np.cumsum, 1)])
def test_ops_accept_a_stream_or_device(name, ref, args):
    x = randn(3, 3)
    for s in (mx.cpu, mx.default_stream(mx.cpu)):
        out = getattr(mx, name)(*[mx.array(x)] * args, stream=s)
        check(out, ref(*[x.astype(np.float64)] * args), rtol=1e-5, atol=1e-5)


# ---- MLX corner cases: complex round / logcumsumexp, infinite arange steps, shapes past int32,
# empty scatters ----


def test_round_of_complex_rounds_each_part():
    z = np.array([22.2 + 3.6j, 18.5 + 98.2j, -0.5 - 1.5j], np.complex64)
    got = np.array(mx.round(mx.array(z)))
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(got, np.round(z.real) + 1j * np.round(z.imag))
    np.testing.assert_allclose(np.array(mx.round(mx.array(z), 1)),
                               np.round(z.real, 1) + 1j * np.round(z.imag, 1), rtol=1e-6)


@pytest.mark.parametrize("reverse, inclusive", [(False, True), (True, True), (False, False)])
def test_logcumsumexp_of_complex_matches_log_cumsum_exp(reverse, inclusive):
    z = (RNG.standard_normal((3, 5)) * 20 + 1j * RNG.standard_normal((3, 5))).astype(np.complex64)
    got = np.array(mx.logcumsumexp(mx.array(z), axis=1, reverse=reverse, inclusive=inclusive))
    zz = z.astype(np.complex128)[:, ::-1] if reverse else z.astype(np.complex128)
    ref = np.log(np.cumsum(np.exp(zz), axis=1))
    if not inclusive:
        ref = np.concatenate([np.full((3, 1), -np.inf), ref[:, :-1]], axis=1)
    ref = ref[:, ::-1] if reverse else ref
    finite = np.isfinite(ref.real)
    np.testing.assert_array_equal(np.isneginf(got.real), ~finite)
    # The imaginary part is an angle: compare on the unit circle.
    np.testing.assert_allclose(got.real[finite], ref.real[finite], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.exp(1j * got.imag[finite]), np.exp(1j * ref.imag[finite]), atol=1e-4)


def test_arange_with_an_infinite_step_takes_the_first_element():
    assert mx.arange(0, 10, float("inf")).tolist() == [0]
    assert mx.arange(0, -10, float("-inf")).tolist() == [0]
    assert mx.arange(10, 0, float("inf")).tolist() == []
    assert mx.arange(0, 10, 100).tolist() == [0]
    with pytest.raises(ValueError, match="2147483648"):
        mx.arange(0, 2**31, 1)


def test_shapes_outside_int32_are_overflow_errors_naming_the_value():
    for make in (lambda d: mx.zeros(d), lambda d: mx.ones([2, d]), lambda d: mx.full((d,), 1.0),
                 lambda d: mx.reshape(mx.zeros(4), [d]), lambda d: mx.broadcast_to(mx.zeros(1), [d, 1])):
        for d in (2**31, -(2**31) - 1):
            with pytest.raises(OverflowError, match=str(d)):
                make(d)
    with pytest.raises(OverflowError, match=str(2**32)):
        mx.kron(mx.zeros(2**16), mx.zeros(2**16))
    with pytest.raises(TypeError, match="'2'"):
        mx.reshape(mx.zeros(4), ["2", 2])
    assert mx.reshape(mx.arange(4), [np.int64(2), 2]).shape == (2, 2)
    assert mx.zeros(np.int32(3)).shape == (3,)


def test_scatters_into_empty_arrays_are_no_ops():
    e = mx.zeros((0,))
    e[mx.zeros((0,), dtype=mx.bool_)] = mx.zeros((0,))
    assert e.shape == (0,)
    assert mx.put_along_axis(e, e, e, axis=None).size == 0
    with pytest.raises(ValueError, match="integer dtype"):
        mx.put_along_axis(mx.zeros((2,)), mx.zeros((1,)), mx.ones((1,)), axis=0)


def test_device_info_names_the_cpu_and_its_architecture():
    import platform

    info = mx.device_info(mx.cpu)
    assert info == mx.device_info()
    assert info["architecture"] == platform.machine()
    with open("/proc/cpuinfo") as f:
        names = [l.split(": ", 1)[1].strip() for l in f if l.startswith("model name")]
    assert info["device_name"] == (names[0] if names else "unknown")
    with pytest.raises(ValueError, match="not available"):
        mx.device_info(mx.gpu)


def test_argpartition_puts_tied_values_in_index_order_around_kth():
    # MLX's CPU order for ties (mlx-lm routes tokens to the top-k of expert scores that are all
    # equal in a freshly initialised mixture of experts): the lowest indices come first.
    out = np.array(mx.argpartition(-mx.zeros((1, 4)), kth=1))
    np.testing.assert_array_equal(out, [[0, 1, 2, 3]])
    v = np.array([3, 1, 1, 1, 0, 1, 2, 1], np.float32)
    got = np.array(mx.argpartition(mx.array(v), kth=3))
    stable = np.argsort(v, kind="stable")
    assert set(got[:3]) == set(stable[:3]) and got[3] == stable[3]
