"""tessera.core.random (against a NumPy Threefry-2x32 and sample moments), tessera.core.linalg
(norm against numpy.linalg.norm) and tessera.core.fast (rms_norm, layer_norm, rope and
scaled_dot_product_attention against NumPy formulas)."""

import math

import numpy as np
import pytest

import tessera.core as mx

RNG = np.random.default_rng(4321)
N = 100_000


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ============================================================== random: keys and bits

_M = 0xFFFFFFFF
_ROT = [13, 15, 26, 6, 17, 29, 16, 24]


def _threefry2x32(k0, k1, c0, c1):
    """Threefry-2x32 with 20 rounds (Salmon et al. / Random123), plain Python ints."""
    ks = [k0, k1, 0x1BD11BDA ^ k0 ^ k1]
    x0, x1 = (c0 + ks[0]) & _M, (c1 + ks[1]) & _M
    for r in range(20):
        x0 = (x0 + x1) & _M
        x1 = (((x1 << _ROT[r % 8]) | (x1 >> (32 - _ROT[r % 8]))) & _M) ^ x0
        if r % 4 == 3:
            s = r // 4 + 1
            x0 = (x0 + ks[s % 3]) & _M
            x1 = (x1 + ks[(s + 1) % 3] + s) & _M
    return x0, x1


def _bits32(key, n):
    """MLX's layout of `n` uint32 words from one key: word i and word half+odd+i come from
    counter (i, half+odd+i); an odd middle word is the first output of counter (half, 0)."""
    k0, k1 = (int(v) for v in np.array(key))
    half, odd = n // 2, n % 2
    out = np.zeros(n, np.uint64)
    for i in range(half):
        out[i], out[half + odd + i] = _threefry2x32(k0, k1, i, half + odd + i)
    if odd:
        out[half] = _threefry2x32(k0, k1, half, 0)[0]
    return out.astype(np.uint32)


def test_threefry_reference_matches_random123_known_answers():
    # guards the NumPy reference itself
    assert _threefry2x32(0, 0, 0, 0) == (0x6B200159, 0x99BA4EFE)
    assert _threefry2x32(_M, _M, _M, _M) == (0x1CB996FC, 0xBB002BE7)
    assert _threefry2x32(0x13198A2E, 0x03707344, 0x243F6A88, 0x85A308D3) == (0xC4923A9C,
                                                                              0x483DF7A0)


@pytest.mark.parametrize("seed", [0, 7, 2**32 + 5, 2**64 - 1])
def test_key_is_the_two_halves_of_the_seed(seed):
    k = mx.random.key(seed)
    assert k.dtype == mx.uint32 and k.shape == (2,)
    np.testing.assert_array_equal(np.array(k), [seed >> 32, seed & _M])


@pytest.mark.parametrize("seed,num", [(0, 2), (3, 1), (2**40 + 1, 5), (9, 0)])
def test_split_is_threefry_of_the_key(seed, num):
    k = mx.random.key(seed)
    keys = mx.random.split(k, num)
    assert keys.dtype == mx.uint32 and keys.shape == (num, 2)
    np.testing.assert_array_equal(np.array(keys), _bits32(k, 2 * num).reshape(num, 2))
    if num == 2:
        np.testing.assert_array_equal(np.array(mx.random.split(k)), np.array(keys))


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_uniform_is_bits_over_uint32_max(n):
    k = mx.random.key(11)
    u = mx.random.uniform(shape=(n,), key=k)
    ref = _bits32(k, n).astype(np.float32) / np.float32(2**32 - 1)
    ref = np.minimum(ref, np.nextafter(np.float32(1), np.float32(0)))
    np.testing.assert_array_equal(np.array(u), ref)


def test_bernoulli_is_bits_below_scaled_p():
    k = mx.random.key(5)
    p = 0.3
    b = mx.random.bernoulli(p, (7,), key=k)
    assert b.dtype == mx.bool_
    ref = _bits32(k, 7).astype(np.float64) < p * np.nextafter(np.float32(2**32 - 1),
                                                             np.float32(np.inf))
    np.testing.assert_array_equal(np.array(b), ref)


# ============================================================== random: determinism

SAMPLERS = {
    "uniform": lambda k: mx.random.uniform(shape=(64,), key=k),
    "normal": lambda k: mx.random.normal((64,), key=k),
    "randint": lambda k: mx.random.randint(0, 1000, (64,), key=k),
    "bernoulli": lambda k: mx.random.bernoulli(0.5, (64,), key=k),
    "truncated_normal": lambda k: mx.random.truncated_normal(-1.0, 1.0, (64,), key=k),
    "gumbel": lambda k: mx.random.gumbel((64,), key=k),
    "categorical": lambda k: mx.random.categorical(mx.zeros((64, 10)), key=k),
    "laplace": lambda k: mx.random.laplace((64,), key=k),
    "permutation": lambda k: mx.random.permutation(64, key=k),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_same_key_same_samples_and_different_keys_differ(name):
    f = SAMPLERS[name]
    a = np.array(f(mx.random.key(1)))
    np.testing.assert_array_equal(a, np.array(f(mx.random.key(1))))
    b = np.array(f(mx.random.key(2)))
    assert not np.array_equal(a, b)
    k1, k2 = mx.random.split(mx.random.key(1))
    assert not np.array_equal(np.array(f(k1)), np.array(f(k2)))


@pytest.mark.parametrize("name", ["uniform", "normal", "randint"])
def test_seed_makes_the_implicit_key_sequence_reproducible(name):
    f = SAMPLERS[name]
    mx.random.seed(123)
    a1, a2 = np.array(f(None)), np.array(f(None))
    mx.random.seed(123)
    b1, b2 = np.array(f(None)), np.array(f(None))
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert not np.array_equal(a1, a2)  # the sequence advances
    mx.random.seed(124)
    assert not np.array_equal(a1, np.array(f(None)))


def test_non_contiguous_key_gives_the_same_samples():
    keys = mx.random.split(mx.random.key(3), 4)
    strided = keys[::2, 0]  # a strided view holding two uint32 values
    dense = mx.array(np.array(keys)[::2, 0])
    got = np.array(mx.random.uniform(shape=(9,), key=strided))
    np.testing.assert_array_equal(got, np.array(mx.random.uniform(shape=(9,), key=dense)))
    ref = _bits32(dense, 9).astype(np.float32) / np.float32(2**32 - 1)
    np.testing.assert_array_equal(got, np.minimum(ref, np.nextafter(np.float32(1), 0)))


# ============================================================== random: distributions

def _close_mean(x, mu, sd, n_se=5.0):
    se = sd / math.sqrt(x.size)
    assert abs(float(np.mean(x)) - mu) <= n_se * se, (np.mean(x), mu, se)


@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-3.0, 5.0), (2.0, 2.5)])
def test_uniform_range_and_moments(low, high):
    x = np.array(mx.random.uniform(low, high, (N,), key=mx.random.key(0)))
    assert x.dtype == np.float32
    assert x.min() >= low and x.max() < high
    width = high - low
    _close_mean(x, (low + high) / 2, width / math.sqrt(12))
    assert abs(x.var() - width ** 2 / 12) < 0.02 * width ** 2 / 12


def test_uniform_broadcasts_array_bounds_and_float16():
    lo = np.array([0.0, 10.0, -5.0], np.float32)
    x = np.array(mx.random.uniform(mx.array(lo), mx.array(lo + 1), (4000, 3),
                                   key=mx.random.key(1)))
    assert x.shape == (4000, 3)
    assert np.all(x >= lo) and np.all(x < lo + 1)
    h = mx.random.uniform(shape=(N,), dtype=mx.float16, key=mx.random.key(2))
    assert h.dtype == mx.float16
    hv = np.array(h)
    assert hv.min() >= 0 and hv.max() < 1  # never rounds up to high
    _close_mean(hv.astype(np.float64), 0.5, 1 / math.sqrt(12))


