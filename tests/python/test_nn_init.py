"""tessera.nn.init: shapes and dtypes, exact constant and identity values, fan-in / fan-out as
MLX computes them, and the mean / spread / bounds of large samples within a few standard
errors."""

import math

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn.init as init

DTYPES = [mx.float32, mx.float16, mx.bfloat16]
SHAPES = [(3,), (3, 3), (2, 3, 4)]
Z = 5.0  # how many standard errors a sample statistic may stray


def as_np(a):
    return np.asarray(a.astype(mx.float32)).astype(np.float64)


def check_normal_sample(sample, mean, std):
    x = as_np(sample).ravel()
    n = x.size
    assert abs(x.mean() - mean) < Z * std / math.sqrt(n), (x.mean(), mean)
    # The sample std of a normal has standard error about std / sqrt(2n).
    assert abs(x.std() - std) < Z * std / math.sqrt(2 * n), (x.std(), std)


def check_uniform_sample(sample, low, high):
    x = as_np(sample).ravel()
    n = x.size
    width = high - low
    assert x.min() >= low and x.max() <= high, (x.min(), x.max(), low, high)
    # Both ends are reached (to within a small fraction of the width).
    assert x.min() < low + 1e-3 * width and x.max() > high - 1e-3 * width
    std = width / math.sqrt(12)
    assert abs(x.mean() - (low + high) / 2) < Z * std / math.sqrt(n)
    # Var of a uniform sample's variance: (w^4/80 - w^4/144) / n.
    var_se = math.sqrt((width**4 / 80 - width**4 / 144) / n)
    assert abs(x.var() - std**2) < Z * var_se, (x.var(), std**2)


# ---- constant, normal, uniform, identity ----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_constant(dtype, shape):
    out = init.constant(2.5, dtype)(mx.zeros(shape))
    assert out.shape == shape and out.dtype == dtype
    assert (as_np(out) == 2.5).all()


def test_constant_default_dtype_ignores_input_dtype():
    out = init.constant(-1)(mx.zeros((2, 2), dtype=mx.float16))
    assert out.dtype == mx.float32
    np.testing.assert_array_equal(np.asarray(out), -np.ones((2, 2)))
    assert init.constant(3, mx.int32)(mx.zeros((4,))).dtype == mx.int32


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_normal_and_uniform_shapes_and_dtypes(dtype, shape):
    for initializer in [init.normal(dtype=dtype), init.uniform(-1.0, 1.0, dtype)]:
        out = initializer(mx.zeros(shape))
        assert out.shape == shape and out.dtype == dtype
    assert init.normal()(mx.zeros(shape)).dtype == mx.float32
    assert init.uniform()(mx.zeros(shape)).dtype == mx.float32


def test_normal_statistics():
    check_normal_sample(init.normal()(mx.zeros((400, 500))), 0.0, 1.0)
    check_normal_sample(init.normal(mean=3.0, std=0.5)(mx.zeros((200, 500))), 3.0, 0.5)
    check_normal_sample(init.normal(-2.0, 4.0, mx.float16)(mx.zeros((100, 500))), -2.0, 4.0)


def test_uniform_statistics():
    out = init.uniform()(mx.zeros((400, 500)))
    check_uniform_sample(out, 0.0, 1.0)
    assert as_np(out).max() < 1.0  # a half-open interval
    check_uniform_sample(init.uniform(-3.0, 5.0)(mx.zeros((200, 500))), -3.0, 5.0)
    check_uniform_sample(init.uniform(low=2.0, high=2.5)(mx.zeros((100, 500))), 2.0, 2.5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_identity(dtype):
    for n in [1, 3, 7]:
        out = init.identity(dtype)(mx.zeros((n, n)))
        assert out.dtype == dtype and out.shape == (n, n)
        np.testing.assert_array_equal(as_np(out), np.eye(n))
    for bad in [(3, 2), (3,), (2, 2, 2)]:
        with pytest.raises(ValueError, match=re_shape(bad)):
            init.identity(dtype)(mx.zeros(bad))


def re_shape(shape):
    return "\\(" + ", ".join(str(s) for s in shape) + (",\\)" if len(shape) == 1 else "\\)")


# ---- fan computation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,fan_in,fan_out",
    [
        ((3, 5), 5, 3),
        ((8, 3, 2), 2 * 3, 8 * 3),  # (out, k, in): receptive field k
        ((16, 3, 5, 4), 4 * 15, 16 * 15),  # (out, kh, kw, in)
        ((2, 1, 1, 1, 9), 9, 2),
    ],
)
def test_fan_in_fan_out(shape, fan_in, fan_out):
    assert init._calculate_fan_in_fan_out(mx.zeros(shape)) == (fan_in, fan_out)


@pytest.mark.parametrize(
    "make", [init.glorot_normal, init.glorot_uniform, init.he_normal, init.he_uniform]
)
def test_fan_based_initializers_need_two_dimensions(make):
    for shape in [(), (7,)]:
        with pytest.raises(ValueError, match=f"{len(shape)} dimensions"):
            make()(mx.zeros(shape))


# ---- Glorot and He --------------------------------------------------------------------------

CONV = (256, 5, 5, 32)  # fan_in = 32 * 25 = 800, fan_out = 256 * 25 = 6400
FAN_IN, FAN_OUT = 800, 6400


