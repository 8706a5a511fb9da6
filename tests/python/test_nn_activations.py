"""tessera.nn activations: every function against a NumPy float64 version of its formula
(moderate and very large inputs), half-precision dtypes, shapeless compilation over changing
shapes and settings, the Module classes against the functions, and gradients against central
finite differences in float64.

Most activations are compiled (``mx.compile(shapeless=True)``, as in MLX), and each new fused
kernel costs one C++ compiler run on a cold kernel cache (~0.4 s). The float32 value tests run
every compiled function; the other dtype sweeps and most gradient checks run with compile
disabled (the ``eager`` fixture) and reuse the same settings, so a cold run builds about twenty
kernels and a warm one builds none."""

import math

import numpy as np
import pytest

import tessera.core as mx
from tessera.nn.layers import activations as A
from tessera.nn.layers.base import Module

RNG = np.random.default_rng(1234)

MODERATE = np.concatenate([np.linspace(-8, 8, 81), [-0.5, 0.5, 1e-3, -1e-3]])
LARGE = np.array([-1e30, -1e4, -100.0, -30.0, 30.0, 100.0, 1e4, 1e30])
INPUTS = np.concatenate([MODERATE, LARGE])

_erf = np.vectorize(math.erf)


def np_sigmoid(x):
    return 0.5 * (1 + np.tanh(x / 2))  # no overflow for any x


def np_softplus(x):
    return np.logaddexp(x, 0)


def np_elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def np_log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


