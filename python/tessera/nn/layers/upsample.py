"""``Upsample``: nearest, (multi-)linear and cubic resampling of channels-last inputs, built from
array ops.

The input is ``(N, S_1, ..., S_k, C)``: the axes between the batch and the channels are
spatial, and each is resized to ``int(scale * S)``.
"""

import operator
from functools import reduce
from itertools import product
from math import ceil
from typing import Callable, Literal, Tuple, Union

import tessera.core as mx
from tessera.nn.layers.base import Module


def _along(v: mx.array, axis: int, ndims: int) -> mx.array:
    """``v`` (1-D) reshaped to lie along spatial ``axis`` of ``ndims`` spatial axes."""
    shape = [1] * ndims
    shape[axis] = -1
    return v.reshape(shape)


def _source_coordinates(N: int, scale: float, align_corners: bool, axis: int, ndims: int) -> mx.array:
    """Where in the input (in input pixels) each of the ``int(scale * N)`` outputs samples."""
    M = int(scale * N)
    out = mx.arange(M, dtype=mx.float32)
    if align_corners:
        # The first and last outputs sit exactly on the first and last inputs.
        coords = out * ((N - 1) / max(M - 1, 1))
    else:
        # Pixel centres: output pixel j covers [j, j + 1) / scale of the input; this keeps the
        # centre of the output grid on the centre of the input grid.
        step = 1 / scale
        start = ((M - 1) * step - N + 1) / 2
        coords = out * step - start
    return _along(coords, axis, ndims)


def _nearest_indices(N: int, scale: float, axis: int, ndims: int) -> mx.array:
    M = int(scale * N)
    out = mx.arange(M, dtype=mx.float32)
    if M > N:
        idx = mx.round((out + 0.5) * (N / M) - 0.5)
    else:
        idx = out * (N / M)
    return _along(idx.astype(mx.uint32), axis, ndims)


def _linear_taps(N, scale, align_corners, axis, ndims):
    """The two (index, weight) taps of linear interpolation along one axis."""
    pos = mx.clip(_source_coordinates(N, scale, align_corners, axis, ndims), 0, N - 1)
    left = mx.floor(pos)
    right = mx.ceil(pos)
    frac = mx.expand_dims(pos - left, -1)
    return (
        (left.astype(mx.uint32), 1 - frac),
        (right.astype(mx.uint32), frac),
    )


def _keys_near(x: mx.array, a: float) -> mx.array:
    """Keys' cubic kernel for distances ``|x| <= 1``."""
    return ((a + 2.0) * x - (a + 3.0)) * x * x + 1


def _keys_far(x: mx.array, a: float) -> mx.array:
    """Keys' cubic kernel for distances ``1 < |x| <= 2``."""
    return (((x - 5) * x + 8) * x - 4) * a


def _cubic_taps(N, scale, align_corners, axis, ndims):
    """The four (index, weight) taps of cubic interpolation (Keys, a = -0.75) along one axis.

    Taps past the edges repeat the edge pixel.
    """
    a = -0.75
    pos = _source_coordinates(N, scale, align_corners, axis, ndims)
    l1 = mx.floor(pos)
    r1 = mx.floor(pos + 1)
    l2 = l1 - 1
    r2 = r1 + 1
    taps = []
    for idx, kernel in ((l1, _keys_near), (r1, _keys_near), (l2, _keys_far), (r2, _keys_far)):
        w = kernel(mx.abs(pos - idx), a)[..., None]
        taps.append((mx.clip(idx, 0, N - 1).astype(mx.uint32), w))
    return tuple(taps)


def _triangle(x: mx.array) -> mx.array:
    return mx.maximum(1.0 - x, 0.0)


def _cubic_half(x: mx.array) -> mx.array:
    # Keys' kernel with a = -0.5 (the Pillow convention), zero past distance 2.
    a = -0.5
    return mx.where(x <= 1.0, _keys_near(x, a), mx.where(x <= 2.0, _keys_far(x, a), 0.0))


