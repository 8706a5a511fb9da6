"""Attention and Transformer layers: ``MultiHeadAttention``, the encoder and decoder layers and
stacks, and ``Transformer``."""

import math
from typing import Any, Callable, Optional

import tessera.core as mx
from tessera.nn.layers.activations import relu
from tessera.nn.layers.base import Module
from tessera.nn.layers.dropout import Dropout
from tessera.nn.layers.linear import Linear
from tessera.nn.layers.normalization import LayerNorm


def _checkpoint(module: Module) -> Callable:
    """``module`` as a callable that recomputes its intermediates in the backward pass."""
    # Imported here: tessera.nn.utils sits above the layers in the package.
    from tessera.nn.utils import checkpoint

    return checkpoint(module)


class MultiHeadAttention(Module):
    """Scaled dot-product attention over several heads.

    The queries, keys and values are projected by ``query_proj``, ``key_proj`` and
    ``value_proj``, split into ``num_heads`` heads along the features, attended with
    ``softmax(q k^T / sqrt(head_dims) + mask) v`` in every head, joined again and projected by
    ``out_proj``. The projections have no bias unless ``bias`` is true.

    The optional ``mask`` is added to the scores; it must broadcast to
    ``(batch, num_heads, queries, keys)`` and holds ``-inf`` (or a large negative number) where a
    query must not see a key. A boolean mask (``False`` hides) and the string ``"causal"`` are
    accepted too.

    Args:
        dims (int): The model dimensions: the projected queries' and keys' features, and the
            default of the other sizes.
        num_heads (int): The number of heads; it must divide ``dims``.
        query_input_dims (int, optional): The queries' input features. Default: ``dims``.
        key_input_dims (int, optional): The keys' input features. Default: ``dims``.
        value_input_dims (int, optional): The values' input features.
            Default: ``key_input_dims``.
        value_dims (int, optional): The projected values' features. Default: ``dims``.
        value_output_dims (int, optional): The output's features. Default: ``dims``.
        bias (bool, optional): Whether the projections add a bias. Default: ``False``.
    """

    def __init__(
        self,
        dims: int,
        num_heads: int,
        query_input_dims: Optional[int] = None,
        key_input_dims: Optional[int] = None,
        value_input_dims: Optional[int] = None,
        value_dims: Optional[int] = None,
        value_output_dims: Optional[int] = None,
        bias: bool = False,
    ):
        super().__init__()
        if num_heads <= 0 or dims % num_heads != 0:
            raise ValueError(
                f"MultiHeadAttention: dims={dims} must be divisible by num_heads={num_heads}")
        query_input_dims = query_input_dims or dims
        key_input_dims = key_input_dims or dims
        value_input_dims = value_input_dims or key_input_dims
        value_dims = value_dims or dims
        value_output_dims = value_output_dims or dims
        if value_dims % num_heads != 0:
            raise ValueError(
                f"MultiHeadAttention: value_dims={value_dims} must be divisible by num_heads={num_heads}")

        self.num_heads = num_heads
        self.query_proj = Linear(query_input_dims, dims, bias=bias)
        self.key_proj = Linear(key_input_dims, dims, bias=bias)
        self.value_proj = Linear(value_input_dims, value_dims, bias=bias)
        self.out_proj = Linear(value_dims, value_output_dims, bias=bias)

    def __call__(self, queries: mx.array, keys: mx.array, values: mx.array, mask=None) -> mx.array:
        """Attends ``queries`` (``(B, L_q, ·)``) to ``keys`` and ``values`` (``(B, L_k, ·)``).

        Args:
            queries (array): The queries.
            keys (array): The keys.
            values (array): The values.
            mask (array or str, optional): The attention mask. Default: ``None``.

        Returns:
            array: The result, ``(B, L_q, value_output_dims)``.
        """
        h = self.num_heads

        def heads(t):
            # (B, L, h * d) -> (B, h, L, d)
            return mx.unflatten(t, -1, (h, -1)).transpose(0, 2, 1, 3)

        q = heads(self.query_proj(queries))
        k = heads(self.key_proj(keys))
        v = heads(self.value_proj(values))
        scale = math.sqrt(1 / q.shape[-1])
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
        out = out.transpose(0, 2, 1, 3).flatten(-2, -1)
        return self.out_proj(out)

    @staticmethod
    def create_additive_causal_mask(N: int, dtype: mx.Dtype = mx.float32) -> mx.array:
        """An ``(N, N)`` additive mask that stops query ``i`` from seeing keys ``j > i``.

        Args:
            N (int): The sequence length.
            dtype (Dtype, optional): The mask's dtype. Default: ``float32``.

        Returns:
            array: ``0`` on and below the diagonal, the dtype's most negative finite value
            above it.
        """
        positions = mx.arange(N)
        future = positions[:, None] < positions[None]
        return future.astype(dtype) * mx.finfo(dtype).min