# name -> (function under test, NumPy reference); both take x only.
ELEMENTWISE = {
    "sigmoid": (A.sigmoid, np_sigmoid),
    "relu": (A.relu, lambda x: np.maximum(x, 0)),
    "relu2": (A.relu2, lambda x: np.maximum(x, 0) ** 2),
    "relu6": (A.relu6, lambda x: np.clip(x, 0, 6)),
    "leaky_relu": (A.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x)),
    "leaky_relu_0.3": (lambda x: A.leaky_relu(x, 0.3), lambda x: np.where(x > 0, x, 0.3 * x)),
    "leaky_relu_kw": (lambda x: A.leaky_relu(x, negative_slope=0.05),
                      lambda x: np.where(x > 0, x, 0.05 * x)),
    "elu": (A.elu, np_elu),
    "elu_2": (lambda x: A.elu(x, alpha=2.0), lambda x: np_elu(x, 2.0)),
    "celu": (A.celu, lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(np.minimum(x, 0)))),
    "celu_0.5": (lambda x: A.celu(x, 0.5),
                 lambda x: np.maximum(x, 0) + 0.5 * np.expm1(np.minimum(x, 0) / 0.5)),
    # MLX's constants (rounded), not the exact SELU ones.
    "selu": (A.selu, lambda x: 1.0507 * np_elu(x, 1.67326)),
    "silu": (A.silu, lambda x: x * np_sigmoid(x)),
    "log_sigmoid": (A.log_sigmoid, lambda x: -np.logaddexp(0, -x)),
    "gelu": (A.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    "gelu_approx": (
        A.gelu_approx,
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    ),
    "gelu_fast_approx": (A.gelu_fast_approx, lambda x: x * np_sigmoid(1.702 * x)),
    "softplus": (A.softplus, np_softplus),
    "softsign": (A.softsign, lambda x: x / (1 + np.abs(x))),
    "softshrink": (A.softshrink,
                   lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0))),
    "softshrink_2": (lambda x: A.softshrink(x, lambd=2.0),
                     lambda x: np.where(x > 2, x - 2, np.where(x < -2, x + 2, 0))),
    "mish": (A.mish, lambda x: x * np.tanh(np_softplus(x))),
    "hardswish": (A.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hard_tanh": (A.hard_tanh, lambda x: np.clip(x, -1, 1)),
    "hard_tanh_range": (lambda x: A.hard_tanh(x, min_val=-0.5, max_val=2.0),
                        lambda x: np.clip(x, -0.5, 2.0)),
    "hard_shrink": (A.hard_shrink, lambda x: np.where(np.abs(x) > 0.5, x, 0)),
    "hard_shrink_3": (lambda x: A.hard_shrink(x, 3.0), lambda x: np.where(np.abs(x) > 3, x, 0)),
    "tanh": (A.tanh, np.tanh),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_values(name):
    fn, ref = ELEMENTWISE[name]
    x = INPUTS.astype(np.float32)
    out = fn(mx.array(x))
    assert out.dtype == mx.float32 and out.shape == x.shape
    with np.errstate(over="ignore"):
        # Rounded to float32, so a result beyond its range is inf as it should be.
        expected = ref(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=2e-6, atol=2e-6)


@pytest.fixture
def eager():
    """Run the compiled activations uncompiled (``mx.disable_compile``).

    The float32 tests above go through the compiled kernels; the dtype sweeps below check the
    same formulas eagerly, so that a cold kernel cache does not have to build a kernel for every
    dtype (each costs a C++ compiler run). ``test_compiled_half_precision`` covers the compiled
    path for half precision on ``gelu``.
    """
    mx.disable_compile()
    try:
        yield
    finally:
        mx.enable_compile()


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_elementwise_half_precision(name, dtype, eager):
    fn, ref = ELEMENTWISE[name]
    x = mx.array(MODERATE.astype(np.float32)).astype(dtype)
    out = fn(x)
    assert out.dtype == dtype, (name, out.dtype)
    xs = np.asarray(x.astype(mx.float32)).astype(np.float64)
    tol = 1e-2 if dtype == mx.float16 else 4e-2
    np.testing.assert_allclose(np.asarray(out.astype(mx.float32)), ref(xs), rtol=tol, atol=tol)


def test_compiled_half_precision():
    x = mx.array(MODERATE.astype(np.float32)).astype(mx.float16)
    xs = np.asarray(x.astype(mx.float32)).astype(np.float64)
    fn, ref = ELEMENTWISE["gelu"]
    out = fn(x)
    assert out.dtype == mx.float16
    np.testing.assert_allclose(np.asarray(out.astype(mx.float32)), ref(xs), rtol=1e-2, atol=1e-2)


def test_elementwise_keep_float64(eager):
    x = mx.array(MODERATE, dtype=mx.float64)
    for name, (fn, ref) in ELEMENTWISE.items():
        out = fn(x)
        assert out.dtype == mx.float64, name
        np.testing.assert_allclose(np.asarray(out), ref(MODERATE), rtol=1e-12, atol=1e-12,
                                   err_msg=name)


def test_prelu_function():
    x = RNG.normal(size=(4, 3)) * 3
    alpha = np.array([0.1, -0.5, 2.0])
    out = A.prelu(mx.array(x, dtype=mx.float32), mx.array(alpha, dtype=mx.float32))
    np.testing.assert_allclose(np.asarray(out), np.where(x > 0, x, alpha * x), rtol=1e-6)


def test_step():
    x = mx.array([-2.0, -1e-6, 0.0, 1e-6, 1.0, 3.0])
    out = A.step(x)
    assert out.dtype == mx.int32
    np.testing.assert_array_equal(np.asarray(out), [0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(np.asarray(A.step(x, 1.0)), [0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(np.asarray(A.step(x, threshold=-1.0)), [0, 1, 1, 1, 1, 1])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_softmin_log_softmax(axis, request):
    if axis != -1:
        request.getfixturevalue("eager")  # other axes: the formula, without more kernels
    x = RNG.normal(size=(4, 6)) * 5
    x[0] += 1e4  # a row of large values
    x32 = mx.array(x.astype(np.float32))
    xr = np.asarray(x32).astype(np.float64)
    logp = np_log_softmax(xr, axis)
    close = np.testing.assert_allclose
    close(np.asarray(A.softmax(x32, axis=axis)), np.exp(logp), rtol=1e-5, atol=1e-7)
    close(np.asarray(A.log_softmax(x32, axis=axis)), logp, rtol=1e-5, atol=1e-5)
    close(np.asarray(A.softmin(x32, axis=axis)), np.exp(np_log_softmax(-xr, axis)),
          rtol=1e-5, atol=1e-7)
    # The default axis is the last.
    if axis == -1:
        for fn in [A.softmax, A.log_softmax, A.softmin]:
            np.testing.assert_array_equal(np.asarray(fn(x32)), np.asarray(fn(x32, axis=-1)))


def test_log_softmax_of_equal_large_values():
    for v in [1.0, 1e4, 1e8, 1e20, 1e36]:
        out = A.log_softmax(mx.array([[v, v]]))
        np.testing.assert_allclose(np.asarray(out), [[-math.log(2)] * 2], atol=1e-6)
        np.testing.assert_allclose(np.asarray(A.softmax(mx.array([[v, v, v, v]]))), [[0.25] * 4])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_glu(axis):
    x = RNG.normal(size=(4, 6, 2))
    a, b = np.split(x, 2, axis=axis)
    out = A.glu(mx.array(x.astype(np.float32)), axis=axis)
    np.testing.assert_allclose(np.asarray(out), a * np_sigmoid(b), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        A.glu(mx.zeros((3, 5)))


def test_shapeless_compile_follows_shapes_and_settings():
    # A shapeless compiled function is reused for new shapes: results must follow them.
    for shape in [(3,), (2, 5), (4, 1, 3), (7,), (2, 3, 2, 2)]:
        x = RNG.normal(size=shape) * 4
        xm = mx.array(np.asarray(x, dtype=np.float32))
        xr = np.asarray(xm).astype(np.float64)
        for name in ["relu", "silu", "gelu", "elu", "hardswish", "softshrink"]:
            fn, ref = ELEMENTWISE[name]
            out = fn(xm)
            assert out.shape == shape, (name, out.shape)
            np.testing.assert_allclose(np.asarray(out), ref(xr), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(A.log_softmax(xm)), np_log_softmax(xr),
                                   rtol=1e-5, atol=1e-5)
    # Changing a scalar setting between calls changes the result.
    x = mx.array([-2.0, 1.0])
    for slope in [0.01, 0.3, 0.05]:
        np.testing.assert_allclose(np.asarray(A.leaky_relu(x, slope)), [-2 * slope, 1.0], rtol=1e-6)
    for alpha in [1.0, 2.0]:
        np.testing.assert_allclose(np.asarray(A.elu(x, alpha)), [alpha * math.expm1(-2), 1.0],
                                   rtol=1e-6)


# ---- Modules --------------------------------------------------------------------------------

CLASS_CASES = [
    (A.Sigmoid(), A.sigmoid),
    (A.ReLU(), A.relu),
    (A.ReLU2(), A.relu2),
    (A.ReLU6(), A.relu6),
    (A.LeakyReLU(), A.leaky_relu),
    (A.LeakyReLU(negative_slope=0.3), lambda x: A.leaky_relu(x, 0.3)),
    (A.ELU(), A.elu),
    (A.ELU(alpha=2.0), lambda x: A.elu(x, 2.0)),
    (A.CELU(), A.celu),
    (A.CELU(alpha=0.5), lambda x: A.celu(x, 0.5)),
    (A.SELU(), A.selu),
    (A.SiLU(), A.silu),
    (A.LogSigmoid(), A.log_sigmoid),
    (A.LogSoftmax(), A.log_softmax),
    (A.Softmax(), A.softmax),
    (A.Softmin(), A.softmin),
    (A.Softplus(), A.softplus),
    (A.Softsign(), A.softsign),
    (A.Softshrink(), A.softshrink),
    (A.Softshrink(lambd=2.0), lambda x: A.softshrink(x, 2.0)),
    (A.Mish(), A.mish),
    (A.Hardswish(), A.hardswish),
    (A.HardTanh(), A.hard_tanh),
    (A.HardShrink(), A.hard_shrink),
    (A.HardShrink(lambd=3.0), lambda x: A.hard_shrink(x, 3.0)),
    (A.Tanh(), A.tanh),
    (A.Step(), A.step),
    (A.Step(threshold=1.0), lambda x: A.step(x, 1.0)),
    (A.GLU(), A.glu),
    (A.GLU(axis=0), lambda x: A.glu(x, axis=0)),
    (A.GELU(), A.gelu),
    (A.GELU(approx="precise"), A.gelu_approx),
    (A.GELU(approx="tanh"), A.gelu_approx),
    (A.GELU(approx="fast"), A.gelu_fast_approx),
    (A.PReLU(), lambda x: A.prelu(x, mx.array([0.25]))),
]


@pytest.mark.parametrize("module,function", CLASS_CASES, ids=lambda v: type(v).__name__)
def test_classes_equal_functions(module, function):
    assert isinstance(module, Module)
    x = mx.array((RNG.normal(size=(4, 6)) * 3).astype(np.float32))
    np.testing.assert_array_equal(np.asarray(module(x)), np.asarray(function(x)))
    if not isinstance(module, A.PReLU):
        assert module.parameters() == {}


def test_class_settings_matter():
    x = mx.array([-4.0, -1.0, 0.3, 1.0])
    np.testing.assert_allclose(np.asarray(A.LeakyReLU(0.3)(x)), [-1.2, -0.3, 0.3, 1.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(A.ELU(2.0)(x)),
                               [2 * math.expm1(-4), 2 * math.expm1(-1), 0.3, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(A.Step(threshold=1.0)(x)), [0, 0, 0, 1])
    np.testing.assert_allclose(np.asarray(A.HardShrink(lambd=3.0)(x)), [-4.0, 0, 0, 0])
    np.testing.assert_allclose(np.asarray(A.Softshrink(lambd=2.0)(x)), [-2.0, 0, 0, 0], rtol=1e-6)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(ValueError, match="'erf'"):
        A.GELU(approx="erf")


def test_gelu_approximations_are_close():
    x = mx.arange(-6.0, 6.0, 0.12)
    exact = np.asarray(A.gelu(x))
    assert np.abs(np.asarray(A.gelu_approx(x)) - exact).max() < 5e-4
    assert np.abs(np.asarray(A.gelu_fast_approx(x)) - exact).max() < 2.5e-2


def test_prelu_module():
    m = A.PReLU(num_parameters=3, init=0.1)
    assert set(m.parameters()) == {"weight"}
    assert m.weight.shape == (3,) and m.weight.dtype == mx.float32
    np.testing.assert_allclose(np.asarray(m.weight), [0.1] * 3, rtol=1e-7)
    x = RNG.normal(size=(5, 3))
    xm = mx.array(x.astype(np.float32))
    xr = np.asarray(xm).astype(np.float64)
    np.testing.assert_allclose(np.asarray(m(xm)), np.where(xr > 0, xr, 0.1 * xr), rtol=1e-6)
    # The weight is a trainable parameter: its gradient is sum(min(0, x)) per channel.
    m.update({"weight": mx.array([0.2, 0.5, -1.0])})

    def loss(params):
        m.update(params)
        return mx.sum(m(xm))

    grads = mx.grad(loss)(m.trainable_parameters())
    np.testing.assert_allclose(np.asarray(grads["weight"]), np.minimum(xr, 0).sum(axis=0),
                               rtol=1e-5)


# ---- gradients ------------------------------------------------------------------------------


def finite_difference(f, x, h=1e-6):
    out = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        out[i] = (f(up) - f(down)) / (2 * h)
    return out


GRAD_CASES = {
    "sigmoid": A.sigmoid,
    "silu": A.silu,
    "gelu": A.gelu,
    "gelu_approx": A.gelu_approx,
    "softplus": A.softplus,
    "log_sigmoid": A.log_sigmoid,
    "mish": A.mish,
    "elu": lambda x: A.elu(x, 1.3),
    "celu": lambda x: A.celu(x, 0.7),
    "selu": A.selu,
    "leaky_relu": lambda x: A.leaky_relu(x, 0.2),
    "hardswish": A.hardswish,
    "softsign": A.softsign,
    # Weighted, so that the sum of the outputs is not a constant.
    "log_softmax": lambda x: A.log_softmax(x) * mx.array([1.0, -2.0, 0.5, 3.0, 1.0], mx.float64),
    "softmin": lambda x: A.softmin(x, axis=0) * mx.array([1.0, 2.0, 3.0, 4.0, 5.0], mx.float64),
    "glu": lambda x: A.glu(mx.reshape(x, (2, 5)), axis=0),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_against_finite_differences(name, request):
    if name != "gelu":
        # Through the compiled kernels for gelu only: each float64 backward is another kernel
        # to build on a cold cache, and the derivative rules are those of the eager ops.
        request.getfixturevalue("eager")
    fn = GRAD_CASES[name]
    # Keep away from the kinks of the piecewise functions (0 and +-3).
    x = np.array([-2.7, -1.1, -0.4, 0.35, 1.6, 2.2, -3.4, 0.8, 3.6, -0.05])
    if name in ("log_softmax", "softmin"):
        x = x[:5]

    def scalar(v):
        return mx.sum(fn(v))

    analytic = mx.grad(scalar)(mx.array(x, dtype=mx.float64))
    assert analytic.dtype == mx.float64
    numeric = finite_difference(lambda v: scalar(mx.array(v, dtype=mx.float64)).item(), x)
    np.testing.assert_allclose(np.asarray(analytic), numeric, rtol=1e-6, atol=1e-8)


def test_prelu_gradients(eager):
    x = np.array([-1.5, 0.7, -0.2, 2.0])
    alpha = np.array([0.3, -0.1, 0.8, 0.25])

    def f(xv, av):
        return mx.sum(A.prelu(xv, av) * mx.array([1.0, 2.0, 3.0, 4.0], dtype=mx.float64))

    def f64(v):
        return mx.array(v, dtype=mx.float64)

    gx, ga = mx.grad(f, argnums=(0, 1))(f64(x), f64(alpha))
    numeric_x = finite_difference(lambda v: f(f64(v), f64(alpha)).item(), x)
    numeric_a = finite_difference(lambda v: f(f64(x), f64(v)).item(), alpha)
    np.testing.assert_allclose(np.asarray(gx), numeric_x, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ga), numeric_a, rtol=1e-6, atol=1e-9)
