"""Tensor-parallel and fully sharded layers over a distributed group, as MLX's.

``AllToShardedLinear`` keeps a slice of a linear layer's outputs on each rank (its input is
whole); ``ShardedToAllLinear`` a slice of its inputs, summing the partial products with
``all_sum``. A transformer's attention and MLP blocks are one of each. Their ``Quantized``
versions hold a slice of a ``QuantizedLinear``'s packed weight. ``fully_shard`` keeps a slice of
every parameter on each rank and gathers them for the call (FSDP).
"""

import math
from functools import lru_cache
from typing import Callable, Optional, Union

import tessera.core as mx
from tessera.nn.layers.base import Module
from tessera.nn.layers.linear import Linear
from tessera.nn.layers.quantized import (
    QuantizedLinear, _check_dims, _defaults_for_mode, _quantize, _unpacked_dims,
)
from tessera.utils import tree_flatten, tree_map_with_path, tree_unflatten

__all__ = [
    "sum_gradients",
    "shard_inplace",
    "shard_linear",
    "AllToShardedLinear",
    "ShardedToAllLinear",
    "QuantizedAllToShardedLinear",
    "QuantizedShardedToAllLinear",
    "FullyShardedModule",
    "fully_shard",
]


@lru_cache(maxsize=None)
def sum_gradients(group):
    """The identity whose gradient is summed over ``group`` (the input of a layer whose
    outputs are sharded receives a partial gradient from each rank)."""
    if group.size() == 1:
        return lambda x: x

    @mx.custom_function
    def identity(x):
        return x

    @identity.vjp
    def identity_vjp(x, cotangent, _):
        return mx.distributed.all_sum(cotangent, group=group)

    return identity


def _split(weight, segments, axis):
    # segments: a number of equal parts, split indices, or fractions of the axis.
    if isinstance(segments, int) or isinstance(segments[0], int):
        return mx.split(weight, segments, axis=axis)
    n = weight.shape[axis]
    return mx.split(weight, [int(f * n) for f in segments], axis=axis)


def _shard(parameters, predicate, group):
    """Each rank's slice of the parameters ``predicate(path, array)`` names: an axis, or
    ``(axis, segments)`` to slice each segment (fused projections such as q/k/v) separately."""
    group = group or mx.distributed.init()
    n, r = group.size(), group.rank()

    def one(path, weight):
        if not isinstance(weight, mx.array):
            return weight
        spec = predicate(path, weight)
        if spec is None:
            return weight
        if isinstance(spec, int):
            axis, segments = spec, 1
        elif isinstance(spec, tuple):
            axis, segments = spec
        else:
            raise ValueError(
                f"shard: the sharding function returned {spec!r} for {path}; it must return None, "
                "an axis, or a tuple (axis, segments)")
        if weight.shape[axis] % n:
            raise ValueError(
                f"shard: {path} has size {weight.shape[axis]} on axis {axis}, not divisible by "
                f"the group size {n}")
        parts = [_split(seg, n, axis)[r] for seg in _split(weight, segments, axis)]
        return mx.contiguous(mx.concatenate(parts, axis=axis))

    return tree_map_with_path(one, parameters)


def _all_to_sharded(segments):
    return lambda path, w: (-1, segments) if path.endswith("bias") else (max(w.ndim - 2, 0), segments)


def _sharded_to_all(segments):
    return lambda path, w: None if path.endswith("bias") else (-1, segments)


def _check_sharding(sharding):
    if sharding not in ("all-to-sharded", "sharded-to-all"):
        raise ValueError(
            f"sharding must be 'all-to-sharded' or 'sharded-to-all', not {sharding!r}")


