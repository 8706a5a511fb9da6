"""Convolution layers over channels-last inputs (MLX's ``Conv1d`` ... ``ConvTranspose3d``): each
holds ``weight`` and ``bias`` and calls the matching ``tessera.core`` op, whose derivatives give
the gradients.

Inputs are ``(N, S_1, ..., S_k, C_in)`` and weights ``(C_out, K_1, ..., K_k, C_in / groups)``
for both the direct and the transposed layers, so MLX checkpoints load unchanged. Weights start
uniform in ``[-s, s]`` with ``s = 1 / sqrt(C_in * K_1 * ... * K_k)``; biases start at zero.
"""

import math
import operator
from typing import Optional, Tuple, Union

import tessera.core as mx
from tessera.nn.layers.base import Module

_IntOrTuple = Union[int, Tuple[int, ...]]


def _per_axis(value, n: int, name: str, owner: str, least: int) -> Tuple[int, ...]:
    """``value`` (an int, or a tuple/list of ``n`` ints, each at least ``least``) as ``n`` ints."""
    plural = "integer" if n == 1 else "integers"
    shape_msg = f"[{owner}] '{name}' must be an integer or a tuple of {n} {plural}, got {value!r}"
    items = list(value) if isinstance(value, (list, tuple)) else [value] * n
    if len(items) != n or any(isinstance(v, bool) for v in items):
        raise ValueError(shape_msg)
    try:
        items = [operator.index(v) for v in items]
    except TypeError:
        raise ValueError(shape_msg) from None
    if any(v < least for v in items):
        what = "positive" if least == 1 else "non-negative"
        raise ValueError(f"[{owner}] '{name}' must be {what}, got {value!r}")
    return tuple(items)


def _channels(value, name: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"[{owner}] '{name}' must be a positive integer, got {value!r}")
    return value


