"""Normalisation layers: ``LayerNorm``, ``RMSNorm``, ``GroupNorm``, ``BatchNorm``, ``InstanceNorm``.

Every layer works on channels-last inputs (the features are the last axis) and, where it has an
affine transform, names its scale ``weight`` (starting at ones) and its shift ``bias`` (starting
at zeros), as MLX does.
"""

from typing import Tuple

import tessera.core as mx
from tessera.nn.layers.base import Module


def _check_eps(layer: str, eps: float):
    # eps sits under a square root: zero or less gives NaN for inputs of small variance.
    if not eps > 0.0:
        raise ValueError(f"[{layer}] 'eps' must be positive but got eps={eps}")


class InstanceNorm(Module):
    r"""Normalises each channel of each sample over its spatial positions.

    Computes

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta,

    with the mean and (biased) variance taken over the axes between the first (batch) and the
    last (features), separately for every sample and feature (Ulyanov et al., 2016,
    https://arxiv.org/abs/1607.08022). :math:`\gamma` (``weight``, ones) and :math:`\beta`
    (``bias``, zeros) have ``dims`` entries and exist only when ``affine`` is true.

    Args:
        dims (int): The number of features, the size of the input's last axis.
        eps (float): Added to the variance for numerical stability. Default: ``1e-5``.
        affine (bool): Whether to learn the per-feature scale and shift. Default: ``False``.

    Shape:
        - Input: ``(N, ..., C)`` with at least 3 dimensions and ``C == dims``.
        - Output: the shape of the input.
    """

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = False):
        super().__init__()
        _check_eps("InstanceNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self) -> str:
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x: mx.array) -> mx.array:
        if x.ndim < 3:
            raise ValueError(
                "InstanceNorm: the input must have at least 3 dimensions (N, ..., C), "
                f"got ndim={x.ndim}")
        n, c = x.shape[0], x.shape[-1]
        spatial = x.shape[1:-1]
        # Bring the features next to the batch and flatten the spatial axes into one, so that
        # a layer norm over the last axis normalises each (sample, feature) pair.
        perm = (0, x.ndim - 1) + tuple(range(1, x.ndim - 1))
        rows = mx.transpose(x, perm).reshape(n, c, -1)
        rows = mx.fast.layer_norm(rows, None, None, self.eps)
        back = (0,) + tuple(range(2, x.ndim)) + (1,)
        y = mx.transpose(rows.reshape(n, c, *spatial), back)
        if "weight" in self:
            y = self.weight * y + self.bias
        return y


class LayerNorm(Module):
    r"""Normalises the last axis of the input to zero mean and unit variance.

    Computes

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta

    over the last axis (Ba et al., 2016, https://arxiv.org/abs/1607.06450), with the biased
    variance. :math:`\gamma` is ``weight`` (ones) and :math:`\beta` is ``bias`` (zeros).

    Args:
        dims (int): The size of the last axis.
        eps (float): Added to the variance for numerical stability. Default: ``1e-5``.
        affine (bool): Whether to learn a per-feature scale (and shift). Default: ``True``.
        bias (bool): With ``affine``, whether to learn the shift too; without it the layer
            only scales. Default: ``True``.
    """

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = True, bias: bool = True):
        super().__init__()
        _check_eps("LayerNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))
        self.eps = eps
        self.dims = dims

    def _extra_repr(self) -> str:
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x: mx.array) -> mx.array:
        weight = self["weight"] if "weight" in self else None
        bias = self["bias"] if "bias" in self else None
        return mx.fast.layer_norm(x, weight, bias, self.eps)


