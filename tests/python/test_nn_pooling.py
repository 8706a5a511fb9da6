"""tessera.nn pooling layers (MaxPool1d ... AvgPool3d) against NumPy sliding windows, their
gradients against a loop that routes each output's cotangent to its window, and MLX's
argument handling, errors and repr."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import tessera.core as mx
import tessera.nn as nn

RNG = np.random.default_rng(20240612)

MAX = {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}
AVG = {1: nn.AvgPool1d, 2: nn.AvgPool2d, 3: nn.AvgPool3d}

# (spatial shape, kernel_size, stride, padding): overlapping windows with padding in 1, 2 and
# 3 dimensions, gaps between windows (stride > kernel), and stride = kernel (the default) on
# sizes the kernel does not divide.
CASES = [
    ((9,), 3, 2, 1),
    ((7, 6), (3, 2), (2, 1), (1, 1)),
    ((5, 6, 4), (2, 3, 2), (1, 2, 2), (1, 0, 1)),
    ((8, 5), (2, 1), (3, 2), 0),
    ((5, 7), (2, 3), None, 0),
]


def per_axis(v, n):
    return tuple(v) if isinstance(v, tuple) else (v,) * n


def np_pool(x, kind, kernel, stride, padding):
    """Pooling by NumPy: pad, take every window, keep every stride-th, reduce (in float64)."""
    n = x.ndim - 2
    kernel = per_axis(kernel, n)
    stride = kernel if stride is None else per_axis(stride, n)
    padding = per_axis(padding, n)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), [(0, 0)] + [(p, p) for p in padding] + [(0, 0)],
                constant_values=fill)
    w = sliding_window_view(xp, kernel, axis=tuple(range(1, n + 1)))
    w = w[(slice(None),) + tuple(slice(None, None, s) for s in stride)]
    axes = tuple(range(-n, 0))
    return w.max(axis=axes) if kind == "max" else w.mean(axis=axes)


def np_pool_grad(x, kind, kernel, stride, padding, cot):
    """d sum(pool(x) * cot) / dx by loops: each output sends its cotangent to its window's
    maximum (max) or spreads it as cot / window size over the window (avg); padding drops it."""
    n = x.ndim - 2
    kernel = per_axis(kernel, n)
    stride = kernel if stride is None else per_axis(stride, n)
    padding = per_axis(padding, n)
    spatial = x.shape[1:-1]
    grad = np.zeros(x.shape, np.float64)
    for b in range(x.shape[0]):
        for c in range(x.shape[-1]):
            for o in np.ndindex(*cot.shape[1:-1]):
                starts = [oi * s - p for oi, s, p in zip(o, stride, padding)]
                inside = [tuple(st + k for st, k in zip(starts, off))
                          for off in np.ndindex(*kernel)]
                inside = [i for i in inside if all(0 <= ii < sz for ii, sz in zip(i, spatial))]
                g = cot[(b,) + o + (c,)]
                if kind == "max":
                    best = max(inside, key=lambda i: x[(b,) + i + (c,)])
                    grad[(b,) + best + (c,)] += g
                else:
                    for i in inside:
                        grad[(b,) + i + (c,)] += g / np.prod(kernel)
    return grad


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("spatial,kernel,stride,padding", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pool_matches_numpy(kind, spatial, kernel, stride, padding, dtype):
    x = RNG.standard_normal((2,) + spatial + (3,)).astype(dtype)
    layer = (MAX if kind == "max" else AVG)[len(spatial)](kernel, stride, padding)
    y = layer(mx.array(x))
    ref = np_pool(x, kind, kernel, stride, padding)
    assert y.shape == ref.shape
    assert y.dtype == mx.array(x).dtype
    tol = 1e-6 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(np.array(y).astype(np.float64), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("spatial,kernel,stride,padding", CASES)
def test_pool_gradient_matches_loop(kind, spatial, kernel, stride, padding):
    x = RNG.standard_normal((2,) + spatial + (3,)).astype(np.float32)
    layer = (MAX if kind == "max" else AVG)[len(spatial)](kernel, stride, padding)
    cot = RNG.standard_normal(np_pool(x, kind, kernel, stride, padding).shape).astype(np.float32)
    g = mx.grad(lambda a: (layer(a) * mx.array(cot)).sum())(mx.array(x))
    ref = np_pool_grad(x, kind, kernel, stride, padding, cot)
    np.testing.assert_allclose(np.array(g), ref, rtol=1e-5, atol=1e-6)


def test_max_pool_ties_share_the_gradient():
    # A constant window has every element as its maximum: each gets an equal share.
    g = mx.grad(lambda a: nn.MaxPool1d(2)(a).sum())(mx.ones((1, 4, 1)))
    np.testing.assert_array_equal(np.array(g).ravel(), [0.5, 0.5, 0.5, 0.5])


def test_max_pool_pads_integers_with_their_smallest_value():
    x = np.array([[-5, -3, -7, -1]], np.int32)[..., None]
    y = nn.MaxPool1d(2, stride=1, padding=1)(mx.array(x))
    assert y.dtype == mx.int32
    np.testing.assert_array_equal(np.array(y).ravel(), [-5, -3, -3, -1, -1])


def test_avg_pool_counts_padding_in_the_mean():
    y = nn.AvgPool1d(2, padding=1)(mx.ones((1, 2, 1)))
    np.testing.assert_array_equal(np.array(y).ravel(), [0.5, 0.5])


def test_stride_defaults_to_kernel_size_and_ints_apply_to_every_axis():
    layer = nn.MaxPool3d(2)
    assert layer(mx.zeros((1, 4, 6, 8, 2))).shape == (1, 2, 3, 4, 2)
    assert layer._stride == layer._kernel_size == [2, 2, 2]
    assert nn.AvgPool2d([2, 3], stride=[1, 2]).parameters() == {}


def test_repr_matches_mlx():
    assert repr(nn.MaxPool1d(kernel_size=3, padding=2)) == (
        "MaxPool1d(kernel_size=(3,), stride=(3,), padding=(2,))")
    assert repr(nn.AvgPool2d(kernel_size=(1, 2), stride=2, padding=(1, 2))) == (
        "AvgPool2d(kernel_size=(1, 2), stride=(2, 2), padding=(1, 2))")
    assert repr(nn.MaxPool3d(3, 3, 2)) == (
        "MaxPool3d(kernel_size=(3, 3, 3), stride=(3, 3, 3), padding=(2, 2, 2))")


@pytest.mark.parametrize("args,message", [
    (((2, 2, 2),), r"\[MaxPool2d\] 'kernel_size' must be an integer or a tuple of 2 integers"),
    ((2.0,), r"'kernel_size' must be an integer"),
    ((2, (1,)), r"'stride' must be an integer or a tuple of 2 integers, got \(1,\)"),
    ((0,), r"'kernel_size' must be positive, got \(0, 0\)"),
    ((2, (1, -1)), r"'stride' must be positive, got \(1, -1\)"),
    ((2, 1, -1), r"'padding' must be non-negative, got \(-1, -1\)"),
])
def test_bad_arguments_are_value_errors(args, message):
    with pytest.raises(ValueError, match=message):
        nn.MaxPool2d(*args)


def test_wrong_input_ndim_names_the_expected_layout():
    with pytest.raises(ValueError, match=r"\[AvgPool2d\] expects a channels-last input "
                       r"\(N, H, W, C\) with 4 dimensions, got shape \(4, 4, 3\)"):
        nn.AvgPool2d(2)(mx.zeros((4, 4, 3)))
    with pytest.raises(ValueError, match=r"\[MaxPool1d\] .* \(N, L, C\) with 3 dimensions"):
        nn.MaxPool1d(2)(mx.zeros((1, 2, 4, 3)))


def test_kernel_larger_than_the_padded_input_is_an_error():
    with pytest.raises(ValueError, match=r"kernel_size=\(5, 2\) is larger than the padded "
                       r"spatial shape \(4, 6\)"):
        nn.MaxPool2d((5, 2), padding=1)(mx.zeros((1, 2, 4, 1)))
