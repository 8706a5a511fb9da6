"""``Embedding``: a table of learned vectors looked up by integer index."""

import math
from typing import Optional

import tessera.core as mx
from tessera.nn.layers.base import Module
from tessera.nn.layers.quantized import QuantizedEmbedding


class Embedding(Module):
    """Maps integer indices (token ids, say) to rows of a learned table.

    The table ``weight`` has shape ``(num_embeddings, dims)`` and starts normal with mean 0 and
    standard deviation ``1 / sqrt(dims)``.

    Args:
        num_embeddings (int): The number of rows, the vocabulary size for tokens.
        dims (int): The length of each vector.
    """

    def __init__(self, num_embeddings: int, dims: int):
        super().__init__()
        if num_embeddings <= 0 or dims <= 0:
            raise ValueError(
                f"Embedding: num_embeddings={num_embeddings} and dims={dims} must both be positive")
        self.weight = mx.random.normal(shape=(num_embeddings, dims), scale=math.sqrt(1 / dims))

    def _extra_repr(self) -> str:
        rows, dims = self.weight.shape
        return f"{rows}, {dims}"

    def __call__(self, x: mx.array) -> mx.array:
        """The rows of ``weight`` at the indices ``x``: shape ``x.shape + (dims,)``."""
        return self.weight[x]

    def as_linear(self, x: mx.array) -> mx.array:
        """Uses the table as a linear map from ``dims`` features to ``num_embeddings`` scores.

        Computes ``x @ weight.T``, the output projection of a model whose input embedding and
        output layer share (tie) their weights.

        Args:
            x (array): An array whose last axis has ``dims`` entries.

        Returns:
            array: An array whose last axis has ``num_embeddings`` entries.
        """
        return x @ self.weight.T

    def to_quantized(
        self,
        group_size: Optional[int] = None,
        bits: Optional[int] = None,
        mode: str = "affine",
        quantize_input: bool = False,
    ):
        """The :class:`QuantizedEmbedding` approximating this layer (what :func:`quantize` uses).

        Args:
            group_size (int, optional): The quantization group size. Default: the mode's (64).
            bits (int, optional): The bits per weight. Default: the mode's (4).
            mode (str): The quantization mode. Default: ``"affine"``.
            quantize_input (bool): Must be ``False``: a lookup has no input to quantize.
        """
        if quantize_input:
            raise ValueError(
                "Embedding.to_quantized: quantize_input=True is not supported for embeddings "
                "(their input is indices); quantize only the Linear layers with class_predicate")
        return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)
