"""tessera.nn layers (dropout, embedding, normalisation, positional encodings, attention and
Transformers, recurrent layers, upsampling) against NumPy implementations of their formulas,
gradients against central finite differences in float64, and MLX's parameter names and shapes."""

import math

import numpy as np
import pytest

import tessera.core as mx
from tessera.nn.layers.dropout import Dropout, Dropout2d, Dropout3d
from tessera.nn.layers.embedding import Embedding
from tessera.nn.layers.normalization import BatchNorm, GroupNorm, InstanceNorm, LayerNorm, RMSNorm
from tessera.nn.layers.positional_encoding import ALiBi, RoPE, SinusoidalPositionalEncoding
from tessera.nn.layers.recurrent import GRU, LSTM, RNN
from tessera.nn.layers.transformer import (
    MultiHeadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from tessera.nn.layers.upsample import Upsample
from tessera.utils import tree_flatten, tree_map, tree_unflatten

RNG = np.random.default_rng(20240611)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def f64(a):
    return mx.array(np.asarray(a, np.float64), dtype=mx.float64)


def np_params(module):
    """The module's parameters as a flat {dotted key: NumPy array}."""
    return {k: np.array(v) for k, v in tree_flatten(module.parameters())}


def shapes(module):
    return {k: tuple(v.shape) for k, v in tree_flatten(module.parameters())}


def close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.array(a), b, rtol=rtol, atol=atol)


def randomise(module, dtype=mx.float32, scale=0.5):
    """Replaces every parameter by fresh normal values (so that ones/zeros hide nothing)."""
    module.update(tree_map(
        lambda p: mx.array(scale * RNG.standard_normal(p.shape), dtype=dtype), module.parameters()))
    return module


def fd_grad(fn, x, eps=1e-6):
    """Central finite differences of the scalar fn(NumPy float64 array) at x."""
    x = np.array(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (fn(xp) - fn(xm)) / (2 * eps)
    return g


def check_grad_x(layer_fn, x, rtol=1e-6, atol=1e-7, fd_eps=1e-6):
    """mx.grad of sum(layer(x) * R) against finite differences, in float64."""
    r = f64(RNG.standard_normal(np.array(layer_fn(f64(x))).shape))

    def loss(a):
        return (layer_fn(a) * r).sum()

    analytic = np.array(mx.grad(loss)(f64(x)))
    numeric = fd_grad(lambda a: float(np.array(loss(f64(a)))), x, fd_eps)
    np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol)


def check_grad_param(module, name, call, rtol=1e-6, atol=1e-7):
    """mx.grad of sum(call() * R) with respect to parameter ``name`` (a dotted key), against
    finite differences, in float64 (the module must be float64)."""
    r = f64(RNG.standard_normal(np.array(call()).shape))
    params = module.trainable_parameters()

    def loss(p):
        module.update(p)
        return (call() * r).sum()

    analytic = dict(tree_flatten(mx.grad(loss)(params)))[name]
    base = dict(tree_flatten(params))

    def loss_at(value):
        flat = dict(base)
        flat[name] = f64(value)
        module.update(tree_unflatten(list(flat.items())))
        return float(np.array((call() * r).sum()))

    numeric = fd_grad(loss_at, np.array(base[name]))
    module.update(params)
    np.testing.assert_allclose(np.array(analytic), numeric, rtol=rtol, atol=atol)


# ===================================================================== NumPy references

def np_layer_norm(x, w=None, b=None, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def np_softmax(s, axis=-1):
    s = s - s.max(axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis, keepdims=True)


def np_linear(x, p, prefix):
    y = x @ p[prefix + ".weight"].T
    if prefix + ".bias" in p:
        y = y + p[prefix + ".bias"]
    return y


def np_mha(p, prefix, q, k, v, heads, mask=None):
    def split(t):
        b, l, d = t.shape
        return t.reshape(b, l, heads, d // heads).transpose(0, 2, 1, 3)

    qh = split(np_linear(q, p, prefix + "query_proj"))
    kh = split(np_linear(k, p, prefix + "key_proj"))
    vh = split(np_linear(v, p, prefix + "value_proj"))
    s = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(qh.shape[-1])
    if mask is not None:
        s = s + mask
    o = np_softmax(s) @ vh
    b, h, l, d = o.shape
    return np_linear(o.transpose(0, 2, 1, 3).reshape(b, l, h * d), p, prefix + "out_proj")


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


# ========================================================================= Dropout

def test_dropout_train_keeps_one_minus_p_scaled_and_eval_is_identity():
    mx.random.seed(3)
    x = mx.ones((200, 500))
    for p in (0.3, 0.75):
        layer = Dropout(p)
        y = np.array(layer(x))
        kept = y != 0
        # 100k Bernoulli draws: the kept fraction is within ~7 standard deviations
        assert abs(kept.mean() - (1 - p)) < 0.01
        np.testing.assert_allclose(y[kept], 1 / (1 - p), rtol=1e-6)
        layer.eval()
        assert layer(x) is x
    assert Dropout(0.0)(x) is x
    # a different draw each call
    layer = Dropout(0.5)
    assert not np.array_equal(np.array(layer(x)), np.array(layer(x)))


def test_dropout_keeps_dtype_and_values():
    mx.random.seed(4)
    x = randn(64, 64)
    for dtype in (mx.float32, mx.float16, mx.bfloat16):
        y = Dropout(0.5)(mx.array(x).astype(dtype))
        assert y.dtype == dtype and y.shape == (64, 64)
    y = np.array(Dropout(0.25)(mx.array(x)))
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / 0.75, rtol=1e-6)


def test_dropout_channels():
    mx.random.seed(5)
    x = mx.ones((64, 3, 3, 64))
    y = np.array(Dropout2d(0.5)(x))
    # every (sample, channel) is either dropped everywhere or kept (scaled by 2) everywhere
    per_channel = y.reshape(64, 9, 64)
    assert np.all(per_channel == per_channel[:, :1, :])
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert abs((per_channel[:, 0, :] != 0).mean() - 0.5) < 0.05
    y3 = np.array(Dropout2d(0.5)(mx.ones((4, 5, 32))))  # HWC
    assert np.all(y3 == y3[:1, :1, :])

    z = np.array(Dropout3d(0.25)(mx.ones((32, 2, 2, 2, 64))))
    per_channel = z.reshape(32, 8, 64)
    assert np.all(per_channel == per_channel[:, :1, :])
    assert abs((per_channel[:, 0, :] != 0).mean() - 0.75) < 0.05
    np.testing.assert_allclose(z[z != 0], 1 / 0.75, rtol=1e-6)
    z4 = np.array(Dropout3d(0.5)(mx.ones((2, 2, 2, 16))))  # DHWC
    assert np.all(z4 == z4[:1, :1, :1, :])

    for layer in (Dropout2d(0.5), Dropout3d(0.5)):
        layer.eval()
    assert layer(mx.ones((1, 2, 2, 2, 3))).shape == (1, 2, 2, 2, 3)
    with pytest.raises(ValueError, match="ndim=2"):
        Dropout2d()(mx.ones((3, 4)))
    with pytest.raises(ValueError, match="ndim=3"):
        Dropout3d()(mx.ones((3, 4, 5)))


@pytest.mark.parametrize("cls", [Dropout, Dropout2d, Dropout3d])
def test_dropout_rejects_bad_probability(cls):
    for p in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match=f"p={p}"):
            cls(p)
    assert "p=0.25" in repr(cls(0.25))
    assert cls(0.5).parameters() == {}


