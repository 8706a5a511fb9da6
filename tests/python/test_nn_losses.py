"""tessera.nn.losses against NumPy versions of each formula: every reduction, the optional
arguments (weights, axis, label smoothing, probability targets, margins, thresholds), numerically
hard inputs, error messages, and gradients against central finite differences in float64."""

import math

import numpy as np
import pytest

import tessera.core as mx
from tessera.nn import losses

REDUCTIONS = ["none", "mean", "sum"]
RNG = np.random.default_rng(20240601)


def arr(values, dtype=mx.float32):
    return mx.array(np.asarray(values), dtype=dtype)


def np_reduce(loss, reduction):
    if reduction == "mean":
        return np.mean(loss)
    if reduction == "sum":
        return np.sum(loss)
    return loss


def check(result, expected, rtol=1e-5, atol=1e-6):
    result = np.asarray(result)
    expected = np.asarray(expected)
    assert result.shape == expected.shape, (result.shape, expected.shape)
    np.testing.assert_allclose(result, expected, rtol=rtol, atol=atol)


def np_log_softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def finite_difference(f, x, h=1e-6):
    """Central differences of the scalar function ``f`` (NumPy float64 in, float out)."""
    x = np.array(x, dtype=np.float64)
    out = np.zeros_like(x)
    for index in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[index] += h
        down[index] -= h
        out[index] = (f(up) - f(down)) / (2 * h)
    return out


def check_gradient(loss_of, x, rtol=1e-5, atol=1e-7):
    """mx.grad of ``loss_of`` (array -> scalar array) at ``x`` against finite differences."""
    x = np.asarray(x, dtype=np.float64)
    analytic = mx.grad(loss_of)(mx.array(x, dtype=mx.float64))
    assert analytic.dtype == mx.float64
    numeric = finite_difference(lambda v: loss_of(mx.array(v, dtype=mx.float64)).item(), x)
    np.testing.assert_allclose(np.asarray(analytic), numeric, rtol=rtol, atol=atol)
    return np.asarray(analytic)