class _Conv(Module):
    """What the six layers share: argument checks, parameters, the call and the repr.

    ``groups=None`` marks a layer without a ``groups`` argument (always 1, not in the repr);
    ``output_padding=None`` marks a direct (not transposed) convolution.
    """

    _ndims: int
    _op = None  # the tessera.core function, e.g. mx.conv2d

    def __init__(self, in_channels: int, out_channels: int, kernel_size: _IntOrTuple,
                 stride: _IntOrTuple, padding: _IntOrTuple, dilation: _IntOrTuple,
                 groups: Optional[int], bias: bool, output_padding: Optional[_IntOrTuple] = None):
        super().__init__()
        name, n = type(self).__name__, self._ndims
        in_channels = _channels(in_channels, "in_channels", name)
        out_channels = _channels(out_channels, "out_channels", name)
        kernel = _per_axis(kernel_size, n, "kernel_size", name, least=1)
        strides = _per_axis(stride, n, "stride", name, least=1)
        pads = _per_axis(padding, n, "padding", name, least=0)
        dilations = _per_axis(dilation, n, "dilation", name, least=1)
        self._has_groups = groups is not None
        if self._has_groups:
            if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
                raise ValueError(f"[{name}] 'groups' must be a positive integer, got {groups!r}")
            if in_channels % groups or out_channels % groups:
                raise ValueError(
                    f"[{name}] groups={groups} must divide in_channels={in_channels} and "
                    f"out_channels={out_channels}; choose groups among their common divisors")
        scale = math.sqrt(1.0 / (in_channels * math.prod(kernel)))
        self.weight = mx.random.uniform(
            low=-scale, high=scale, shape=(out_channels, *kernel, in_channels // (groups or 1)))
        if bias:
            self.bias = mx.zeros((out_channels,))

        # MLX's attributes: ints for 1-D layers; for 2-D and 3-D, tuples for stride and padding
        # (and output_padding) while dilation stays as given (an int or a tuple).
        def plain(values):
            return values[0] if n == 1 else values

        self.stride = plain(strides)
        self.padding = plain(pads)
        self.dilation = plain(dilations) if n == 1 or not isinstance(dilation, int) else dilation
        if self._has_groups:
            self.groups = groups
        self._transposed = output_padding is not None
        if self._transposed:
            self.output_padding = plain(
                _per_axis(output_padding, n, "output_padding", name, least=0))

    def _extra_repr(self) -> str:
        w = self.weight.shape
        groups = self.groups if self._has_groups else 1
        kernel = w[1] if self._ndims == 1 else tuple(w[1:-1])
        text = (f"{w[-1] * groups}, {w[0]}, kernel_size={kernel}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, ")
        if self._transposed:
            text += f"output_padding={self.output_padding}, "
        if self._has_groups:
            text += f"groups={self.groups}, "
        return text + f"bias={'bias' in self}"

    def _check_input(self, x: mx.array):
        name, n = type(self).__name__, self._ndims
        in_channels = self.weight.shape[-1] * (self.groups if self._has_groups else 1)
        if x.ndim != n + 2 or x.shape[-1] != in_channels:
            layout = {1: "(N, L, C)", 2: "(N, H, W, C)", 3: "(N, D, H, W, C)"}[n]
            raise ValueError(
                f"[{name}] expects a channels-last input {layout} with {n + 2} dimensions and "
                f"C = in_channels = {in_channels}, got shape {tuple(x.shape)}; add a missing "
                "batch axis with expand_dims, or move channels last with moveaxis")

    def __call__(self, x: mx.array) -> mx.array:
        self._check_input(x)
        args = [self.stride, self.padding, self.dilation]
        if self._transposed:
            args.append(self.output_padding)
        if self._has_groups:
            args.append(self.groups)
        y = self._op(x, self["weight"], *args)
        if "bias" in self:
            y = y + self["bias"]
        return y


class Conv1d(_Conv):
    r"""1-dimensional convolution of ``(N, L, C_in)`` inputs.

    The output is ``(N, L_out, C_out)`` with
    ``L_out = (L + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1``.
    ``weight`` is ``(out_channels, kernel_size, in_channels // groups)``.

    Args:
        in_channels (int): The number of input channels.
        out_channels (int): The number of output channels.
        kernel_size (int): The filter length.
        stride (int, optional): The step between filter positions. Default: ``1``.
        padding (int, optional): How many zeros to add at both ends. Default: ``0``.
        dilation (int, optional): The spacing between filter taps. Default: ``1``.
        groups (int, optional): Split the channels into this many groups, each convolved with
            its own filters; it must divide both channel counts. Default: ``1``.
        bias (bool, optional): Whether to add a learned bias. Default: ``True``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> nn.Conv1d(4, 8, kernel_size=3, padding=1)(mx.zeros((2, 10, 4))).shape
        (2, 10, 8)
    """

    _ndims = 1
    _op = staticmethod(mx.conv1d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias)


class Conv2d(_Conv):
    r"""2-dimensional convolution of ``(N, H, W, C_in)`` inputs.

    ``kernel_size``, ``stride``, ``padding`` and ``dilation`` are each an int (the same for
    height and width) or a tuple ``(height, width)``; each output size follows
    ``(S + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1``. ``weight`` is
    ``(out_channels, kH, kW, in_channels // groups)``.

    Args:
        in_channels (int): The number of input channels.
        out_channels (int): The number of output channels.
        kernel_size (int or tuple(int, int)): The filter size.
        stride (int or tuple(int, int), optional): The step between filter positions.
            Default: ``1``.
        padding (int or tuple(int, int), optional): How many rows / columns of zeros to add on
            both sides. Default: ``0``.
        dilation (int or tuple(int, int), optional): The spacing between filter taps.
            Default: ``1``.
        groups (int, optional): Split the channels into this many groups, each convolved with
            its own filters; it must divide both channel counts. Default: ``1``.
        bias (bool, optional): Whether to add a learned bias. Default: ``True``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> nn.Conv2d(3, 16, kernel_size=3, stride=2, padding=1)(mx.zeros((8, 32, 32, 3))).shape
        (8, 16, 16, 16)
    """

    _ndims = 2
    _op = staticmethod(mx.conv2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, groups: int = 1, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias)


class Conv3d(_Conv):
    r"""3-dimensional convolution of ``(N, D, H, W, C_in)`` inputs.

    ``kernel_size``, ``stride``, ``padding`` and ``dilation`` are each an int (the same for
    every spatial axis) or a tuple ``(depth, height, width)``. ``weight`` is
    ``(out_channels, kD, kH, kW, in_channels)``; as in MLX there is no ``groups`` argument.

    Args:
        in_channels (int): The number of input channels.
        out_channels (int): The number of output channels.
        kernel_size (int or tuple(int, int, int)): The filter size.
        stride (int or tuple(int, int, int), optional): The step between filter positions.
            Default: ``1``.
        padding (int or tuple(int, int, int), optional): How many planes of zeros to add on
            both sides. Default: ``0``.
        dilation (int or tuple(int, int, int), optional): The spacing between filter taps.
            Default: ``1``.
        bias (bool, optional): Whether to add a learned bias. Default: ``True``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> nn.Conv3d(2, 4, kernel_size=3)(mx.zeros((1, 5, 6, 7, 2))).shape
        (1, 3, 4, 5, 4)
    """

    _ndims = 3
    _op = staticmethod(mx.conv3d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         None, bias)


class ConvTranspose1d(_Conv):
    r"""1-dimensional transposed convolution of ``(N, L, C_in)`` inputs: the adjoint of
    ``Conv1d`` with the same arguments (up to swapping the channel axes of ``weight``), as
    used to upsample.

    The output is ``(N, L_out, C_out)`` with
    ``L_out = (L - 1) * stride - 2 * padding + dilation * (kernel_size - 1) + output_padding + 1``.
    ``weight`` is ``(out_channels, kernel_size, in_channels)``.

    Args:
        in_channels (int): The number of input channels.
        out_channels (int): The number of output channels.
        kernel_size (int): The filter length.
        stride (int, optional): The upsampling step. Default: ``1``.
        padding (int, optional): How many positions to trim from both ends of the full
            output. Default: ``0``.
        dilation (int, optional): The spacing between filter taps. Default: ``1``.
        output_padding (int, optional): Extra positions added at the end of the output (to
            pick one of the input lengths a strided ``Conv1d`` maps to ``L``). Default: ``0``.
        bias (bool, optional): Whether to add a learned bias. Default: ``True``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> nn.ConvTranspose1d(8, 4, kernel_size=4, stride=2, padding=1)(mx.zeros((2, 5, 8))).shape
        (2, 10, 4)
    """

    _ndims = 1
    _op = staticmethod(mx.conv_transpose1d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, output_padding: int = 0, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         None, bias, output_padding)


class ConvTranspose2d(_Conv):
    r"""2-dimensional transposed convolution of ``(N, H, W, C_in)`` inputs (the adjoint of
    ``Conv2d``; see :class:`ConvTranspose1d` for the output size along each axis).

    Every size argument is an int (the same for height and width) or a tuple
    ``(height, width)``. ``weight`` is ``(out_channels, kH, kW, in_channels)``.

    Args:
        in_channels (int): The number of input channels.
        out_channels (int): The number of output channels.
        kernel_size (int or tuple(int, int)): The filter size.
        stride (int or tuple(int, int), optional): The upsampling step. Default: ``1``.
        padding (int or tuple(int, int), optional): How many rows / columns to trim from both
            sides of the full output. Default: ``0``.
        dilation (int or tuple(int, int), optional): The spacing between filter taps.
            Default: ``1``.
        output_padding (int or tuple(int, int), optional): Extra rows / columns added at the
            end of the output. Default: ``0``.
        bias (bool, optional): Whether to add a learned bias. Default: ``True``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> layer = nn.ConvTranspose2d(16, 3, kernel_size=3, stride=2, padding=1, output_padding=1)
        >>> layer(mx.zeros((8, 16, 16, 16))).shape
        (8, 32, 32, 3)
    """

    _ndims = 2
    _op = staticmethod(mx.conv_transpose2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, output_padding: Union[int, tuple] = 0,
                 bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         None, bias, output_padding)


class ConvTranspose3d(_Conv):
    r"""3-dimensional transposed convolution of ``(N, D, H, W, C_in)`` inputs (the adjoint of
    ``Conv3d``; see :class:`ConvTranspose1d` for the output size along each axis).

    Every size argument is an int (the same for every spatial axis) or a tuple
    ``(depth, height, width)``. ``weight`` is ``(out_channels, kD, kH, kW, in_channels)``.

    Args:
        in_channels (int): The number of input channels.
        out_channels (int): The number of output channels.
        kernel_size (int or tuple(int, int, int)): The filter size.
        stride (int or tuple(int, int, int), optional): The upsampling step. Default: ``1``.
        padding (int or tuple(int, int, int), optional): How many planes to trim from both
            sides of the full output. Default: ``0``.
        dilation (int or tuple(int, int, int), optional): The spacing between filter taps.
            Default: ``1``.
        output_padding (int or tuple(int, int, int), optional): Extra planes added at the end
            of the output. Default: ``0``.
        bias (bool, optional): Whether to add a learned bias. Default: ``True``.

    Examples:
        >>> import tessera.core as mx
        >>> import tessera.nn as nn
        >>> nn.ConvTranspose3d(4, 2, kernel_size=2, stride=2)(mx.zeros((1, 3, 3, 3, 4))).shape
        (1, 6, 6, 6, 2)
    """

    _ndims = 3
    _op = staticmethod(mx.conv_transpose3d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, tuple],
                 stride: Union[int, tuple] = 1, padding: Union[int, tuple] = 0,
                 dilation: Union[int, tuple] = 1, output_padding: Union[int, tuple] = 0,
                 bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         None, bias, output_padding)
