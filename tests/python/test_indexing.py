"""NumPy-style indexing: __getitem__, __setitem__ and a.at[...] against NumPy."""

import numpy as np
import pytest

import tessera.core as mx

X = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

GET_CASES = [
    1, -1, (1, 2), (slice(None), 1), (Ellipsis, 0), (0, Ellipsis, -1), slice(None, None, -1),
    (slice(None), slice(None, None, -2)), (slice(1, None), slice(None, 1)), (slice(-1, -4, -1),),
    (slice(None), slice(5, -10, -1)), (slice(10, 20),), None, (None, 1, None), (Ellipsis, None),
    (slice(None), [0, 2]), ([1, 0], [2, 1]), (0, [2, 1], slice(None), [4, 3]),
    (slice(None), [[0], [2]], [1, 3]), ([0, 1], slice(None), [1, 2]), (Ellipsis, [4, 0, 4]),
    (slice(None), [-1, -3]), (1, slice(None), [0, 3], slice(1, 4, 2)),
    (slice(None), np.array([[1, 2]]), 0), (slice(None), None, [0, 1]),
]


@pytest.mark.parametrize("index", GET_CASES, ids=[repr(c) for c in GET_CASES])
def test_getitem_matches_numpy(index):
    got = mx.array(X)[index]
    want = X[index]
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)


def test_getitem_with_tessera_index_arrays_and_scalars():
    a = mx.array(X)
    idx = mx.array([1, 0, 1])
    np.testing.assert_array_equal(np.asarray(a[idx]), X[[1, 0, 1]])
    np.testing.assert_array_equal(np.asarray(a[mx.array(1)]), X[1])
    np.testing.assert_array_equal(np.asarray(a[:, mx.array([[2]])]), X[:, [[2]]])


