"""Neural networks on Tessera, with the API of ``mlx.nn``: ``Module``, layers, losses,
initialisers, ``value_and_grad`` and data-parallel / tensor-parallel training helpers."""

from tessera.nn import init, losses  # noqa: F401
from tessera.nn.layers import *  # noqa: F401,F403
from tessera.nn.layers import Module  # noqa: F401
from tessera.nn.utils import average_gradients, checkpoint, value_and_grad  # noqa: F401