@pytest.mark.parametrize("dtype", DTYPES)
def test_glorot_and_he_shapes_and_dtypes(dtype):
    for make in [init.glorot_normal, init.glorot_uniform, init.he_normal, init.he_uniform]:
        for shape in [(3, 3), (3, 3, 3), (4, 2, 3, 5)]:
            out = make(dtype)(mx.zeros(shape))
            assert out.shape == shape and out.dtype == dtype
        assert make()(mx.zeros((2, 3))).dtype == mx.float32


def test_glorot_normal_statistics():
    x = mx.zeros(CONV)
    check_normal_sample(init.glorot_normal()(x), 0.0, math.sqrt(2.0 / (FAN_IN + FAN_OUT)))
    check_normal_sample(
        init.glorot_normal()(x, gain=3.0), 0.0, 3.0 * math.sqrt(2.0 / (FAN_IN + FAN_OUT))
    )
    check_normal_sample(init.glorot_normal()(mx.zeros((300, 700))), 0.0, math.sqrt(2.0 / 1000))


def test_glorot_uniform_statistics():
    x = mx.zeros(CONV)
    limit = math.sqrt(6.0 / (FAN_IN + FAN_OUT))
    check_uniform_sample(init.glorot_uniform()(x), -limit, limit)
    check_uniform_sample(init.glorot_uniform()(x, 0.5), -0.5 * limit, 0.5 * limit)


def test_he_normal_statistics():
    x = mx.zeros(CONV)
    he = init.he_normal()
    check_normal_sample(he(x), 0.0, 1 / math.sqrt(FAN_IN))
    check_normal_sample(he(x, mode="fan_in"), 0.0, 1 / math.sqrt(FAN_IN))
    check_normal_sample(he(x, mode="fan_out"), 0.0, 1 / math.sqrt(FAN_OUT))
    check_normal_sample(he(x, "fan_out", 2.0), 0.0, 2.0 / math.sqrt(FAN_OUT))
    check_normal_sample(he(x, gain=math.sqrt(2)), 0.0, math.sqrt(2 / FAN_IN))


def test_he_uniform_statistics():
    x = mx.zeros(CONV)
    he = init.he_uniform()
    lim_in, lim_out = math.sqrt(3.0 / FAN_IN), math.sqrt(3.0 / FAN_OUT)
    check_uniform_sample(he(x), -lim_in, lim_in)
    check_uniform_sample(he(x, mode="fan_out"), -lim_out, lim_out)
    check_uniform_sample(he(x, mode="fan_in", gain=4.0), -4 * lim_in, 4 * lim_in)


@pytest.mark.parametrize("make", [init.he_normal, init.he_uniform])
def test_he_rejects_unknown_mode(make):
    with pytest.raises(ValueError, match="fan_avg"):
        make()(mx.zeros((3, 3)), mode="fan_avg")


# ---- sparse ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sparsity,shape", [(0.5, (3, 2)), (0.5, (2, 2)), (0.5, (4, 3)),
                                            (0.3, (5, 10)), (0.25, (6, 7))])
def test_sparse_zeros_per_row(dtype, sparsity, shape):
    out = init.sparse(sparsity, dtype=dtype)(mx.zeros(shape))
    assert out.shape == shape and out.dtype == dtype
    zeros = (as_np(out) == 0).sum(axis=1)
    np.testing.assert_array_equal(zeros, math.ceil(sparsity * shape[1]))


def test_sparse_edges_and_statistics():
    assert (as_np(init.sparse(0.0)(mx.zeros((4, 6)))) != 0).all()
    assert (as_np(init.sparse(1.0)(mx.zeros((4, 6)))) == 0).all()
    out = as_np(init.sparse(0.4, mean=1.5, std=2.0)(mx.zeros((500, 400))))
    assert ((out == 0).sum(axis=1) == 160).all()
    # The kept entries are the normal samples.
    kept = out[out != 0]
    check_normal_sample(mx.array(kept), 1.5, 2.0)
    # The zeroed columns differ from row to row and cover the columns evenly.
    mask = out == 0
    assert len({row.tobytes() for row in mask}) > 490
    per_column = mask.sum(axis=0)
    expected, se = 500 * 0.4, math.sqrt(500 * 0.4 * 0.6)
    assert np.abs(per_column - expected).max() < Z * se


def test_sparse_needs_two_dimensions():
    initializer = init.sparse(0.5)
    for shape in [(4,), (2, 3, 4)]:
        with pytest.raises(ValueError, match=f"{len(shape)} dimensions"):
            initializer(mx.zeros(shape))


def test_seeded_initializers_are_reproducible():
    for initializer in [init.normal(), init.uniform(), init.glorot_uniform(), init.he_normal(),
                        init.sparse(0.5)]:
        mx.random.seed(7)
        a = np.asarray(initializer(mx.zeros((6, 5))))
        mx.random.seed(7)
        b = np.asarray(initializer(mx.zeros((6, 5))))
        c = np.asarray(initializer(mx.zeros((6, 5))))
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(b, c)



@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_orthogonal_has_orthonormal_rows_or_columns(shape):
    q = as_np(init.orthogonal(gain=2.0)(mx.zeros(shape)))
    assert q.shape == shape
    small = min(shape)
    gram = q.T @ q if shape[0] >= shape[1] else q @ q.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-5)
    with pytest.raises(ValueError, match="2D"):
        init.orthogonal()(mx.zeros((2, 2, 2)))