# ======================================================================= Embedding

def test_embedding_lookup_as_linear_and_init():
    mx.random.seed(6)
    emb = Embedding(10, 4)
    assert shapes(emb) == {"weight": (10, 4)}
    w = np.array(emb.weight)
    ids = np.array([[1, 9, 0], [3, 3, 7]])
    out = emb(mx.array(ids))
    assert out.shape == (2, 3, 4)
    close(out, w[ids], 0, 0)
    h = randn(2, 5, 4)
    close(emb.as_linear(mx.array(h)), h @ w.T)
    # N(0, 1/dims)
    big = np.array(Embedding(1000, 16).weight)
    assert abs(big.std() - 0.25) < 0.01 and abs(big.mean()) < 0.01
    with pytest.raises(ValueError, match="dims=0"):
        Embedding(5, 0)


# =================================================================== normalisation

@pytest.mark.parametrize("cls,args", [
    (LayerNorm, (8,)), (RMSNorm, (8,)), (GroupNorm, (2, 8)), (InstanceNorm, (8,)), (BatchNorm, (8,)),
])
def test_norms_reject_non_positive_eps(cls, args):
    for eps in (0.0, -1e-30, -1.0):
        with pytest.raises(ValueError, match=f"must be positive but got eps={eps}"):
            cls(*args, eps=eps)
    cls(*args, eps=1e-30)


def test_layer_norm_forward_and_parameters():
    x = randn(3, 5, 8)
    ln = LayerNorm(8)
    assert shapes(ln) == {"weight": (8,), "bias": (8,)}
    close(ln(mx.array(x)), np_layer_norm(x))
    randomise(ln)
    p = np_params(ln)
    close(ln(mx.array(x)), np_layer_norm(x, p["weight"], p["bias"]), 1e-4, 1e-5)
    assert shapes(LayerNorm(8, affine=False)) == {}
    nb = LayerNorm(8, bias=False, eps=1e-2)
    assert shapes(nb) == {"weight": (8,)}
    randomise(nb)
    close(nb(mx.array(x)), np_layer_norm(x, np.array(nb.weight), eps=1e-2), 1e-4, 1e-5)


def vjp_at(module, x, g):
    """The gradient of sum(module(x) * g), a vector-Jacobian product: (dx, {parameter: d})."""
    params = module.trainable_parameters()
    cot = mx.array(g)

    def loss(p, a):
        module.update(p)
        return (module(a) * cot).sum()

    dp, dx = mx.grad(loss, argnums=(0, 1))(params, mx.array(x))
    module.update(params)
    return np.array(dx), {k: np.array(v) for k, v in tree_flatten(dp)}


# fast.layer_norm and fast.rms_norm accumulate in float32 even for float64 inputs (as MLX
# does), too coarse for finite differences: their gradients are checked against the NumPy
# derivation of the backward pass instead.

def test_layer_norm_gradients_against_numpy_derivation():
    ln = randomise(LayerNorm(6, eps=1e-3))
    x, g = randn(4, 6), randn(4, 6)
    w = np.array(ln.weight).astype(np.float64)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    mu = x64.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + 1e-3)
    xhat = (x64 - mu) * rstd
    dxhat = g64 * w
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    got_dx, got_dp = vjp_at(ln, x, g)
    np.testing.assert_allclose(got_dx, dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_dp["weight"], (g64 * xhat).sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_dp["bias"], g64.sum(0), rtol=1e-4, atol=1e-5)
    # and a coarse finite-difference check of the whole chain
    check_grad_x(randomise(LayerNorm(5), mx.float64), randn(3, 5, dtype=np.float64), fd_eps=1e-3,
                 rtol=1e-3, atol=1e-4)


def test_rms_norm_forward_and_gradients():
    x = randn(4, 6)
    rms = RMSNorm(6, eps=1e-3)
    assert shapes(rms) == {"weight": (6,)}
    randomise(rms)
    w = np.array(rms.weight)
    close(rms(mx.array(x)), x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-3) * w, 1e-4, 1e-5)
    # backward: with r = (mean(x^2) + eps)^(-1/2) and u = g * w,
    # dx = r u - x r^3 mean(u x) and dw = sum over rows of g x r
    g = randn(4, 6)
    x64, g64, w64 = (t.astype(np.float64) for t in (x, g, w))
    r = 1 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-3)
    u = g64 * w64
    dx = r * u - x64 * r ** 3 * (u * x64).mean(-1, keepdims=True)
    got_dx, got_dp = vjp_at(rms, x, g)
    np.testing.assert_allclose(got_dx, dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_dp["weight"], (g64 * x64 * r).sum(0), rtol=1e-4, atol=1e-5)
    check_grad_x(randomise(RMSNorm(5), mx.float64), randn(3, 5, dtype=np.float64), fd_eps=1e-3,
                 rtol=1e-3, atol=1e-4)


