"""Training helpers: ``value_and_grad`` and ``checkpoint`` over a model's parameters, and
``average_gradients`` for data-parallel training."""

from collections import OrderedDict
from functools import wraps
from typing import Any, Callable, Optional

import tessera.core as mx
from tessera.nn.layers.base import Module
from tessera.utils import tree_flatten, tree_map, tree_reduce, tree_unflatten  # noqa: F401 (as mlx.nn.utils)

__all__ = ["value_and_grad", "checkpoint", "average_gradients", "clip_grad_norm_sharded"]


def value_and_grad(model: Module, fn: Callable):
    """``fn``'s value and its gradient with respect to ``model``'s trainable parameters.

    Args:
        model (Module): The model whose ``trainable_parameters()`` are differentiated.
        fn (callable): Called with the arguments of the returned function; it uses ``model``.

    Returns:
        A function returning ``(value, gradients)``; the gradients are a tree like
        ``model.trainable_parameters()``.
    """

    def with_params(params, *args, **kwargs):
        model.update(params)
        return fn(*args, **kwargs)

    vg = mx.value_and_grad(with_params)

    @wraps(fn)
    def value_and_gradients(*args, **kwargs):
        return vg(model.trainable_parameters(), *args, **kwargs)

    return value_and_gradients


def checkpoint(module: Module, fn: Optional[Callable] = None):
    """``fn`` (by default the module itself) recomputing its intermediate values in the
    backward pass instead of keeping them (``mx.checkpoint`` over the module's parameters).

    Args:
        module (Module): The module whose parameters ``fn`` uses.
        fn (callable, optional): The function to checkpoint. Default: ``module``.

    Returns:
        The checkpointed function.
    """
    if fn is None:
        fn = module  # the module, not its __call__: a later patch of __call__ is seen

    def with_params(params, *args, **kwargs):
        module.update(params)
        return fn(*args, **kwargs)

    checkpointed = mx.checkpoint(with_params)

    @wraps(fn)
    def call(*args, **kwargs):
        return checkpointed(module.trainable_parameters(), *args, **kwargs)

    return call


# Bucket plans of average_gradients, per gradient tree signature (keys, shapes, dtypes) and
# settings: a training step reuses its plan instead of recomputing it (MLX recomputes it).
_PLANS: "OrderedDict[tuple, list]" = OrderedDict()
_MAX_PLANS = 16
# Measured at 2 ranks over shared memory: 25 all_sums of 4 MiB took as long as one of 100 MiB.
_ALONE_BYTES = 1 << 20


def _bucket_plan(flat, all_reduce_size, communication_type):
    signature = (
        tuple((k, tuple(g.shape), g.dtype) for k, g in flat),
        all_reduce_size,
        communication_type,
    )
    plan = _PLANS.get(signature)
    if plan is not None:
        _PLANS.move_to_end(signature)
        return plan
    # Same-dtype gradients (in the dtype they travel in) go together, in the tree's order; a
    # bucket closes once it holds at least all_reduce_size bytes. An array of _ALONE_BYTES or
    # more is a bucket of its own: its all_sum already runs at full bandwidth, and copying it
    # into a bucket would only add a pass over its bytes.
    by_dtype = OrderedDict()
    plan = []
    for i, (_, g) in enumerate(flat):
        wire = communication_type or g.dtype
        if g.size * wire.size >= min(_ALONE_BYTES, all_reduce_size):
            plan.append((wire, [i]))
        else:
            by_dtype.setdefault(wire, []).append(i)
    for wire, indices in by_dtype.items():
        bucket, nbytes = [], 0
        for i in indices:
            bucket.append(i)
            nbytes += flat[i][1].size * wire.size
            if nbytes >= all_reduce_size:
                plan.append((wire, bucket))
                bucket, nbytes = [], 0
        if bucket:
            plan.append((wire, bucket))
    plan = [(wire, bucket, _offsets([flat[i][1].size for i in bucket])) for wire, bucket in plan]
    _PLANS[signature] = plan
    if len(_PLANS) > _MAX_PLANS:
        _PLANS.popitem(last=False)
    return plan