def test_uniform_0d_and_empty_shapes():
    assert mx.random.uniform(key=mx.random.key(0)).shape == ()
    assert mx.random.uniform(shape=(0, 3), key=mx.random.key(0)).shape == (0, 3)
    assert mx.random.normal((2, 0), key=mx.random.key(0)).shape == (2, 0)


@pytest.mark.parametrize("loc,scale", [(None, None), (2.0, 3.0), (-1.0, 0.5)])
def test_normal_moments(loc, scale):
    x = np.array(mx.random.normal((N,), loc=loc, scale=scale, key=mx.random.key(3)),
                 np.float64)
    mu, sd = loc or 0.0, scale or 1.0
    _close_mean(x, mu, sd)
    assert abs(x.std() - sd) < 0.01 * sd
    # skew ~ 0, excess kurtosis ~ 0
    z = (x - x.mean()) / x.std()
    assert abs(np.mean(z ** 3)) < 0.05 and abs(np.mean(z ** 4) - 3) < 0.1
    assert np.all(np.isfinite(x))


def test_normal_array_loc_scale_broadcast():
    loc = np.array([0.0, 100.0], np.float32)
    x = np.array(mx.random.normal((20000, 2), loc=mx.array(loc), scale=mx.array([1.0, 0.1]),
                                  key=mx.random.key(4)), np.float64)
    np.testing.assert_allclose(x.mean(0), loc, atol=0.05)
    np.testing.assert_allclose(x.std(0), [1.0, 0.1], rtol=0.03)


@pytest.mark.parametrize("dtype", [mx.float16, mx.float32])
def test_normal_dtypes(dtype):
    x = mx.random.normal((N,), dtype=dtype, key=mx.random.key(5))
    assert x.dtype == dtype
    v = np.array(x, np.float64)
    _close_mean(v, 0.0, 1.0)
    assert abs(v.std() - 1) < 0.02


def test_complex_normal_has_unit_total_variance():
    x = np.array(mx.random.normal((N,), dtype=mx.complex64, key=mx.random.key(6)))
    assert x.dtype == np.complex64
    _close_mean(x.real, 0.0, math.sqrt(0.5))
    _close_mean(x.imag, 0.0, math.sqrt(0.5))
    assert abs(x.real.var() - 0.5) < 0.02 and abs(x.imag.var() - 0.5) < 0.02
    assert abs(np.corrcoef(x.real, x.imag)[0, 1]) < 0.02


@pytest.mark.parametrize("low,high,dtype", [(0, 10, mx.int32), (-5, 5, mx.int8),
                                            (0, 256, mx.uint8), (-7, -6, mx.int64),
                                            (3, 100000, mx.int32)])
def test_randint_covers_range_uniformly(low, high, dtype):
    x = np.array(mx.random.randint(low, high, (N,), dtype=dtype, key=mx.random.key(7)))
    assert x.dtype == np.dtype({mx.int32: np.int32, mx.int8: np.int8, mx.uint8: np.uint8,
                                mx.int64: np.int64}[dtype])
    assert x.min() >= low and x.max() < high
    n = high - low
    if n <= 256:
        counts = np.bincount((x.astype(np.int64) - low), minlength=n)
        assert counts.size == n and counts.min() > 0
        expected = N / n
        chi2 = np.sum((counts - expected) ** 2 / expected)
        assert chi2 < n + 6 * math.sqrt(2 * n) + 10, chi2
    _close_mean(x.astype(np.float64), (low + high - 1) / 2, math.sqrt((n * n - 1) / 12))


def test_randint_array_bounds_broadcast():
    lo = mx.array([0, 100, -50])
    x = np.array(mx.random.randint(lo, lo + 3, (1000, 3), key=mx.random.key(8)))
    assert np.all(x >= np.array(lo)) and np.all(x < np.array(lo) + 3)
    for j in range(3):
        assert set(np.unique(x[:, j]) - np.array(lo)[j]) == {0, 1, 2}


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_bernoulli_frequency(p):
    x = np.array(mx.random.bernoulli(p, (N,), key=mx.random.key(9)))
    assert x.dtype == np.bool_
    if p in (0.0, 1.0):
        assert x.all() == bool(p) and x.any() == bool(p)
    else:
        _close_mean(x.astype(np.float64), p, math.sqrt(p * (1 - p)))


def test_bernoulli_array_p_and_default_shape():
    p = mx.array([[0.2], [0.8]])
    x = mx.random.bernoulli(p, key=mx.random.key(10))
    assert x.shape == (2, 1)
    y = np.array(mx.random.bernoulli(p, (2, 50000), key=mx.random.key(10)), np.float64)
    np.testing.assert_allclose(y.mean(1), [0.2, 0.8], atol=0.01)
    assert mx.random.bernoulli(key=mx.random.key(1)).shape == ()


@pytest.mark.parametrize("lower,upper", [(-1.0, 1.0), (0.0, 2.0), (-0.5, 3.0)])
def test_truncated_normal_stays_in_bounds_with_the_right_mean(lower, upper):
    x = np.array(mx.random.truncated_normal(lower, upper, (N,), key=mx.random.key(11)),
                 np.float64)
    assert x.min() >= lower and x.max() <= upper

    def pdf(t):
        return math.exp(-t * t / 2) / math.sqrt(2 * math.pi)

    def cdf(t):
        return 0.5 * (1 + math.erf(t / math.sqrt(2)))
    z = cdf(upper) - cdf(lower)
    mean = (pdf(lower) - pdf(upper)) / z
    var = 1 + (lower * pdf(lower) - upper * pdf(upper)) / z - mean ** 2
    _close_mean(x, mean, math.sqrt(var))
    assert abs(x.var() - var) < 0.03 * var


def test_truncated_normal_shape_from_broadcast_bounds():
    lo = mx.array([[-1.0], [0.0]])
    hi = mx.array([0.5, 1.0, 2.0])
    x = mx.random.truncated_normal(lo, hi, key=mx.random.key(12))
    assert x.shape == (2, 3)
    xv = np.array(x)
    assert np.all(xv >= np.array(lo)) and np.all(xv <= np.array(hi))


def test_gumbel_moments():
    x = np.array(mx.random.gumbel((N,), key=mx.random.key(13)), np.float64)
    assert np.all(np.isfinite(x))
    _close_mean(x, np.euler_gamma, math.pi / math.sqrt(6))
    assert abs(x.var() - math.pi ** 2 / 6) < 0.05 * math.pi ** 2 / 6