def test_group_norm_both_groupings():
    x = randn(2, 3, 4, 6)
    for compatible in (False, True):
        gn = randomise(GroupNorm(3, 6, pytorch_compatible=compatible))
        assert shapes(gn) == {"weight": (6,), "bias": (6,)}
        p = np_params(gn)
        if compatible:  # contiguous blocks of 2 features
            g = x.reshape(2, 12, 3, 2).transpose(0, 2, 1, 3).reshape(2, 3, -1)
        else:  # feature f in group f % 3
            g = x.reshape(2, 12, 2, 3).transpose(0, 3, 1, 2).reshape(2, 3, -1)
        mu = g.mean(-1, keepdims=True)
        var = g.var(-1, keepdims=True)
        n = (g - mu) / np.sqrt(var + 1e-5)
        if compatible:
            n = n.reshape(2, 3, 12, 2).transpose(0, 2, 1, 3).reshape(x.shape)
        else:
            n = n.reshape(2, 3, 12, 2).transpose(0, 2, 3, 1).reshape(x.shape)
        close(gn(mx.array(x)), n * p["weight"] + p["bias"], 1e-4, 1e-4)
    assert shapes(GroupNorm(2, 4, affine=False)) == {}
    with pytest.raises(ValueError, match="dims=6 is not divisible by num_groups=4"):
        GroupNorm(4, 6)
    with pytest.raises(ValueError, match="num_groups=0"):
        GroupNorm(0, 8)
    with pytest.raises(ValueError, match="dims=0"):
        GroupNorm(2, 0)


def test_instance_norm():
    for shape in [(2, 7, 3), (2, 4, 5, 3)]:
        x = randn(*shape)
        axes = tuple(range(1, x.ndim - 1))
        ref = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
        close(InstanceNorm(3)(mx.array(x)), ref, 1e-4, 1e-5)
        inorm = randomise(InstanceNorm(3, affine=True))
        p = np_params(inorm)
        close(inorm(mx.array(x)), ref * p["weight"] + p["bias"], 1e-4, 1e-5)
    assert shapes(InstanceNorm(3)) == {}
    assert shapes(InstanceNorm(3, affine=True)) == {"weight": (3,), "bias": (3,)}
    with pytest.raises(ValueError, match="ndim=2"):
        InstanceNorm(3)(mx.ones((4, 3)))


def test_batch_norm_running_statistics_and_eval(tmp_path):
    bn = BatchNorm(4, momentum=0.2)
    assert shapes(bn) == {"weight": (4,), "bias": (4,), "running_mean": (4,), "running_var": (4,)}
    assert set(dict(tree_flatten(bn.trainable_parameters()))) == {"weight", "bias"}
    bn.unfreeze()
    assert set(dict(tree_flatten(bn.trainable_parameters()))) == {"weight", "bias"}
    randomise(bn)
    p = np_params(bn)
    rm, rv = np.zeros(4), np.ones(4)
    bn.running_mean, bn.running_var = mx.zeros((4,)), mx.ones((4,))
    for step in range(3):
        x = randn(2, 3, 3, 4) * (step + 1) + step
        axes = (0, 1, 2)
        y = bn(mx.array(x))
        ref = (x - x.mean(axes)) / np.sqrt(x.var(axes) + 1e-5) * p["weight"] + p["bias"]
        close(y, ref, 1e-4, 1e-4)
        rm = 0.8 * rm + 0.2 * x.mean(axes)
        rv = 0.8 * rv + 0.2 * x.var(axes, ddof=1)
        close(bn.running_mean, rm, 1e-5, 1e-5)
        close(bn.running_var, rv, 1e-5, 1e-5)
    bn.eval()
    x = randn(5, 4)
    close(bn(mx.array(x)), (x - rm) / np.sqrt(rv + 1e-5) * p["weight"] + p["bias"], 1e-4, 1e-4)
    close(bn.running_mean, rm, 1e-5, 1e-5)  # eval leaves the statistics alone
    # the running statistics are saved and loaded with the parameters
    path = str(tmp_path / "bn.npz")
    bn.save_weights(path)
    fresh = BatchNorm(4, momentum=0.2).load_weights(path)
    close(fresh.running_var, rv, 1e-5, 1e-5)
    assert set(dict(tree_flatten(fresh.trainable_parameters()))) == {"weight", "bias"}

    # no running statistics: batch statistics in both modes
    plain = BatchNorm(4, affine=False, track_running_stats=False)
    assert shapes(plain) == {}
    plain.eval()
    close(plain(mx.array(x)), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), 1e-4, 1e-4)

    with pytest.raises(ValueError, match="ndim=5"):
        BatchNorm(4)(mx.ones((1, 2, 2, 2, 4)))
    with pytest.raises(ValueError, match=r"shape \(1, 4\)"):
        BatchNorm(4)(mx.ones((1, 4)))


def test_batch_norm_training_gradients():
    bn = randomise(BatchNorm(3), mx.float64)
    bn.running_mean, bn.running_var = f64(np.zeros(3)), f64(np.ones(3))
    x = randn(4, 3, dtype=np.float64)
    check_grad_x(bn, x)
    xa = f64(x)
    check_grad_param(bn, "weight", lambda: bn(xa))
    # running statistics are frozen: no gradient is asked for them
    assert "running_mean" not in bn.trainable_parameters()


# ========================================================= positional encodings