def _offsets(sizes):
    out, total = [], 0
    for s in sizes[:-1]:
        total += s
        out.append(total)
    return out


def average_gradients(
    gradients: Any,
    group: Optional[mx.distributed.Group] = None,
    all_reduce_size: int = 32 * 1024**2,
    communication_stream: Optional[mx.Stream] = None,
    communication_type: Optional[mx.Dtype] = None,
):
    """The mean of ``gradients`` over the ranks of ``group``, on every rank.

    Gradients of one dtype are flattened and concatenated into buckets of about
    ``all_reduce_size`` bytes, each summed with one ``all_sum`` and divided by the group's
    size. Unlike MLX, a tree of mixed dtypes is bucketed per dtype (MLX falls back to one
    ``all_sum`` per array), an array of 1 MiB or more is summed alone (not copied into a
    bucket), the bucket plan is kept per tree structure, and floating buckets go through
    ``all_mean``, which divides each reduced block while it is in cache (the same bits as
    ``all_sum`` then ``/ n``, without a second pass over the result).

    Args:
        gradients (Any): A tree of arrays.
        group (Group, optional): The group to average over. Default: the global group.
        all_reduce_size (int): Bytes per bucket; ``0`` or less sums each array alone.
            Default: 32 MiB.
        communication_stream (Stream, optional): The stream of the collectives.
        communication_type (Dtype, optional): Cast to this dtype for the communication (for
            example ``mx.float16`` to halve the bytes) and back afterwards.

    Returns:
        A tree like ``gradients`` with the averaged arrays.
    """
    group = group or mx.distributed.init()
    n = group.size()
    if n == 1:
        return gradients
    flat = tree_flatten(gradients)
    if not flat:
        return gradients

    def wire(x):
        return x if communication_type is None or x.dtype == communication_type else x.astype(communication_type)

    def back(x, like):
        return x if x.dtype == like.dtype else x.astype(like.dtype)

    divisible = (mx.float16, mx.bfloat16, mx.float32, mx.float64)

    def mean(x):
        # all_mean divides each reduced block while it is in cache: the bits of all_sum / n
        # without a second pass over the result.
        if x.dtype in divisible:
            return mx.distributed.all_mean(x, group=group, stream=communication_stream)
        return mx.distributed.all_sum(x, group=group, stream=communication_stream) / n

    if all_reduce_size <= 0:
        averaged = [back(mean(wire(g)), g) for _, g in flat]
    else:
        averaged = [None] * len(flat)
        for _, bucket, offsets in _bucket_plan(flat, all_reduce_size, communication_type):
            if len(bucket) == 1:
                i = bucket[0]
                g = flat[i][1]
                averaged[i] = back(mean(wire(g)), g)
                continue
            big = mx.concatenate([wire(flat[i][1]).reshape(-1) for i in bucket])
            big = mean(big)
            for i, part in zip(bucket, mx.split(big, offsets)):
                g = flat[i][1]
                averaged[i] = back(part.reshape(g.shape), g)
    results = iter(averaged)
    return tree_map(lambda _: next(results), gradients)


def clip_grad_norm_sharded(gradients: Any, max_norm: float, group: Optional[mx.distributed.Group] = None):
    """Clips gradients sharded across ``group`` by their global L2 norm.

    Args:
        gradients (Any): This rank's shard of the gradient tree.
        max_norm (float): The largest norm allowed.
        group (Group, optional): The group the gradients are sharded over.

    Returns:
        ``(clipped gradients, global norm)``.
    """
    local = tree_reduce(lambda acc, g: acc + g.square().sum(), gradients, 0.0)
    norm = mx.sqrt(mx.distributed.all_sum(local, group=group))
    scale = mx.minimum(max_norm / (norm + 1e-6), 1.0)
    return tree_map(lambda g: g * scale, gradients), norm