@pytest.mark.parametrize("loc,scale", [(0.0, 1.0), (2.0, 0.5)])
def test_laplace_moments(loc, scale):
    x = np.array(mx.random.laplace((N,), loc=loc, scale=scale, key=mx.random.key(14)),
                 np.float64)
    sd = math.sqrt(2) * scale
    _close_mean(x, loc, sd)
    assert abs(x.var() - sd ** 2) < 0.05 * sd ** 2
    assert abs(np.median(x) - loc) < 0.02 * scale * 5


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("how", ["num_samples", "shape", "batch"])
def test_categorical_frequencies_follow_softmax(how):
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4], np.float32))
    if how == "num_samples":
        x = mx.random.categorical(mx.array(logits), num_samples=N, key=mx.random.key(15))
    elif how == "shape":
        x = mx.random.categorical(mx.array(logits), shape=(N // 100, 100), key=mx.random.key(15))
    else:
        x = mx.random.categorical(mx.array(np.tile(logits, (N, 1))), key=mx.random.key(15))
    assert x.dtype == mx.uint32
    v = np.array(x).reshape(-1)
    freq = np.bincount(v, minlength=4) / v.size
    p = _softmax(logits.astype(np.float64))
    np.testing.assert_allclose(freq, p, atol=5 * np.sqrt(p * (1 - p) / v.size).max())


def test_categorical_axis_and_masked_logits():
    logits = np.array([[0.0, -np.inf], [-np.inf, 0.0], [0.0, 0.0]], np.float32).T  # (2, 3)
    x = np.array(mx.random.categorical(mx.array(logits), axis=0, key=mx.random.key(16)))
    assert x.shape == (3,)
    assert x[0] == 0 and x[1] == 1
    many = np.array(mx.random.categorical(mx.array(logits[:, 2:]), axis=0, shape=(N, 1),
                                          key=mx.random.key(17)))
    _close_mean(many.astype(np.float64), 0.5, 0.5)


@pytest.mark.parametrize("n", [0, 1, 10, 1000])
def test_permutation_of_int_is_a_permutation(n):
    p = mx.random.permutation(n, key=mx.random.key(18))
    v = np.array(p)
    assert v.shape == (n,)
    np.testing.assert_array_equal(np.sort(v), np.arange(n))
    if n >= 10:
        assert not np.array_equal(v, np.arange(n))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_permutation_of_array_shuffles_slices_along_axis(axis):
    x = np.arange(60, dtype=np.int32).reshape(6, 10)
    out = np.array(mx.random.permutation(mx.array(x), axis=axis, key=mx.random.key(19)))
    assert out.shape == x.shape
    xs = np.moveaxis(x, axis, 0)
    os_ = np.moveaxis(out, axis, 0)
    # every slice along `axis` is one of the input's slices, each used once
    rows = sorted(tuple(r) for r in os_.reshape(os_.shape[0], -1))
    assert rows == sorted(tuple(r) for r in xs.reshape(xs.shape[0], -1))
    assert not np.array_equal(out, x)


def test_permutation_is_roughly_uniform():
    counts = np.zeros((3, 3))
    for s in range(600):
        p = np.array(mx.random.permutation(3, key=mx.random.key(1000 + s)))
        counts[np.arange(3), p] += 1
    np.testing.assert_allclose(counts / 600, 1 / 3, atol=0.1)


def test_documented_degenerate_bounds():
    k = mx.random.key(20)
    # low > high: samples in (high, low], as MLX
    x = np.array(mx.random.uniform(5.0, 2.0, (1000,), key=k))
    assert x.min() > 2.0 and x.max() <= 5.0
    # randint with low >= high gives low
    np.testing.assert_array_equal(np.array(mx.random.randint(5, 2, (7,), key=k)), 5)
    # randint floors (not truncates) for negative ranges
    assert set(np.unique(np.array(mx.random.randint(-3, 0, (2000,), key=k)))) == {-3, -2, -1}
    # p >= 1 is always true, p <= 0 never
    assert np.array(mx.random.bernoulli(1.5, (100,), key=k)).all()
    assert not np.array(mx.random.bernoulli(-0.5, (100,), key=k)).any()


@pytest.mark.parametrize("name", ["uniform", "normal", "truncated_normal", "gumbel", "laplace"])
def test_half_precision_samplers_keep_dtype_and_are_finite(name):
    k = mx.random.key(21)
    f = {"uniform": lambda: mx.random.uniform(shape=(1000,), dtype=mx.float16, key=k),
         "normal": lambda: mx.random.normal((1000,), dtype=mx.float16, key=k),
         "truncated_normal": lambda: mx.random.truncated_normal(-2, 2, (1000,),
                                                                dtype=mx.float16, key=k),
         "gumbel": lambda: mx.random.gumbel((1000,), dtype=mx.float16, key=k),
         "laplace": lambda: mx.random.laplace((1000,), dtype=mx.float16, key=k)}[name]
    x = f()
    assert x.dtype == mx.float16 and x.shape == (1000,)
    v = np.array(x, np.float64)
    assert np.all(np.isfinite(v)) and v.std() > 0.1


def test_categorical_with_infinite_logits_picks_only_the_maximal_entries():
    logits = mx.array([np.inf, 0.0, np.inf])
    a = np.array(mx.random.categorical(logits, num_samples=2000, key=mx.random.key(22)))
    assert set(np.unique(a)) == {0, 2}
    b = np.array(mx.random.categorical(mx.array([[0.0, -np.inf, 5.0, -np.inf]] * 2000),
                                       key=mx.random.key(23)))
    assert set(np.unique(b)) <= {0, 2} and np.mean(b == 2) > 0.95


def test_random_errors_are_value_errors():
    k = mx.random.key(0)
    with pytest.raises(ValueError, match="uint32"):
        mx.random.uniform(shape=(2,), key=mx.array([0, 1]))
    with pytest.raises(ValueError, match="shape"):
        mx.random.normal((2,), key=mx.array([0, 1, 2], dtype=mx.uint32))
    with pytest.raises(ValueError, match="floating"):
        mx.random.uniform(shape=(2,), dtype=mx.int32, key=k)
    with pytest.raises(ValueError, match="integer"):
        mx.random.randint(0, 5, (2,), dtype=mx.float32, key=k)
    with pytest.raises(ValueError, match="broadcast|shape"):
        mx.random.uniform(mx.zeros((3,)), 1.0, (2,), key=k)
    with pytest.raises(ValueError, match="negative"):
        mx.random.normal((-1,), key=k)
    with pytest.raises(ValueError, match="not both"):
        mx.random.categorical(mx.zeros((3,)), shape=(2,), num_samples=2, key=k)
    with pytest.raises(ValueError, match="axis"):
        mx.random.categorical(mx.zeros((3,)), axis=1, key=k)
    with pytest.raises(ValueError, match="floating"):
        mx.random.bernoulli(mx.array([1]), key=k)
    with pytest.raises(ValueError, match="non-negative|num"):
        mx.random.split(k, -1)


# ============================================================== linalg.norm

VECTOR_ORDS = [None, 1, 2, 3.5, 0, 0.5, np.inf, -np.inf, -1]


@pytest.mark.parametrize("ord", VECTOR_ORDS, ids=str)
@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_vector_norms_match_numpy(ord, axis, keepdims):
    x = randn(5, 4) if axis is not None else randn(7)
    out = mx.linalg.norm(mx.array(x), ord, axis, keepdims)
    with np.errstate(divide="ignore"):
        ref = np.linalg.norm(x.astype(np.float64), ord, axis, keepdims)
    np.testing.assert_allclose(np.array(out), ref, rtol=2e-5, atol=1e-6)
    assert out.dtype == mx.float32


MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf]


@pytest.mark.parametrize("ord", MATRIX_ORDS, ids=str)
@pytest.mark.parametrize("axis", [None, (0, 1), (1, 0), (-1, -2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norms_match_numpy(ord, axis, keepdims):
    x = randn(3, 5)
    out = mx.linalg.norm(mx.array(x), ord, list(axis) if axis else None, keepdims)
    ref = np.linalg.norm(x.astype(np.float64), ord, axis, keepdims)
    np.testing.assert_allclose(np.array(out), ref, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("ord", [None, "fro", 1, np.inf])
def test_batched_matrix_norms_over_trailing_axes(ord):
    x = randn(2, 3, 4)
    out = mx.linalg.norm(mx.array(x), ord, [1, 2])
    ref = np.linalg.norm(x.astype(np.float64), ord, (1, 2))
    np.testing.assert_allclose(np.array(out), ref, rtol=2e-5)


def test_norm_without_ord_or_axis_flattens():
    x = randn(2, 3, 4)
    np.testing.assert_allclose(mx.linalg.norm(mx.array(x)).item(),
                               np.linalg.norm(x.reshape(-1).astype(np.float64)), rtol=1e-6)
    out = mx.linalg.norm(mx.array(x), keepdims=True)
    assert out.shape == (1, 1, 1)


def test_norm_of_non_contiguous_and_integer_input():
    x = randn(6, 5)
    np.testing.assert_allclose(np.array(mx.linalg.norm(mx.array(x).T, axis=1)),
                               np.linalg.norm(x.T, axis=1), rtol=1e-5)
    np.testing.assert_allclose(np.array(mx.linalg.norm(mx.array(x[::2, ::-1]), 1, axis=0)),
                               np.linalg.norm(x[::2, ::-1], 1, axis=0), rtol=1e-5)
    xi = np.array([[3, 4], [6, 8]], np.int32)
    out = mx.linalg.norm(mx.array(xi), axis=1)
    assert out.dtype == mx.float32
    np.testing.assert_allclose(np.array(out), [5.0, 10.0])


def test_norm_float16_and_complex64():
    h = randn(64).astype(np.float16)
    out = mx.linalg.norm(mx.array(h))
    assert out.dtype == mx.float16
    np.testing.assert_allclose(out.item(), np.linalg.norm(h.astype(np.float64)), rtol=3e-3)
    c = (randn(4, 3) + 1j * randn(4, 3)).astype(np.complex64)
    out = mx.linalg.norm(mx.array(c), axis=1)
    assert out.dtype == mx.float32
    np.testing.assert_allclose(np.array(out), np.linalg.norm(c, axis=1), rtol=1e-5)
    np.testing.assert_allclose(np.array(mx.linalg.norm(mx.array(c), 1, axis=0)),
                               np.linalg.norm(c, 1, axis=0), rtol=1e-5)


def test_norm_of_zeros_and_empty():
    np.testing.assert_array_equal(np.array(mx.linalg.norm(mx.zeros((3,)), 0.5)), 0.0)
    np.testing.assert_array_equal(np.array(mx.linalg.norm(mx.zeros((0,)))), 0.0)


def test_norm_errors():
    with pytest.raises(ValueError, match="invalid ord"):
        mx.linalg.norm(mx.zeros((2, 2)), 3, [0, 1])
    with pytest.raises(ValueError, match="invalid ord"):
        mx.linalg.norm(mx.zeros((2, 2)), "max")
    with pytest.raises(ValueError, match="fro|vector|string|ord"):
        mx.linalg.norm(mx.zeros((3,)), "fro", 0)
    with pytest.raises(ValueError, match="axis|rank"):
        mx.linalg.norm(mx.zeros((2, 2, 2)), 1)
    with pytest.raises(ValueError, match="axes|axis|at most"):
        mx.linalg.norm(mx.zeros((2, 2, 2)), axis=[0, 1, 2])
    with pytest.raises((ValueError, IndexError), match="axis|bounds|range"):
        mx.linalg.norm(mx.zeros((2, 2)), axis=2)


# ============================================================== fast.rms_norm / layer_norm

def _rms_norm(x, w, eps):
    x64 = x.astype(np.float64)
    y = x64 / np.sqrt(np.mean(x64 ** 2, -1, keepdims=True) + eps)
    return y if w is None else y * w


def _layer_norm(x, w, b, eps):
    x64 = x.astype(np.float64)
    y = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


@pytest.mark.parametrize("shape", [(8,), (3, 16), (2, 3, 7)])
@pytest.mark.parametrize("with_weight", [False, True])
@pytest.mark.parametrize("eps", [1e-5, 1.0])
def test_rms_norm_matches_formula(shape, with_weight, eps):
    x = randn(*shape)
    w = randn(shape[-1]) if with_weight else None
    out = mx.fast.rms_norm(mx.array(x), mx.array(w) if with_weight else None, eps)
    assert out.dtype == mx.float32 and out.shape == shape
    np.testing.assert_allclose(np.array(out), _rms_norm(x, w, eps), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("shape", [(8,), (3, 16), (2, 3, 7)])
@pytest.mark.parametrize("wb", [(False, False), (True, False), (False, True), (True, True)])
def test_layer_norm_matches_formula(shape, wb):
    x = randn(*shape) * 3 + 1
    w = randn(shape[-1]) if wb[0] else None
    b = randn(shape[-1]) if wb[1] else None
    out = mx.fast.layer_norm(mx.array(x), None if w is None else mx.array(w),
                             None if b is None else mx.array(b), 1e-5)
    assert out.dtype == mx.float32 and out.shape == shape
    np.testing.assert_allclose(np.array(out), _layer_norm(x, w, b, 1e-5), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("fn", ["rms_norm", "layer_norm"])
def test_norms_of_non_contiguous_and_float16_inputs(fn):
    x = randn(16, 6)
    w = randn(16)
    if fn == "rms_norm":
        def call(a, wt):
            return mx.fast.rms_norm(a, wt, 1e-5)

        def ref(a, wt):
            return _rms_norm(a, wt, 1e-5)
    else:
        def call(a, wt):
            return mx.fast.layer_norm(a, wt, None, 1e-5)

        def ref(a, wt):
            return _layer_norm(a, wt, None, 1e-5)
    np.testing.assert_allclose(np.array(call(mx.array(x).T, mx.array(w))), ref(x.T, w),
                               rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.array(call(mx.array(x.T[::2]), mx.array(w))),
                               ref(x.T[::2], w), rtol=2e-5, atol=2e-5)
    xh, wh = x.T.astype(np.float16), w.astype(np.float16)
    out = call(mx.array(xh), mx.array(wh))
    assert out.dtype == mx.float16
    np.testing.assert_allclose(np.array(out, np.float64), ref(xh, wh.astype(np.float64)),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_layer_norm_kernel_in_half_precision_and_its_gradient(dtype):
    # The one-pass kernel against the float64 formula on the half inputs, and its gradient (the
    # composite's) against the gradient of the same normalisation written with ops.
    x, w, b = randn(3, 5, 96), randn(96), randn(96)
    t = getattr(mx, dtype)
    X, W, B = (mx.array(a).astype(t) for a in (x, w, b))
    out = mx.fast.layer_norm(X, W, B, 1e-5)
    assert out.dtype == t
    ref = _layer_norm(*(np.array(a.astype(mx.float32), np.float64) for a in (X, W, B)), 1e-5)
    np.testing.assert_allclose(np.array(out.astype(mx.float32)), ref, atol=5e-2, rtol=2e-2)

    def ops(x, w, b):
        c = x - x.mean(-1, keepdims=True)
        return c * mx.rsqrt((c * c).mean(-1, keepdims=True) + 1e-5) * w + b
    args = [mx.array(a) for a in (x, w, b)]
    g = mx.grad(lambda *a: (mx.fast.layer_norm(*a, 1e-5) * args[0]).sum(), argnums=(0, 1, 2))
    h = mx.grad(lambda *a: (ops(*a) * args[0]).sum(), argnums=(0, 1, 2))
    for a, c in zip(g(*args), h(*args)):
        np.testing.assert_allclose(np.array(a), np.array(c), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_norms_carry_nan_and_inf_as_the_formula_does(dtype):
    # Rows with a NaN or an inf, and an infinite weight: the kernels' rounding skips its NaN
    # handling only where no NaN can arise, so every NaN and inf lands where float64's does.
    x, w, b = randn(4, 96), randn(96), randn(96)
    x[1, 7], x[2, 3], w[5] = np.nan, np.inf, np.inf
    t = getattr(mx, dtype)
    X, W, B = (mx.array(a).astype(t) for a in (x, w, b))
    xd, wd, bd = (np.array(a.astype(mx.float32), np.float64) for a in (X, W, B))
    with np.errstate(invalid="ignore"):
        want_ln = _layer_norm(xd, wd, bd, 1e-5)
        want_rms = xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + 1e-5) * wd
    tol = 2e-2 if dtype == "bfloat16" else 1e-5
    for got, want in ((mx.fast.layer_norm(X, W, B, 1e-5), want_ln),
                      (mx.fast.rms_norm(X, W, 1e-5), want_rms)):
        got = np.array(got.astype(mx.float32))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
        np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=tol)


def test_layer_norm_of_constant_rows_is_the_bias():
    x = np.full((2, 5), 3.0, np.float32)
    b = randn(5)
    out = mx.fast.layer_norm(mx.array(x), None, mx.array(b), 1e-5)
    np.testing.assert_allclose(np.array(out), np.broadcast_to(b, (2, 5)), atol=1e-6)


def test_norm_weight_shape_mismatch_is_value_error():
    with pytest.raises(ValueError, match="weight|shape|features"):
        mx.fast.rms_norm(mx.zeros((2, 4)), mx.ones((3,)), 1e-5)
    with pytest.raises(ValueError, match="weight|shape|features"):
        mx.fast.layer_norm(mx.zeros((2, 4)), mx.ones((3,)), None, 1e-5)
    with pytest.raises(ValueError, match="bias|shape|features"):
        mx.fast.layer_norm(mx.zeros((2, 4)), None, mx.ones((5,)), 1e-5)


# ============================================================== fast.rope

def _rope(x, dims, traditional, base, scale, offset, freqs=None):
    x = x.astype(np.float64)
    T = x.shape[-2]
    if freqs is None:
        inv = base ** (-np.arange(0, dims, 2, dtype=np.float64) / dims)
    else:
        inv = 1.0 / freqs.astype(np.float64)
    off = np.asarray(offset, np.float64).reshape((-1,) + (1,) * (x.ndim - 1))
    pos = (off + np.arange(T).reshape(T, 1)) * scale  # (..., T, 1) against (dims/2,)
    theta = pos * inv
    c, s = np.cos(theta), np.sin(theta)
    out = x.copy()
    if traditional:
        x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2] = x1 * c - x2 * s
        out[..., 1:dims:2] = x1 * s + x2 * c
    else:
        h = dims // 2
        x1, x2 = x[..., :h], x[..., h:dims]
        out[..., :h] = x1 * c - x2 * s
        out[..., h:dims] = x1 * s + x2 * c
    return out


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("dims", [8, 4])
@pytest.mark.parametrize("offset,scale", [(0, 1.0), (3, 1.0), (2, 0.5)])
def test_rope_matches_formula(traditional, dims, offset, scale):
    x = randn(2, 3, 5, 8)
    out = mx.fast.rope(mx.array(x), dims, traditional=traditional, base=10000.0, scale=scale,
                       offset=offset)
    assert out.shape == x.shape and out.dtype == mx.float32
    np.testing.assert_allclose(np.array(out), _rope(x, dims, traditional, 10000.0, scale,
                                                    offset), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("traditional", [False, True])
def test_rope_with_explicit_freqs(traditional):
    x = randn(1, 4, 6)
    freqs = RNG.uniform(1, 50, 3).astype(np.float32)
    out = mx.fast.rope(mx.array(x), 6, traditional=traditional, base=None, scale=1.0, offset=1,
                       freqs=mx.array(freqs))
    np.testing.assert_allclose(np.array(out), _rope(x, 6, traditional, None, 1.0, 1, freqs),
                               rtol=1e-4, atol=1e-5)


def test_rope_with_per_batch_array_offset():
    x = randn(3, 2, 4, 8)
    off = np.array([0, 5, 2], np.int32)
    out = mx.fast.rope(mx.array(x), 8, traditional=False, base=500.0, scale=1.0,
                       offset=mx.array(off))
    np.testing.assert_allclose(np.array(out), _rope(x, 8, False, 500.0, 1.0, off), rtol=1e-4,
                               atol=1e-5)
    out1 = mx.fast.rope(mx.array(x), 8, traditional=False, base=500.0, scale=1.0,
                        offset=mx.array([4]))
    np.testing.assert_allclose(np.array(out1), _rope(x, 8, False, 500.0, 1.0, 4), rtol=1e-4,
                               atol=1e-5)


def test_rope_non_contiguous_and_float16():
    x = randn(2, 8, 6)
    xt = np.swapaxes(x, 1, 2)  # (2, 6, 8): T=6, D=8
    out = mx.fast.rope(mx.swapaxes(mx.array(x), 1, 2), 8, traditional=True, base=10000.0,
                       scale=1.0, offset=0)
    np.testing.assert_allclose(np.array(out), _rope(xt, 8, True, 10000.0, 1.0, 0), rtol=1e-4,
                               atol=1e-5)
    h = xt.astype(np.float16)
    outh = mx.fast.rope(mx.array(h), 8, traditional=False, base=10000.0, scale=1.0, offset=0)
    assert outh.dtype == mx.float16
    np.testing.assert_allclose(np.array(outh, np.float64), _rope(h, 8, False, 10000.0, 1.0, 0),
                               rtol=1e-2, atol=1e-2)


def test_rope_errors():
    x = mx.zeros((1, 4, 8))
    with pytest.raises(ValueError, match="base|freqs"):
        mx.fast.rope(x, 8, traditional=False, base=None, scale=1.0, offset=0)
    with pytest.raises(ValueError, match="base|freqs"):
        mx.fast.rope(x, 8, traditional=False, base=10.0, scale=1.0, offset=0,
                     freqs=mx.ones((4,)))
    with pytest.raises(ValueError, match="dims|even|feature"):
        mx.fast.rope(x, 16, traditional=False, base=10.0, scale=1.0, offset=0)


# ============================================================== fast.scaled_dot_product_attention

def _sdpa(q, k, v, scale, mask=None, sinks=None):
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k = np.repeat(k, rep, axis=1)
    v = np.repeat(v, rep, axis=1)
    s = scale * q @ np.swapaxes(k, -1, -2)
    Lq, Lk = q.shape[-2], k.shape[-2]
    if isinstance(mask, str):
        keep = np.arange(Lk)[None, :] <= np.arange(Lq)[:, None] + (Lk - Lq)
        s = np.where(keep, s, -np.inf)
    elif mask is not None and mask.dtype == np.bool_:
        s = np.where(mask, s, -np.inf)
    elif mask is not None:
        s = s + mask
    if sinks is not None:
        sk = np.broadcast_to(sinks.astype(np.float64).reshape(1, -1, 1, 1),
                             s.shape[:-1] + (1,))
        s = np.concatenate([s, sk], -1)
    p = _softmax(s)
    if sinks is not None:
        p = p[..., :-1]
    return p @ v


@pytest.mark.parametrize("nq,nkv", [(4, 4), (4, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("lq,lk", [(5, 5), (1, 7), (3, 6)])
@pytest.mark.parametrize("mask", [None, "causal"])
def test_sdpa_matches_formula(nq, nkv, lq, lk, mask):
    D = 8
    q, k, v = randn(2, nq, lq, D), randn(2, nkv, lk, D), randn(2, nkv, lk, D)
    scale = 1 / math.sqrt(D)
    out = mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v),
                                               scale=scale, mask=mask)
    assert out.shape == q.shape and out.dtype == mx.float32
    np.testing.assert_allclose(np.array(out), _sdpa(q, k, v, scale, mask), rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("kind", ["bool", "additive", "bool_broadcast"])
def test_sdpa_with_array_masks(kind):
    q, k, v = randn(2, 2, 4, 8), randn(2, 2, 6, 8), randn(2, 2, 6, 8)
    if kind == "bool":
        m = RNG.random((2, 2, 4, 6)) > 0.3
        m[..., 0] = True  # every query sees a key
    elif kind == "additive":
        m = randn(2, 2, 4, 6)
    else:
        m = RNG.random((4, 6)) > 0.3
        m[:, 0] = True
    out = mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v),
                                               scale=0.3, mask=mx.array(m))
    np.testing.assert_allclose(np.array(out), _sdpa(q, k, v, 0.3, m), rtol=1e-4, atol=1e-5)


def test_sdpa_with_sinks():
    q, k, v = randn(1, 4, 3, 8), randn(1, 2, 5, 8), randn(1, 2, 5, 8)
    sinks = randn(4)
    out = mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v),
                                               scale=0.5, mask="causal", sinks=mx.array(sinks))
    np.testing.assert_allclose(np.array(out), _sdpa(q, k, v, 0.5, "causal", sinks), rtol=1e-4,
                               atol=1e-5)


def test_sdpa_non_contiguous_inputs_and_float16():
    # (B, T, H, D) layouts transposed to (B, H, T, D), as attention layers do
    q, k, v = randn(2, 5, 4, 8), randn(2, 7, 4, 8), randn(2, 7, 4, 8)
    qt, kt, vt = (np.swapaxes(t, 1, 2) for t in (q, k, v))
    out = mx.fast.scaled_dot_product_attention(*(mx.swapaxes(mx.array(t), 1, 2)
                                                 for t in (q, k, v)), scale=0.35)
    np.testing.assert_allclose(np.array(out), _sdpa(qt, kt, vt, 0.35), rtol=1e-4, atol=1e-5)
    h = [t.astype(np.float16) for t in (qt, kt, vt)]
    outh = mx.fast.scaled_dot_product_attention(*(mx.array(t) for t in h), scale=0.35,
                                                mask="causal")
    assert outh.dtype == mx.float16
    np.testing.assert_allclose(np.array(outh, np.float64), _sdpa(*h, 0.35, "causal"),
                               rtol=1e-2, atol=1e-2)


def test_sdpa_force_fused_gives_the_same_result():
    q, k, v = randn(1, 2, 3, 4), randn(1, 2, 3, 4), randn(1, 2, 3, 4)
    a = mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v), scale=1.0)
    b = mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v), scale=1.0,
                                             force_fused=True)
    np.testing.assert_array_equal(np.array(a), np.array(b))
    np.testing.assert_allclose(np.array(a), _sdpa(q, k, v, 1.0), rtol=1e-4, atol=1e-5)


def test_sdpa_errors():
    q = mx.zeros((1, 4, 3, 8))
    k = mx.zeros((1, 3, 5, 8))
    with pytest.raises(ValueError, match="causal"):
        mx.fast.scaled_dot_product_attention(q, mx.zeros((1, 4, 5, 8)), mx.zeros((1, 4, 5, 8)),
                                             scale=1.0, mask="upper")
    with pytest.raises(ValueError, match="head|multiple|divis"):
        mx.fast.scaled_dot_product_attention(q, k, k, scale=1.0)
    with pytest.raises(ValueError, match="dim|shape|D|match"):
        mx.fast.scaled_dot_product_attention(q, mx.zeros((1, 4, 5, 6)), mx.zeros((1, 4, 5, 6)),
                                             scale=1.0)
    with pytest.raises(ValueError, match="mask|broadcast|shape"):
        mx.fast.scaled_dot_product_attention(q, mx.zeros((1, 4, 5, 8)), mx.zeros((1, 4, 5, 8)),
                                             scale=1.0, mask=mx.zeros((3, 4)))


def test_sdpa_fully_masked_rows_average_the_values_as_mlx():
    # MLX's reference fills masked scores with finfo.min (not -inf): a query that sees no key
    # gets the plain mean of the values instead of NaN.
    q, k = randn(1, 1, 4, 4), randn(1, 1, 2, 4)
    v = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4)
    out = np.array(mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v),
                                                        scale=1.0, mask="causal"))
    # query i sees keys j <= i + (2 - 4): queries 0 and 1 see none
    np.testing.assert_allclose(out[0, 0, :2], np.broadcast_to(v[0, 0].mean(0), (2, 4)),
                               rtol=1e-6)
    np.testing.assert_allclose(out[..., 2:, :], _sdpa(q[:, :, 2:], k, v, 1.0, "causal"),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), ("bfloat16", 2e-2), (np.float16, 4e-3)])
