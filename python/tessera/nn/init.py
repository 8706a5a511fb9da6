"""Parameter initialisers for ``tessera.nn``, matching ``mlx.nn.init``.

Each function here builds an initialiser: a callable that takes an array and returns a new
array of the same shape (its values are ignored) filled as the initialiser describes.
"""

import math
from typing import Callable, Literal

import tessera.core as mx

__all__ = [
    "constant",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "identity",
    "normal",
    "orthogonal",
    "sparse",
    "uniform",
]


def constant(value: float, dtype: mx.Dtype = mx.float32) -> Callable[[mx.array], mx.array]:
    """Build an initialiser that fills its output with one value.

    Args:
        value (float): The value every element takes.
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array], array]: Maps an array to a ``value``-filled array of its shape.
    """

    def initializer(a: mx.array) -> mx.array:
        return mx.full(a.shape, value, dtype=dtype)

    return initializer


def normal(
    mean: float = 0.0, std: float = 1.0, dtype: mx.Dtype = mx.float32
) -> Callable[[mx.array], mx.array]:
    """Build an initialiser that draws from a normal distribution.

    Args:
        mean (float, optional): The distribution's mean. Default: ``0.0``.
        std (float, optional): The distribution's standard deviation. Default: ``1.0``.
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array], array]: Maps an array to normal samples of its shape.
    """

    def initializer(a: mx.array) -> mx.array:
        return mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)

    return initializer


def uniform(
    low: float = 0.0, high: float = 1.0, dtype: mx.Dtype = mx.float32
) -> Callable[[mx.array], mx.array]:
    """Build an initialiser that draws uniformly from ``[low, high)``.

    Args:
        low (float, optional): The lower bound. Default: ``0.0``.
        high (float, optional): The upper bound. Default: ``1.0``.
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array], array]: Maps an array to uniform samples of its shape.
    """

    def initializer(a: mx.array) -> mx.array:
        return mx.random.uniform(low, high, a.shape, dtype=dtype)

    return initializer


def identity(dtype: mx.Dtype = mx.float32) -> Callable[[mx.array], mx.array]:
    """Build an initialiser that returns an identity matrix.

    Args:
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array], array]: Maps a square matrix to the identity of its size; any other
        shape raises ``ValueError``.
    """

    def initializer(arr: mx.array) -> mx.array:
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(
                f"identity: the array to fill must be square (n, n), got shape {tuple(arr.shape)}"
            )
        return mx.eye(n=arr.shape[0], dtype=dtype)

    return initializer


def _calculate_fan_in_fan_out(x: mx.array):
    """Fan-in and fan-out of a weight of ``x``'s shape.

    The last axis counts inputs and the first counts outputs; for more than two dimensions
    both are multiplied by the product of the axes in between (the receptive field).
    """
    if x.ndim < 2:
        raise ValueError(
            f"glorot / he initialisers need an array of 2 or more dimensions (fan in and fan out), "
            f"got {x.ndim} dimensions"
        )
    receptive_field = 1
    for size in x.shape[1:-1]:
        receptive_field *= size
    fan_in = x.shape[-1] * receptive_field
    fan_out = x.shape[0] * receptive_field
    return fan_in, fan_out


def _select_fan(x: mx.array, mode: str) -> int:
    fan_in, fan_out = _calculate_fan_in_fan_out(x)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"Invalid mode: {mode}. Valid modes are: fan_in, fan_out")


def glorot_normal(dtype: mx.Dtype = mx.float32) -> Callable[[mx.array, float], mx.array]:
    r"""Build a Glorot (Xavier) normal initialiser.

    Samples are zero-mean normal with standard deviation
    :math:`\gamma \sqrt{2 / (\text{fan\_in} + \text{fan\_out})}`, where :math:`\gamma` is
    the ``gain`` given to the initialiser (Glorot and Bengio, 2010, "Understanding the
    difficulty of training deep feedforward neural networks").

    Args:
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array, float], array]: Takes an array of at least two dimensions and an
        optional ``gain`` (default ``1.0``) and returns samples of the array's shape.
    """

    def initializer(a: mx.array, gain: float = 1.0) -> mx.array:
        fan_in, fan_out = _calculate_fan_in_fan_out(a)
        std = gain * math.sqrt(2.0 / (fan_in + fan_out))
        return mx.random.normal(shape=a.shape, scale=std, dtype=dtype)

    return initializer