class RMSNorm(Module):
    r"""Divides the last axis of the input by its root mean square.

    Computes

    .. math::

        y = \frac{x}{\sqrt{\mathrm{E}[x^2] + \epsilon}} \gamma

    over the last axis (Zhang and Sennrich, 2019, https://arxiv.org/abs/1910.07467), where
    :math:`\gamma` is ``weight`` (ones). The mean square is accumulated in 32-bit precision
    (or more) whatever the input's dtype.

    Args:
        dims (int): The size of the last axis.
        eps (float): Added to the mean square for numerical stability. Default: ``1e-5``.
    """

    def __init__(self, dims: int, eps: float = 1e-5):
        super().__init__()
        _check_eps("RMSNorm", eps)
        self.weight = mx.ones((dims,))
        self.eps = eps

    def _extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x: mx.array) -> mx.array:
        return mx.fast.rms_norm(x, self["weight"], self.eps)


class GroupNorm(Module):
    r"""Normalises groups of features, each over the spatial axes and the group's features.

    Computes the layer-norm formula

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta

    with the statistics of each sample taken over its spatial axes (those between the first and
    the last) and the features of one group (Wu and He, 2018, https://arxiv.org/abs/1803.08494).
    By default feature ``f`` belongs to group ``f % num_groups`` (groups interleave); with
    ``pytorch_compatible`` the groups are contiguous blocks of ``dims // num_groups`` features,
    as in PyTorch. :math:`\gamma` (``weight``, ones) and :math:`\beta` (``bias``, zeros) are
    per feature.

    Args:
        num_groups (int): The number of groups; it must divide ``dims``.
        dims (int): The number of features, the size of the last axis.
        eps (float): Added to the variance for numerical stability. Default: ``1e-5``.
        affine (bool): Whether to learn the per-feature scale and shift. Default: ``True``.
        pytorch_compatible (bool): Whether groups are contiguous blocks of features, as in
            PyTorch. Default: ``False``.
    """

    def __init__(
        self,
        num_groups: int,
        dims: int,
        eps: float = 1e-5,
        affine: bool = True,
        pytorch_compatible: bool = False,
    ):
        super().__init__()
        _check_eps("GroupNorm", eps)
        if num_groups <= 0:
            raise ValueError(f"GroupNorm: num_groups={num_groups} must be a positive integer")
        if dims <= 0:
            raise ValueError(f"GroupNorm: dims={dims} must be a positive integer")
        if dims % num_groups != 0:
            raise ValueError(
                f"GroupNorm: dims={dims} is not divisible by num_groups={num_groups}")
        if affine:
            self.bias = mx.zeros((dims,))
            self.weight = mx.ones((dims,))
        self.num_groups = num_groups
        self.dims = dims
        self.eps = eps
        self.pytorch_compatible = pytorch_compatible

    def _extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.dims}, eps={self.eps}, affine={'weight' in self}, "
            f"pytorch_compatible={self.pytorch_compatible}"
        )

    def _blocked_group_norm(self, x: mx.array) -> mx.array:
        # Groups are contiguous blocks of features: gather each group into one row and
        # normalise the rows.
        g = self.num_groups
        n, *spatial, c = x.shape
        size = c // g
        rows = x.reshape(n, -1, g, size).transpose(0, 2, 1, 3).reshape(n, g, -1)
        rows = mx.fast.layer_norm(rows, None, None, self.eps)
        return rows.reshape(n, g, -1, size).transpose(0, 2, 1, 3).reshape(n, *spatial, c)

    def _interleaved_group_norm(self, x: mx.array) -> mx.array:
        # Feature f is in group f % num_groups: the groups are the last axis of this view.
        g = self.num_groups
        n, *spatial, c = x.shape
        v = x.reshape(n, -1, g)
        mean = mx.mean(v, axis=1, keepdims=True)
        var = mx.var(v, axis=1, keepdims=True)
        v = (v - mean) * mx.rsqrt(var + self.eps)
        return v.reshape(n, *spatial, c)

    def __call__(self, x: mx.array) -> mx.array:
        if x.ndim < 2:
            raise ValueError(
                f"GroupNorm: the input must have at least 2 dimensions (N, ..., C), got ndim={x.ndim}")
        if x.shape[-1] != self.dims:
            raise ValueError(
                f"GroupNorm: the input's last axis has {x.shape[-1]} features; expected dims={self.dims}")
        if self.pytorch_compatible:
            y = self._blocked_group_norm(x)
        else:
            y = self._interleaved_group_norm(x)
        if "weight" in self:
            y = self.weight * y + self.bias
        return y


