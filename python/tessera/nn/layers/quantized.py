"""Quantized layers, as MLX's: ``QuantizedLinear``, ``QuantizedEmbedding``, ``QQLinear`` (input
quantized too) and ``quantize``,
which swaps a model's layers for their quantized versions (``Linear.to_quantized`` and
``Embedding.to_quantized``). Weights are kept packed in MLX's format (``mx.quantize``), so
MLX's quantized checkpoints load; the quantized parameters start frozen.
"""

import math
from typing import Callable, Optional, Union

import tessera.core as mx
from tessera.nn.layers.base import Module
from tessera.utils import tree_map_with_path

__all__ = ["quantize", "QQLinear", "QuantizedEmbedding", "QuantizedLinear"]

# MLX's (group_size, bits) defaults per mode (the fp modes accept only theirs; the core says so).
_MODE_DEFAULTS = {"affine": (64, 4), "mxfp4": (32, 4), "nvfp4": (16, 4), "mxfp8": (32, 8)}


def _defaults_for_mode(where, mode, group_size, bits):
    if mode not in _MODE_DEFAULTS:
        raise ValueError(
            f"{where}: quantization mode {mode!r} is unknown; use one of "
            + ", ".join(repr(m) for m in _MODE_DEFAULTS))
    default_group_size, default_bits = _MODE_DEFAULTS[mode]
    return (default_group_size if group_size is None else group_size,
            default_bits if bits is None else bits)


def _check_dims(where, **dims):
    for name, value in dims.items():
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{where}: {name}={value!r} must be a positive integer")


def _check_groups(where, name, size, group_size, mode):
    # The core names only the matrix shape; say which argument of the layer to change.
    if isinstance(group_size, int) and group_size > 0 and size % group_size:
        fix = ("choose a group_size of 32, 64 or 128 that divides it" if mode == "affine"
               else f"mode {mode!r} needs a multiple of {group_size}")
        raise ValueError(
            f"{where}: {name}={size} is not a multiple of group_size={group_size}; quantization "
            f"groups run along that axis ({fix})")


def _quantize(weight, group_size, bits, mode):
    """``(packed, scales, biases or None)``: the fp modes have no biases."""
    packed, scales, *biases = mx.quantize(weight, group_size, bits, mode=mode)
    return packed, scales, (biases[0] if biases else None)


def _unpacked_dims(packed_dims, bits):
    return (packed_dims * 32) // bits


def quantize(
    model: Module,
    group_size: Optional[int] = None,
    bits: Optional[int] = None,
    *,
    mode: str = "affine",
    quantize_input: bool = False,
    class_predicate: Optional[Callable[[str, Module], Union[bool, dict]]] = None,
):
    """Replaces ``model``'s leaf modules by quantized versions, in place.

    By default every leaf module with a ``to_quantized`` method (``Linear``, ``Embedding``) is
    replaced by ``module.to_quantized(group_size=..., bits=..., mode=...)``.

    Args:
        model (Module): The model.
        group_size (int, optional): The quantization group size (see
            :func:`tessera.core.quantize`). Default: the mode's (64 for ``"affine"``).
        bits (int, optional): The bits per weight. Default: the mode's (4 for ``"affine"``).
        mode (str): The quantization mode: ``"affine"``, ``"mxfp4"``, ``"mxfp8"`` or
            ``"nvfp4"``. Default: ``"affine"``.
        quantize_input (bool): Quantize the activations too (:class:`QQLinear`, modes
            ``"nvfp4"`` and ``"mxfp8"``). Default: ``False``.
        class_predicate (callable, optional): ``fn(path, module)`` returning ``False`` (keep
            the module), ``True`` (quantize it with the arguments above) or a dict of
            arguments for its ``to_quantized``. Default: every module with ``to_quantized``.
    """
    class_predicate = class_predicate or (lambda _, m: hasattr(m, "to_quantized"))

    def maybe_quantize(path, module):
        decision = class_predicate(path, module)
        if not decision:
            return module
        if not hasattr(module, "to_quantized"):
            raise ValueError(
                f"quantize: class_predicate chose {path} ({type(module).__name__}), which has no "
                "to_quantized method")
        if isinstance(decision, bool):
            kwargs = {"group_size": group_size, "bits": bits, "mode": mode}
            if quantize_input:
                kwargs["quantize_input"] = True
            return module.to_quantized(**kwargs)
        if isinstance(decision, dict):
            kwargs = dict(decision)
            if "quantize_input" in kwargs and not kwargs["quantize_input"]:
                del kwargs["quantize_input"]
            return module.to_quantized(**kwargs)
        raise ValueError(
            f"quantize: class_predicate returned {decision!r} for {path}; it must return a bool "
            "or a dict of arguments for to_quantized")

    leaves = tree_map_with_path(maybe_quantize, model.leaf_modules(), is_leaf=Module.is_module)
    model.update_modules(leaves)


