"""Dropout layers: ``Dropout`` (element-wise), ``Dropout2d`` and ``Dropout3d`` (whole channels)."""

import tessera.core as mx
from tessera.nn.layers.base import Module


def _keep_probability(layer: str, p: float) -> float:
    """``1 - p`` after checking that ``p`` is a probability in ``[0, 1)``."""
    if not 0 <= p < 1:
        raise ValueError(f"{layer}: the drop probability p={p} must lie in [0, 1)")
    return 1 - p


def _drop(x: mx.array, keep: float, mask_shape) -> mx.array:
    # Keep each mask entry with probability `keep`; scaling the survivors by 1 / keep leaves
    # the expected value of every element unchanged. The Python scalar keeps x's dtype.
    mask = mx.random.bernoulli(keep, mask_shape)
    return (mask * x) * (1 / keep)


class Dropout(Module):
    r"""Zeroes each element independently with probability ``p`` while training.

    The elements that survive are multiplied by :math:`\frac{1}{1-p}`, so that every element
    keeps its expected value. In evaluation mode (after :meth:`Module.eval`) the layer returns
    its input unchanged.

    Args:
        p (float): The probability of zeroing an element, in ``[0, 1)``. Default: ``0.5``.
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        self._p_1 = _keep_probability("Dropout", p)

    def _extra_repr(self) -> str:
        return f"p={1 - self._p_1}"

    def __call__(self, x: mx.array) -> mx.array:
        if self._p_1 == 1 or not self.training:
            return x
        return _drop(x, self._p_1, x.shape)


class Dropout2d(Module):
    r"""Zeroes whole channels independently with probability ``p`` while training.

    The input is channels-last, ``NHWC`` or ``HWC``: one draw decides each channel of each
    sample for every position ``(H, W)`` at once. Surviving channels are multiplied by
    :math:`\frac{1}{1-p}`. Dropping whole feature maps suits early convolutional layers, whose
    neighbouring pixels are strongly correlated, so that dropping single pixels hardly
    regularises (Tompson et al., *Efficient Object Localization Using Convolutional Networks*,
    CVPR 2015).

    Args:
        p (float): The probability of zeroing a channel, in ``[0, 1)``. Default: ``0.5``.
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        self._p_1 = _keep_probability("Dropout2d", p)

    def _extra_repr(self) -> str:
        return f"p={1 - self._p_1}"

    def __call__(self, x: mx.array) -> mx.array:
        if x.ndim not in (3, 4):
            raise ValueError(
                f"Dropout2d: expected an input with 3 (HWC) or 4 (NHWC) dimensions, got ndim={x.ndim}")
        if self._p_1 == 1 or not self.training:
            return x
        # One draw per (sample, channel): the two spatial axes get size 1.
        shape = list(x.shape)
        shape[-3] = shape[-2] = 1
        return _drop(x, self._p_1, shape)


class Dropout3d(Module):
    r"""Zeroes whole channels of volumetric inputs with probability ``p`` while training.

    The input is channels-last, ``NDHWC`` or ``DHWC``: one draw decides each channel of each
    sample for every position ``(D, H, W)``. Surviving channels are multiplied by
    :math:`\frac{1}{1-p}`. Useful for 3D convolutions (video, medical volumes).

    Args:
        p (float): The probability of zeroing a channel, in ``[0, 1)``. Default: ``0.5``.
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        self._p_1 = _keep_probability("Dropout3d", p)

    def _extra_repr(self) -> str:
        return f"p={1 - self._p_1}"

    def __call__(self, x: mx.array) -> mx.array:
        if x.ndim not in (4, 5):
            raise ValueError(
                f"Dropout3d: expected an input with 4 (DHWC) or 5 (NDHWC) dimensions, got ndim={x.ndim}")
        if self._p_1 == 1 or not self.training:
            return x
        shape = list(x.shape)
        shape[-4] = shape[-3] = shape[-2] = 1
        return _drop(x, self._p_1, shape)
