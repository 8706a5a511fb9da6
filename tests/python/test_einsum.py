"""einsum against numpy.einsum (float64 reference), einsum_path against numpy.einsum_path's
greedy path, gradients through a contraction, and errors."""

import numpy as np
import pytest

import tessera.core as mx

RNG = np.random.default_rng(13)
SIZES = dict(zip("abcdefghijklm", [2, 3, 4, 5, 3, 2, 4, 3, 5, 2, 3, 4, 2]))


def operands(spec):
    lhs = spec.split("->")[0]
    return [RNG.standard_normal([SIZES[c] for c in term]).astype(np.float32) for term in lhs.split(",")]


CASES = [
    "ij,jk->ik", "ij,jk", "ii->i", "ii", "iij->ij", "ij->", "ij->ji", "bij,bjk->bik",
    "ab,cd->abcd", "abc,cd,de->abe", "ea,fb,abcd,gc,hd->efgh", "ijk,jil->kl",
    "dd,fb,be,cdb->cef", "bca,cdb,dbf,afc->", "a,a->", "a,b->ab",
]


@pytest.mark.parametrize("spec", CASES)
def test_einsum_matches_numpy(spec):
    ops = operands(spec)
    got = np.array(mx.einsum(spec, *[mx.array(o) for o in ops]))
    want = np.einsum(spec, *[o.astype(np.float64) for o in ops])
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    path, text = mx.einsum_path(spec, *[mx.array(o) for o in ops])
    assert path == np.einsum_path(spec, *ops, optimize="greedy")[0][1:]
    assert "Complete contraction" in text


def test_ellipsis_broadcast_and_integers():
    a, b = RNG.standard_normal((2, 1, 3, 4)), RNG.standard_normal((5, 4, 6))
    got = np.array(mx.einsum("...ij,...jk->...ik", mx.array(a), mx.array(b)))
    np.testing.assert_allclose(got, np.einsum("...ij,...jk->...ik", a, b), rtol=1e-5)
    got = np.array(mx.einsum("...i,...i", mx.array(a), mx.array(a)))
    np.testing.assert_allclose(got, np.einsum("...i,...i", a, a), rtol=1e-5)
    ia, ib = np.arange(12).reshape(3, 4), np.arange(8).reshape(4, 2)
    got = mx.einsum("ij,jk->ik", mx.array(ia), mx.array(ib))
    assert got.dtype == mx.int64 or got.dtype == mx.int32
    np.testing.assert_array_equal(np.array(got), ia @ ib)


def test_gradient_through_einsum():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 5))
    c = RNG.standard_normal((3, 5))
    ga, gb = mx.grad(lambda x, y: mx.sum(mx.einsum("ij,jk->ik", x, y) * mx.array(c)), argnums=(0, 1))(
        mx.array(a), mx.array(b))
    # float32 sums: each element within a few roundings of the sum of its terms' magnitudes
    np.testing.assert_allclose(np.array(ga), c @ b.T, rtol=1e-5, atol=1e-6 * np.abs(c).sum())
    np.testing.assert_allclose(np.array(gb), a.T @ c, rtol=1e-5, atol=1e-6 * np.abs(c).sum())


@pytest.mark.parametrize(
    "spec,shapes,match",
    [
        ("ij,jk", [(2, 3)], "2 operands"),
        ("ij,jk", [(2, 3), (4, 5)], "sizes 3 and 4"),
        ("ij->k", [(2, 3)], "appears in no input"),
        ("ij", [(2, 3, 4)], "3 dims"),
        ("i1", [(2, 3)], "invalid subscript"),
    ],
)
def test_errors_name_the_problem(spec, shapes, match):
    with pytest.raises(ValueError, match=match):
        mx.einsum(spec, *[mx.ones(s) for s in shapes])