class QuantizedEmbedding(Module):
    """An :class:`Embedding` whose table is quantized: rows are dequantized as they are looked up.

    Its parameters are MLX's: ``weight`` (uint32, ``(num_embeddings, dims * bits / 32)``),
    ``scales`` and ``biases`` (``(num_embeddings, dims / group_size)``), frozen.

    Args:
        num_embeddings (int): The number of rows (the vocabulary size).
        dims (int): The length of each vector (a multiple of ``group_size``).
        group_size (int, optional): The quantization group size. Default: the mode's (64).
        bits (int, optional): The bits per weight. Default: the mode's (4).
        mode (str): The quantization mode. Default: ``"affine"``.
    """

    def __init__(
        self,
        num_embeddings: int,
        dims: int,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
    ):
        super().__init__()
        where = "QuantizedEmbedding"
        _check_dims(where, num_embeddings=num_embeddings, dims=dims)
        self.group_size, self.bits = _defaults_for_mode(where, mode, group_size, bits)
        self.mode = mode
        _check_groups(where, "dims", dims, self.group_size, mode)
        weight = mx.random.normal(shape=(num_embeddings, dims), scale=math.sqrt(1 / dims))
        self.weight, self.scales, self.biases = _quantize(weight, self.group_size, self.bits, mode)
        self.num_embeddings = num_embeddings
        self.dims = dims
        self.freeze()

    def __call__(self, x: mx.array) -> mx.array:
        """The dequantized rows at the indices ``x``: shape ``x.shape + (dims,)``."""
        x = mx.array(x) if not isinstance(x, mx.array) else x
        # dequantize wants a matrix: look up a flat list of rows, then restore x's shape.
        flat = x.reshape(-1)
        biases = self.get("biases")
        rows = mx.dequantize(
            self["weight"][flat],
            scales=self["scales"][flat],
            biases=biases[flat] if biases is not None else None,
            group_size=self.group_size,
            bits=self.bits,
            mode=self.mode,
        )
        return rows.reshape(*x.shape, rows.shape[-1])

    def as_linear(self, x: mx.array) -> mx.array:
        """``x @ dequantize(weight).T`` without dequantizing: the output projection of a model
        whose input embedding and output layer share their weights."""
        return mx.quantized_matmul(
            x,
            self["weight"],
            scales=self["scales"],
            biases=self.get("biases"),
            transpose=True,
            group_size=self.group_size,
            bits=self.bits,
            mode=self.mode,
        )

    def _extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    @classmethod
    def from_embedding(
        cls,
        embedding_layer: Module,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
    ):
        """The :class:`QuantizedEmbedding` of an :class:`Embedding`'s table."""
        num_embeddings, dims = embedding_layer.weight.shape
        layer = cls(num_embeddings, dims, group_size, bits, mode=mode)
        # The constructor's random table is lazy and never evaluated once replaced.
        layer.weight, layer.scales, layer.biases = _quantize(
            embedding_layer.weight, layer.group_size, layer.bits, mode)
        return layer


class QuantizedLinear(Module):
    """A :class:`Linear` with a quantized weight: ``y = x @ dequantize(W).T + b``, computed by
    :func:`tessera.core.quantized_matmul` without dequantizing ``W``.

    Its parameters are MLX's: ``weight`` (uint32, ``(output_dims, input_dims * bits / 32)``),
    ``scales`` and ``biases`` (``(output_dims, input_dims / group_size)``) and ``bias``
    (``(output_dims,)``, zeros), all frozen at construction, as in MLX (``unfreeze`` makes
    them trainable, e.g. to fine-tune the scales). :meth:`from_linear` copies a ``Linear``'s
    bias, which is not frozen.

    Args:
        input_dims (int): The size of the last axis of the input (a multiple of ``group_size``).
        output_dims (int): The size of the last axis of the output.
        bias (bool): Whether to add ``b``. Default: ``True``.
        group_size (int, optional): The quantization group size. Default: the mode's (64).
        bits (int, optional): The bits per weight. Default: the mode's (4).
        mode (str): The quantization mode. Default: ``"affine"``.
    """

    def __init__(
        self,
        input_dims: int,
        output_dims: int,
        bias: bool = True,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
    ):
        super().__init__()
        where = "QuantizedLinear"
        _check_dims(where, input_dims=input_dims, output_dims=output_dims)
        self.group_size, self.bits = _defaults_for_mode(where, mode, group_size, bits)
        self.mode = mode
        _check_groups(where, "input_dims", input_dims, self.group_size, mode)
        scale = math.sqrt(1 / input_dims)
        weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))
        self.weight, self.scales, self.biases = _quantize(weight, self.group_size, self.bits, mode)
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    def _extra_repr(self) -> str:
        out, packed = self.weight.shape
        return (f"input_dims={_unpacked_dims(packed, self.bits)}, output_dims={out}, "
                f"bias={'bias' in self}, group_size={self.group_size}, bits={self.bits}, "
                f"mode={self.mode}")

    def __call__(self, x: mx.array) -> mx.array:
        y = mx.quantized_matmul(
            x,
            self["weight"],
            scales=self["scales"],
            biases=self.get("biases"),
            transpose=True,
            group_size=self.group_size,
            bits=self.bits,
            mode=self.mode,
        )
        if "bias" in self:
            y = y + self["bias"]
        return y

    @classmethod
    def from_linear(
        cls,
        linear_layer: Module,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
    ):
        """The :class:`QuantizedLinear` of a :class:`Linear` (its bias kept as it is)."""
        output_dims, input_dims = linear_layer.weight.shape
        layer = cls(input_dims, output_dims, False, group_size, bits, mode=mode)
        # The constructor's random weight is lazy and never evaluated once replaced.
        layer.weight, layer.scales, layer.biases = _quantize(
            linear_layer.weight, layer.group_size, layer.bits, mode)
        if "bias" in linear_layer:
            layer.bias = linear_layer.bias
        return layer


