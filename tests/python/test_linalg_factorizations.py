"""linalg's LAPACK routines (qr, svd, inv, tri_inv, cholesky, cholesky_inv, pinv, lu,
lu_factor, solve, solve_triangular, eig, eigh, det, slogdet, cross, the SVD norms) against
NumPy / SciPy and reconstructions; gradients against finite differences in float64."""

import itertools

import numpy as np
import pytest
import scipy.linalg

import tessera.core as mx

RNG = np.random.default_rng(11)
LA = mx.linalg


def f64(v):
    return mx.array(v, dtype=mx.float64)


def rand(*shape):
    return RNG.standard_normal(shape)


def spd(*shape):
    a = rand(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (0, 3)])
def test_qr_reconstructs_with_orthonormal_q(shape):
    a = rand(*shape)
    q, r = LA.qr(f64(a))
    q, r = np.array(q), np.array(r)
    k = min(shape[-2:])
    assert q.shape == (*shape[:-2], shape[-2], k) and r.shape == (*shape[:-2], k, shape[-1])
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)), atol=1e-12)
    np.testing.assert_array_equal(np.tril(r, -1), 0)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (3, 5, 5)])
def test_svd_matches_numpy_and_reconstructs(shape):
    a = rand(*shape).astype(np.float32)
    u, s, vt = (np.array(x) for x in LA.svd(mx.array(a)))
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-5)
    k = min(shape[-2:])
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], a, atol=1e-5)
    np.testing.assert_allclose(np.array(LA.svd(mx.array(a), compute_uv=False)), s, rtol=1e-6)


def test_inverses():
    a = rand(3, 5, 5)
    np.testing.assert_allclose(np.array(LA.inv(f64(a))), np.linalg.inv(a), rtol=1e-10)
    low = np.tril(a) + 5 * np.eye(5)
    # The other triangle is not read.
    got = np.array(LA.tri_inv(f64(low + np.triu(rand(5, 5), 1))))
    np.testing.assert_allclose(got, np.linalg.inv(low), rtol=1e-10, atol=1e-12)
    up = np.swapaxes(low, -1, -2)
    np.testing.assert_allclose(np.array(LA.tri_inv(f64(up), upper=True)), np.linalg.inv(up), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.array(LA.pinv(f64(a[0, :3]))), np.linalg.pinv(a[0, :3]), atol=1e-12)


def test_cholesky_and_its_inverse():
    m = spd(2, 4, 4)
    low = np.array(LA.cholesky(f64(m)))
    np.testing.assert_allclose(low, np.linalg.cholesky(m), rtol=1e-12)
    up = np.array(LA.cholesky(f64(m), upper=True))
    np.testing.assert_allclose(up, np.swapaxes(np.linalg.cholesky(m), -1, -2), rtol=1e-12)
    np.testing.assert_allclose(np.array(LA.cholesky_inv(f64(low))), np.linalg.inv(m), rtol=1e-10)
    np.testing.assert_allclose(np.array(LA.cholesky_inv(f64(up), upper=True)), np.linalg.inv(m), rtol=1e-10)


def test_lu_and_lu_factor_match_scipy():
    a = rand(2, 5, 5)
    p, l, u = (np.array(x) for x in LA.lu(f64(a)))
    np.testing.assert_allclose(np.take_along_axis(l, p[..., None].astype(np.int64), axis=-2) @ u, a, atol=1e-12)
    lu, piv = LA.lu_factor(f64(a[0]))
    want_lu, want_piv = scipy.linalg.lu_factor(a[0])
    np.testing.assert_allclose(np.array(lu), want_lu, atol=1e-12)
    np.testing.assert_array_equal(np.array(piv), want_piv)
    # Non-square.
    for shape in [(3, 5), (5, 3)]:
        b = rand(*shape)
        p, l, u = (np.array(x) for x in LA.lu(f64(b)))
        np.testing.assert_allclose(l[p] @ u, b, atol=1e-12)


