"""The layers of ``tessera.nn``."""

from tessera.nn.layers.base import Module
from tessera.nn.layers.containers import Sequential
from tessera.nn.layers.distributed import (
    AllToShardedLinear,
    FullyShardedModule,
    ShardedToAllLinear,
    fully_shard,
    shard_inplace,
    shard_linear,
    sum_gradients,
)
from tessera.nn.layers.linear import Bilinear, Identity, Linear
