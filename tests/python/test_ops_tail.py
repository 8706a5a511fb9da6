"""The smaller ops of the op tail against NumPy: kron, vecdot, diff, median, searchsorted and
the window functions, and depends."""

import numpy as np
import pytest

import tessera.core as mx

RNG = np.random.default_rng(17)


@pytest.mark.parametrize("sa,sb", [((2, 3), (4, 5)), ((3,), (2, 2)), ((2, 1, 3), (3, 2))])
def test_kron(sa, sb):
    a, b = RNG.standard_normal(sa).astype(np.float32), RNG.standard_normal(sb).astype(np.float32)
    np.testing.assert_allclose(np.array(mx.kron(mx.array(a), mx.array(b))), np.kron(a, b), rtol=1e-6)
    with pytest.raises(ValueError, match="empty"):
        mx.kron(mx.zeros((0,)), mx.array(b))


def test_vecdot_conjugates_the_first_argument():
    a = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex64)
    b = (RNG.standard_normal((4,)) + 1j * RNG.standard_normal((4,))).astype(np.complex64)
    np.testing.assert_allclose(np.array(mx.vecdot(mx.array(a), mx.array(b))), np.vecdot(a, b), rtol=1e-5)
    x, y = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 3))
    np.testing.assert_allclose(np.array(mx.vecdot(mx.array(x), mx.array(y), axis=0)),
                               np.vecdot(x, y, axis=0), rtol=1e-5)


@pytest.mark.parametrize("n,axis", [(1, -1), (2, 0), (0, 1), (5, -1)])
def test_diff(n, axis):
    a = RNG.integers(-9, 9, (4, 6))
    np.testing.assert_array_equal(np.array(mx.diff(mx.array(a), n=n, axis=axis)), np.diff(a, n=n, axis=axis))


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), -1])
def test_median(axis):
    a = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    np.testing.assert_allclose(np.array(mx.median(mx.array(a), axis=axis)), np.median(a, axis=axis), rtol=1e-6)
    np.testing.assert_allclose(np.array(mx.median(mx.array(a), axis=axis, keepdims=True)),
                               np.median(a, axis=axis, keepdims=True), rtol=1e-6)
    a[1, 2, 3] = np.nan
    np.testing.assert_allclose(np.array(mx.median(mx.array(a), axis=axis)), np.median(a, axis=axis), rtol=1e-6)
    ints = RNG.integers(0, 10, (7,))
    assert mx.median(mx.array(ints)).item() == np.median(ints)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(side):
    seq = np.sort(RNG.integers(0, 20, 50)).astype(np.float32)
    vals = RNG.integers(-2, 23, (3, 7)).astype(np.float32)
    np.testing.assert_array_equal(np.array(mx.searchsorted(mx.array(seq), mx.array(vals), side=side)),
                                  np.searchsorted(seq, vals, side=side))
    with_nan = np.array([1.0, 2.0, np.nan], np.float32)
    assert mx.searchsorted(mx.array(with_nan), mx.array([np.nan]), side=side).tolist() == \
        np.searchsorted(with_nan, [np.nan], side=side).tolist()
    got = mx.vmap(lambda s_: mx.searchsorted(s_, mx.array(vals[0])), in_axes=0)(mx.array(np.stack([seq, seq[::-1].copy()[::-1]])))
    np.testing.assert_array_equal(np.array(got)[0], np.searchsorted(seq, vals[0]))
    with pytest.raises(ValueError, match="side"):
        mx.searchsorted(mx.array(seq), mx.array(vals), side="middle")
    with pytest.raises(ValueError, match="1-D"):
        mx.searchsorted(mx.ones((2, 2)), mx.array(vals))


@pytest.mark.parametrize("name", ["hanning", "hamming", "bartlett", "blackman"])
@pytest.mark.parametrize("m", [0, 1, 2, 7, 64])
def test_windows(name, m):
    got = np.array(getattr(mx, name)(m))
    np.testing.assert_allclose(got, getattr(np, name)(m), atol=1e-6)


def test_multivariate_normal_moments_shapes_and_errors():
    cov = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])
    mean = np.array([1.0, -2.0, 0.5])
    n = 100000
    x = np.array(mx.random.multivariate_normal(mx.array(mean), mx.array(cov), shape=(n,),
                                               key=mx.random.key(3))).astype(np.float64)
    assert x.shape == (n, 3)
    # Within 5 standard errors: of the mean sqrt(var / n); of a covariance entry
    # sqrt((s_ii s_jj + s_ij^2) / n).
    assert np.all(np.abs(x.mean(0) - mean) < 5 * np.sqrt(np.diag(cov) / n))
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    assert np.all(np.abs(np.cov(x.T) - cov) < 5 * se)
    # A singular covariance (rank 1): every sample lies on the line mean + t * (1, 1).
    y = np.array(mx.random.multivariate_normal(mx.zeros((2,)), mx.array([[1.0, 1.0], [1.0, 1.0]]),
                                               shape=(50,), dtype=mx.float64, key=mx.random.key(4)))
    np.testing.assert_allclose(y[:, 0], y[:, 1], atol=1e-6)
    batched = mx.random.multivariate_normal(mx.zeros((4, 1, 3)), mx.array(np.stack([cov] * 2)))
    assert batched.shape == (4, 2, 3)
    with pytest.raises(ValueError, match="mean"):
        mx.random.multivariate_normal(mx.zeros((2,)), mx.eye(3))
    with pytest.raises(ValueError, match="float32 or float64"):
        mx.random.multivariate_normal(mx.zeros((2,)), mx.eye(2), dtype=mx.float16)


# ---- depends ----

def test_depends_passes_values_and_gradients_and_evaluates_the_dependencies():
    x = mx.array([1.0, 2.0, 3.0])
    dep = mx.exp(mx.array([0.0]))
    y = mx.depends(x * 2, dep)
    np.testing.assert_array_equal(np.array(y), [2.0, 4.0, 6.0])
    a, b = mx.depends([x, x + 1], [dep, dep * 3])
    np.testing.assert_array_equal(np.array(b), [2.0, 3.0, 4.0])
    g = mx.grad(lambda x: (mx.depends(x * x, dep) * 1.0).sum())(x)
    np.testing.assert_array_equal(np.array(g), [2.0, 4.0, 6.0])
    # Evaluating the output evaluates the dependency: one that fails to evaluate fails it.
    bad = mx.gather_mm(mx.ones((2, 2, 2)), mx.ones((2, 2, 2)), rhs_indices=mx.array([5]))
    with pytest.raises(ValueError, match="rhs_indices holds 5"):
        mx.eval(mx.depends(x + 1, bad))