def test_solves_broadcast_and_match_numpy():
    a, b = rand(3, 4, 4), rand(4, 2)
    np.testing.assert_allclose(np.array(LA.solve(f64(a), f64(b))), np.linalg.solve(a, b), rtol=1e-10)
    v = rand(4)
    np.testing.assert_allclose(np.array(LA.solve(f64(a[0]), f64(v))), np.linalg.solve(a[0], v), rtol=1e-10)
    low = np.tril(a[0]) + 4 * np.eye(4)
    np.testing.assert_allclose(np.array(LA.solve_triangular(f64(low), f64(b))),
                               scipy.linalg.solve_triangular(low, b, lower=True), rtol=1e-10)


def test_eigen_decompositions():
    m = spd(2, 5, 5)
    for uplo in ["L", "U"]:
        w, v = (np.array(x) for x in LA.eigh(f64(m), UPLO=uplo))
        np.testing.assert_allclose(w, np.linalg.eigvalsh(m), rtol=1e-10)
        np.testing.assert_allclose(m @ v, v * w[..., None, :], atol=1e-10)
        np.testing.assert_allclose(np.array(LA.eigvalsh(f64(m), UPLO=uplo)), w, rtol=1e-12)
    a = rand(6, 6).astype(np.float32)
    w, v = (np.array(x) for x in LA.eig(mx.array(a)))
    assert w.dtype == np.complex64 and v.dtype == np.complex64
    np.testing.assert_allclose(a @ v, v * w[None, :], atol=1e-4)
    np.testing.assert_allclose(np.sort_complex(np.array(LA.eigvals(mx.array(a)))),
                               np.sort_complex(np.linalg.eigvals(a)), rtol=1e-4)


def test_complex_svd_eig_eigh():
    a = (rand(4, 4) + 1j * rand(4, 4)).astype(np.complex64)
    u, s, vt = (np.array(x) for x in LA.svd(mx.array(a)))
    assert s.dtype == np.float32
    np.testing.assert_allclose((u * s[None, :]) @ vt, a, atol=1e-5)
    w, v = (np.array(x) for x in LA.eig(mx.array(a)))
    np.testing.assert_allclose(a @ v, v * w[None, :], atol=1e-4)
    h = a @ a.conj().T
    w, v = (np.array(x) for x in LA.eigh(mx.array(h)))
    assert w.dtype == np.float32
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(h @ v, v * w[None, :], atol=1e-3)