def test_sdpa_streams_keys_in_blocks_with_an_online_softmax(dtype, tol):
    # 600 keys: three of the kernel's blocks; 70 queries of 6 heads sharing 2 KV heads: several
    # query tiles. The float64 formula is the reference; half inputs are rounded first.
    q, k, v = randn(1, 6, 70, 16), randn(1, 2, 600, 16), randn(1, 2, 600, 16)
    mask = RNG.random((70, 600)) > 0.2
    sinks = randn(6)
    to = (lambda a: mx.array(a).astype(mx.bfloat16)) if dtype == "bfloat16" else \
        (lambda a: mx.array(a.astype(dtype)))
    Q, K, V = to(q), to(k), to(v)
    q, k, v = (np.array(t.astype(mx.float32), np.float64) for t in (Q, K, V))
    for kw, ref in ((dict(mask="causal"), _sdpa(q, k, v, 0.4, "causal")),
                    (dict(mask=mx.array(mask)), _sdpa(q, k, v, 0.4, mask)),
                    (dict(sinks=to(sinks)), _sdpa(q, k, v, 0.4, None,
                                                  np.array(to(sinks).astype(mx.float32))))):
        out = mx.fast.scaled_dot_product_attention(Q, K, V, scale=0.4, **kw)
        assert out.dtype == Q.dtype
        np.testing.assert_allclose(np.array(out.astype(mx.float32)), ref, atol=tol, rtol=tol)