def shard_inplace(
    module: Module,
    sharding: Union[str, Callable],
    *,
    segments: Union[int, list] = 1,
    group: Optional[mx.distributed.Group] = None,
):
    """Replaces ``module``'s parameters by this rank's slices of them.

    Args:
        module (Module): The module to shard.
        sharding (str or callable): ``"all-to-sharded"`` (slice the outputs),
            ``"sharded-to-all"`` (slice the inputs), or ``fn(path, array)`` returning
            ``None``, an axis, or ``(axis, segments)``.
        segments (int or list): Parts sliced separately (e.g. 3 for fused q/k/v), as split
            indices or fractions. Default: 1.
        group (Group, optional): The group. Default: the global group.
    """
    if isinstance(sharding, str):
        _check_sharding(sharding)
        sharding = _all_to_sharded(segments) if sharding == "all-to-sharded" else _sharded_to_all(segments)
    module.update(_shard(module.parameters(), sharding, group))


def shard_linear(
    module: Module,
    sharding: str,
    *,
    segments: Union[int, list] = 1,
    group: Optional[mx.distributed.Group] = None,
):
    """The sharded layer of a ``Linear`` or ``QuantizedLinear`` with this rank's slice of its
    weights (the layer given is not changed).

    Args:
        module (Linear or QuantizedLinear): The layer.
        sharding (str): ``"all-to-sharded"`` or ``"sharded-to-all"``.
        segments (int or list): As :func:`shard_inplace`. Default: 1.
        group (Group, optional): The group. Default: the global group.

    Returns:
        An ``AllToShardedLinear`` or a ``ShardedToAllLinear`` (their ``Quantized`` versions for
        a ``QuantizedLinear``).
    """
    _check_sharding(sharding)
    to_sharded = sharding == "all-to-sharded"
    if isinstance(module, Linear):
        cls = AllToShardedLinear if to_sharded else ShardedToAllLinear
        return cls.from_linear(module, segments=segments, group=group)
    if isinstance(module, QuantizedLinear):
        cls = QuantizedAllToShardedLinear if to_sharded else QuantizedShardedToAllLinear
        return cls.from_quantized_linear(module, segments=segments, group=group)
    raise ValueError(
        f"shard_linear: expected an nn.Linear or nn.QuantizedLinear, got {type(module).__name__}; "
        "shard other modules' parameters with shard_inplace")


class AllToShardedLinear(Module):
    """A linear layer whose outputs are sliced across the group: each rank computes
    ``output_dims / N`` of them from the whole input.

    Args:
        input_dims (int): The input size.
        output_dims (int): The output size of the whole layer (divisible by the group size).
        bias (bool): Whether to add a bias. Default: ``True``.
        group (Group, optional): The group. Default: the global group.
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group: Optional[mx.distributed.Group] = None):
        super().__init__()
        self.group = group or mx.distributed.init()
        n = self.group.size()
        if output_dims % n:
            raise ValueError(f"AllToShardedLinear: output_dims {output_dims} is not divisible by the group size {n}")
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims // n, input_dims))
        if bias:
            self.bias = mx.random.uniform(low=-scale, high=scale, shape=(output_dims // n,))

    def _extra_repr(self) -> str:
        out, inp = self.weight.shape
        return f"input_dims={inp}, output_dims={out * self.group.size()}, bias={'bias' in self}"

    def __call__(self, x: mx.array) -> mx.array:
        x = sum_gradients(self.group)(x)
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T

    @classmethod
    def from_linear(cls, linear_layer: Module, *, segments: Union[int, list] = 1,
                    group: Optional[mx.distributed.Group] = None):
        group = group or mx.distributed.init()
        out, inp = linear_layer.weight.shape
        layer = cls(inp, out, "bias" in linear_layer, group)
        layer.update(_shard(linear_layer.parameters(), _all_to_sharded(segments), group))
        return layer


class ShardedToAllLinear(Module):
    """A linear layer whose inputs are sliced across the group: each rank multiplies its
    ``input_dims / N`` slice and the partial products are summed with ``all_sum``.

    Args:
        input_dims (int): The input size of the whole layer (divisible by the group size).
        output_dims (int): The output size.
        bias (bool): Whether to add a bias. Default: ``True``.
        group (Group, optional): The group. Default: the global group.
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group: Optional[mx.distributed.Group] = None):
        super().__init__()
        self.group = group or mx.distributed.init()
        n = self.group.size()
        if input_dims % n:
            raise ValueError(f"ShardedToAllLinear: input_dims {input_dims} is not divisible by the group size {n}")
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims // n))
        if bias:
            self.bias = mx.random.uniform(low=-scale, high=scale, shape=(output_dims,))

    def _extra_repr(self) -> str:
        out, inp = self.weight.shape
        return f"input_dims={inp * self.group.size()}, output_dims={out}, bias={'bias' in self}"

    def __call__(self, x: mx.array) -> mx.array:
        x = mx.distributed.all_sum(x @ self["weight"].T, group=self.group)
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_linear(cls, linear_layer: Module, *, segments: Union[int, list] = 1,
                    group: Optional[mx.distributed.Group] = None):
        group = group or mx.distributed.init()
        out, inp = linear_layer.weight.shape
        layer = cls(inp, out, "bias" in linear_layer, group)
        layer.update(_shard(linear_layer.parameters(), _sharded_to_all(segments), group))
        return layer