class BatchNorm(Module):
    r"""Normalises each feature over the batch (and spatial) axes.

    Computes

    .. math::

        y = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] + \epsilon}} \gamma + \beta

    per feature, the statistics taken over every axis but the last (Ioffe and Szegedy, 2015,
    https://arxiv.org/abs/1502.03167). Inputs are ``NC``, ``NLC`` or ``NHWC``.

    In training mode the batch's mean and biased variance normalise the input and, with
    ``track_running_stats``, update the running estimates

    .. math::

        \hat\mu \leftarrow (1 - m)\hat\mu + m\,\mu_B, \qquad
        \hat\sigma^2 \leftarrow (1 - m)\hat\sigma^2 + m\,s^2_B

    where :math:`m` is ``momentum`` and :math:`s^2_B` the unbiased batch variance. In evaluation
    mode the running estimates (``running_mean``, starting at zeros, and ``running_var``,
    starting at ones) normalise instead. They are saved with the parameters but always frozen,
    so optimisers leave them alone. Without ``track_running_stats`` the batch statistics are
    used in both modes.

    Args:
        num_features (int): The number of features, the size of the last axis.
        eps (float, optional): Added to the variance for numerical stability.
            Default: ``1e-5``.
        momentum (float, optional): The weight of the new batch in the running estimates.
            Default: ``0.1``.
        affine (bool, optional): Whether to learn a per-feature scale ``weight`` and shift
            ``bias``. Default: ``True``.
        track_running_stats (bool, optional): Whether to keep the running estimates.
            Default: ``True``.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
    ):
        super().__init__()
        _check_eps("BatchNorm", eps)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(keys=["running_mean", "running_var"], recurse=False)

    def unfreeze(self, *args, **kwargs):
        """As :meth:`Module.unfreeze`, except that the running statistics stay frozen."""
        super().unfreeze(*args, **kwargs)
        if self.track_running_stats:
            self.freeze(keys=["running_mean", "running_var"], recurse=False)
        return self

    def _extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={'weight' in self}, track_running_stats={self.track_running_stats}"
        )

    def _calc_stats(self, x: mx.array, ddof: int = 0) -> Tuple[mx.array, mx.array]:
        """The per-feature mean and variance of ``x`` over every axis but the last.

        Args:
            x (array): The input.
            ddof (int): The variance divides by ``count - ddof``. Default: ``0``.

        Returns:
            tuple(array, array): The mean and the variance, each of shape ``(num_features,)``.
        """
        axes = tuple(range(x.ndim - 1))
        return mx.mean(x, axis=axes), mx.var(x, axis=axes, ddof=ddof)

    def __call__(self, x: mx.array) -> mx.array:
        """Normalises ``x`` (and, when training, updates the running statistics).

        Args:
            x (array): The input, ``NC``, ``NLC`` or ``NHWC``.

        Returns:
            array: The normalised input, of the same shape.
        """
        if not 2 <= x.ndim <= 4:
            raise ValueError(
                f"BatchNorm: the input must have 2, 3 or 4 dimensions (NC, NLC, NHWC), got ndim={x.ndim}")
        if self.training:
            count = 1
            for size in x.shape[:-1]:
                count *= size
            if count == 1:
                raise ValueError(
                    f"BatchNorm: training needs more than one value per feature; the input of "
                    f"shape {tuple(x.shape)} has {count}")

        mean, var = self._calc_stats(x)
        if self.track_running_stats:
            if self.training:
                m = self.momentum
                unbiased = self._calc_stats(x, ddof=1)[1]
                self.running_mean = (1 - m) * self.running_mean + m * mean
                self.running_var = (1 - m) * self.running_var + m * unbiased
            else:
                mean, var = self.running_mean, self.running_var

        y = (x - mean) * mx.rsqrt(var + self.eps)
        if "weight" in self:
            y = self.weight * y + self.bias
        return y