def test_sdpa_vmap_grad_and_compile_of_the_fused_kernel():
    q, k, v = randn(3, 1, 4, 5, 8), randn(1, 2, 7, 8), randn(3, 1, 2, 7, 8)
    k_arr = mx.array(k)
    f = lambda q, v: mx.fast.scaled_dot_product_attention(q, k_arr, v, scale=0.3, mask="causal")
    got = np.array(mx.vmap(f)(mx.array(q), mx.array(v)))
    for i in range(3):
        np.testing.assert_allclose(got[i], _sdpa(q[i], k, v[i], 0.3, "causal"), rtol=1e-4,
                                   atol=1e-5)
    # Gradients against the same attention written with ops.
    def with_ops(q, k, v):
        s = (q * 0.3) @ mx.repeat(k, 2, axis=1).swapaxes(-1, -2)
        return mx.softmax(s, axis=-1) @ mx.repeat(v, 2, axis=1)
    w = mx.arange(8, dtype=mx.float32)
    args = [mx.array(t) for t in (randn(2, 4, 5, 8), randn(2, 2, 6, 8), randn(2, 2, 6, 8))]
    fused = mx.grad(lambda *a: (mx.fast.scaled_dot_product_attention(*a, scale=0.3) * w).sum(),
                    argnums=(0, 1, 2))(*args)
    plain = mx.grad(lambda *a: (with_ops(*a) * w).sum(), argnums=(0, 1, 2))(*args)
    for a, b in zip(fused, plain):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-4, atol=1e-5)
    compiled = mx.compile(lambda *a: mx.fast.scaled_dot_product_attention(*a, scale=0.3))
    np.testing.assert_allclose(np.array(compiled(*args)), np.array(with_ops(*args)), rtol=1e-5,
                               atol=1e-6)