def np_rope(x, dims, traditional, base, scale, offset):
    *_, L, D = x.shape
    half = dims // 2
    theta = base ** (-np.arange(half) * 2.0 / dims)
    pos = (np.arange(L) + offset) * scale
    ang = pos[:, None] * theta[None, :]
    c, s = np.cos(ang), np.sin(ang)
    y = x.copy()
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        y[..., 0:dims:2] = a * c - b * s
        y[..., 1:dims:2] = a * s + b * c
    else:
        a, b = x[..., :half], x[..., half:dims]
        y[..., :half] = a * c - b * s
        y[..., half:dims] = a * s + b * c
    return y


@pytest.mark.parametrize("traditional", [False, True])
def test_rope_against_numpy_rotation(traditional):
    x = randn(2, 3, 5, 8)
    for dims, base, scale, offset in [(8, 10000, 1.0, 0), (8, 500.0, 0.5, 3), (4, 10000, 1.0, 7)]:
        rope = RoPE(dims, traditional=traditional, base=base, scale=scale)
        y = rope(mx.array(x), offset=offset)
        close(y, np_rope(x, dims, traditional, base, scale, offset), 1e-4, 1e-4)
    assert RoPE(4).parameters() == {}
    assert RoPE(4)(mx.ones((1, 2, 4), dtype=mx.float16)).dtype == mx.float16
    with pytest.raises(ValueError, match="3"):
        RoPE(3)(mx.ones((1, 2, 4)))


def test_sinusoidal_positional_encoding():
    x = np.array([0.0, 1.0, 2.5, 7.0, 30.0], np.float32)
    dims, lo, hi = 8, 1e-3, 2.0
    t = 1 - np.arange(4) / 3
    freqs = np.exp(t * (np.log(hi) - np.log(lo)) + np.log(lo))
    ang = x[:, None] * freqs
    pe = SinusoidalPositionalEncoding(dims, min_freq=lo, max_freq=hi)
    assert pe.parameters() == {}
    close(pe(mx.array(x)), np.concatenate([np.sin(ang), np.cos(ang)], -1) * math.sqrt(2 / dims), 1e-4, 1e-5)
    pe = SinusoidalPositionalEncoding(dims, min_freq=lo, max_freq=hi, scale=1.5, cos_first=True, full_turns=True)
    ang = ang * 2 * np.pi
    close(pe(mx.array(x)), 1.5 * np.concatenate([np.cos(ang), np.sin(ang)], -1), 1e-4, 1e-4)
    # unit-norm rows by default
    y = np.array(SinusoidalPositionalEncoding(16, min_freq=0.01)(mx.arange(10)))
    np.testing.assert_allclose((y * y).sum(-1), 1, atol=1e-5)
    assert SinusoidalPositionalEncoding(2)(mx.arange(3)).shape == (3, 2)
    y = SinusoidalPositionalEncoding(4, scale=0.0)(mx.arange(3))
    assert np.all(np.array(y) == 0)
    for dims in (0, 3, -2):
        with pytest.raises(ValueError, match=f"dims={dims}"):
            SinusoidalPositionalEncoding(dims)


def np_alibi_slopes(n):
    # Press et al.: for a power of two, the geometric sequence starting at 2**(-8/n); otherwise
    # that of the largest power of two below, then every other slope of twice that power.
    def pow2(m):
        return [2 ** (-8 * (i + 1) / m) for i in range(m)]

    if n & (n - 1) == 0:
        return pow2(n)
    p = 1 << (n.bit_length() - 1)
    return pow2(p) + pow2(2 * p)[0::2][: n - p]


def test_alibi():
    np.testing.assert_allclose(np_alibi_slopes(8), [2.0 ** -i for i in range(1, 9)])
    for heads in (8, 6, 1):
        slopes = ALiBi.create_alibi_slope(heads, mx.float32)
        assert slopes.shape == (heads, 1, 1)
        close(slopes.reshape(-1), np_alibi_slopes(heads), 1e-6, 0)
    scores = randn(2, 6, 3, 7)
    offset = 4
    mask = randn(3, 7)
    q = np.arange(offset, offset + 3)
    k = np.arange(7)
    bias = -np.abs(q[:, None] - k[None, :]) * np.array(np_alibi_slopes(6))[:, None, None]
    layer = ALiBi()
    close(layer(mx.array(scores), offset=offset), scores + bias[None], 1e-5, 1e-5)
    close(layer(mx.array(scores), offset=offset, mask=mx.array(mask)), scores + bias[None] + mask, 1e-5, 1e-5)
    m = ALiBi.create_alibi_matrix(5, 5, 4, 0)
    assert m.shape == (1, 4, 5, 5) and m.dtype == mx.float32
    assert layer(mx.array(scores).astype(mx.float16)).dtype == mx.float16
    with pytest.raises(ValueError, match="num_heads=0"):
        ALiBi.create_alibi_slope(0, mx.float32)


# ============================================================= attention and Transformers

def test_causal_mask():
    m = np.array(MultiHeadAttention.create_additive_causal_mask(4))
    ref = np.where(np.arange(4)[:, None] < np.arange(4)[None], np.finfo(np.float32).min, 0)
    np.testing.assert_array_equal(m, ref)
    m16 = MultiHeadAttention.create_additive_causal_mask(3, mx.float16)
    assert m16.dtype == mx.float16 and float(np.array(m16.astype(mx.float32))[0, 2]) == -65504.0
    mb = np.array(MultiHeadAttention.create_additive_causal_mask(4, mx.bfloat16).astype(mx.float32))
    assert not np.isnan(mb).any() and mb[0, -1] < -1e38 and mb[-1, 0] == 0


