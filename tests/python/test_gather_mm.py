"""The gathered and segmented products: gather_mm and gather_qmm (the mixture-of-experts
products: each index position multiplies a's matrix lhs_indices[i] by b's, possibly quantized,
matrix rhs_indices[i]) against NumPy products (of the dequantized matrices for gather_qmm: affine
and fp modes, both orientations, broadcast indices, defaults, 1-D operands), their gradients
against the same product composed from take + matmul / quantized_matmul; segmented_mm against
NumPy slices; block_masked_mm against NumPy's masked tiles; and the errors."""

import numpy as np
import pytest

import tessera.core as mx

RNG = np.random.default_rng(23)


def experts(mode, transpose, e=4, n=32, k=64):
    shape = (e, n, k) if transpose else (e, k, n)
    w = mx.array(RNG.standard_normal(shape).astype(np.float32))
    q = mx.quantize(w, group_size=32, mode=mode) if mode == "affine" else mx.quantize(w, mode=mode)
    biases = q[2] if mode == "affine" else None
    wd = np.array(mx.dequantize(q[0], q[1], biases, group_size=32 if mode == "affine" else None,
                                mode=mode, dtype=mx.float64))
    return q[0], q[1], biases, wd


@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("mode", ["affine", "mxfp4", "nvfp4"])
def test_matches_numpy_gathered_products(mode, transpose):
    wq, scales, biases, wd = experts(mode, transpose)
    x = RNG.standard_normal((3, 2, 64)).astype(np.float32)  # 3 matrices of 2 rows
    lhs = np.array([[0, 2], [1, 1], [2, 0]], np.int32)
    rhs = np.array([3, 0], np.int64)  # broadcasts against lhs
    gs = 32 if mode == "affine" else None
    got = mx.gather_qmm(mx.array(x), wq, scales, biases, lhs_indices=mx.array(lhs),
                        rhs_indices=mx.array(rhs), transpose=transpose, group_size=gs, mode=mode)
    assert got.shape == (3, 2, 2, 32)
    mats = wd if not transpose else np.swapaxes(wd, -1, -2)
    li, ri = np.broadcast_arrays(lhs, rhs)
    want = np.einsum("abmk,abkn->abmn", x.astype(np.float64)[li], mats[ri])
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_default_indices_take_every_matrix_in_order():
    wq, scales, biases, wd = experts("mxfp8", True, e=3)
    x = RNG.standard_normal((3, 5, 64)).astype(np.float32)
    got = mx.gather_qmm(mx.array(x), wq, scales, rhs_indices=mx.array([2, 0, 1]), mode="mxfp8")
    want = x.astype(np.float64) @ np.swapaxes(wd[[2, 0, 1]], -1, -2)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # Neither index: quantized_matmul, broadcasting batches.
    plain = mx.gather_qmm(mx.array(x), wq, scales, mode="mxfp8")
    np.testing.assert_allclose(np.array(plain), x @ np.swapaxes(wd, -1, -2), rtol=1e-4, atol=1e-3)


def test_gradients_match_the_composed_product():
    wq, scales, biases, _ = experts("affine", True)
    x = mx.array(RNG.standard_normal((3, 2, 64)).astype(np.float32))
    lhs, rhs = mx.array([0, 2, 2, 1]), mx.array([1, 1, 3, 0])

    def gathered(x, s, b):
        return mx.gather_qmm(x, wq, s, b, lhs_indices=lhs, rhs_indices=rhs, group_size=32)

    def composed(x, s, b):
        return mx.quantized_matmul(x[lhs], wq[rhs], s[rhs], b[rhs], group_size=32)

    cot = mx.array(RNG.standard_normal((4, 2, 32)).astype(np.float32))
    for f in (gathered, composed):
        assert f(x, scales, biases).shape == (4, 2, 32)
    loss = lambda f: (lambda *a: (f(*a) * cot).sum())
    got = mx.grad(loss(gathered), argnums=(0, 1, 2))(x, scales, biases)
    want = mx.grad(loss(composed), argnums=(0, 1, 2))(x, scales, biases)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda q: mx.gather_qmm(mx.ones((2, 1, 64)), *q, rhs_indices=mx.array([4]),
                                 group_size=32), "rhs_indices holds 4 but w has 4 matrices"),
        (lambda q: mx.gather_qmm(mx.ones((2, 1, 64)), *q, lhs_indices=mx.array([0.5]),
                                 group_size=32), "lhs_indices must be integers"),
        (lambda q: mx.gather_qmm(mx.ones((64,)), *q, rhs_indices=mx.array([0]), group_size=32),
         "must be matrices"),
        (lambda q: mx.gather_qmm(mx.ones((2, 1, 32)), *q, rhs_indices=mx.array([0]),
                                 group_size=32), "needs 64"),
    ],
)
def test_errors_name_the_problem(call, match):
    wq, scales, biases, _ = experts("affine", True)
    with pytest.raises(ValueError, match=match):
        mx.eval(call((wq, scales, biases)))