def _sdpa_ops(q, k, v, scale, causal=False, mask=None, sinks=None):
    """Attention written with Tessera's ops (the fused kernel's gradients are checked
    against this one's): masked scores are finfo.min, as in MLX's reference."""
    rep = q.shape[1] // k.shape[1]
    s = (q * scale) @ mx.repeat(k, rep, axis=1).swapaxes(-1, -2)
    lq, lk = q.shape[2], k.shape[2]
    low = mx.array(np.finfo(np.float32).min, s.dtype)
    if causal:
        s = mx.where(mx.arange(lk)[None] <= mx.arange(lq)[:, None] + (lk - lq), s, low)
    if mask is not None:
        s = mx.where(mask, s, low) if mask.dtype == mx.bool_ else s + mask
    if sinks is not None:
        s = mx.concatenate([mx.broadcast_to(sinks[None, :, None, None], s.shape[:-1] + (1,)), s],
                           -1)
    p = mx.softmax(s, axis=-1, precise=True)
    return (p[..., 1:] if sinks is not None else p) @ mx.repeat(v, rep, axis=1)


@pytest.mark.parametrize("kind", ["plain", "causal", "bool", "sinks", "decode", "no_key"])
def test_sdpa_fused_gradient_matches_the_ops_gradient(kind):
    # "decode": one query over 600 keys (three key blocks); "no_key": causal with more queries
    # than keys, so the first rows see no key (their scores are constants).
    lq, lk = {"decode": (1, 600), "no_key": (9, 4)}.get(kind, (70, 300))
    q, k, v = (mx.array(t) for t in (randn(2, 6, lq, 16), randn(2, 2, lk, 16), randn(2, 2, lk, 12)))
    w = mx.array(randn(2, 6, lq, 12))
    kw, ops_kw, args = {}, {}, [q, k, v]
    if kind in ("causal", "no_key"):
        kw, ops_kw = dict(mask="causal"), dict(causal=True)
    if kind == "bool":
        m = mx.array(RNG.random((lq, lk)) > 0.3)
        kw, ops_kw = dict(mask=m), dict(mask=m)
    if kind == "sinks":
        args.append(mx.array(randn(6)))

    def fused(q, k, v, *sinks):
        return (mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, sinks=sinks[0] if sinks
                                                     else None, **kw) * w).sum()

    def plain(q, k, v, *sinks):
        return (_sdpa_ops(q, k, v, 0.3, sinks=sinks[0] if sinks else None, **ops_kw) * w).sum()

    argnums = tuple(range(len(args)))
    for a, b in zip(mx.grad(fused, argnums=argnums)(*args), mx.grad(plain, argnums=argnums)(*args)):
        b = np.array(b)
        np.testing.assert_allclose(np.array(a), b, rtol=1e-4, atol=1e-5 * np.abs(b).max())