def test_multi_head_attention_forward_and_masks():
    mx.random.seed(7)
    mha = MultiHeadAttention(8, 2, query_input_dims=6, key_input_dims=5, value_input_dims=3,
                             value_dims=4, value_output_dims=7, bias=True)
    assert shapes(mha) == {
        "query_proj.weight": (8, 6), "query_proj.bias": (8,),
        "key_proj.weight": (8, 5), "key_proj.bias": (8,),
        "value_proj.weight": (4, 3), "value_proj.bias": (4,),
        "out_proj.weight": (7, 4), "out_proj.bias": (7,),
    }
    p = np_params(mha)
    q, k, v = randn(2, 3, 6), randn(2, 4, 5), randn(2, 4, 3)
    close(mha(mx.array(q), mx.array(k), mx.array(v)), np_mha(p, "", q, k, v, 2), 1e-4, 1e-5)
    mask = randn(2, 1, 3, 4)
    close(mha(mx.array(q), mx.array(k), mx.array(v), mask=mx.array(mask)),
          np_mha(p, "", q, k, v, 2, mask), 1e-4, 1e-5)
    # the additive causal mask hides later keys
    self_attn = MultiHeadAttention(8, 4)
    assert set(shapes(self_attn)) == {f"{n}_proj.weight" for n in ("query", "key", "value", "out")}
    x = randn(1, 5, 8)
    cm = MultiHeadAttention.create_additive_causal_mask(5)
    ps = np_params(self_attn)
    ref = np_mha(ps, "", x, x, x, 4, np.array(cm))
    close(self_attn(mx.array(x), mx.array(x), mx.array(x), cm), ref, 1e-4, 1e-5)
    # changing a future token leaves earlier outputs alone
    x2 = x.copy()
    x2[0, 4] += 3.0
    y1 = np.array(self_attn(mx.array(x), mx.array(x), mx.array(x), cm))
    y2 = np.array(self_attn(mx.array(x2), mx.array(x2), mx.array(x2), cm))
    np.testing.assert_allclose(y1[:, :4], y2[:, :4], atol=1e-6)
    assert not np.allclose(y1[:, 4], y2[:, 4])
    # the string "causal" and a boolean mask (False hides) give the same result
    xa = mx.array(x)
    close(self_attn(xa, xa, xa, "causal"), ref, 1e-4, 1e-5)
    keep = np.arange(5)[:, None] >= np.arange(5)[None]
    close(self_attn(xa, xa, xa, mx.array(keep)), ref, 1e-4, 1e-5)
    with pytest.raises(ValueError, match="dims=10 must be divisible by num_heads=4"):
        MultiHeadAttention(10, 4)


def test_multi_head_attention_gradients():
    mha = randomise(MultiHeadAttention(4, 2, bias=True), mx.float64)
    q, kv = randn(1, 3, 4, dtype=np.float64), randn(1, 2, 4, dtype=np.float64)
    mask = f64(randn(3, 2))
    check_grad_x(lambda a: mha(a, f64(kv), f64(kv), mask), q)
    check_grad_x(lambda a: mha(f64(q), a, a), kv)
    qa, ka = f64(q), f64(kv)
    for name in ("query_proj.weight", "key_proj.bias", "value_proj.weight", "out_proj.weight"):
        check_grad_param(mha, name, lambda: mha(qa, ka, ka, mask))


def np_encoder_layer(p, pre, x, mask, heads, norm_first, act):
    def ln(t, name):
        return np_layer_norm(t, p[pre + name + ".weight"], p[pre + name + ".bias"])

    def mlp(t):
        return np_linear(act(np_linear(t, p, pre + "linear1")), p, pre + "linear2")

    if norm_first:
        y = ln(x, "ln1")
        x = x + np_mha(p, pre + "attention.", y, y, y, heads, mask)
        return x + mlp(ln(x, "ln2"))
    x = ln(x + np_mha(p, pre + "attention.", x, x, x, heads, mask), "ln1")
    return ln(x + mlp(x), "ln2")


def np_decoder_layer(p, pre, x, mem, xm, mm, heads, norm_first, act):
    def ln(t, name):
        return np_layer_norm(t, p[pre + name + ".weight"], p[pre + name + ".bias"])

    def mlp(t):
        return np_linear(act(np_linear(t, p, pre + "linear1")), p, pre + "linear2")

    sa, ca = pre + "self_attention.", pre + "cross_attention."
    if norm_first:
        y = ln(x, "ln1")
        x = x + np_mha(p, sa, y, y, y, heads, xm)
        y = ln(x, "ln2")
        x = x + np_mha(p, ca, y, mem, mem, heads, mm)
        return x + mlp(ln(x, "ln3"))
    x = ln(x + np_mha(p, sa, x, x, x, heads, xm), "ln1")
    x = ln(x + np_mha(p, ca, x, mem, mem, heads, mm), "ln2")
    return ln(x + mlp(x), "ln3")


def np_relu(x):
    return np.maximum(x, 0)


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_layers_against_numpy(norm_first):
    mx.random.seed(8)
    x, mem = randn(2, 4, 8), randn(2, 3, 8)
    xm = np.array(MultiHeadAttention.create_additive_causal_mask(4))
    mm = randn(4, 3)

    enc = randomise(TransformerEncoderLayer(8, 2, mlp_dims=12, norm_first=norm_first))
    p = np_params(enc)
    close(enc(mx.array(x), mx.array(xm)), np_encoder_layer(p, "", x, xm, 2, norm_first, np_relu), 1e-4, 1e-4)

    def silu(t):
        return t * mx.sigmoid(t)

    enc2 = randomise(TransformerEncoderLayer(8, 2, activation=silu, norm_first=norm_first))
    assert shapes(enc2)["linear1.weight"] == (32, 8)  # mlp_dims defaults to 4 * dims
    close(enc2(mx.array(x), None),
          np_encoder_layer(np_params(enc2), "", x, None, 2, norm_first, lambda t: t * np_sigmoid(t)),
          1e-4, 1e-4)

    dec = randomise(TransformerDecoderLayer(8, 2, mlp_dims=12, norm_first=norm_first))
    p = np_params(dec)
    close(dec(mx.array(x), mx.array(mem), mx.array(xm), mx.array(mm)),
          np_decoder_layer(p, "", x, mem, xm, mm, 2, norm_first, np_relu), 1e-4, 1e-4)

    stack = randomise(TransformerEncoder(2, 8, 2, mlp_dims=12, norm_first=norm_first))
    p = np_params(stack)
    h = x
    for i in range(2):
        h = np_encoder_layer(p, f"layers.{i}.", h, xm, 2, norm_first, np_relu)
    ref = np_layer_norm(h, p["ln.weight"], p["ln.bias"])
    close(stack(mx.array(x), mx.array(xm)), ref, 1e-4, 1e-4)
    close(stack(mx.array(x), mask=mx.array(xm)), ref, 1e-4, 1e-4)  # MLX's keyword too

    dstack = randomise(TransformerDecoder(2, 8, 2, mlp_dims=12, norm_first=norm_first))
    p = np_params(dstack)
    h = x
    for i in range(2):
        h = np_decoder_layer(p, f"layers.{i}.", h, mem, xm, None, 2, norm_first, np_relu)
    ref = np_layer_norm(h, p["ln.weight"], p["ln.bias"])
    close(dstack(mx.array(x), mx.array(mem), mx.array(xm), None), ref, 1e-4, 1e-4)
    close(dstack(mx.array(x), mx.array(mem), x_mask=mx.array(xm), memory_mask=None), ref, 1e-4, 1e-4)