def _antialiased_taps(N, scale, align_corners, axis, ndims, kernel, radius):
    """Taps of a filter that, when shrinking, widens by ``1 / scale`` to low-pass the input.

    Taps outside the input get weight zero and each output's weights are normalised to sum
    to one.
    """
    pos = _source_coordinates(N, scale, align_corners, axis, ndims)
    stretch = 1.0 / scale if scale < 1 else 1.0
    reach = ceil(radius * stretch) + 1
    idxs, weights = [], []
    for k in range(1 - reach, reach):
        idx = mx.floor(pos) + k
        w = kernel(mx.abs(pos - idx) / stretch)
        w = mx.where((idx >= 0) & (idx < N), w, 0.0)
        idxs.append(idx)
        weights.append(w)
    total = reduce(operator.add, weights)
    total = mx.where(total > 0, total, 1.0)
    return tuple(
        (mx.clip(idx, 0, N - 1).astype(mx.uint32), mx.expand_dims(w / total, -1))
        for idx, w in zip(idxs, weights)
    )


def _linear_aa_taps(N, scale, align_corners, axis, ndims):
    return _antialiased_taps(N, scale, align_corners, axis, ndims, _triangle, 1.0)


def _cubic_aa_taps(N, scale, align_corners, axis, ndims):
    return _antialiased_taps(N, scale, align_corners, axis, ndims, _cubic_half, 2.0)


def _check_scales(x: mx.array, scale_factor: Tuple):
    if x.ndim - 2 != len(scale_factor):
        raise ValueError(
            f"Upsample: scale_factor={scale_factor} has {len(scale_factor)} entries but the input "
            f"has {x.ndim - 2} spatial dimensions")


def _check_antialias(align_corners: bool, antialias: bool):
    if antialias and align_corners:
        raise ValueError(
            "[Upsample] antialias=True with align_corners=True is not supported; "
            "use align_corners=False to antialias")


def upsample_nearest(x: mx.array, scale_factor: Tuple) -> mx.array:
    """Nearest-neighbour resampling of the spatial axes of ``x`` by ``scale_factor``."""
    _check_scales(x, scale_factor)
    ndims = len(scale_factor)
    if tuple(map(int, scale_factor)) == tuple(scale_factor):
        # Whole factors: repeat every pixel by broadcasting a new axis after each spatial one.
        n, *spatial, c = x.shape
        expanded = [n]
        target = [n]
        for size, s in zip(spatial, scale_factor):
            expanded += [size, 1]
            target += [size, int(s)]
        y = mx.broadcast_to(x.reshape(expanded + [c]), target + [c])
        return y.reshape([n] + [size * int(s) for size, s in zip(spatial, scale_factor)] + [c])
    spatial = x.shape[1:-1]
    index = (slice(None),) + tuple(
        _nearest_indices(size, s, axis, ndims) for axis, (size, s) in enumerate(zip(spatial, scale_factor)))
    return x[index]


def _interpolate(x: mx.array, scale_factor: Tuple, taps_fn: Callable, align_corners: bool = False) -> mx.array:
    """Sums every combination of per-axis taps: bi-, tri-, ... linear or cubic at once."""
    _check_scales(x, scale_factor)
    ndims = len(scale_factor)
    spatial = x.shape[1:-1]
    per_axis = [taps_fn(size, s, align_corners, axis, ndims)
                for axis, (size, s) in enumerate(zip(spatial, scale_factor))]
    out = None
    for combo in product(*per_axis):
        idx, ws = zip(*combo)
        term = reduce(operator.mul, ws) * x[(slice(None),) + idx]
        out = term if out is None else out + term
    return out


def _interpolate_separable(x: mx.array, scale_factor: Tuple, taps_fn: Callable,
                           align_corners: bool = False) -> mx.array:
    """Resamples one spatial axis after another (for the wide antialiasing filters)."""
    _check_scales(x, scale_factor)
    ndims = len(scale_factor)
    out = x
    for axis, (size, s) in enumerate(zip(x.shape[1:-1], scale_factor)):
        total = None
        for idx, w in taps_fn(size, s, align_corners, axis, ndims):
            term = mx.take(out, idx.reshape(-1), axis=axis + 1) * w
            total = term if total is None else total + term
        out = total
    return out


def upsample_linear(x: mx.array, scale_factor: Tuple, align_corners: bool = False,
                    antialias: bool = False) -> mx.array:
    """Linear (bilinear, trilinear, ...) resampling of the spatial axes of ``x``."""
    _check_antialias(align_corners, antialias)
    if antialias:
        return _interpolate_separable(x, scale_factor, _linear_aa_taps, align_corners)
    return _interpolate(x, scale_factor, _linear_taps, align_corners)