def test_getitem_errors():
    a = mx.array(X)
    with pytest.raises(IndexError, match="out of bounds"):
        a[2]
    with pytest.raises(IndexError, match="too many indices"):
        a[0, 0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        a[..., 0, ...]
    with pytest.raises(ValueError, match="boolean masks"):
        a[mx.array([True, False])]
    with pytest.raises(ValueError, match="must be integers"):
        a[mx.array([0.5])]
    with pytest.raises(ValueError, match="cannot index"):
        a["x"]


SET_CASES = [
    (1, 7.0), ((0, 1), -1.0), ((slice(None), 2), np.arange(5, dtype=np.float32)),
    ((Ellipsis, slice(None, None, -2)), 3.0), ((slice(None), [0, 2]), 9.0),
    (([1, 0], [2, 1]), np.ones((2, 4, 5), np.float32)), ((slice(None), None, 1), 4.0),
    ((0, [2, 1], slice(None), [4, 3]), np.array([[1.0], [2.0]], np.float32)),
    ((0, 1), np.ones((1, 1, 4, 5), np.float32)),  # leading size-1 dims of the value drop
    ((slice(None), [0, 2]), np.ones((1, 2, 2, 4, 5), np.float32)),
    ((slice(None), slice(1, 3), [0, 3]), 5.0), ((1, slice(None), [0, 3], slice(1, 4, 2)), 2.0),
]


@pytest.mark.parametrize("index,value", SET_CASES, ids=[repr(c[0]) for c in SET_CASES])
def test_setitem_matches_numpy(index, value):
    a = mx.array(X)
    ident = id(a)
    a[index] = mx.array(value) if isinstance(value, np.ndarray) else value
    want = X.copy()
    want[index] = value
    assert id(a) == ident
    np.testing.assert_array_equal(np.asarray(a), want)


def test_setitem_boolean_masks():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = mx.array(x)
    a[a > 5] = 0.0
    want = x.copy()
    want[want > 5] = 0.0
    np.testing.assert_array_equal(np.asarray(a), want)
    b = mx.array(x)
    mask = x % 2 == 0
    b[mx.array(mask)] = mx.array([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0])
    want = x.copy()
    want[mask] = [-1, -2, -3, -4, -5, -6]
    np.testing.assert_array_equal(np.asarray(b), want)
    c = mx.array(x)
    c[mx.array([True, False, True])] = 1.0  # a mask over the leading dim
    want = x.copy()
    want[[True, False, True]] = 1.0
    np.testing.assert_array_equal(np.asarray(c), want)
    with pytest.raises(ValueError, match="mask"):
        c[mx.array([True, False])] = 1.0


def test_at_accumulates_repeated_indices():
    a = mx.zeros((4,))
    idx = mx.array([0, 1, 1, 3, 3, 3])
    np.testing.assert_array_equal(np.asarray(a.at[idx].add(1.0)), [1, 2, 0, 3])
    ref = np.ones(4, np.float32)
    np.multiply.at(ref, [0, 2, 2], 3.0)
    np.testing.assert_array_equal(np.asarray(mx.ones((4,)).at[mx.array([0, 2, 2])].multiply(3.0)), ref)
    np.testing.assert_array_equal(np.asarray(mx.zeros((2, 3)).at[:, 1].subtract(2.0)),
                                  [[0, -2, 0], [0, -2, 0]])
    m = mx.array([5.0, 1.0, 7.0]).at[mx.array([0, 0, 2])].maximum(mx.array([2.0, 9.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(m), [9, 1, 7])
    n = mx.array([5.0, 1.0, 7.0]).at[mx.array([1, 2])].minimum(0.5)
    np.testing.assert_array_equal(np.asarray(n), [5, 0.5, 0.5])
    d = mx.array([8.0, 8.0]).at[mx.array([0, 0])].divide(2.0)
    np.testing.assert_array_equal(np.asarray(d), [2, 8])


def test_at_with_a_value_that_has_extra_leading_ones_and_its_gradient():
    src = mx.array([1.0, 2.0, 3.0, 4.0])
    upd = mx.array([[10.0, 20.0]])
    assert src.at[1:3].add(upd).tolist() == [1.0, 12.0, 23.0, 4.0]
    _, vjps = mx.vjp(lambda s, u: [s.at[1:3].add(u)], [src, upd], [mx.array([4.0, 5.0, 6.0, 7.0])])
    assert vjps[0].tolist() == [4.0, 5.0, 6.0, 7.0] and vjps[1].tolist() == [[5.0, 6.0]]


def test_malformed_indices_are_both_numpys_index_error_and_mlxs_value_error():
    for a, index, what in ((mx.array(X), (0, 0, 0, 0, 0), "too many indices"),
                           (mx.array(0), 0, "too many indices"),
                           (mx.array(X), (..., 0, ...), "single ellipsis")):
        with pytest.raises(mx.IndexingError, match=what):
            a[index]
        with pytest.raises(IndexError, match=what):
            a[index]
        with pytest.raises(ValueError, match=what):
            a[index] = 1
    z = mx.array(0)
    with pytest.raises(ValueError, match="too many indices"):
        z[0] = mx.array(1)
    assert z.item() == 0


@pytest.mark.parametrize("index", [2**32, -(2**31) - 1, 2**31, slice(None, 2**32),
                                   slice(-(2**40), None), slice(None, None, 2**31)])
def test_indices_outside_int32_are_a_value_error_naming_them(index):
    a = mx.array([0, 1, 2])
    bad = index if isinstance(index, int) else next(v for v in (index.start, index.stop, index.step)
                                                     if v is not None)
    with pytest.raises(ValueError, match=str(bad)):
        a[index]
    with pytest.raises(ValueError, match=str(bad)):
        a[index] = 5
    # The largest int32 bounds are still slices NumPy clamps.
    np.testing.assert_array_equal(np.asarray(a[: 2**31 - 1]), [0, 1, 2])
    np.testing.assert_array_equal(np.asarray(a[-(2**31):]), [0, 1, 2])


def test_setitem_with_a_python_bool_is_a_scalar_mask():
    a = mx.array([1.0, 2.0, 3.0])
    a[True] = 5.0
    np.testing.assert_array_equal(np.asarray(a), [5.0, 5.0, 5.0])
    a[False] = 7.0
    np.testing.assert_array_equal(np.asarray(a), [5.0, 5.0, 5.0])
    b = mx.array(np.arange(6, dtype=np.int32).reshape(2, 3))
    b[mx.array(True)] = 4
    np.testing.assert_array_equal(np.asarray(b), np.full((2, 3), 4))
    with pytest.raises(ValueError, match="dimension 2"):
        mx.arange(1000).reshape(10, 10, 10)[np.zeros((10, 10, 1), dtype=bool)] = 0
    with pytest.raises(ValueError, match="Python bool"):
        a[True]


def test_at_needs_an_index_first():
    a = mx.array(1)
    with pytest.raises(ValueError, match=r"a\.at\[index\]\.add"):
        a.at.add(1)
    assert a.at[None].add(1).item() == 2  # None is an index
    np.testing.assert_array_equal(np.asarray(mx.array([0, 1, 2]).at[1].add(2)), [0, 3, 2])