class _QuantizedShardedLinear(Module):
    """What the two quantized sharded layers share: the quantized weight of a
    ``(rows, cols)`` slice, frozen for good (``unfreeze`` leaves it frozen, as in MLX)."""

    def _init_quantized(self, where, rows, cols, input_dims, bias_size, group_size, bits, mode):
        self.group_size, self.bits = _defaults_for_mode(where, mode, group_size, bits)
        self.mode = mode
        if isinstance(self.group_size, int) and self.group_size > 0 and cols % self.group_size:
            raise ValueError(
                f"{where}: each rank's weight has {cols} inputs, not a multiple of group_size="
                f"{self.group_size}; every rank must hold whole quantization groups")
        scale = math.sqrt(1.0 / input_dims)
        weight = mx.random.uniform(low=-scale, high=scale, shape=(rows, cols))
        self.weight, self.scales, self.biases = _quantize(weight, self.group_size, self.bits, mode)
        if bias_size:
            self.bias = mx.zeros((bias_size,))
        self.freeze()

    def unfreeze(self, *args, **kwargs):
        """Unfreezes sub-modules as :meth:`Module.unfreeze`; this layer's own parameters stay
        frozen."""
        super().unfreeze(*args, **kwargs)
        self.freeze(recurse=False)
        return self

    def _quantized_matmul(self, x):
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

    def _dims(self):
        out, packed = self.weight.shape
        return out, _unpacked_dims(packed, self.bits)

    def _repr_tail(self):
        return f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}"

    @classmethod
    def _from_quantized(cls, layer, predicate, group):
        group = group or mx.distributed.init()
        out, packed = layer.weight.shape
        sharded = cls(_unpacked_dims(packed, layer.bits), out, "bias" in layer,
                      group_size=layer.group_size, bits=layer.bits,
                      mode=getattr(layer, "mode", "affine"), group=group)
        sharded.update(_shard(layer.parameters(), predicate, group))
        return sharded