def test_transformer_parameter_names_and_forward():
    mx.random.seed(9)
    model = Transformer(dims=8, num_heads=2, num_encoder_layers=2, num_decoder_layers=1, mlp_dims=16)
    keys = shapes(model)
    attn = {f"{n}_proj.weight": (8, 8) for n in ("query", "key", "value", "out")}
    mlp = {"linear1.weight": (16, 8), "linear1.bias": (16,), "linear2.weight": (8, 16), "linear2.bias": (8,)}
    ln = {f"{n}.{w}": (8,) for n in ("ln1", "ln2", "ln3") for w in ("weight", "bias")}
    expected = {}
    for i in range(2):
        pre = f"encoder.layers.{i}."
        expected.update({pre + "attention." + k: v for k, v in attn.items()})
        expected.update({pre + k: v for k, v in {**mlp, **ln}.items() if not k.startswith("ln3")})
    pre = "decoder.layers.0."
    for a in ("self_attention.", "cross_attention."):
        expected.update({pre + a + k: v for k, v in attn.items()})
    expected.update({pre + k: v for k, v in {**mlp, **ln}.items()})
    expected.update({f"{s}.ln.{w}": (8,) for s in ("encoder", "decoder") for w in ("weight", "bias")})
    assert keys == expected

    src, tgt = randn(2, 5, 8), randn(2, 3, 8)
    tm = np.array(MultiHeadAttention.create_additive_causal_mask(3))
    p = np_params(model)
    mem = src
    for i in range(2):
        mem = np_encoder_layer(p, f"encoder.layers.{i}.", mem, None, 2, True, np_relu)
    mem = np_layer_norm(mem, p["encoder.ln.weight"], p["encoder.ln.bias"])
    out = np_decoder_layer(p, "decoder.layers.0.", tgt, mem, tm, None, 2, True, np_relu)
    out = np_layer_norm(out, p["decoder.ln.weight"], p["decoder.ln.bias"])
    close(model(mx.array(src), mx.array(tgt), None, mx.array(tm), None), out, 1e-4, 1e-4)

    # custom encoder and decoder replace the standard ones
    enc, dec = TransformerEncoder(1, 8, 2), TransformerDecoder(1, 8, 2)
    custom = Transformer(dims=8, num_heads=2, custom_encoder=enc, custom_decoder=dec)
    assert custom.encoder is enc and custom.decoder is dec


def test_transformer_checkpoint_matches_plain():
    mx.random.seed(10)
    plain = TransformerEncoder(2, 8, 2, mlp_dims=16)
    ckpt = TransformerEncoder(2, 8, 2, mlp_dims=16, checkpoint=True)
    ckpt.update(plain.parameters())
    x = mx.array(randn(2, 4, 8))
    mask = MultiHeadAttention.create_additive_causal_mask(4)

    def grads(model):
        def loss(params, x):
            model.update(params)
            return (model(x, mask) ** 2).sum()

        return mx.value_and_grad(loss, argnums=(0, 1))(model.trainable_parameters(), x)

    (v1, (gp1, gx1)), (v2, (gp2, gx2)) = grads(plain), grads(ckpt)
    close(v2, np.array(v1), 1e-5, 1e-5)
    close(gx2, np.array(gx1), 1e-5, 1e-5)
    flat1 = dict(tree_flatten(gp1))
    for k, g in tree_flatten(gp2):
        close(g, np.array(flat1[k]), 1e-4, 1e-5)

    dplain = TransformerDecoder(1, 8, 2, norm_first=False)
    dckpt = TransformerDecoder(1, 8, 2, norm_first=False, checkpoint=True)
    dckpt.update(dplain.parameters())
    mem = mx.array(randn(2, 3, 8))
    close(dckpt(x, mem, mask, None), np.array(dplain(x, mem, mask, None)), 1e-5, 1e-5)


def test_transformer_dropout_follows_training_mode():
    mx.random.seed(11)
    layer = TransformerEncoderLayer(8, 2, dropout=0.5)
    x = mx.array(randn(2, 4, 8))
    a, b = np.array(layer(x, None)), np.array(layer(x, None))
    assert not np.allclose(a, b)
    layer.eval()
    a, b = np.array(layer(x, None)), np.array(layer(x, None))
    np.testing.assert_array_equal(a, b)
    layer.dropout1.train()
    p = np_params(layer)
    assert not np.allclose(np.array(layer(x, None)), np_encoder_layer(p, "", np.array(x), None, 2, True, np_relu))


# ========================================================================== recurrent

def np_rnn(p, x, h=None, act=np.tanh):
    xs = x @ p["Wxh"].T + p.get("bias", 0)
    out = []
    for t in range(x.shape[-2]):
        pre = xs[..., t, :] + (0 if h is None else h @ p["Whh"].T)
        h = act(pre)
        out.append(h)
    return np.stack(out, -2)