# ---- gather_mm ----

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gather_mm_matches_numpy(dtype):
    a = RNG.standard_normal((2, 3, 4, 5)).astype(dtype)  # 6 matrices 4 x 5
    b = RNG.standard_normal((5, 5, 7)).astype(dtype)     # 5 matrices 5 x 7
    lhs = np.array([[5, 0, 2]], np.uint32)
    rhs = np.array([[1], [4]], np.int16)
    got = mx.gather_mm(mx.array(a), mx.array(b), mx.array(lhs), mx.array(rhs))
    assert got.shape == (2, 3, 4, 7) and got.dtype == mx.array(a).dtype
    li, ri = np.broadcast_arrays(lhs, rhs)
    want = a.reshape(-1, 4, 5)[li] @ b[ri]
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)


def test_gather_mm_vectors_and_defaults():
    a = RNG.standard_normal((5,)).astype(np.float32)
    b = RNG.standard_normal((3, 5, 2)).astype(np.float32)
    got = mx.gather_mm(mx.array(a), mx.array(b), rhs_indices=mx.array([2, 2, 0]))
    assert got.shape == (3, 2)
    np.testing.assert_allclose(np.array(got), np.stack([a @ b[i] for i in (2, 2, 0)]), rtol=1e-5,
                               atol=1e-5)
    # Neither index: matmul.
    np.testing.assert_allclose(np.array(mx.gather_mm(mx.array(b), mx.array(b[0].T))),
                               b @ b[0].T, rtol=1e-5, atol=1e-5)


def test_gather_mm_gradients_match_the_composed_product():
    a = mx.array(RNG.standard_normal((3, 2, 4)).astype(np.float32))
    b = mx.array(RNG.standard_normal((4, 4, 6)).astype(np.float32))
    lhs, rhs = mx.array([2, 0, 2, 1, 2]), mx.array([3, 3, 0, 1, 1])
    cot = mx.array(RNG.standard_normal((5, 2, 6)).astype(np.float32))
    loss_g = lambda a, b: (mx.gather_mm(a, b, lhs, rhs) * cot).sum()
    loss_c = lambda a, b: ((a[lhs] @ b[rhs]) * cot).sum()
    got = mx.grad(loss_g, argnums=(0, 1))(a, b)
    want = mx.grad(loss_c, argnums=(0, 1))(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-5, atol=1e-5)


def test_gather_mm_errors():
    a, b = mx.ones((2, 3, 4)), mx.ones((3, 4, 5))
    with pytest.raises(ValueError, match="rhs_indices holds 3 but b has 3 matrices"):
        mx.eval(mx.gather_mm(a, b, rhs_indices=mx.array([0, 3])))
    with pytest.raises(ValueError, match="must match the second to last"):
        mx.gather_mm(a, mx.ones((3, 5, 5)), rhs_indices=mx.array([0]))
    with pytest.raises(ValueError, match="real floating"):
        mx.gather_mm(mx.ones((2, 3, 4), mx.int32), mx.ones((3, 4, 5), mx.int32),
                     rhs_indices=mx.array([0]))


# ---- segmented_mm ----