# ---- cross_entropy --------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_with_class_indices(reduction):
    logits = RNG.normal(size=(6, 5)) * 3
    targets = RNG.integers(0, 5, size=6)
    expected = -np_log_softmax(logits)[np.arange(6), targets]
    result = losses.cross_entropy(arr(logits), mx.array(targets), reduction=reduction)
    assert result.dtype == mx.float32
    check(result, np_reduce(expected, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_with_class_probabilities(reduction):
    logits = RNG.normal(size=(4, 7))
    probs = np.exp(np_log_softmax(RNG.normal(size=(4, 7))))
    expected = -np.sum(probs * np_log_softmax(logits), axis=-1)
    result = losses.cross_entropy(arr(logits), arr(probs), reduction=reduction)
    check(result, np_reduce(expected, reduction))


def test_cross_entropy_one_hot_probabilities_equal_indices():
    logits = RNG.normal(size=(5, 4))
    targets = np.array([0, 3, 1, 2, 3])
    one_hot = np.eye(4)[targets]
    a = losses.cross_entropy(arr(logits), mx.array(targets))
    b = losses.cross_entropy(arr(logits), arr(one_hot))
    check(a, b)


@pytest.mark.parametrize("smoothing", [0.1, 0.3, 0.9])
@pytest.mark.parametrize("as_probs", [False, True])
def test_cross_entropy_label_smoothing(smoothing, as_probs):
    n, c = 6, 5
    logits = RNG.normal(size=(n, c)) * 2
    indices = RNG.integers(0, c, size=n)
    hard = np.eye(c)[indices] if not as_probs else np.exp(np_log_softmax(RNG.normal(size=(n, c))))
    # Smoothing mixes the target distribution with the uniform one.
    smoothed = (1 - smoothing) * hard + smoothing / c
    expected = -np.sum(smoothed * np_log_softmax(logits), axis=-1)
    targets = arr(hard) if as_probs else mx.array(indices)
    for reduction in REDUCTIONS:
        result = losses.cross_entropy(
            arr(logits), targets, label_smoothing=smoothing, reduction=reduction
        )
        check(result, np_reduce(expected, reduction))


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_weights(smoothing):
    logits = RNG.normal(size=(5, 3))
    targets = RNG.integers(0, 3, size=5)
    weights = RNG.uniform(0.1, 2.0, size=5)
    smoothed = (1 - smoothing) * np.eye(3)[targets] + smoothing / 3
    per_sample = -np.sum(smoothed * np_log_softmax(logits), axis=-1) * weights
    for reduction in REDUCTIONS:
        result = losses.cross_entropy(
            arr(logits), mx.array(targets), weights=arr(weights),
            label_smoothing=smoothing, reduction=reduction,
        )
        check(result, np_reduce(per_sample, reduction))


def test_cross_entropy_other_axis():
    logits = RNG.normal(size=(2, 6, 3))  # classes on axis 1
    targets = RNG.integers(0, 6, size=(2, 3))
    logp = np_log_softmax(logits, axis=1)
    expected = -np.take_along_axis(logp, targets[:, None, :], axis=1)[:, 0, :]
    check(losses.cross_entropy(arr(logits), mx.array(targets), axis=1), expected)
    # Probabilities along axis 0 of a transposed problem.
    probs = np.exp(np_log_softmax(RNG.normal(size=(6, 4)), axis=0))
    lg = RNG.normal(size=(6, 4))
    expected = -np.sum(probs * np_log_softmax(lg, axis=0), axis=0)
    check(losses.cross_entropy(arr(lg), arr(probs), axis=0), expected)
    # And axis=0 with indices equals axis=-1 on the transpose.
    base = RNG.normal(size=(4, 8))
    idx = mx.array([1, 2, 3, 0])
    check(
        losses.cross_entropy(arr(base.T), idx, axis=0),
        losses.cross_entropy(arr(base), idx, axis=-1),
    )


def test_cross_entropy_is_shift_invariant_for_large_logits():
    base = np.array([[2.0, -1.0, 0.5]])
    idx = mx.array([0])
    reference = -np_log_softmax(base)[0, 0]
    for offset in [1e4, 1e6]:
        check(losses.cross_entropy(arr(base + offset), idx), [reference], atol=1e-5, rtol=1e-4)
    for value in [1.0, 1e4, 1e8, 1e20]:
        check(losses.cross_entropy(arr([[value, value]]), idx), [math.log(2)], atol=1e-5)


def test_cross_entropy_infinite_logits():
    logits = arr([[0.0, -np.inf], [-np.inf, 0.0]])
    check(losses.cross_entropy(logits, mx.array([0, 1])), [0.0, 0.0])
    # As in MLX (and PyTorch), 0 * -inf in the probability form gives NaN.
    probs = arr([[1.0, 0.0], [0.0, 1.0]])
    assert np.isnan(np.asarray(losses.cross_entropy(logits, probs))).all()


def test_cross_entropy_errors():
    logits = arr(np.zeros((3, 4)))
    idx = mx.array([0, 1, 2])
    for bad in [-0.1, 1.0, 1.5]:
        with pytest.raises(ValueError, match=str(bad)):
            losses.cross_entropy(logits, idx, label_smoothing=bad)
    with pytest.raises(ValueError, match=r"\(4,\)"):
        losses.cross_entropy(logits, mx.array([0, 1, 2, 3]))
    with pytest.raises(ValueError, match=r"\(3, 5\)"):
        losses.cross_entropy(logits, arr(np.zeros((3, 5))))
    with pytest.raises(ValueError, match=r"\(2,\)"):
        losses.cross_entropy(logits, idx, weights=arr([1.0, 2.0]))
    with pytest.raises(ValueError, match="average"):
        losses.cross_entropy(logits, idx, reduction="average")


def test_cross_entropy_gradient():
    logits = RNG.normal(size=(3, 4))
    targets = mx.array([2, 0, 3])
    weights = mx.array([0.5, 1.0, 2.0], dtype=mx.float64)
    g = check_gradient(
        lambda x: losses.cross_entropy(x, targets, weights=weights, reduction="sum"), logits
    )
    # Closed form: weight * (softmax - one_hot).
    closed = (np.exp(np_log_softmax(logits)) - np.eye(4)[[2, 0, 3]]) * np.asarray(weights)[:, None]
    np.testing.assert_allclose(g, closed, rtol=1e-8, atol=1e-10)
    probs = mx.array(np.exp(np_log_softmax(RNG.normal(size=(3, 4)))), dtype=mx.float64)
    check_gradient(
        lambda x: losses.cross_entropy(x, probs, label_smoothing=0.2, reduction="mean"), logits
    )


# ---- binary_cross_entropy -------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction):
    logits = RNG.normal(size=(3, 4)) * 3
    targets = RNG.integers(0, 2, size=(3, 4)).astype(np.float64)
    expected = np.log1p(np.exp(-np.abs(logits))) + np.maximum(logits, 0) - logits * targets
    result = losses.binary_cross_entropy(arr(logits), arr(targets), reduction=reduction)
    check(result, np_reduce(expected, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_probabilities(reduction):
    probs = RNG.uniform(0.01, 0.99, size=(8,))
    targets = RNG.uniform(0, 1, size=(8,))  # soft targets are allowed too
    expected = -(targets * np.log(probs) + (1 - targets) * np.log(1 - probs))
    result = losses.binary_cross_entropy(
        arr(probs), arr(targets), with_logits=False, reduction=reduction
    )
    check(result, np_reduce(expected, reduction), rtol=1e-4)


def test_binary_cross_entropy_default_reduction_is_mean_and_weights():
    logits = RNG.normal(size=(6,))
    targets = RNG.integers(0, 2, size=6).astype(np.float64)
    weights = RNG.uniform(0, 3, size=6)
    per = np.logaddexp(0, logits) - logits * targets
    check(losses.binary_cross_entropy(arr(logits), arr(targets)), np.mean(per))
    check(
        losses.binary_cross_entropy(
            arr(logits), arr(targets), weights=arr(weights), reduction="none"
        ),
        per * weights,
    )
    probs = 1 / (1 + np.exp(-logits))
    check(
        losses.binary_cross_entropy(
            arr(probs), arr(targets), weights=arr(weights), with_logits=False, reduction="sum"
        ),
        np.sum(per * weights),
        rtol=1e-4,
    )
    # Integer targets work as in MLX.
    check(
        losses.binary_cross_entropy(
            arr(logits), mx.array(targets.astype(np.int32)), reduction="none"
        ),
        per,
    )


def test_binary_cross_entropy_extreme_inputs():
    # Large logits must not overflow.
    logits = np.array([-200.0, -50.0, 50.0, 200.0])
    targets = np.array([1.0, 0.0, 1.0, 0.0])
    expected = np.logaddexp(0, logits) - logits * targets
    check(losses.binary_cross_entropy(arr(logits), arr(targets), reduction="none"), expected)
    # Probabilities of exactly 0 or 1 are clipped to log = -100.
    probs = arr([0.0, 1.0, 0.0, 1.0])
    result = losses.binary_cross_entropy(
        probs, arr([1.0, 0.0, 0.0, 1.0]), with_logits=False, reduction="none"
    )
    check(result, [100.0, 100.0, 0.0, 0.0])


def test_binary_cross_entropy_errors():
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        losses.binary_cross_entropy(arr([0.0, 1.0, 2.0]), arr([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"\(1,\)"):
        losses.binary_cross_entropy(arr([0.0, 1.0]), arr([0.0, 1.0]), weights=arr([1.0]))
    with pytest.raises(ValueError, match="total"):
        losses.binary_cross_entropy(arr([0.0]), arr([1.0]), reduction="total")


def test_binary_cross_entropy_gradient():
    logits = RNG.normal(size=(5,))
    targets = RNG.integers(0, 2, size=5).astype(np.float64)
    t = mx.array(targets, dtype=mx.float64)
    g = check_gradient(lambda x: losses.binary_cross_entropy(x, t, reduction="sum"), logits)
    np.testing.assert_allclose(g, 1 / (1 + np.exp(-logits)) - targets, rtol=1e-8)
    probs = RNG.uniform(0.1, 0.9, size=(5,))
    check_gradient(
        lambda p: losses.binary_cross_entropy(p, t, with_logits=False, reduction="mean"), probs
    )


# ---- regression losses ----------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_l1_and_mse(reduction):
    p = RNG.normal(size=(4, 3))
    t = RNG.normal(size=(4, 3))
    check(losses.l1_loss(arr(p), arr(t), reduction=reduction), np_reduce(np.abs(p - t), reduction))
    check(
        losses.mse_loss(arr(p), arr(t), reduction=reduction),
        np_reduce((p - t) ** 2, reduction),
    )


@pytest.mark.parametrize("beta", [1.0, 0.25, 3.0])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_smooth_l1(beta, reduction):
    p = RNG.normal(size=(10,)) * 2
    t = RNG.normal(size=(10,))
    d = np.abs(p - t)
    expected = np.where(d < beta, 0.5 * d**2 / beta, d - 0.5 * beta)
    check(losses.smooth_l1_loss(arr(p), arr(t), beta=beta, reduction=reduction),
          np_reduce(expected, reduction))


@pytest.mark.parametrize("delta", [1.0, 0.3, 2.5])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_huber(delta, reduction):
    p = RNG.normal(size=(3, 4)) * 2
    t = RNG.normal(size=(3, 4))
    a = np.abs(p - t)
    expected = np.where(a <= delta, 0.5 * a**2, delta * (a - 0.5 * delta))
    check(losses.huber_loss(arr(p), arr(t), delta=delta, reduction=reduction),
          np_reduce(expected, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_log_cosh(reduction):
    p = np.concatenate([RNG.normal(size=8), [100.0, -100.0, 1e-4]])
    t = np.concatenate([RNG.normal(size=8), [0.0, 0.0, 0.0]])
    e = np.abs(p - t)
    # log(cosh e) = e + log1p(exp(-2e)) - log 2, finite even where cosh overflows float32.
    expected = e + np.log1p(np.exp(-2 * e)) - math.log(2)
    check(losses.log_cosh_loss(arr(p), arr(t), reduction=reduction),
          np_reduce(expected, reduction), atol=1e-5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_hinge(reduction):
    scores = RNG.normal(size=(9,)) * 2
    labels = RNG.choice([-1.0, 1.0], size=9)
    expected = np.maximum(0, 1 - scores * labels)
    check(losses.hinge_loss(arr(scores), arr(labels), reduction=reduction),
          np_reduce(expected, reduction))


@pytest.mark.parametrize("margin", [0.0, 0.5])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking(margin, reduction):
    x1, x2 = RNG.normal(size=7), RNG.normal(size=7)
    y = RNG.choice([-1.0, 1.0], size=7)
    expected = np.maximum(0, -y * (x1 - x2) + margin)
    check(losses.margin_ranking_loss(arr(x1), arr(x2), arr(y), margin=margin, reduction=reduction),
          np_reduce(expected, reduction))


def test_margin_ranking_shape_error():
    with pytest.raises(ValueError, match=r"targets \(2,\)"):
        losses.margin_ranking_loss(arr([1.0, 2.0, 3.0]), arr([1.0, 2.0, 3.0]), arr([1.0, -1.0]))


def test_regression_shape_errors():
    a, b = arr(np.zeros((2, 3))), arr(np.zeros((3, 2)))
    for fn in [losses.l1_loss, losses.mse_loss, losses.smooth_l1_loss]:
        with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
            fn(a, b)
    for fn in [losses.l1_loss, losses.mse_loss, losses.hinge_loss, losses.huber_loss,
               losses.log_cosh_loss]:
        with pytest.raises(ValueError, match="'max'"):
            fn(a, a, reduction="max")


# ---- likelihood losses ----------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll(reduction):
    logp = np_log_softmax(RNG.normal(size=(5, 4)))
    targets = RNG.integers(0, 4, size=5)
    expected = -logp[np.arange(5), targets]
    check(losses.nll_loss(arr(logp), mx.array(targets), reduction=reduction),
          np_reduce(expected, reduction))
    # Classes on axis 0.
    check(losses.nll_loss(arr(logp.T), mx.array(targets), axis=0, reduction=reduction),
          np_reduce(expected, reduction))


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gaussian_nll(full, reduction):
    mean = RNG.normal(size=(3, 4))
    target = RNG.normal(size=(3, 4))
    var = RNG.uniform(0.1, 2.0, size=(3, 4))
    var[0, 0] = 1e-9  # below eps: clamped to it
    target[0, 0] = mean[0, 0] + 1e-4  # keeps that entry's squared error / eps moderate
    v = np.maximum(var, 1e-6)
    expected = 0.5 * (np.log(v) + (target - mean) ** 2 / v)
    if full:
        expected = expected + 0.5 * math.log(2 * math.pi)
    result = losses.gaussian_nll_loss(
        arr(mean), arr(target), arr(var), full=full, reduction=reduction
    )
    check(result, np_reduce(expected, reduction), rtol=1e-4)


def test_gaussian_nll_eps_and_errors():
    mean, target = arr([0.0, 1.0]), arr([1.0, 1.0])
    var = arr([0.0, 0.5])
    expected = 0.5 * (np.log([0.01, 0.5]) + np.array([1.0, 0.0]) / np.array([0.01, 0.5]))
    check(losses.gaussian_nll_loss(mean, target, var, eps=0.01, reduction="none"), expected)
    with pytest.raises(ValueError, match=r"targets shape \(3,\)"):
        losses.gaussian_nll_loss(mean, arr([1.0, 2.0, 3.0]), var)
    with pytest.raises(ValueError, match=r"vars shape \(1,\)"):
        losses.gaussian_nll_loss(mean, target, arr([1.0]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_kl_div(reduction):
    p = np_log_softmax(RNG.normal(size=(4, 6)))
    q = np_log_softmax(RNG.normal(size=(4, 6)))
    expected = np.sum(np.exp(q) * (q - p), axis=-1)
    assert (expected >= 0).all()
    check(losses.kl_div_loss(arr(p), arr(q), reduction=reduction), np_reduce(expected, reduction))
    check(losses.kl_div_loss(arr(p.T), arr(q.T), axis=0, reduction=reduction),
          np_reduce(expected, reduction))
    # Identical distributions are zero apart.
    check(losses.kl_div_loss(arr(p), arr(p)), np.zeros(4), atol=1e-6)


# ---- embedding losses -----------------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_triplet(p, reduction):
    a, pos, neg = (RNG.normal(size=(5, 3)) for _ in range(3))

    def dist(x, y, axis=-1):
        return (np.sum(np.abs(x - y) ** p, axis=axis) + 1e-6) ** (1.0 / p)

    for margin in [1.0, 0.2]:
        expected = np.maximum(dist(a, pos) - dist(a, neg) + margin, 0)
        result = losses.triplet_loss(
            arr(a), arr(pos), arr(neg), p=p, margin=margin, reduction=reduction
        )
        check(result, np_reduce(expected, reduction), rtol=1e-4)
    expected = np.maximum(dist(a, pos, 0) - dist(a, neg, 0) + 1.0, 0)
    check(losses.triplet_loss(arr(a), arr(pos), arr(neg), axis=0, p=p, reduction=reduction),
          np_reduce(expected, reduction), rtol=1e-4)


def test_triplet_eps():
    a = RNG.normal(size=(4, 3))
    neg = a + 0.5
    # Zero anchor-positive distance: the eps under the root is all that is left of it.
    for p, eps in [(2, 1e-6), (1, 0.25), (3, 0.5)]:
        d_neg = (3 * 0.5**p + eps) ** (1.0 / p)
        expected = np.maximum(eps ** (1.0 / p) - d_neg + 2.0, 0) * np.ones(4)
        result = losses.triplet_loss(arr(a), arr(a), arr(neg), p=p, margin=2.0, eps=eps)
        check(result, expected, rtol=1e-5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cosine_similarity(reduction):
    x1, x2 = RNG.normal(size=(4, 5)), RNG.normal(size=(4, 5))

    def cos(a, b, axis):
        n = np.linalg.norm(a, axis=axis) * np.linalg.norm(b, axis=axis)
        return np.sum(a * b, axis=axis) / np.maximum(n, 1e-8)

    check(losses.cosine_similarity_loss(arr(x1), arr(x2), reduction=reduction),
          np_reduce(cos(x1, x2, 1), reduction))
    check(losses.cosine_similarity_loss(arr(x1), arr(x2), axis=0, reduction=reduction),
          np_reduce(cos(x1, x2, 0), reduction))
    # A zero vector gives 0 instead of NaN thanks to eps.
    z = np.zeros((1, 5))
    check(losses.cosine_similarity_loss(arr(z), arr(x2[:1])), [0.0])
    # Parallel vectors give 1, antiparallel -1.
    check(losses.cosine_similarity_loss(arr(x1), arr(3 * x1)), np.ones(4))
    check(losses.cosine_similarity_loss(arr(x1), arr(-x1)), -np.ones(4))


# ---- defaults, dtypes and more gradients ----------------------------------------------------


def test_default_reductions_match_mlx():
    x = arr(RNG.normal(size=(3, 4)))
    y = arr(RNG.normal(size=(3, 4)))
    v = arr(RNG.uniform(0.5, 1.0, size=(3, 4)))
    idx = mx.array([0, 1, 2])
    cases = {
        "mean": [
            lambda r: losses.binary_cross_entropy(x, y, **r),
            lambda r: losses.l1_loss(x, y, **r),
            lambda r: losses.mse_loss(x, y, **r),
            lambda r: losses.smooth_l1_loss(x, y, **r),
            lambda r: losses.gaussian_nll_loss(x, y, v, **r),
        ],
        "none": [
            lambda r: losses.cross_entropy(x, idx, **r),
            lambda r: losses.nll_loss(x, idx, **r),
            lambda r: losses.kl_div_loss(x, y, **r),
            lambda r: losses.triplet_loss(x, y, v, **r),
            lambda r: losses.hinge_loss(x, y, **r),
            lambda r: losses.huber_loss(x, y, **r),
            lambda r: losses.log_cosh_loss(x, y, **r),
            lambda r: losses.cosine_similarity_loss(x, y, **r),
            lambda r: losses.margin_ranking_loss(x, y, v, **r),
        ],
    }
    for default, fns in cases.items():
        for fn in fns:
            check(fn({}), fn({"reduction": default}))
            with pytest.raises(ValueError, match="'bogus'"):
                fn({"reduction": "bogus"})


def test_float64_inputs_stay_float64():
    x = mx.array(RNG.normal(size=(2, 3)), dtype=mx.float64)
    y = mx.array(RNG.normal(size=(2, 3)), dtype=mx.float64)
    assert losses.mse_loss(x, y).dtype == mx.float64
    assert losses.cross_entropy(x, mx.array([0, 2])).dtype == mx.float64
    assert losses.log_cosh_loss(x, y).dtype == mx.float64
    assert losses.binary_cross_entropy(x, y).dtype == mx.float64


def test_regression_gradients():
    # Points away from the kinks of |.|, huber and smooth L1.
    p = np.array([-2.3, -0.4, 0.2, 0.7, 1.9])
    t = mx.array(np.array([0.1, 0.05, -0.3, 0.2, 0.0]), dtype=mx.float64)
    check_gradient(lambda x: losses.huber_loss(x, t, delta=1.0, reduction="sum"), p)
    check_gradient(lambda x: losses.smooth_l1_loss(x, t, beta=0.5, reduction="mean"), p)
    check_gradient(lambda x: losses.log_cosh_loss(x, t, reduction="sum"), p)
    g = check_gradient(lambda x: losses.mse_loss(x, t, reduction="mean"), p)
    np.testing.assert_allclose(g, 2 * (p - np.asarray(t)) / p.size, rtol=1e-8)


def test_likelihood_and_embedding_gradients():
    mean = RNG.normal(size=(4,))
    target = mx.array(RNG.normal(size=(4,)), dtype=mx.float64)
    var = mx.array(RNG.uniform(0.5, 2.0, size=(4,)), dtype=mx.float64)
    check_gradient(lambda m: losses.gaussian_nll_loss(m, target, var, reduction="sum"), mean)
    m64 = mx.array(mean, dtype=mx.float64)
    check_gradient(lambda v: losses.gaussian_nll_loss(m64, target, v, full=True), np.asarray(var))
    a = RNG.normal(size=(3, 4))
    pos = mx.array(a + 0.1 * RNG.normal(size=(3, 4)), dtype=mx.float64)
    neg = mx.array(RNG.normal(size=(3, 4)), dtype=mx.float64)
    check_gradient(lambda x: losses.triplet_loss(x, pos, neg, margin=5.0, reduction="sum"), a,
                   rtol=1e-4, atol=1e-6)
    other = mx.array(RNG.normal(size=(3, 4)), dtype=mx.float64)
    check_gradient(lambda x: losses.cosine_similarity_loss(x, other, reduction="sum"), a)
    q = mx.array(np_log_softmax(RNG.normal(size=(2, 3))), dtype=mx.float64)
    g = check_gradient(lambda x: losses.kl_div_loss(x, q, reduction="sum"), RNG.normal(size=(2, 3)))
    np.testing.assert_allclose(g, -np.exp(np.asarray(q)), rtol=1e-8)