def np_gru(p, x, h=None):
    H = p["Wh"].shape[1]
    if h is None:
        h = np.zeros(x.shape[:-2] + (H,), x.dtype)
    wr, wz, wn = np.split(p["Wx"], 3)
    ur, uz, un = np.split(p["Wh"], 3)
    br, bz, bn = np.split(p.get("b", np.zeros(3 * H)), 3)
    bhn = p.get("bhn", np.zeros(H))
    out = []
    for t in range(x.shape[-2]):
        xt = x[..., t, :]
        r = np_sigmoid(xt @ wr.T + h @ ur.T + br)
        z = np_sigmoid(xt @ wz.T + h @ uz.T + bz)
        n = np.tanh(xt @ wn.T + bn + r * (h @ un.T + bhn))
        h = (1 - z) * n + z * h
        out.append(h)
    return np.stack(out, -2)


def np_lstm(p, x, h=None, c=None):
    H = p["Wh"].shape[1]
    if h is None:
        h = np.zeros(x.shape[:-2] + (H,), x.dtype)
    if c is None:
        c = np.zeros_like(h)
    hs, cs = [], []
    for t in range(x.shape[-2]):
        z = x[..., t, :] @ p["Wx"].T + h @ p["Wh"].T + p.get("bias", 0)
        i, f, g, o = np.split(z, 4, axis=-1)
        c = np_sigmoid(f) * c + np_sigmoid(i) * np.tanh(g)
        h = np_sigmoid(o) * np.tanh(c)
        hs.append(h)
        cs.append(c)
    return np.stack(hs, -2), np.stack(cs, -2)


def test_recurrent_parameter_names_shapes_and_init():
    mx.random.seed(12)
    assert shapes(RNN(3, 5)) == {"Wxh": (5, 3), "Whh": (5, 5), "bias": (5,)}
    assert shapes(RNN(3, 5, bias=False)) == {"Wxh": (5, 3), "Whh": (5, 5)}
    assert shapes(GRU(3, 5)) == {"Wx": (15, 3), "Wh": (15, 5), "b": (15,), "bhn": (5,)}
    assert shapes(GRU(3, 5, bias=False)) == {"Wx": (15, 3), "Wh": (15, 5)}
    assert shapes(LSTM(3, 5)) == {"Wx": (20, 3), "Wh": (20, 5), "bias": (20,)}
    assert shapes(LSTM(3, 5, bias=False)) == {"Wx": (20, 3), "Wh": (20, 5)}
    # uniform in [-1/sqrt(H), 1/sqrt(H)]
    w = np.array(LSTM(64, 100).Wx)
    assert np.abs(w).max() <= 0.1 and np.abs(w).max() > 0.099
    assert abs(w.mean()) < 0.002 and abs(w.std() - 0.1 / math.sqrt(3)) < 0.002
    with pytest.raises(ValueError, match="nonlinearity=3"):
        RNN(2, 2, nonlinearity=3)


def test_rnn_and_gru_against_numpy():
    mx.random.seed(13)
    x, h0 = randn(2, 5, 3), randn(2, 4)
    for bias in (True, False):
        rnn = RNN(3, 4, bias=bias)
        p = np_params(rnn)
        close(rnn(mx.array(x)), np_rnn(p, x), 1e-5, 1e-5)
        close(rnn(mx.array(x), mx.array(h0)), np_rnn(p, x, h0), 1e-5, 1e-5)
        close(rnn(mx.array(x[0]), mx.array(h0[0])), np_rnn(p, x[0], h0[0]), 1e-5, 1e-5)  # unbatched
        gru = GRU(3, 4, bias=bias)
        p = np_params(gru)
        close(gru(mx.array(x)), np_gru(p, x), 1e-5, 1e-5)
        close(gru(mx.array(x), mx.array(h0)), np_gru(p, x, h0), 1e-5, 1e-5)
        close(gru(mx.array(x[1])), np_gru(p, x[1]), 1e-5, 1e-5)
    relu_rnn = RNN(3, 4, nonlinearity=lambda t: mx.maximum(t, 0))
    close(relu_rnn(mx.array(x)), np_rnn(np_params(relu_rnn), x, act=np_relu), 1e-5, 1e-5)


def test_lstm_against_numpy_and_gradients():
    mx.random.seed(14)
    x, h0, c0 = randn(2, 4, 3), randn(2, 5), randn(2, 5)
    for bias in (True, False):
        lstm = LSTM(3, 5, bias=bias)
        p = np_params(lstm)
        for args in [(), (h0,), (h0, c0)]:
            hs, cs = lstm(mx.array(x), *map(mx.array, args))
            rh, rc = np_lstm(p, x, *args)
            close(hs, rh, 1e-5, 1e-5)
            close(cs, rc, 1e-5, 1e-5)
        hs, cs = lstm(mx.array(x[0]), cell=mx.array(c0[0]))
        rh, rc = np_lstm(p, x[0], None, c0[0])
        close(hs, rh, 1e-5, 1e-5)
        close(cs, rc, 1e-5, 1e-5)

    lstm = LSTM(2, 3)
    lstm.set_dtype(mx.float64)
    x = randn(1, 3, 2, dtype=np.float64)
    h0 = f64(randn(1, 3))
    check_grad_x(lambda a: mx.concatenate(lstm(a, h0), -1), x)
    xa = f64(x)
    for name in ("Wx", "Wh", "bias"):
        check_grad_param(lstm, name, lambda: mx.concatenate(lstm(xa, h0), -1))


# =========================================================================== Upsample

def np_coords(N, s, align):
    M = int(s * N)
    j = np.arange(M, dtype=np.float64)
    if align:
        return j * (N - 1) / max(M - 1, 1)
    # centre of output pixel j, mapped to the input, centre grid on centre grid
    return (j - (M - 1) / 2) / s + (N - 1) / 2


def np_linear_matrix(N, s, align):
    c = np.clip(np_coords(N, s, align), 0, N - 1)
    A = np.zeros((len(c), N))
    for j, x in enumerate(c):
        lo = int(np.floor(x))
        hi = min(lo + 1, N - 1)
        A[j, lo] += 1 - (x - lo)
        A[j, hi] += x - lo
    return A