def glorot_uniform(dtype: mx.Dtype = mx.float32) -> Callable[[mx.array, float], mx.array]:
    r"""Build a Glorot (Xavier) uniform initialiser.

    Samples are uniform on :math:`[-l, l]` with
    :math:`l = \gamma \sqrt{6 / (\text{fan\_in} + \text{fan\_out})}`, where :math:`\gamma` is
    the ``gain`` given to the initialiser.

    Args:
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array, float], array]: Takes an array of at least two dimensions and an
        optional ``gain`` (default ``1.0``) and returns samples of the array's shape.
    """

    def initializer(a: mx.array, gain: float = 1.0) -> mx.array:
        fan_in, fan_out = _calculate_fan_in_fan_out(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def he_normal(
    dtype: mx.Dtype = mx.float32,
) -> Callable[[mx.array, Literal["fan_in", "fan_out"], float], mx.array]:
    r"""Build a He (Kaiming) normal initialiser.

    Samples are zero-mean normal with standard deviation :math:`\gamma / \sqrt{\text{fan}}`,
    where ``fan`` is the fan-in or the fan-out as ``mode`` selects and :math:`\gamma` is the
    ``gain`` (He et al., 2015, "Delving Deep into Rectifiers").

    Args:
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array, str, float], array]: Takes an array of at least two dimensions, a
        ``mode`` (``"fan_in"``, the default, or ``"fan_out"``) and a ``gain`` (default
        ``1.0``), and returns samples of the array's shape.
    """

    def initializer(
        a: mx.array,
        mode: Literal["fan_in", "fan_out"] = "fan_in",
        gain: float = 1.0,
    ) -> mx.array:
        std = gain / math.sqrt(_select_fan(a, mode))
        return mx.random.normal(shape=a.shape, scale=std, dtype=dtype)

    return initializer


def he_uniform(
    dtype: mx.Dtype = mx.float32,
) -> Callable[[mx.array, Literal["fan_in", "fan_out"], float], mx.array]:
    r"""Build a He (Kaiming) uniform initialiser.

    Samples are uniform on :math:`[-l, l]` with :math:`l = \gamma \sqrt{3 / \text{fan}}`,
    where ``fan`` is the fan-in or the fan-out as ``mode`` selects and :math:`\gamma` is the
    ``gain``.

    Args:
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array, str, float], array]: Takes an array of at least two dimensions, a
        ``mode`` (``"fan_in"``, the default, or ``"fan_out"``) and a ``gain`` (default
        ``1.0``), and returns samples of the array's shape.
    """

    def initializer(
        a: mx.array,
        mode: Literal["fan_in", "fan_out"] = "fan_in",
        gain: float = 1.0,
    ) -> mx.array:
        limit = gain * math.sqrt(3.0 / _select_fan(a, mode))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def sparse(
    sparsity: float,
    mean: float = 0.0,
    std: float = 1.0,
    dtype: mx.Dtype = mx.float32,
) -> Callable[[mx.array], mx.array]:
    """Build an initialiser for sparse two-dimensional weights.

    Entries are normal samples, and in every row ``ceil(sparsity * columns)`` of them, chosen
    at random independently per row, are set to zero. With weights used as ``x @ w.T`` each
    output feature thus keeps the same share of input connections (Martens, 2010, "Deep
    learning via Hessian-free optimization").

    Args:
        sparsity (float): The fraction of each row to zero.
        mean (float, optional): Mean of the normal samples. Default: ``0.0``.
        std (float, optional): Standard deviation of the normal samples. Default: ``1.0``.
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array], array]: Maps a two-dimensional array to a sparse array of its
        shape; other ranks raise ``ValueError``.
    """

    def initializer(a: mx.array) -> mx.array:
        if a.ndim != 2:
            raise ValueError(
                f"Only tensors with 2 dimensions are supported, got {a.ndim} dimensions."
            )
        rows, cols = a.shape
        zeros_per_row = int(math.ceil(sparsity * cols))

        # A random permutation of the columns of each row: its first entries name the
        # positions to clear.
        column_order = mx.argsort(mx.random.uniform(shape=a.shape), axis=1)
        out = mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)
        if zeros_per_row > 0:
            row_index = mx.reshape(mx.arange(rows), (rows, 1))
            out[row_index, column_order[:, :zeros_per_row]] = 0
        return out

    return initializer


def orthogonal(gain: float = 1.0, dtype: mx.Dtype = mx.float32) -> Callable[[mx.array], mx.array]:
    """An initialiser that returns a (semi-)orthogonal matrix: the leading ``rows x cols``
    block of the Q factor of a square standard-normal matrix, each column's sign made that of
    R's diagonal (so Q is uniformly distributed), times ``gain``.

    Args:
        gain (float, optional): Scale of the matrix. Default: ``1.0``.
        dtype (Dtype, optional): The output's data type. Default: ``float32``.

    Returns:
        Callable[[array], array]: Maps a two-dimensional array to an orthogonal matrix of its
        shape (orthonormal rows or columns, whichever are fewer); other ranks raise
        ``ValueError``.
    """

    def initializer(a: mx.array) -> mx.array:
        if a.ndim != 2:
            raise ValueError(
                f"Orthogonal initialization requires a 2D array but got a {a.ndim}D array."
            )
        rows, cols = a.shape
        n = max(rows, cols)
        q, r = mx.linalg.qr(mx.random.normal(shape=(n, n)))
        q = q * mx.sign(mx.diag(r))
        return (q[:rows, :cols] * gain).astype(dtype)

    return initializer