class QuantizedAllToShardedLinear(_QuantizedShardedLinear):
    """:class:`AllToShardedLinear` with a quantized weight (as :class:`QuantizedLinear`): each
    rank computes ``output_dims / N`` of the outputs from the whole input. Its parameters are
    frozen.

    Args:
        input_dims (int): The input size (a multiple of ``group_size``).
        output_dims (int): The output size of the whole layer (divisible by the group size).
        bias (bool): Whether to add a bias. Default: ``True``.
        group_size (int): The quantization group size. Default: 64.
        bits (int): The bits per weight. Default: 4.
        mode (str): The quantization mode. Default: ``"affine"``.
        group (Group, optional): The group. Default: the global group.
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group_size: int = 64, bits: int = 4, mode: str = "affine",
                 group: Optional[mx.distributed.Group] = None):
        super().__init__()
        where = "QuantizedAllToShardedLinear"
        _check_dims(where, input_dims=input_dims, output_dims=output_dims)
        self.group = group or mx.distributed.init()
        n = self.group.size()
        if output_dims % n:
            raise ValueError(
                f"{where}: output_dims {output_dims} is not divisible by the group size {n}")
        self._init_quantized(where, output_dims // n, input_dims, input_dims,
                             output_dims // n if bias else 0, group_size, bits, mode)

    def _extra_repr(self) -> str:
        out, inp = self._dims()
        return (f"input_dims={inp}, output_dims={out * self.group.size()}, "
                f"bias={'bias' in self}, {self._repr_tail()}")

    def __call__(self, x: mx.array) -> mx.array:
        x = self._quantized_matmul(sum_gradients(self.group)(x))
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_quantized_linear(cls, quantized_linear_layer: Module, *,
                              segments: Union[int, list] = 1,
                              group: Optional[mx.distributed.Group] = None):
        """This rank's slice of the outputs of a :class:`QuantizedLinear`."""
        return cls._from_quantized(quantized_linear_layer, _all_to_sharded(segments), group)


class QuantizedShardedToAllLinear(_QuantizedShardedLinear):
    """:class:`ShardedToAllLinear` with a quantized weight (as :class:`QuantizedLinear`): each
    rank multiplies its ``input_dims / N`` slice of the inputs and the partial products are
    summed with ``all_sum``. Its parameters are frozen.

    Args:
        input_dims (int): The input size of the whole layer (divisible by the group size, and
            ``input_dims / N`` a multiple of ``group_size``).
        output_dims (int): The output size.
        bias (bool): Whether to add a bias. Default: ``True``.
        group_size (int): The quantization group size. Default: 64.
        bits (int): The bits per weight. Default: 4.
        mode (str): The quantization mode. Default: ``"affine"``.
        group (Group, optional): The group. Default: the global group.
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group_size: int = 64, bits: int = 4, mode: str = "affine",
                 group: Optional[mx.distributed.Group] = None):
        super().__init__()
        where = "QuantizedShardedToAllLinear"
        _check_dims(where, input_dims=input_dims, output_dims=output_dims)
        self.group = group or mx.distributed.init()
        n = self.group.size()
        if input_dims % n:
            raise ValueError(
                f"{where}: input_dims {input_dims} is not divisible by the group size {n}")
        self._init_quantized(where, output_dims, input_dims // n, input_dims,
                             output_dims if bias else 0, group_size, bits, mode)

    def _extra_repr(self) -> str:
        out, inp = self._dims()
        return (f"input_dims={inp * self.group.size()}, output_dims={out}, "
                f"bias={'bias' in self}, {self._repr_tail()}")

    def __call__(self, x: mx.array) -> mx.array:
        x = mx.distributed.all_sum(self._quantized_matmul(x), group=self.group)
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_quantized_linear(cls, quantized_linear_layer: Module, *,
                              segments: Union[int, list] = 1,
                              group: Optional[mx.distributed.Group] = None):
        """This rank's slice of the inputs of a :class:`QuantizedLinear`."""
        return cls._from_quantized(quantized_linear_layer, _sharded_to_all(segments), group)


