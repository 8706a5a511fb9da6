"""Optimizers and learning-rate schedules, as ``mlx.optimizers``.

``import tessera.optimizers as optim`` gives the optimizer classes (:class:`SGD`, :class:`Adam`,
:class:`AdamW`, ...), the schedule makers (:func:`cosine_decay`, :func:`join_schedules`, ...) and
:func:`clip_grad_norm`. An optimizer keeps its whole state (the step count, the learning rate and
one small dict of arrays per parameter) in :attr:`Optimizer.state`, a tree that can be flattened
with :func:`tessera.utils.tree_flatten` and saved like any other tree of arrays.
"""

from tessera.optimizers import optimizers, schedulers
from tessera.optimizers.optimizers import *  # noqa: F401,F403
from tessera.optimizers.schedulers import *  # noqa: F401,F403
# Names mlx.optimizers has through its own imports, which programs reach as optim.tree_map.
from tessera.nn.layers.base import Module  # noqa: E402,F401
from tessera.utils import tree_flatten, tree_map, tree_merge, tree_reduce, tree_unflatten  # noqa: E402,F401
