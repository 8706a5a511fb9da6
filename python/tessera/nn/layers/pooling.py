"""Max and average pooling over 1, 2 or 3 spatial axes of channels-last inputs (MLX's
``MaxPool1d`` ... ``AvgPool3d``), built from ``pad``, ``as_strided`` and reductions, so that
gradients come from those ops' derivatives.

The input is ``(N, S_1, ..., S_k, C)``; each spatial axis of size ``S`` becomes
``(S + 2 * padding - kernel_size) // stride + 1``.
"""

import operator
from typing import List, Optional, Tuple, Union

import tessera.core as mx
from tessera.nn.layers.base import Module

_IntOrTuple = Union[int, Tuple[int, ...]]


def _per_axis(value, n: int, name: str, owner: str) -> List[int]:
    """``value`` (an int, or a tuple/list of ``n`` ints) as a list of ``n`` ints."""
    plural = "integer" if n == 1 else "integers"
    msg = f"[{owner}] '{name}' must be an integer or a tuple of {n} {plural}, got {value!r}"
    items = list(value) if isinstance(value, (list, tuple)) else [value] * n
    if len(items) != n:
        raise ValueError(msg)
    try:
        return [operator.index(v) for v in items]
    except TypeError:
        raise ValueError(msg) from None


def _lowest(dtype: mx.Dtype):
    """The padding that never wins a max: -inf, or the smallest value of an integer dtype."""
    if dtype == mx.bool_:
        return False
    if mx.issubdtype(dtype, mx.integer):
        return mx.iinfo(dtype).min
    return -float("inf")