def test_sdpa_gradient_with_and_without_the_forwards_softmax_statistics(tmp_path):
    # Traced under a gradient, the forward also outputs each row's softmax maximum and sum,
    # which the gradient kernel reads; a forward built outside a trace (an imported function)
    # has none, and the kernel recomputes them. Both against the ops' gradient, with grouped
    # heads, sinks and rows that see no key (9 queries, 4 keys, causal); then batching and
    # forward-mode through the two-output forward.
    q, k, v, sinks = (mx.array(t) for t in (randn(2, 4, 9, 8), randn(2, 2, 4, 8), randn(2, 2, 4, 8),
                                            randn(4)))
    w = mx.array(randn(2, 4, 9, 8))
    f = lambda q, k, v, s: mx.fast.scaled_dot_product_attention(  # noqa: E731
        q, k, v, scale=0.3, mask="causal", sinks=s)
    path = str(tmp_path / "sdpa.mlxfn")
    mx.export_function(path, f, q, k, v, sinks)
    imported = mx.import_function(path)
    want = mx.grad(lambda *a: (_sdpa_ops(*a[:3], 0.3, causal=True, sinks=a[3]) * w).sum(),
                   argnums=(0, 1, 2, 3))(q, k, v, sinks)
    for fn in (f, lambda *a: imported(*a)[0]):
        got = mx.grad(lambda *a: (fn(*a) * w).sum(), argnums=(0, 1, 2, 3))(q, k, v, sinks)
        for a, b in zip(got, want):
            b = np.array(b)
            np.testing.assert_allclose(np.array(a), b, rtol=1e-4, atol=1e-5 * np.abs(b).max())
    qs = mx.array(randn(3, 2, 4, 9, 8))
    loss = lambda x: (f(x, k, v, sinks) * w).sum()  # noqa: E731
    np.testing.assert_allclose(np.array(mx.grad(lambda x: mx.vmap(loss)(x).sum())(qs)),
                               np.array(mx.vmap(mx.grad(loss))(qs)), rtol=1e-5, atol=1e-6)
    t = mx.array(randn(2, 4, 9, 8))
    got = mx.jvp(lambda x: mx.grad(loss)(x), [q], [t])[1][0]
    ref = mx.jvp(lambda x: mx.grad(lambda y: (_sdpa_ops(y, k, v, 0.3, causal=True, sinks=sinks)
                                              * w).sum())(x), [q], [t])[1][0]
    np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-4,
                               atol=1e-5 * np.abs(np.array(ref)).max())


def test_sdpa_gradient_over_4k_keys_needs_memory_for_its_rows():
    L = 4096
    q, k, v = (mx.random.normal((1, 2, L, 64)) for _ in range(3))
    mx.eval(q, k, v)
    grad = mx.grad(lambda q, k, v: mx.fast.scaled_dot_product_attention(
        q, k, v, scale=0.125, mask="causal").sum(), argnums=(0, 1, 2))
    mx.reset_peak_memory()
    before = mx.get_active_memory()
    mx.eval(grad(q, k, v))
    # q, k, v's gradients, the forward's output and cotangent: 5 of q's size; the score matrix
    # alone would be 128 MiB.
    assert mx.get_peak_memory() - before < 8 * q.nbytes


def test_sdpa_over_8k_keys_needs_memory_for_its_rows_not_its_scores():
    # Causal attention over 8192 positions, 2 heads of 64: the score matrix would be 512 MiB in
    # float32; the kernel keeps a block of scores per task.
    L = 8192
    q, k, v = (mx.random.normal((1, 2, L, 64)) for _ in range(3))
    mx.eval(q, k, v)
    mx.reset_peak_memory()
    before = mx.get_active_memory()
    out = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal")
    mx.eval(out)
    assert mx.get_peak_memory() - before < 3 * out.nbytes
    last = _sdpa(np.array(q[:, :, -2:]), np.array(k), np.array(v), 0.125, "causal")
    np.testing.assert_allclose(np.array(out[:, :, -2:]), last, rtol=1e-4, atol=1e-5)


def test_clear_streams_restarts_the_implicit_key():
    # MLX's test runner calls mx.clear_streams() between tests: the implicit key goes back to
    # the process's starting key, so the draws after it repeat, and differ from the next ones.
    mx.clear_streams()
    a = np.array(mx.random.uniform(shape=(4,)))
    b = np.array(mx.random.uniform(shape=(4,)))
    mx.clear_streams()
    np.testing.assert_array_equal(np.array(mx.random.uniform(shape=(4,))), a)
    assert not np.array_equal(a, b)
    mx.random.seed(0)  # leave the state as other tests expect it: seeded


def _rope_ops(x, dims, traditional, base, scale, offset):
    """mx.fast.rope spelled out in ops, rounding where the one-pass kernel must round."""
    B, N, T, D = x.shape
    half = dims // 2
    pos = (mx.arange(T, dtype=mx.float32) + offset) * mx.array(scale, mx.float32)
    inv = mx.exp(mx.arange(0, -half, -1, dtype=mx.float32) * np.float32(np.log(base) / half))
    theta = pos[:, None] * inv
    c, s = mx.cos(theta).astype(x.dtype), mx.sin(theta).astype(x.dtype)
    if traditional:
        x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
    else:
        x1, x2 = x[..., :half], x[..., half:dims]
    r1, r2 = x1 * c - x2 * s, x1 * s + x2 * c
    if traditional:
        rot = mx.stack([r1, r2], -1).reshape(B, N, T, dims)
    else:
        rot = mx.concatenate([r1, r2], -1)
    return mx.concatenate([rot, x[..., dims:]], -1)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("traditional", [False, True])