def _gather_fn(group, full_shapes, shard_sizes, compute_dtype):
    """All ranks' shards (concatenated, one all_gather) → full parameters; the gradient of the
    full parameters goes back to each rank's shard with sum_scatter (averaged over the group)."""
    n = group.size()
    offsets = []
    total = 0
    for s in shard_sizes[:-1]:
        total += s
        offsets.append(total)
    shard_shapes = [(s[0] // n,) + tuple(s[1:]) for s in full_shapes]

    def cast(x, dtype):
        return x if dtype is None or x.dtype == dtype else x.astype(dtype)

    @mx.custom_function
    def gather(shards):
        row = mx.concatenate([cast(s.reshape(1, -1), compute_dtype) for s in shards], axis=1)
        full = mx.distributed.all_gather(row, group=group)  # (n, total shard size)
        return [p.reshape(shape) for p, shape in zip(mx.split(full, offsets, axis=1), full_shapes)]

    @gather.vjp
    def gather_vjp(shards, cotangents, _):
        rows = mx.concatenate([c.reshape(n, -1) for c in cotangents], axis=1)
        mine = mx.distributed.sum_scatter(rows, group=group) / n
        parts = mx.split(mine, offsets, axis=1)
        return [cast(p.reshape(shape), s.dtype) for p, shape, s in zip(parts, shard_shapes, shards)]

    return gather


def _shardable(m, k, v):
    return not isinstance(v, FullyShardedModule) and Module.valid_parameter_filter(m, k, v)


class FullyShardedModule(Module):
    """``module`` with every parameter sliced along axis 0 across the group; a call gathers
    the full parameters, runs the module, and puts the slices back (gradients reach the
    slices averaged over the group). Made by :func:`fully_shard`.

    Args:
        module (Module): The module to shard (its axis 0 sizes divisible by the group size).
        group (Group, optional): The group. Default: the global group.
        compute_dtype (Dtype, optional): The dtype the parameters are gathered in.
    """

    def __init__(self, module: Module, group: Optional[mx.distributed.Group] = None,
                 compute_dtype: Optional[mx.Dtype] = None):
        super().__init__()
        group = group or mx.distributed.init()
        n = group.size()
        params = module.filter_and_map(_shardable)
        flat = tree_flatten(params)
        for path, a in flat:
            if a.ndim == 0:
                raise ValueError(f"fully_shard: parameter {path} is a scalar and cannot be sliced")
            if a.shape[0] % n:
                raise ValueError(
                    f"fully_shard: parameter {path} of shape {tuple(a.shape)} cannot be sliced "
                    f"across {n} ranks: its axis 0 must be divisible by {n}")
        object.__setattr__(self, "_paths", [k for k, _ in flat])
        gather = _gather_fn(group, [a.shape for _, a in flat], [a.size // n for _, a in flat], compute_dtype)
        module.update(_shard(params, lambda p, w: 0, group))
        self.module = module
        self._gather = gather

    def _extra_repr(self) -> str:
        return f"num_sharded_params={len(self._paths)}"

    def _gathered_call(self, fn, *args, **kwargs):
        shards_tree = self.module.filter_and_map(_shardable)
        shards = [a for _, a in tree_flatten(shards_tree)]
        full = self._gather(shards)
        self.module.update(tree_unflatten(list(zip(self._paths, full))))
        try:
            return fn(*args, **kwargs)
        finally:
            self.module.update(shards_tree)

    def __call__(self, *args, **kwargs):
        return self._gathered_call(self.module, *args, **kwargs)

    def as_linear(self, *args, **kwargs):
        return self._gathered_call(self.module.as_linear, *args, **kwargs)


def fully_shard(module: Module, *, group: Optional[mx.distributed.Group] = None,
                compute_dtype: Optional[mx.Dtype] = None) -> Module:
    """``module`` as a :class:`FullyShardedModule` (unchanged on one rank, when already
    sharded, or when it has no parameter to shard).

    Args:
        module (Module): The module.
        group (Group, optional): The group. Default: the global group.
        compute_dtype (Dtype, optional): The dtype the parameters are gathered in.

    Returns:
        The sharded module (or ``module``).
    """
    group = group or mx.distributed.init()
    if group.size() == 1 or isinstance(module, FullyShardedModule):
        return module
    wrapped = FullyShardedModule(module, group=group, compute_dtype=compute_dtype)
    return wrapped if wrapped._paths else module