@pytest.mark.parametrize("dtype", [mx.float32, mx.float64, mx.bfloat16])
def test_segmented_mm_matches_numpy(dtype):
    a = RNG.standard_normal((5, 12))
    b = RNG.standard_normal((12, 3))
    segs = np.array([[[0, 4], [4, 12]], [[3, 3], [2, 9]], [[0, 12], [7, 5]]], np.int32)
    got = mx.segmented_mm(mx.array(a, dtype=dtype), mx.array(b, dtype=dtype), mx.array(segs))
    assert got.shape == (3, 2, 5, 3) and got.dtype == dtype
    ar = np.array(mx.array(a, dtype=dtype).astype(mx.float64))
    br = np.array(mx.array(b, dtype=dtype).astype(mx.float64))
    want = np.stack([ar[:, s0:s1] @ br[s0:s1] if s1 > s0 else np.zeros((5, 3))
                     for s0, s1 in segs.reshape(-1, 2)]).reshape(3, 2, 5, 3)
    tol = 2e-2 if dtype == mx.bfloat16 else 1e-5
    np.testing.assert_allclose(np.array(got.astype(mx.float64)), want, rtol=tol, atol=tol)


def test_segmented_mm_errors():
    a, b = mx.ones((2, 4)), mx.ones((4, 3))
    with pytest.raises(ValueError, match="segment bound 5 is past the shared dim 4"):
        mx.eval(mx.segmented_mm(a, b, mx.array([[0, 5]])))
    with pytest.raises(ValueError, match=r"\(\.\.\., 2\)"):
        mx.segmented_mm(a, b, mx.array([0, 1, 2]))
    with pytest.raises(ValueError, match="must be matrices"):
        mx.segmented_mm(mx.ones((1, 2, 4)), b, mx.array([[0, 1]]))


# ---- block_masked_mm ----

def spread(mask, bs, rows, cols):
    return np.repeat(np.repeat(mask, bs, -2), bs, -1)[..., :rows, :cols]


@pytest.mark.parametrize("bs", [32, 64])
def test_block_masked_mm_matches_numpy(bs):
    M, K, N = 70, 100, 40  # partial last tiles
    tm, tk, tn = (-(-d // bs) for d in (M, K, N))
    a = RNG.standard_normal((2, M, K)).astype(np.float32)
    b = RNG.standard_normal((K, N)).astype(np.float32)
    a[0, :5, :5] = np.nan  # in a masked-out tile of a bool mask: must vanish
    ml = RNG.random((2, tm, tk)) > 0.4
    ml[0, 0, 0] = False
    mr = RNG.random((tk, tn)) > 0.3
    mo = RNG.random((2, tm, tn)) > 0.2
    got = mx.block_masked_mm(mx.array(a), mx.array(b), bs, mx.array(mo), mx.array(ml), mx.array(mr))
    am = np.where(spread(ml, bs, M, K), a, 0)
    bm = np.where(spread(mr, bs, K, N), b, 0)
    want = np.where(spread(mo, bs, M, N), am @ bm, 0)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)
    # Floating masks scale their tiles.
    fl = RNG.random((tm, tk)).astype(np.float32)
    got = mx.block_masked_mm(mx.array(a[1]), mx.array(b), bs, mask_lhs=mx.array(fl))
    want = (a[1] * spread(fl, bs, M, K)) @ b
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)


def test_block_masked_mm_gradient_and_errors():
    a = mx.array(RNG.standard_normal((64, 64)).astype(np.float32))
    b = mx.array(RNG.standard_normal((64, 64)).astype(np.float32))
    ml = mx.array(np.array([[True, False], [False, True]]))
    g = mx.grad(lambda a: mx.block_masked_mm(a, b, 32, mask_lhs=ml).sum())(a)
    want = np.where(spread(np.array(ml), 32, 64, 64), np.ones((64, 64)) @ np.array(b).T, 0)
    np.testing.assert_allclose(np.array(g), want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="block_size 16 is not supported"):
        mx.block_masked_mm(a, b, 16, mask_out=mx.array([[True]]))
    with pytest.raises(ValueError, match="mask_out \\(3,3\\) does not broadcast"):
        mx.block_masked_mm(a, b, 32, mask_out=mx.ones((3, 3), mx.bool_))
