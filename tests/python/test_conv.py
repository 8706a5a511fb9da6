"""Convolutions: conv1d/2d/3d, conv_general, conv_transpose*, convolve, against a direct NumPy
reference (dilate, pad, sliding windows, einsum) that shares nothing with Tessera's im2col +
gemm kernels; gradients against finite differences in float64."""

import itertools

import numpy as np
import pytest

import tessera.core as mx

RNG = np.random.default_rng(7)


def ref_conv(x, w, stride, lo, hi, kdil, idil, groups=1, flip=False):
    """conv_general by its definition, in float64."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    d = x.ndim - 2
    n, c = x.shape[0], x.shape[-1]
    dil = [(s - 1) * k + 1 if s else 0 for s, k in zip(x.shape[1:-1], idil)]
    xd = np.zeros((n, *dil, c))
    xd[(slice(None),) + tuple(slice(None, None, k) for k in idil)] = x
    for ax in range(d):
        a, b = lo[ax], hi[ax]
        if a < 0:
            xd = np.take(xd, range(-a, xd.shape[ax + 1]), axis=ax + 1)
            a = 0
        if b < 0:
            xd = np.take(xd, range(0, xd.shape[ax + 1] + b), axis=ax + 1)
            b = 0
        widths = [(0, 0)] * xd.ndim
        widths[ax + 1] = (a, b)
        xd = np.pad(xd, widths)
    if flip:
        w = w[(slice(None),) + (slice(None, None, -1),) * d]
    o, cg = w.shape[0], w.shape[-1]
    kd = [(k - 1) * s + 1 for k, s in zip(w.shape[1:-1], kdil)]
    wd = np.zeros((o, *kd, cg))
    wd[(slice(None),) + tuple(slice(None, None, s) for s in kdil)] = w
    win = np.lib.stride_tricks.sliding_window_view(xd, kd, axis=tuple(range(1, d + 1)))
    win = win[(slice(None),) + tuple(slice(None, None, s) for s in stride)]
    sp, ks = "abc"[:d], "ijk"[:d]
    og = o // groups
    outs = []
    for g in range(groups):
        xg = win[..., g * cg:(g + 1) * cg, *([slice(None)] * d)]
        outs.append(np.einsum(f"n{sp}z{ks},o{ks}z->n{sp}o", xg, wd[g * og:(g + 1) * og]))
    return np.concatenate(outs, axis=-1)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(got, want, tol=1e-4):
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize(
    "dims,stride,padding,dilation,groups",
    [
        (1, 1, 0, 1, 1),
        (1, 2, 3, 2, 2),
        (2, 1, 1, 1, 1),
        (2, (2, 1), (0, 2), (1, 3), 3),
        (2, 1, 0, 1, 6),  # depthwise: groups == channels
        (3, (1, 2, 1), 1, (2, 1, 1), 1),
        (3, 2, 0, 1, 3),  # groups in 3-D (MLX allows them in 1-D and 2-D only)
    ],
)
def test_conv_nd_matches_reference(dims, stride, padding, dilation, groups):
    def per(v):
        return list(v) if isinstance(v, tuple) else [v] * dims

    spatial = [9, 8, 7][:dims]
    x, w = rand(2, *spatial, 6), rand(groups * 2, *[3, 2, 3][:dims], 6 // groups)
    fn = {1: mx.conv1d, 2: mx.conv2d, 3: mx.conv3d}[dims]
    got = fn(mx.array(x), mx.array(w), stride=stride, padding=padding, dilation=dilation,
             groups=groups)
    want = ref_conv(x, w, per(stride), per(padding), per(padding), per(dilation), [1] * dims,
                    groups)
    close(got, want)


def test_conv_general_input_dilation_asymmetric_and_negative_padding_flip():
    x, w = rand(3, 7, 6, 4), rand(5, 3, 2, 4)
    for lo, hi, idil, flip in [([2, 0], [1, 3], [2, 1], False), ([-1, 1], [0, -2], [1, 3], True)]:
        got = mx.conv_general(mx.array(x), mx.array(w), stride=[1, 2], padding=(lo, hi),
                              kernel_dilation=[1, 2], input_dilation=idil, flip=flip)
        close(got, ref_conv(x, w, [1, 2], lo, hi, [1, 2], idil, 1, flip))


def test_conv_1x1_is_a_matmul_and_views_are_read_as_views():
    x = rand(2, 4, 5, 8)
    w = rand(3, 1, 1, 8)
    want = x @ w[:, 0, 0, :].T
    close(mx.conv2d(mx.array(x), mx.array(w)), want)
    # A transposed (non-contiguous) input and weight.
    xt = mx.transpose(mx.array(x.transpose(0, 2, 1, 3).copy()), (0, 2, 1, 3))
    wt = mx.transpose(mx.array(w.transpose(3, 1, 2, 0).copy()), (3, 1, 2, 0))
    close(mx.conv2d(xt, wt), want)


@pytest.mark.parametrize("dtype,tol", [(mx.float16, 3e-3), (mx.bfloat16, 2e-2), (mx.float64, 1e-12)])
def test_conv_dtypes(dtype, tol):
    x, w = rand(2, 6, 6, 4), rand(4, 3, 3, 2)
    y = mx.conv2d(mx.array(x).astype(dtype), mx.array(w).astype(dtype), padding=1, groups=2)
    assert y.dtype == dtype
    # The reference sees the same rounded inputs.
    xr = np.array(mx.array(x).astype(dtype).astype(mx.float64))
    wr = np.array(mx.array(w).astype(dtype).astype(mx.float64))
    close(y.astype(mx.float64), ref_conv(xr, wr, [1, 1], [1, 1], [1, 1], [1, 1], [1, 1], 2), tol)


def test_conv_promotes_and_handles_empty_batches():
    x = mx.zeros((0, 5, 3))
    y = mx.conv1d(x, mx.ones((2, 3, 3), dtype=mx.float16))
    assert y.shape == (0, 3, 2) and y.dtype == mx.float32


@pytest.mark.parametrize(
    "dims,stride,padding,dilation,output_padding",
    [(1, 2, 1, 1, 1), (2, (2, 3), (1, 0), (1, 2), (1, 0)), (3, 2, 1, 1, 0)],
)
def test_conv_transpose_is_the_adjoint_of_conv(dims, stride, padding, dilation, output_padding):
    # <conv_transpose(x, w), z> == <x, conv(z, w')>, w' = w with its channel axes swapped.
    def per(v):
        return tuple(v) if isinstance(v, tuple) else (v,) * dims

    s, p, dl, op = per(stride), per(padding), per(dilation), per(output_padding)
    ks = [3, 2, 3][:dims]
    x, w = rand(2, *[4, 5, 3][:dims], 3), rand(4, *ks, 3)
    fn = {1: mx.conv_transpose1d, 2: mx.conv_transpose2d, 3: mx.conv_transpose3d}[dims]
    args = [v[0] if dims == 1 else v for v in (s, p, dl, op)]
    y = np.array(fn(mx.array(x), mx.array(w), *args)).astype(np.float64)
    want_shape = [(n - 1) * si - 2 * pi + di * (k - 1) + 1 + oi
                  for n, si, pi, di, k, oi in zip(x.shape[1:-1], s, p, dl, ks, op)]
    assert list(y.shape) == [2, *want_shape, 4]
    z = rand(*y.shape)
    back = ref_conv(z, np.swapaxes(w, 0, -1), s, p, p, dl, [1] * dims)
    np.testing.assert_allclose(np.vdot(y, z), np.vdot(x.astype(np.float64), back), rtol=1e-4)


def test_conv_transpose_groups_follow_the_flipped_definition():
    x, w = rand(2, 5, 5, 4), rand(6, 3, 3, 2)
    got = mx.conv_transpose2d(mx.array(x), mx.array(w), stride=2, padding=1, groups=2)
    want = ref_conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1], [2, 2], 2, flip=True)
    close(got, want)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("na,nv", [(9, 3), (8, 4), (3, 7)])
def test_convolve_matches_numpy(mode, na, nv):
    a, v = rand(na), rand(nv)
    close(mx.convolve(mx.array(a), mx.array(v), mode=mode), np.convolve(a, v, mode=mode))


def f64(v):
    return mx.array(v, dtype=mx.float64)


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for idx in itertools.product(*map(range, x.shape)):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        g[idx] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize(
    "kw", [dict(stride=[2], padding=([1], [2]), kernel_dilation=[2], groups=2),
           dict(stride=[1], padding=([2], [0]), input_dilation=[2], flip=True)]
)
def test_conv_gradients_match_finite_differences(kw):
    x = RNG.standard_normal((2, 7, 4))
    w = RNG.standard_normal((4, 3, 4 // kw.get("groups", 1)))
    c = RNG.standard_normal(np.array(mx.conv_general(f64(x), f64(w), **kw)).shape)

    def loss(xv, wv):
        return mx.sum(mx.conv_general(xv, wv, **kw) * f64(c))

    gx, gw = mx.grad(loss, argnums=(0, 1))(f64(x), f64(w))
    np.testing.assert_allclose(
        gx, numeric_grad(lambda v: loss(f64(v), f64(w)).item(), x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        gw, numeric_grad(lambda v: loss(f64(x), f64(v)).item(), w), rtol=1e-6, atol=1e-7)


def test_conv_second_derivatives_and_jvp():
    x = RNG.standard_normal((2, 5, 5, 2))
    w = RNG.standard_normal((3, 2, 2, 2))

    def f(xv, wv):
        return mx.sum(mx.square(mx.conv2d(xv, wv, stride=2, padding=1)))

    # The gradient of the gradient's norm, against finite differences of the first gradient.
    def g_norm(xv, wv):
        gx, gw = mx.grad(f, argnums=(0, 1))(xv, wv)
        return mx.sum(gx * gx) + mx.sum(gw * gw)

    hx, hw = mx.grad(g_norm, argnums=(0, 1))(f64(x), f64(w))
    np.testing.assert_allclose(
        hw, numeric_grad(lambda v: g_norm(f64(x), f64(v)).item(), w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        hx, numeric_grad(lambda v: g_norm(f64(v), f64(w)).item(), x), rtol=1e-5, atol=1e-6)
    # jvp against the directional finite difference.
    dx, dw = RNG.standard_normal(x.shape), RNG.standard_normal(w.shape)
    (_,), (t,) = mx.jvp(lambda a, b: (f(a, b),), [f64(x), f64(w)], [f64(dx), f64(dw)])
    eps = 1e-6
    fd = (f(f64(x + eps * dx), f64(w + eps * dw)).item()
          - f(f64(x - eps * dx), f64(w - eps * dw)).item()) / (2 * eps)
    np.testing.assert_allclose(t.item(), fd, rtol=1e-6)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (1, 0)])
@pytest.mark.parametrize("groups", [1, 2])
def test_conv_vmap_matches_a_loop(in_axes, groups):
    b = 3
    x = rand(2, 6, 4) if in_axes[0] is None else np.moveaxis(rand(b, 2, 6, 4), 0, in_axes[0])
    w = rand(4, 3, 4 // groups) if in_axes[1] is None else rand(b, 4, 3, 4 // groups)

    def f(xv, wv):
        return mx.conv1d(xv, wv, padding=1, groups=groups)

    got = mx.vmap(f, in_axes=in_axes)(mx.array(x), mx.array(w))
    for i in range(b):
        xi = x if in_axes[0] is None else np.take(x, i, axis=in_axes[0])
        wi = w if in_axes[1] is None else w[i]
        close(got[i], ref_conv(xi, wi, [1], [1], [1], [1], [1], groups))
    # Per-example weight gradients: vmap over grad batches the two gradient kernels.
    if in_axes == (0, None):
        gws = mx.vmap(mx.grad(lambda xv, wv: mx.sum(f(xv, wv)), argnums=1),
                      in_axes=(0, None))(mx.array(x), mx.array(w))
        for i in range(b):
            gi = mx.grad(lambda wv: mx.sum(f(mx.array(x[i]), wv)))(mx.array(w))
            close(gws[i], np.array(gi, np.float64))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: mx.conv2d(mx.ones((1, 4, 4)), mx.ones((1, 2, 2, 1))), r"conv2d.*\(N, H, W, C_in\)"),
        (lambda: mx.conv_general(mx.ones((1, 4)), mx.ones((1, 2))), "1 to 3 spatial dims"),
        (lambda: mx.conv2d(mx.ones((1, 4, 4, 3)), mx.ones((1, 2, 2, 2))), "channels"),
        (lambda: mx.conv1d(mx.ones((1, 4, 4)), mx.ones((3, 2, 2)), groups=2), "divide"),
        (lambda: mx.conv1d(mx.ones((1, 4, 4), dtype=mx.int32), mx.ones((3, 2, 4))), "floating"),
        (lambda: mx.conv1d(mx.ones((1, 2, 1)), mx.ones((1, 3, 1))), "smaller than the kernel"),
        (lambda: mx.conv1d(mx.ones((1, 5, 1)), mx.ones((1, 3, 1)), stride=0), "positive"),
        (lambda: mx.conv_general(mx.ones((1, 5, 5, 1)), mx.ones((1, 3, 3, 1)), stride=[1, 1, 1]),
         "entries"),
        (lambda: mx.conv_transpose1d(mx.ones((1, 5, 1)), mx.ones((1, 3, 1)), stride=2,
                                     output_padding=2), "output_padding"),
        (lambda: mx.convolve(mx.ones((3,)), mx.ones((2,)), mode="middle"), "mode"),
    ],
)
def test_conv_errors_name_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()