def np_cubic_matrix(N, s, align, a=-0.75):
    def k(d):
        d = abs(d)
        if d <= 1:
            return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
        if d < 2:
            return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
        return 0.0

    c = np_coords(N, s, align)
    A = np.zeros((len(c), N))
    for j, x in enumerate(c):
        f = int(np.floor(x))
        for t in range(f - 1, f + 3):
            A[j, min(max(t, 0), N - 1)] += k(x - t)
    return A


def np_aa_matrix(N, s, kernel, radius):
    # Resampling filter of width radius / s (when shrinking) over the input pixels, the
    # weights of each output normalised over the taps inside the input.
    c = np_coords(N, s, False)
    stretch = 1 / s if s < 1 else 1.0
    A = np.zeros((len(c), N))
    for j, x in enumerate(c):
        for i in range(N):
            A[j, i] = kernel(abs(x - i) / stretch)
        A[j] /= A[j].sum()
    return A


def np_nearest_index(N, s):
    M = int(s * N)
    j = np.arange(M)
    if M > N:
        return np.round((j + 0.5) * N / M - 0.5).astype(int)
    return np.floor(j * N / M).astype(int)


def np_resample(x, mats):
    for axis, A in enumerate(mats):
        x = np.moveaxis(np.tensordot(A, np.moveaxis(x, axis + 1, 0), axes=1), 0, axis + 1)
    return x


def test_upsample_nearest():
    x = randn(2, 3, 4, 2)
    y = np.array(Upsample(2)(mx.array(x)))
    np.testing.assert_array_equal(y, x.repeat(2, 1).repeat(2, 2))
    y = np.array(Upsample((3, 1))(mx.array(x)))
    np.testing.assert_array_equal(y, x.repeat(3, 1))
    for s in [(1.5, 2.5), (0.5, 0.75)]:
        i0, i1 = np_nearest_index(3, s[0]), np_nearest_index(4, s[1])
        y = np.array(Upsample(s)(mx.array(x)))
        np.testing.assert_array_equal(y, x[:, i0][:, :, i1])
    x1 = np.arange(1, 5, dtype=np.int32).reshape(1, 2, 2, 1)
    y = Upsample(2)(mx.array(x1))
    assert y.dtype == mx.int32
    np.testing.assert_array_equal(np.array(y)[0, :, :, 0],
                                  [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("align", [False, True])
def test_upsample_linear_and_cubic(mode, align):
    matrix = np_linear_matrix if mode == "linear" else np_cubic_matrix
    x = randn(2, 3, 4, 2)
    for s in [2, (1.5, 3.0), (0.5, 0.75)]:
        ss = s if isinstance(s, tuple) else (s, s)
        ref = np_resample(x.astype(np.float64), [matrix(3, ss[0], align), matrix(4, ss[1], align)])
        close(Upsample(s, mode=mode, align_corners=align)(mx.array(x)), ref, 1e-4, 1e-5)
    x1 = randn(2, 5, 3)  # one spatial axis
    close(Upsample(2.0, mode=mode, align_corners=align)(mx.array(x1)),
          np_resample(x1.astype(np.float64), [matrix(5, 2.0, align)]), 1e-4, 1e-5)
    x3 = randn(1, 2, 3, 2, 1)  # three spatial axes
    close(Upsample(2, mode=mode, align_corners=align)(mx.array(x3)),
          np_resample(x3.astype(np.float64), [matrix(n, 2, align) for n in (2, 3, 2)]), 1e-4, 1e-5)


def test_upsample_known_values_and_antialias():
    x = mx.arange(1, 5).reshape((1, 2, 2, 1))
    close(Upsample(2, "linear")(x)[0, :, :, 0],
          [[1, 1.25, 1.75, 2], [1.5, 1.75, 2.25, 2.5], [2.5, 2.75, 3.25, 3.5], [3, 3.25, 3.75, 4]])
    close(Upsample(2, "linear", align_corners=True)(x)[0, 0, :, 0], [1, 4 / 3, 5 / 3, 2])

    def tri(d):
        return max(1 - d, 0.0)

    def cub(d, a=-0.5):
        if d <= 1:
            return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
        if d <= 2:
            return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
        return 0.0

    img = randn(1, 8, 6, 2)
    for mode, kernel, radius in [("linear", tri, 1.0), ("cubic", cub, 2.0)]:
        for s in [(0.5, 0.5), (0.25, 1.0 / 3)]:
            ref = np_resample(img.astype(np.float64),
                              [np_aa_matrix(8, s[0], kernel, radius), np_aa_matrix(6, s[1], kernel, radius)])
            close(Upsample(s, mode=mode, antialias=True)(mx.array(img)), ref, 1e-4, 1e-5)
    # growing with antialias: the plain (unwidened) kernel, renormalised
    ref = np_resample(img.astype(np.float64), [np_aa_matrix(8, 2.0, tri, 1.0), np_aa_matrix(6, 2.0, tri, 1.0)])
    close(Upsample(2, mode="linear", antialias=True)(mx.array(img)), ref, 1e-4, 1e-5)
    # a linear 4x4 ramp halved with antialias (PyTorch's known value at the corner)
    r = Upsample(0.5, "linear", antialias=True)(mx.arange(16.0).reshape(1, 4, 4, 1))
    close(r[0, 0, 0, 0], 3.5714285, 1e-5, 1e-5)


def test_upsample_errors_and_repr():
    with pytest.raises(ValueError, match="mode='area'"):
        Upsample(2, mode="area")
    with pytest.raises(ValueError, match="nearest"):
        Upsample(2, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="align_corners"):
        Upsample(2, mode="linear", align_corners=True, antialias=True)
    with pytest.raises(ValueError, match="ndim=2"):
        Upsample(2)(mx.ones((2, 3)))
    with pytest.raises(ValueError, match=r"scale_factor=\(2.0, 2.0\)"):
        Upsample((2, 2))(mx.ones((1, 4, 3)))
    assert Upsample(2).parameters() == {}
    assert "scale_factor=2.0, mode='linear', align_corners=True" in repr(
        Upsample(2, mode="linear", align_corners=True))