class TransformerEncoderLayer(Module):
    """One encoder layer: self-attention, then a two-layer MLP, each with a residual.

    With ``norm_first`` each block normalises its input (``x + f(ln(x))``); otherwise it
    normalises after the residual sum (``ln(x + f(x))``). Dropout follows the attention and the
    activation.

    Args:
        dims (int): The model dimensions.
        num_heads (int): The number of attention heads.
        mlp_dims (int, optional): The MLP's hidden size. Default: ``4 * dims``.
        dropout (float, optional): The dropout probability. Default: ``0.0``.
        activation (callable, optional): The MLP's activation. Default: ``relu``.
        norm_first (bool, optional): Normalise before each block, not after.
            Default: ``True``.
    """

    def __init__(
        self,
        dims: int,
        num_heads: int,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation: Callable[[Any], Any] = relu,
        norm_first: bool = True,
    ):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x):
        return self.linear2(self.dropout2(self.activation(self.linear1(x))))

    def __call__(self, x: mx.array, mask) -> mx.array:
        """Encodes ``x`` (``(B, L, dims)``), its self-attention masked by ``mask``."""
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.attention(y, y, y, mask))
            return x + self._mlp(self.ln2(x))
        x = self.ln1(x + self.dropout1(self.attention(x, x, x, mask)))
        return self.ln2(x + self._mlp(x))


class _LayerStack(Module):
    """``num_layers`` layers of ``layer_class`` followed by a ``LayerNorm`` (the encoder and the
    decoder stacks), each layer optionally checkpointed."""

    def __init__(self, layer_class, num_layers, dims, num_heads, mlp_dims, dropout, activation,
                 norm_first, checkpoint):
        super().__init__()
        self.layers = [
            layer_class(dims, num_heads, mlp_dims, dropout, activation, norm_first)
            for _ in range(num_layers)
        ]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def _run(self, x: mx.array, *rest) -> mx.array:
        for layer in self.layers:
            step = _checkpoint(layer) if self.checkpoint else layer
            x = step(x, *rest)
        return self.ln(x)


class TransformerEncoder(_LayerStack):
    """A stack of ``num_layers`` :class:`TransformerEncoderLayer` followed by a ``LayerNorm``.

    Args:
        num_layers (int): The number of layers.
        dims (int): The model dimensions.
        num_heads (int): The number of attention heads.
        mlp_dims (int, optional): The MLPs' hidden size. Default: ``4 * dims``.
        dropout (float, optional): The dropout probability. Default: ``0.0``.
        activation (callable, optional): The MLPs' activation. Default: ``relu``.
        norm_first (bool, optional): Normalise before each block. Default: ``True``.
        checkpoint (bool, optional): Recompute each layer's intermediates in the backward
            pass instead of keeping them (less memory, more compute). Default: ``False``.
    """

    def __init__(
        self,
        num_layers: int,
        dims: int,
        num_heads: int,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation=relu,
        norm_first: bool = True,
        checkpoint: bool = False,
    ):
        super().__init__(TransformerEncoderLayer, num_layers, dims, num_heads, mlp_dims, dropout,
                         activation, norm_first, checkpoint)

    def __call__(self, x: mx.array, mask) -> mx.array:
        """Encodes ``x`` (``(B, L, dims)``) through every layer, then normalises it."""
        return self._run(x, mask)


class TransformerDecoderLayer(Module):
    """One decoder layer: self-attention, attention to the encoder's output, then an MLP.

    Each of the three blocks has a residual connection and a ``LayerNorm`` (before the block
    with ``norm_first``, after the residual sum otherwise); dropout follows both attentions and
    the activation.

    Args:
        dims (int): The model dimensions.
        num_heads (int): The number of attention heads.
        mlp_dims (int, optional): The MLP's hidden size. Default: ``4 * dims``.
        dropout (float, optional): The dropout probability. Default: ``0.0``.
        activation (callable, optional): The MLP's activation. Default: ``relu``.
        norm_first (bool, optional): Normalise before each block. Default: ``True``.
    """

    def __init__(
        self,
        dims: int,
        num_heads: int,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation: Callable[[Any], Any] = relu,
        norm_first: bool = True,
    ):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.self_attention = MultiHeadAttention(dims, num_heads)
        self.cross_attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.ln3 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x):
        return self.linear2(self.dropout3(self.activation(self.linear1(x))))

    def __call__(self, x: mx.array, memory: mx.array, x_mask, memory_mask) -> mx.array:
        """Decodes ``x`` (``(B, L, dims)``) attending to ``memory`` (``(B, S, dims)``).

        ``x_mask`` masks the self-attention and ``memory_mask`` the cross-attention.
        """
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.self_attention(y, y, y, x_mask))
            y = self.ln2(x)
            x = x + self.dropout2(self.cross_attention(y, memory, memory, memory_mask))
            return x + self._mlp(self.ln3(x))
        x = self.ln1(x + self.dropout1(self.self_attention(x, x, x, x_mask)))
        x = self.ln2(x + self.dropout2(self.cross_attention(x, memory, memory, memory_mask)))
        return self.ln3(x + self._mlp(x))