class QQLinear(Module):
    """A linear layer that quantizes its input as well as its weight (MLX's ``QQLinear``):
    ``y = qqmm(x, W)``, both operands in an fp mode (``"nvfp4"`` or ``"mxfp8"``).

    In training mode the weight is kept in floating point and quantized on the fly, and the
    gradients (with respect to the input and the weight) are themselves products of quantized
    operands, as in MLX; ``eval()`` stores the weight packed with its ``scales``, ``train()``
    turns it back into floats (of the dtype it had; MLX returns bfloat16). No bias (as MLX).

    Args:
        input_dims (int): The size of the input's last axis (a multiple of the group size).
        output_dims (int): The number of outputs.
        group_size (int, optional): Default: the mode's.
        bits (int, optional): Default: the mode's.
        mode (str): ``"nvfp4"`` or ``"mxfp8"``. Default: ``"nvfp4"``.
    """

    def __init__(self, input_dims: int, output_dims: int, group_size: Optional[int] = None,
                 bits: Optional[int] = None, mode: str = "nvfp4"):
        super().__init__()
        where = "QQLinear"
        _check_dims(where, input_dims=input_dims, output_dims=output_dims)
        _check_qq_mode(where, mode)
        self.group_size, self.bits = _defaults_for_mode(where, mode, group_size, bits)
        self.mode = mode
        _check_groups(where, "input_dims", input_dims, self.group_size, mode)
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))
        self._quantized = False
        self._float_dtype = self.weight.dtype

    def quantize(self):
        """Store the weight packed (with ``scales``), as ``eval()`` does."""
        if not self._quantized:
            self._float_dtype = self.weight.dtype
            self.weight, self.scales = mx.quantize(self.weight, self.group_size, self.bits,
                                                   mode=self.mode)
            self._quantized = True

    def dequantize(self):
        """Turn the packed weight back into floats, as ``train()`` does."""
        if self._quantized:
            self.weight = mx.dequantize(self.weight, self.scales, group_size=self.group_size,
                                        bits=self.bits, mode=self.mode, dtype=self._float_dtype)
            self.__delattr__("scales")
            self._quantized = False

    def _set_training_mode(self, mode: bool):
        super()._set_training_mode(mode)
        if self._training:
            self.dequantize()
        else:
            self.quantize()

    def __call__(self, x: mx.array) -> mx.array:
        return mx.qqmm(x, self["weight"], scales=self.get("scales"), group_size=self.group_size,
                       bits=self.bits, mode=self.mode)

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        if self.weight.dtype == mx.uint32:
            in_dims = _unpacked_dims(in_dims, self.bits)
        return (f"input_dims={in_dims}, output_dims={out_dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    @classmethod
    def from_linear(cls, linear_layer: Module, group_size: Optional[int] = None,
                    bits: Optional[int] = None, mode: str = "nvfp4") -> "QQLinear":
        """The :class:`QQLinear` with ``linear_layer``'s weight (which must have no bias, as
        in MLX), in the same training mode."""
        output_dims, input_dims = linear_layer.weight.shape
        if linear_layer.get("bias") is not None:
            raise NotImplementedError(
                "QQLinear.from_linear: the layer has a bias, which QQLinear does not support "
                "(as in MLX); build the Linear with bias=False")
        layer = cls(input_dims, output_dims, group_size, bits, mode=mode)
        layer.weight = linear_layer.weight
        layer._float_dtype = layer.weight.dtype
        layer.train(linear_layer.training)
        return layer


def _check_qq_mode(where, mode):
    if mode not in ("nvfp4", "mxfp8"):
        raise ValueError(
            f"{where}: quantized activations are supported for the 'nvfp4' and 'mxfp8' modes "
            f"(as in MLX); got mode {mode!r}")