def upsample_cubic(x: mx.array, scale_factor: Tuple, align_corners: bool = False,
                   antialias: bool = False) -> mx.array:
    """Cubic (bicubic, ...) resampling of the spatial axes of ``x``."""
    _check_antialias(align_corners, antialias)
    if antialias:
        return _interpolate_separable(x, scale_factor, _cubic_aa_taps, align_corners)
    return _interpolate(x, scale_factor, _cubic_taps, align_corners)


class Upsample(Module):
    r"""Resizes the spatial axes of the input by a scale factor.

    The input is ``(N, S_1, ..., S_k, C)``: batch first, features last, ``k >= 1`` spatial axes
    in between (one for audio, two for images, ...). Each spatial axis of size ``S`` becomes
    ``int(scale * S)``.

    ``"nearest"`` copies the nearest input pixel; ``"linear"`` interpolates linearly along every
    spatial axis (bilinear for images, trilinear for volumes); ``"cubic"`` uses Keys' cubic
    convolution (``a = -0.75``, edge pixels repeated past the border).

    With ``align_corners`` the first and last outputs along each axis sit exactly on the first
    and last inputs; without it the pixels are treated as squares whose centres are sampled.

    With ``antialias`` (``"linear"`` or ``"cubic"``), shrinking (a scale below 1) widens the
    filter by ``1 / scale`` so that it also low-passes the input; the cubic kernel then uses
    ``a = -0.5``. It cannot be combined with ``align_corners``.

    Args:
        scale_factor (float or tuple): The factor for every spatial axis, or one per axis.
        mode (str, optional): ``"nearest"``, ``"linear"`` or ``"cubic"``.
            Default: ``"nearest"``.
        align_corners (bool, optional): Align the corner pixels of input and output in the
            ``"linear"`` and ``"cubic"`` modes. Default: ``False``.
        antialias (bool, optional): Filter when shrinking, in the ``"linear"`` and ``"cubic"``
            modes. Default: ``False``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> x = mx.arange(1, 5).reshape((1, 2, 2, 1))
        >>> nn.Upsample(scale_factor=2, mode="nearest")(x).squeeze()
        array([[1, 1, 2, 2],
               [1, 1, 2, 2],
               [3, 3, 4, 4],
               [3, 3, 4, 4]], dtype=int32)
    """

    def __init__(
        self,
        scale_factor: Union[float, Tuple],
        mode: Literal["nearest", "linear", "cubic"] = "nearest",
        align_corners: bool = False,
        antialias: bool = False,
    ):
        super().__init__()
        if mode not in ("nearest", "linear", "cubic"):
            raise ValueError(
                f"[Upsample] Got unsupported upsampling algorithm: mode={mode!r} "
                "(use 'nearest', 'linear' or 'cubic')")
        if antialias and mode == "nearest":
            raise ValueError("[Upsample] Antialiasing is not supported for mode='nearest'")
        if isinstance(scale_factor, (list, tuple)):
            scale_factor = tuple(float(s) for s in scale_factor)
        else:
            scale_factor = float(scale_factor)
        _check_antialias(align_corners, antialias)
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.antialias = antialias

    def _extra_repr(self) -> str:
        text = f"scale_factor={self.scale_factor}, mode={self.mode!r}, align_corners={self.align_corners}"
        if self.antialias:
            text += ", antialias=True"
        return text

    def __call__(self, x: mx.array) -> mx.array:
        ndims = x.ndim - 2
        if ndims <= 0:
            raise ValueError(
                "[Upsample] The input needs at least one spatial dimension (N, S, C), "
                f"got ndim={x.ndim}")
        scale = self.scale_factor
        if isinstance(scale, tuple):
            if len(scale) != ndims:
                raise ValueError(
                    f"[Upsample] scale_factor={scale} needs one entry per spatial dimension; "
                    f"the input has {ndims}")
        else:
            scale = (scale,) * ndims
        if self.mode == "nearest":
            return upsample_nearest(x, scale)
        if self.mode == "linear":
            return upsample_linear(x, scale, self.align_corners, self.antialias)
        return upsample_cubic(x, scale, self.align_corners, self.antialias)
