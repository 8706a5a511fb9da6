"""Affine layers: ``Identity``, ``Linear`` and ``Bilinear``."""

import math
from typing import Any, Optional

import tessera.core as mx
from tessera.nn.layers.base import Module
from tessera.nn.layers.quantized import QQLinear, QuantizedLinear, _check_qq_mode


class Identity(Module):
    """Returns its input unchanged (any constructor arguments are ignored)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()

    def __call__(self, x: mx.array) -> mx.array:
        return x


def _uniform(scale, shape):
    return mx.random.uniform(low=-scale, high=scale, shape=shape)


class Linear(Module):
    """``y = x @ W.T + b`` over the last axis of ``x``.

    ``W`` has shape ``(output_dims, input_dims)``; ``W`` and ``b`` start uniform in
    ``[-k, k]`` with ``k = 1 / sqrt(input_dims)``.

    Args:
        input_dims (int): The size of the last axis of the input.
        output_dims (int): The size of the last axis of the output.
        bias (bool): Whether to add ``b``. Default: ``True``.
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True):
        super().__init__()
        scale = math.sqrt(1.0 / input_dims)
        self.weight = _uniform(scale, (output_dims, input_dims))
        if bias:
            self.bias = _uniform(scale, (output_dims,))

    def _extra_repr(self) -> str:
        out, inp = self.weight.shape
        return f"input_dims={inp}, output_dims={out}, bias={'bias' in self}"

    def __call__(self, x: mx.array) -> mx.array:
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T

    def to_quantized(
        self,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
        quantize_input: bool = False,
    ):
        """The :class:`QuantizedLinear` (or, with ``quantize_input``, :class:`QQLinear`)
        approximating this layer (what :func:`quantize` uses).

        Args:
            group_size (int, optional): The quantization group size. Default: the mode's (64).
            bits (int, optional): The bits per weight. Default: the mode's (4).
            mode (str): The quantization mode. Default: ``"affine"``.
            quantize_input (bool): Quantize the input too (:class:`QQLinear`, for ``"nvfp4"``
                and ``"mxfp8"``). Default: ``False``.
        """
        if quantize_input:
            _check_qq_mode("Linear.to_quantized", mode)
            return QQLinear.from_linear(self, group_size, bits, mode)
        return QuantizedLinear.from_linear(self, group_size, bits, mode)


class Bilinear(Module):
    """``y[i] = x1 @ W[i] @ x2 + b[i]`` for each output feature ``i``.

    ``W`` has shape ``(output_dims, input2_dims, input1_dims)``; ``W`` and ``b`` start uniform in
    ``[-k, k]`` with ``k = 1 / sqrt(input1_dims)``.

    Args:
        input1_dims (int): The size of the last axis of ``x1``.
        input2_dims (int): The size of the last axis of ``x2``.
        output_dims (int): The size of the last axis of the output.
        bias (bool): Whether to add ``b``. Default: ``True``.
    """

    def __init__(self, input1_dims: int, input2_dims: int, output_dims: int, bias: bool = True):
        super().__init__()
        scale = math.sqrt(1.0 / input1_dims)
        self.weight = _uniform(scale, (output_dims, input2_dims, input1_dims))
        if bias:
            self.bias = _uniform(scale, (output_dims,))

    def _extra_repr(self) -> str:
        out, in2, in1 = self.weight.shape
        return f"input1_dims={in1}, input2_dims={in2}, output_dims={out}, bias={'bias' in self}"

    def __call__(self, x1: mx.array, x2: mx.array) -> mx.array:
        out, in2, in1 = self.weight.shape
        lead = x1.shape[:-1]
        a = x1.reshape(-1, in1)
        b = x2.reshape(-1, 1, in2)
        # (n, in1) @ (in1, out * in2) -> (n, out, in2), then contract in2 with x2.
        t = (a @ self.weight.reshape(out * in2, in1).T).reshape(-1, out, in2)
        y = (b @ t.swapaxes(-2, -1)).squeeze(1).reshape(*lead, out)
        if "bias" in self:
            y = y + self.bias
        return y
