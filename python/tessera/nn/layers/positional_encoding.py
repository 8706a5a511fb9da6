"""Positional encodings: ``RoPE``, ``SinusoidalPositionalEncoding`` and ``ALiBi``."""

import math
from typing import Optional

import tessera.core as mx
from tessera.nn.layers.base import Module


class RoPE(Module):
    """Rotary positional encoding (Su et al., *RoFormer*, https://arxiv.org/abs/2104.09864).

    Feature pairs of the token at position ``t`` (the second to last axis, counted from
    ``offset``) are rotated by the angle ``scale * t * base ** (-2 i / dims)`` for pair ``i``.
    The default pairs feature ``i`` with feature ``i + dims / 2`` (the two halves), which is
    faster; ``traditional`` pairs neighbours ``2 i`` and ``2 i + 1``, as in the paper.

    Args:
        dims (int): How many leading features to rotate; any further features pass through
            unchanged.
        traditional (bool, optional): Rotate neighbouring pairs instead of the two halves.
            Default: ``False``.
        base (float, optional): The base of the per-pair angular frequencies.
            Default: ``10000``.
        scale (float, optional): A factor on the positions. Default: ``1.0``.
    """

    def __init__(self, dims: int, traditional: bool = False, base: float = 10000, scale: float = 1.0):
        super().__init__()
        self.dims = dims
        self.traditional = traditional
        self.base = base
        self.scale = scale

    def _extra_repr(self) -> str:
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x: mx.array, offset: int = 0) -> mx.array:
        """Rotates ``x`` of shape ``(..., L, D)``; its first token is at position ``offset``."""
        return mx.fast.rope(
            x,
            self.dims,
            traditional=self.traditional,
            base=self.base,
            scale=self.scale,
            offset=offset,
        )


class SinusoidalPositionalEncoding(Module):
    r"""Sinusoidal embeddings of (real-valued) positions (Vaswani et al., *Attention Is All You
    Need*, https://arxiv.org/abs/1706.03762).

    A position :math:`x` becomes ``[sin(x w); cos(x w)] * scale`` (or cosines first), where the
    ``dims / 2`` frequencies :math:`w` run geometrically from ``max_freq`` down to ``min_freq``.

    Args:
        dims (int): The length of each embedding; positive and even.
        min_freq (float, optional): The lowest frequency. Default: ``0.0001``.
        max_freq (float, optional): The highest frequency. Default: ``1``.
        scale (float, optional): A factor on the embeddings. Default: ``sqrt(2 / dims)``, which
            gives each embedding unit norm.
        cos_first (bool, optional): Put the cosines before the sines. Default: ``False``.
        full_turns (bool, optional): Multiply the frequencies by :math:`2\pi`, so that they
            count turns. Default: ``False``.
    """

    def __init__(
        self,
        dims: int,
        min_freq: float = 0.0001,
        max_freq: float = 1,
        scale: Optional[float] = None,
        cos_first: bool = False,
        full_turns: bool = False,
    ):
        super().__init__()
        if dims <= 0 or dims % 2 != 0:
            raise ValueError(
                f"[SinusoidalPositionalEncoding] dims must be positive and even but got dims={dims}")
        half = dims // 2
        # t goes from 1 down to 0 over the frequencies (a single frequency sits at max_freq).
        if half == 1:
            t = mx.array([1.0])
        else:
            t = 1 - mx.arange(0, half) / (half - 1)
        log_min, log_max = math.log(min_freq), math.log(max_freq)
        sigmas = mx.exp(t * (log_max - log_min) + log_min)
        if full_turns:
            sigmas = sigmas * (2 * math.pi)
        # The leading underscore keeps the frequencies out of the parameters.
        self._sigmas = sigmas
        self.scale = scale if scale is not None else (2 / dims) ** 0.5
        self.cos_first = cos_first

    def __call__(self, x: mx.array) -> mx.array:
        """Embeds the positions ``x``: the result has shape ``x.shape + (dims,)``."""
        angles = x[..., None] * self._sigmas
        sin, cos = mx.sin(angles), mx.cos(angles)
        parts = [cos, sin] if self.cos_first else [sin, cos]
        y = mx.concatenate(parts, axis=-1)
        if self.scale != 1:
            y = y * self.scale
        return y


class ALiBi(Module):
    """Attention with linear biases (Press et al., 2021, https://arxiv.org/abs/2108.12409).

    Adds ``-slope_h * |i - j|`` to the attention score of query ``i`` and key ``j`` in head
    ``h``; the slopes form a geometric sequence over the heads. The layer has no parameters.
    """

    @staticmethod
    def create_alibi_matrix(
        q_sequence_length: int,
        k_sequence_length: int,
        num_heads: int,
        offset: int,
        dtype=mx.float32,
    ) -> mx.array:
        """The additive biases, of shape ``(1, num_heads, q_sequence_length - offset, k_sequence_length)``.

        Args:
            q_sequence_length (int): One past the position of the last query.
            k_sequence_length (int): The number of keys (at positions ``0, 1, ...``).
            num_heads (int): The number of heads.
            offset (int): The position of the first query.
            dtype (Dtype, optional): The dtype of the result. Default: ``float32``.

        Returns:
            array: The biases.
        """
        queries = mx.arange(offset, q_sequence_length)
        keys = mx.arange(0, k_sequence_length)
        distance = -mx.abs(queries[:, None] - keys[None, :])
        distance = mx.expand_dims(distance, axis=(0, 1))
        slopes = ALiBi.create_alibi_slope(num_heads=num_heads, dtype=dtype)
        return (distance * slopes).astype(dtype)

    @staticmethod
    def create_alibi_slope(num_heads: int, dtype) -> mx.array:
        """The per-head slopes, of shape ``(num_heads, 1, 1)``.

        For ``n`` heads, ``n`` a power of two, the slopes are ``s, s**2, ..., s**n`` with
        ``s = 2 ** (-8 / n)``. Otherwise the ``2**k < n`` slopes of the largest power of two
        come first, followed by every other slope of ``2**(k+1)`` heads until there are ``n``.

        Args:
            num_heads (int): The number of heads.
            dtype (Dtype): The dtype of the result.

        Returns:
            array: The slopes.
        """
        if num_heads <= 0:
            raise ValueError(f"ALiBi: num_heads={num_heads} must be positive")

        def slopes(n: int):
            if math.log2(n).is_integer():
                first = 2 ** (-(2 ** -(math.log2(n) - 3)))
                return [first * first**i for i in range(n)]
            power = 2 ** math.floor(math.log2(n))
            return slopes(power) + slopes(2 * power)[0::2][: n - power]

        values = mx.array(slopes(num_heads), dtype=dtype)
        return mx.expand_dims(values, axis=(-1, -2))

    def __call__(self, attention_scores: mx.array, offset: int = 0, mask: Optional[mx.array] = None) -> mx.array:
        """Adds the biases (and ``mask``, if given) to scores of shape ``(B, H, L_q, L_k)``.

        Args:
            attention_scores (array): The scores, ``(batch, heads, queries, keys)``.
            offset (int, optional): The position of the first query. Default: ``0``.
            mask (array, optional): An additive mask added to the biases. Default: ``None``.

        Returns:
            array: The biased scores.
        """
        biases = ALiBi.create_alibi_matrix(
            q_sequence_length=attention_scores.shape[-2] + offset,
            k_sequence_length=attention_scores.shape[-1],
            num_heads=attention_scores.shape[1],
            offset=offset,
            dtype=attention_scores.dtype,
        )
        if mask is not None:
            biases = biases + mask
        return attention_scores + biases