class TransformerDecoder(_LayerStack):
    """A stack of ``num_layers`` :class:`TransformerDecoderLayer` followed by a ``LayerNorm``.

    Args:
        num_layers (int): The number of layers.
        dims (int): The model dimensions.
        num_heads (int): The number of attention heads.
        mlp_dims (int, optional): The MLPs' hidden size. Default: ``4 * dims``.
        dropout (float, optional): The dropout probability. Default: ``0.0``.
        activation (callable, optional): The MLPs' activation. Default: ``relu``.
        norm_first (bool, optional): Normalise before each block. Default: ``True``.
        checkpoint (bool, optional): Recompute each layer's intermediates in the backward
            pass. Default: ``False``.
    """

    def __init__(
        self,
        num_layers: int,
        dims: int,
        num_heads: int,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation=relu,
        norm_first: bool = True,
        checkpoint: bool = False,
    ):
        super().__init__(TransformerDecoderLayer, num_layers, dims, num_heads, mlp_dims, dropout,
                         activation, norm_first, checkpoint)

    def __call__(self, x: mx.array, memory: mx.array, x_mask, memory_mask) -> mx.array:
        """Decodes ``x`` through every layer against ``memory``, then normalises it."""
        return self._run(x, memory, x_mask, memory_mask)


class Transformer(Module):
    """An encoder-decoder Transformer (Vaswani et al., *Attention Is All You Need*,
    https://arxiv.org/abs/1706.03762).

    The encoder turns the source sequence into a memory; the decoder turns the target
    sequence into the output, attending to the memory in every layer.

    Args:
        dims (int, optional): The model dimensions. Default: ``512``.
        num_heads (int, optional): The number of attention heads. Default: ``8``.
        num_encoder_layers (int, optional): The encoder's layers. Default: ``6``.
        num_decoder_layers (int, optional): The decoder's layers. Default: ``6``.
        mlp_dims (int, optional): The MLPs' hidden size. Default: ``4 * dims``.
        dropout (float, optional): The dropout probability, applied after every attention and
            every MLP activation. Default: ``0.0``.
        activation (callable, optional): The MLPs' activation. Default: ``relu``.
        custom_encoder (Module, optional): Used instead of a :class:`TransformerEncoder`; it
            is called as ``encoder(src, src_mask)``. Default: ``None``.
        custom_decoder (Module, optional): Used instead of a :class:`TransformerDecoder`; it
            is called as ``decoder(tgt, memory, tgt_mask, memory_mask)``. Default: ``None``.
        norm_first (bool, optional): Normalise before each block rather than after the
            residual sum. Default: ``True``.
        checkpoint (bool, optional): Recompute each layer's intermediates in the backward
            pass (less memory, more compute). Default: ``False``.
    """

    def __init__(
        self,
        dims: int = 512,
        num_heads: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation: Callable[[Any], Any] = relu,
        custom_encoder: Optional[Any] = None,
        custom_decoder: Optional[Any] = None,
        norm_first: bool = True,
        checkpoint: bool = False,
    ):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                num_encoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first, checkpoint)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                num_decoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first, checkpoint)

    def __call__(self, src: mx.array, tgt: mx.array, src_mask, tgt_mask, memory_mask) -> mx.array:
        """Encodes ``src`` and decodes ``tgt`` against it.

        Args:
            src (array): The source sequence, ``(B, S, dims)``.
            tgt (array): The target sequence, ``(B, T, dims)``.
            src_mask: The encoder's self-attention mask.
            tgt_mask: The decoder's self-attention mask.
            memory_mask: The decoder's mask on the memory.

        Returns:
            array: The decoded sequence, ``(B, T, dims)``.
        """
        memory = self.encoder(src, src_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)