def test_rope_kernel_equals_its_ops_bit_for_bit_and_differentiates(dtype, traditional):
    dt = getattr(mx, dtype)
    x = mx.swapaxes(mx.array(randn(2, 7, 3, 12)), 1, 2).astype(dt)  # strided, as mlx-lm's q / k
    got = mx.fast.rope(x, 8, traditional=traditional, base=10000.0, scale=0.5, offset=5)
    want = _rope_ops(x, 8, traditional, 10000.0, 0.5, 5)
    np.testing.assert_array_equal(np.array(got.astype(mx.float32)),
                                  np.array(want.astype(mx.float32)))
    # Gradient, vmap and compile go through the same function.
    if dtype == "float32":
        ct = mx.array(randn(*x.shape))
        g = mx.grad(lambda a: mx.sum(mx.fast.rope(a, 8, traditional=traditional, base=1e4,
                                                  scale=0.5, offset=5) * ct))(x)
        g_ops = mx.grad(lambda a: mx.sum(_rope_ops(a, 8, traditional, 1e4, 0.5, 5) * ct))(x)
        np.testing.assert_allclose(np.array(g), np.array(g_ops), rtol=1e-6, atol=1e-6)
        f = lambda a: mx.fast.rope(a, 8, traditional=traditional, base=1e4, scale=0.5, offset=5)
        np.testing.assert_array_equal(np.array(mx.vmap(f)(x[None])[0]), np.array(f(x)))
        np.testing.assert_array_equal(np.array(mx.compile(f)(x)), np.array(f(x)))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rope_gradient_is_the_opposite_rotation(dtype):
    # The vjp is the kernel with the positions' scale negated: against the ops' gradient, for 64
    # of 80 features (whole 16-lane vectors), both layouts, per-batch offsets given as an array.
    dt = getattr(mx, dtype)
    x = mx.array(randn(2, 3, 5, 80)).astype(dt)
    ct = mx.array(randn(2, 3, 5, 80)).astype(dt)
    tol = 1e-6 if dtype == "float32" else 2e-2
    for traditional in (False, True):
        for off in (3, mx.array([3, 11], dtype=mx.int32)):
            f = lambda a: mx.fast.rope(a, 64, traditional=traditional, base=1e4, scale=0.7, offset=off)
            g = mx.vjp(f, [x], [ct])[1][0]
            want = np.zeros((2, 3, 5, 80), np.float32)
            for b in range(2):
                o = off if isinstance(off, int) else int(np.array(off)[b])
                fo = lambda a: _rope_ops(a, 64, traditional, 1e4, 0.7, o)
                want[b] = np.array(mx.vjp(fo, [x[b:b + 1]], [ct[b:b + 1]])[1][0].astype(mx.float32))[0]
            assert g.dtype == dt
            np.testing.assert_allclose(np.array(g.astype(mx.float32)), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rms_norm_kernel_equals_its_ops_and_differentiates(dtype):
    dt = getattr(mx, dtype)
    x = (mx.array(randn(3, 5, 96)) * 3).astype(dt)
    w = mx.array(RNG.uniform(0.5, 1.5, 96).astype(np.float32)).astype(dt)

    def ops(a, weight):
        y = a.astype(mx.float32)
        y = (y * mx.rsqrt(mx.mean(y * y, -1, keepdims=True) + 1e-5)).astype(dt)
        return y * weight

    got = np.array(mx.fast.rms_norm(x, w, 1e-5).astype(mx.float32))
    want = np.array(ops(x, w).astype(mx.float32))
    # The sum of squares may be added in another order: a rounding or two of the output apart.
    ulp = 2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -20
    np.testing.assert_allclose(got, want, rtol=ulp, atol=0)
    if dtype == "float32":
        ct = mx.array(randn(3, 5, 96))
        loss = lambda f: (lambda a, b: mx.sum(f(a, b) * ct))  # noqa: E731
        g = mx.grad(loss(lambda a, b: mx.fast.rms_norm(a, b, 1e-5)), argnums=(0, 1))(x, w)
        g_ops = mx.grad(loss(ops), argnums=(0, 1))(x, w)
        for a, b in zip(g, g_ops):
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-5)
        f = lambda a: mx.fast.rms_norm(a, w, 1e-5)  # noqa: E731
        np.testing.assert_allclose(np.array(mx.vmap(f, in_axes=1)(x)),
                                   np.array(mx.swapaxes(f(x), 0, 1)), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_rms_norm_gradient_kernel_against_float64(dtype):
    # One kernel for dx and dweight: against the float64 derivative of the same function, odd
    # widths, row counts that are not a multiple of its 16-row blocks, with and without a weight.
    dt = getattr(mx, dtype)
    tol = {"float32": 2e-5, "bfloat16": 3e-2, "float16": 5e-3}[dtype]
    for rows, D in ((5, 37), (35, 64)):
        x = mx.array(randn(rows, D)).astype(dt)
        w = mx.array(randn(D)).astype(dt)
        g = mx.array(randn(rows, D)).astype(dt)
        xd, wd, gd = (np.array(a.astype(mx.float32), np.float64) for a in (x, w, g))
        r = 1 / np.sqrt((xd ** 2).mean(-1, keepdims=True) + 1e-5)
        for weighted in (True, False):
            gy = gd * wd if weighted else gd
            want_dx = gy * r - xd * r ** 3 * (gy * xd).sum(-1, keepdims=True) / D
            if weighted:
                dx, dw = mx.vjp(lambda a, b: mx.fast.rms_norm(a, b, 1e-5), [x, w], [g])[1]
                np.testing.assert_allclose(np.array(dw.astype(mx.float32)), (gd * xd * r).sum(0),
                                           rtol=tol, atol=tol * np.sqrt(rows))
                assert dw.dtype == dt
            else:
                dx = mx.vjp(lambda a: mx.fast.rms_norm(a, None, 1e-5), [x], [g])[1][0]
            assert dx.dtype == dt
            np.testing.assert_allclose(np.array(dx.astype(mx.float32)), want_dx, rtol=tol,
                                       atol=tol * np.abs(want_dx).max())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_layer_norm_gradient_kernel_against_float64(dtype):
    # The same kernel with the mean removed, and dbias: every combination of weight and bias.
    dt = getattr(mx, dtype)
    tol = {"float32": 2e-5, "bfloat16": 3e-2}[dtype]
    rows, D = 21, 37
    x = mx.array(randn(rows, D) + 3.0).astype(dt)  # an offset the mean must take away
    w, b = (mx.array(randn(D)).astype(dt) for _ in range(2))
    g = mx.array(randn(rows, D)).astype(dt)
    xd, wd, gd = (np.array(a.astype(mx.float32), np.float64) for a in (x, w, g))
    xc = xd - xd.mean(-1, keepdims=True)
    r = 1 / np.sqrt((xc ** 2).mean(-1, keepdims=True) + 1e-5)
    for weighted, biased in ((True, True), (True, False), (False, True), (False, False)):
        args = [x] + ([w] if weighted else []) + ([b] if biased else [])

        def f(*a):
            return mx.fast.layer_norm(a[0], a[1] if weighted else None,
                                      a[-1] if biased else None, 1e-5)

        grads = mx.vjp(f, args, [g])[1]
        gy = gd * wd if weighted else gd
        want_dx = r * (gy - gy.mean(-1, keepdims=True)) - xc * r ** 3 * (gy * xc).mean(-1, keepdims=True)
        np.testing.assert_allclose(np.array(grads[0].astype(mx.float32)), want_dx, rtol=tol,
                                   atol=tol * np.abs(want_dx).max())
        if weighted:
            np.testing.assert_allclose(np.array(grads[1].astype(mx.float32)), (gd * xc * r).sum(0),
                                       rtol=tol, atol=tol * np.sqrt(rows))
        if biased:
            np.testing.assert_allclose(np.array(grads[-1].astype(mx.float32)), gd.sum(0),
                                       rtol=tol, atol=tol * np.sqrt(rows))
        assert all(gr.dtype == dt for gr in grads)