def _windows(x: mx.array, kernel: List[int], stride: List[int]) -> Tuple[mx.array, Tuple[int, ...]]:
    """The pooling windows of ``x`` and the axes that span one window.

    ``x`` is ``(N, S_1, ..., S_k, C)``; the result has the output positions and the window
    offsets as separate axes (in some order) with ``N`` first and ``C`` last.
    """
    n, *spatial, c = x.shape
    k = len(kernel)
    out = [(size - w) // s + 1 for size, w, s in zip(spatial, kernel, stride)]
    if kernel == stride:
        # Non-overlapping windows: drop the tail no window covers, then split every spatial
        # axis into (output, offset) with a reshape (cheaper than as_strided, and so is its vjp).
        x = x[(slice(None),) + tuple(slice(0, o * w) for o, w in zip(out, kernel))]
        split = [n]
        for o, w in zip(out, kernel):
            split += [o, w]
        return x.reshape(split + [c]), tuple(range(2, 2 * k + 1, 2))
    # Row-contiguous strides of x; as_strided reads x as if laid out that way.
    strides = [1] * x.ndim
    for i in range(x.ndim - 1, 0, -1):
        strides[i - 1] = strides[i] * x.shape[i]
    shape = [n] + out + kernel + [c]
    view_strides = ([strides[0]] + [st * s for st, s in zip(strides[1:-1], stride)]
                    + strides[1:-1] + [1])
    return mx.as_strided(x, shape, view_strides), tuple(range(k + 1, 2 * k + 1))


class _Pool(Module):
    """Pads, cuts the input into windows and reduces each window with ``self._reduce``."""

    _ndims: int

    def __init__(self, kernel_size: _IntOrTuple, stride: Optional[_IntOrTuple],
                 padding: _IntOrTuple):
        super().__init__()
        name = type(self).__name__
        n = self._ndims
        self._kernel_size = _per_axis(kernel_size, n, "kernel_size", name)
        self._stride = (list(self._kernel_size) if stride is None
                        else _per_axis(stride, n, "stride", name))
        self._padding = _per_axis(padding, n, "padding", name)
        for arg, values in (("kernel_size", self._kernel_size), ("stride", self._stride)):
            if any(v <= 0 for v in values):
                raise ValueError(f"[{name}] '{arg}' must be positive, got {tuple(values)}")
        if any(p < 0 for p in self._padding):
            raise ValueError(f"[{name}] 'padding' must be non-negative, got {tuple(self._padding)}")

    def _pad_value(self, dtype: mx.Dtype):
        raise NotImplementedError

    def _reduce(self, windows: mx.array, axes: Tuple[int, ...]) -> mx.array:
        raise NotImplementedError

    def _extra_repr(self) -> str:
        return (f"kernel_size={tuple(self._kernel_size)}, stride={tuple(self._stride)}, "
                f"padding={tuple(self._padding)}")

    def _check_input(self, x: mx.array):
        name, n = type(self).__name__, self._ndims
        if x.ndim != n + 2:
            layout = {1: "(N, L, C)", 2: "(N, H, W, C)", 3: "(N, D, H, W, C)"}[n]
            raise ValueError(
                f"[{name}] expects a channels-last input {layout} with {n + 2} dimensions, "
                f"got shape {tuple(x.shape)} ({x.ndim} dimensions); add a batch or channel "
                "axis with expand_dims if one is missing")
        padded = [size + 2 * p for size, p in zip(x.shape[1:-1], self._padding)]
        if any(size < w for size, w in zip(padded, self._kernel_size)):
            raise ValueError(
                f"[{name}] kernel_size={tuple(self._kernel_size)} is larger than the padded "
                f"spatial shape {tuple(padded)} of the input {tuple(x.shape)} "
                f"(padding={tuple(self._padding)}); use a smaller kernel or more padding")

    def __call__(self, x: mx.array) -> mx.array:
        self._check_input(x)
        if any(self._padding):
            widths = [(0, 0)] + [(p, p) for p in self._padding] + [(0, 0)]
            x = mx.pad(x, widths, constant_values=self._pad_value(x.dtype))
        windows, axes = _windows(x, self._kernel_size, self._stride)
        return self._reduce(windows, axes)


class _MaxPool(_Pool):
    def _pad_value(self, dtype):
        return _lowest(dtype)

    def _reduce(self, windows, axes):
        return mx.max(windows, axis=axes)


class _AvgPool(_Pool):
    def _pad_value(self, dtype):
        return 0

    def _reduce(self, windows, axes):
        # Padded zeros count in every window's mean (MLX's semantics).
        return mx.mean(windows, axis=axes)


class MaxPool1d(_MaxPool):
    r"""1-dimensional max pooling of ``(N, L, C)`` inputs.

    Each output is the maximum of a window of ``kernel_size`` inputs; windows start every
    ``stride`` inputs. The length becomes ``(L + 2 * padding - kernel_size) // stride + 1``.

    Args:
        kernel_size (int or tuple(int)): The window size.
        stride (int or tuple(int), optional): The window step. Default: ``kernel_size``.
        padding (int or tuple(int), optional): How many ``-inf`` (the smallest value for
            integer inputs) to add at both ends of the spatial axis. Default: ``0``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> x = mx.arange(6).reshape((1, 6, 1))
        >>> nn.MaxPool1d(kernel_size=2)(x).squeeze()
        array([1, 3, 5], dtype=int32)
    """

    _ndims = 1

    def __init__(self, kernel_size: Union[int, Tuple[int]],
                 stride: Optional[Union[int, Tuple[int]]] = None,
                 padding: Union[int, Tuple[int]] = 0):
        super().__init__(kernel_size, stride, padding)


class MaxPool2d(_MaxPool):
    r"""2-dimensional max pooling of ``(N, H, W, C)`` inputs.

    ``kernel_size``, ``stride`` and ``padding`` are each an int (the same for height and
    width) or a tuple ``(height, width)``. Each output is the maximum of its window.

    Args:
        kernel_size (int or tuple(int, int)): The window size.
        stride (int or tuple(int, int), optional): The window step. Default: ``kernel_size``.
        padding (int or tuple(int, int), optional): How many rows / columns of ``-inf`` (the
            smallest value for integer inputs) to add on both sides. Default: ``0``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> x = mx.random.normal(shape=(8, 32, 32, 4))
        >>> nn.MaxPool2d(kernel_size=2, stride=2)(x).shape
        (8, 16, 16, 4)
    """

    _ndims = 2

    def __init__(self, kernel_size: Union[int, Tuple[int, int]],
                 stride: Optional[Union[int, Tuple[int, int]]] = None,
                 padding: Union[int, Tuple[int, int]] = 0):
        super().__init__(kernel_size, stride, padding)


class MaxPool3d(_MaxPool):
    r"""3-dimensional max pooling of ``(N, D, H, W, C)`` inputs.

    ``kernel_size``, ``stride`` and ``padding`` are each an int (the same for depth, height
    and width) or a tuple ``(depth, height, width)``. Each output is the maximum of its window.

    Args:
        kernel_size (int or tuple(int, int, int)): The window size.
        stride (int or tuple(int, int, int), optional): The window step.
            Default: ``kernel_size``.
        padding (int or tuple(int, int, int), optional): How many planes of ``-inf`` (the
            smallest value for integer inputs) to add on both sides. Default: ``0``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> x = mx.random.normal(shape=(8, 16, 32, 32, 4))
        >>> nn.MaxPool3d(kernel_size=2, stride=2)(x).shape
        (8, 8, 16, 16, 4)
    """

    _ndims = 3

    def __init__(self, kernel_size: Union[int, Tuple[int, int, int]],
                 stride: Optional[Union[int, Tuple[int, int, int]]] = None,
                 padding: Union[int, Tuple[int, int, int]] = 0):
        super().__init__(kernel_size, stride, padding)


class AvgPool1d(_AvgPool):
    r"""1-dimensional average pooling of ``(N, L, C)`` inputs.

    Each output is the mean of a window of ``kernel_size`` inputs; windows start every
    ``stride`` inputs. Padded zeros count in the mean.

    Args:
        kernel_size (int or tuple(int)): The window size.
        stride (int or tuple(int), optional): The window step. Default: ``kernel_size``.
        padding (int or tuple(int), optional): How many zeros to add at both ends of the
            spatial axis. Default: ``0``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> x = mx.arange(6, dtype=mx.float32).reshape((1, 6, 1))
        >>> nn.AvgPool1d(kernel_size=2)(x).squeeze()
        array([0.5, 2.5, 4.5], dtype=float32)
    """

    _ndims = 1

    def __init__(self, kernel_size: Union[int, Tuple[int]],
                 stride: Optional[Union[int, Tuple[int]]] = None,
                 padding: Union[int, Tuple[int]] = 0):
        super().__init__(kernel_size, stride, padding)


class AvgPool2d(_AvgPool):
    r"""2-dimensional average pooling of ``(N, H, W, C)`` inputs.

    ``kernel_size``, ``stride`` and ``padding`` are each an int (the same for height and
    width) or a tuple ``(height, width)``. Each output is the mean of its window, padded zeros
    included.

    Args:
        kernel_size (int or tuple(int, int)): The window size.
        stride (int or tuple(int, int), optional): The window step. Default: ``kernel_size``.
        padding (int or tuple(int, int), optional): How many rows / columns of zeros to add
            on both sides. Default: ``0``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> x = mx.random.normal(shape=(8, 32, 32, 4))
        >>> nn.AvgPool2d(kernel_size=2, stride=2)(x).shape
        (8, 16, 16, 4)
    """

    _ndims = 2

    def __init__(self, kernel_size: Union[int, Tuple[int, int]],
                 stride: Optional[Union[int, Tuple[int, int]]] = None,
                 padding: Union[int, Tuple[int, int]] = 0):
        super().__init__(kernel_size, stride, padding)


class AvgPool3d(_AvgPool):
    r"""3-dimensional average pooling of ``(N, D, H, W, C)`` inputs.

    ``kernel_size``, ``stride`` and ``padding`` are each an int (the same for depth, height
    and width) or a tuple ``(depth, height, width)``. Each output is the mean of its window,
    padded zeros included.

    Args:
        kernel_size (int or tuple(int, int, int)): The window size.
        stride (int or tuple(int, int, int), optional): The window step.
            Default: ``kernel_size``.
        padding (int or tuple(int, int, int), optional): How many planes of zeros to add on
            both sides. Default: ``0``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> x = mx.random.normal(shape=(8, 16, 32, 32, 4))
        >>> nn.AvgPool3d(kernel_size=2, stride=2)(x).shape
        (8, 8, 16, 16, 4)
    """

    _ndims = 3

    def __init__(self, kernel_size: Union[int, Tuple[int, int, int]],
                 stride: Optional[Union[int, Tuple[int, int, int]]] = None,
                 padding: Union[int, Tuple[int, int, int]] = 0):
        super().__init__(kernel_size, stride, padding)