def test_det_slogdet_norms_and_cross():
    a = rand(3, 5, 5)
    np.testing.assert_allclose(np.array(LA.det(f64(a))), np.linalg.det(a), rtol=1e-10)
    sign, logabs = LA.slogdet(f64(a))
    want = np.linalg.slogdet(a)
    np.testing.assert_array_equal(np.array(sign), want.sign)
    np.testing.assert_allclose(np.array(logabs), want.logabsdet, rtol=1e-10)
    sign, logabs = LA.slogdet(f64(np.ones((3, 3))))
    assert sign.item() == 0 and logabs.item() == -np.inf
    for ord_ in [2, -2, "nuc"]:
        np.testing.assert_allclose(np.array(LA.norm(f64(a), ord_, axis=(0, 2))),
                                   np.linalg.norm(a, ord_, axis=(0, 2)), rtol=1e-10)
    np.testing.assert_allclose(np.array(LA.norm(f64(a), "nuc", axis=(1, 2), keepdims=True)),
                               np.linalg.norm(a, "nuc", axis=(1, 2), keepdims=True), rtol=1e-10)
    x, y = rand(4, 3), rand(3)
    np.testing.assert_allclose(np.array(LA.cross(f64(x), f64(y))), np.cross(x, y), rtol=1e-12)
    np.testing.assert_allclose(np.array(LA.cross(f64(x[:, :2]), f64(y))),
                               np.cross(np.pad(x[:, :2], ((0, 0), (0, 1))), y), rtol=1e-12)


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for idx in itertools.product(*map(range, x.shape)):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        g[idx] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize(
    "name,fn,make",
    [
        ("inv", lambda a: LA.inv(a), lambda: rand(4, 4) + 4 * np.eye(4)),
        ("tri_inv", lambda a: LA.tri_inv(a, upper=True), lambda: rand(4, 4) + 4 * np.eye(4)),
        ("cholesky", lambda a: LA.cholesky(a), lambda: spd(4, 4)),
        ("cholesky_upper", lambda a: LA.cholesky(a, upper=True), lambda: spd(4, 4)),
        ("eigh", lambda a: LA.eigh(a)[1] * LA.eigh(a)[0][None, :], lambda: spd(4, 4)),
        ("eigvalsh_U", lambda a: LA.eigvalsh(a, UPLO="U"), lambda: spd(4, 4)),
        ("solve", lambda a: LA.solve(a, f64(np.arange(8.0).reshape(4, 2))), lambda: rand(4, 4) + 4 * np.eye(4)),
        ("det", lambda a: LA.det(a), lambda: rand(4, 4)),
        ("slogdet", lambda a: LA.slogdet(a)[1], lambda: rand(2, 3, 3)),
    ],
)
def test_gradients_match_finite_differences(name, fn, make):
    a = make()
    c = RNG.standard_normal(np.array(fn(f64(a))).shape)
    if name == "eigh":
        # Eigenvectors are defined up to sign: weigh a sign-invariant function of them.
        def loss(x):
            w, v = LA.eigh(x)
            return mx.sum(mx.square(v) * f64(c)) + mx.sum(w * f64(c[0]))
    else:
        def loss(x):
            return mx.sum(fn(x) * f64(c))
    got = np.array(mx.grad(loss)(f64(a)))
    want = numeric_grad(lambda v: loss(f64(v)).item(), a)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_solve_gradient_in_b_and_vmap():
    a, b = rand(4, 4) + 4 * np.eye(4), rand(4, 3)
    c = rand(4, 3)
    gb = mx.grad(lambda x: mx.sum(LA.solve(f64(a), x) * f64(c)))(f64(b))
    np.testing.assert_allclose(np.array(gb), np.linalg.solve(a.T, c), rtol=1e-10)
    batch = rand(3, 4, 4) + 4 * np.eye(4)
    got = mx.vmap(LA.inv)(f64(batch))
    np.testing.assert_allclose(np.array(got), np.linalg.inv(batch), rtol=1e-10)
    got = mx.vmap(lambda m: LA.solve(m, f64(b)))(f64(batch))
    np.testing.assert_allclose(np.array(got), np.linalg.solve(batch, b), rtol=1e-10)
    w = mx.vmap(LA.eigvalsh, in_axes=1)(f64(np.stack([spd(4, 4), spd(4, 4)], axis=1)))
    assert w.shape == (2, 4)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: LA.inv(mx.zeros((3, 3))), "matrix 0 of the batch is singular"),
        (lambda: LA.cholesky(mx.array([[1.0, 2.0], [2.0, 1.0]])), "not positive definite"),
        (lambda: LA.inv(mx.ones((2, 3))), "square"),
        (lambda: LA.qr(mx.ones((3,))), "2 or more dims"),
        (lambda: LA.svd(mx.ones((3, 3), dtype=mx.int32)), "float32, float64 and complex64"),
        (lambda: LA.inv(mx.ones((3, 3), dtype=mx.float16)), "float32 and float64"),
        (lambda: LA.eigh(mx.eye(2), UPLO="X"), "UPLO"),
        (lambda: LA.solve(mx.eye(3), mx.ones((2,))), "3 elements"),
        (lambda: LA.cross(mx.ones((4,)), mx.ones((3,))), "2 or 3"),
    ],
)
def test_errors_name_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        mx.eval(call())
