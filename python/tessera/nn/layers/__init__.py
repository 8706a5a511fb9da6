"""The layers of ``tessera.nn``, with MLX's names, the quantized ones included (``QuantizedLinear``,
``QuantizedEmbedding``, ``quantize``, affine mode) and their tensor-parallel versions."""

from tessera.nn.layers.activations import (
    CELU, ELU, GELU, GLU, SELU, HardShrink, Hardswish, HardTanh, LeakyReLU, LogSigmoid,
    LogSoftmax, Mish, PReLU, ReLU, ReLU2, ReLU6, Sigmoid, SiLU, Softmax, Softmin, Softplus,
    Softshrink, Softsign, Step, Tanh, celu, elu, gelu, gelu_approx, gelu_fast_approx, glu,
    hard_shrink, hard_tanh, hardswish, leaky_relu, log_sigmoid, log_softmax, mish, prelu, relu,
    relu2, relu6, selu, sigmoid, silu, softmax, softmin, softplus, softshrink, softsign, step,
    tanh,
)
from tessera.nn.layers.base import Module
from tessera.nn.layers.containers import Sequential
from tessera.nn.layers.convolution import (
    Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
)
from tessera.nn.layers.distributed import (
    AllToShardedLinear,
    FullyShardedModule,
    QuantizedAllToShardedLinear,
    QuantizedShardedToAllLinear,
    ShardedToAllLinear,
    fully_shard,
    shard_inplace,
    shard_linear,
    sum_gradients,
)
from tessera.nn.layers.dropout import Dropout, Dropout2d, Dropout3d
from tessera.nn.layers.embedding import Embedding
from tessera.nn.layers.linear import Bilinear, Identity, Linear
from tessera.nn.layers.normalization import BatchNorm, GroupNorm, InstanceNorm, LayerNorm, RMSNorm
from tessera.nn.layers.pooling import (
    AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d,
)
from tessera.nn.layers.positional_encoding import ALiBi, RoPE, SinusoidalPositionalEncoding
from tessera.nn.layers.quantized import QQLinear, QuantizedEmbedding, QuantizedLinear, quantize
from tessera.nn.layers.recurrent import GRU, LSTM, RNN
from tessera.nn.layers.transformer import (
    MultiHeadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from tessera.nn.layers.upsample import Upsample
