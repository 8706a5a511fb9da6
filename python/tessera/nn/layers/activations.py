"""Activation functions and their ``Module`` wrappers, as in ``mlx.nn.layers.activations``.

The element-wise functions are compiled with ``mx.compile(shapeless=True)`` wherever MLX
compiles them, so a call fuses into one kernel and is not retraced when the input shape
changes. Each class calls the function of the same name; classes with settings keep them as
plain attributes, and ``PReLU`` keeps its slopes as the parameter ``weight``.
"""

import math
from functools import partial
from typing import Any

import tessera.core as mx
from tessera.nn.layers.base import Module

__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "SELU",
    "HardShrink",
    "Hardswish",
    "HardTanh",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "Mish",
    "PReLU",
    "ReLU",
    "ReLU2",
    "ReLU6",
    "Sigmoid",
    "SiLU",
    "Softmax",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Step",
    "Tanh",
    "celu",
    "elu",
    "gelu",
    "gelu_approx",
    "gelu_fast_approx",
    "glu",
    "hard_shrink",
    "hard_tanh",
    "hardswish",
    "leaky_relu",
    "log_sigmoid",
    "log_softmax",
    "mish",
    "prelu",
    "relu",
    "relu2",
    "relu6",
    "selu",
    "sigmoid",
    "silu",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "step",
    "tanh",
]

_compiled = partial(mx.compile, shapeless=True)


# ---------------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------------


@_compiled
def sigmoid(x):
    r"""Applies the logistic sigmoid :math:`\sigma(x) = 1 / (1 + e^{-x})` element-wise.

    Args:
        x (array): The input.

    Returns:
        array: ``mx.sigmoid(x)``.
    """
    return mx.sigmoid(x)


@_compiled
def relu(x):
    r"""Applies the rectified linear unit :math:`\max(x, 0)` element-wise.

    Args:
        x (array): The input.

    Returns:
        array: ``mx.maximum(x, 0)``.
    """
    return mx.maximum(x, 0)


@_compiled
def relu2(x):
    r"""Applies the squared ReLU :math:`\max(x, 0)^2` element-wise.

    Args:
        x (array): The input.

    Returns:
        array: The squared rectified input.
    """
    return mx.square(mx.maximum(x, 0))


@_compiled
def relu6(x):
    r"""Applies ReLU capped at six, :math:`\min(\max(x, 0), 6)`, element-wise.

    Args:
        x (array): The input.

    Returns:
        array: The input clamped to ``[0, 6]``.
    """
    return mx.minimum(mx.maximum(x, 0), 6.0)


@_compiled
def leaky_relu(x, negative_slope=0.01):
    r"""Applies the leaky ReLU :math:`\max(\text{negative\_slope} \cdot x, x)` element-wise.

    Args:
        x (array): The input.
        negative_slope (float, optional): The slope for negative inputs. Default: ``0.01``.

    Returns:
        array: The leaky-rectified input.
    """
    return mx.maximum(negative_slope * x, x)


@_compiled
def log_softmax(x, axis=-1):
    r"""Applies the log of the softmax, :math:`x_i - \log \sum_j e^{x_j}`, along ``axis``.

    Args:
        x (array): The input.
        axis (int, optional): The axis to normalise over. Default: ``-1``.

    Returns:
        array: Log-probabilities of the input's shape.
    """
    # Subtract the maximum before normalising: for large inputs, adding the log-sum-exp to
    # the maximum would round away the small normaliser that is to be subtracted.
    x = x - mx.stop_gradient(mx.max(x, axis=axis, keepdims=True))
    return x - mx.logsumexp(x, axis=axis, keepdims=True)


@_compiled
def elu(x, alpha=1.0):
    r"""Applies the exponential linear unit element-wise.

    The result is :math:`x` for positive inputs and :math:`\alpha (e^x - 1)` elsewhere.

    Args:
        x (array): The input.
        alpha (float, optional): The scale of the negative part. Default: ``1.0``.

    Returns:
        array: ``mx.where(x > 0, x, alpha * (mx.exp(x) - 1))``.
    """
    return mx.where(x > 0, x, alpha * (mx.exp(x) - 1))


@_compiled
def softmax(x, axis=-1):
    r"""Applies the softmax :math:`e^{x_i} / \sum_j e^{x_j}` along ``axis``.

    Args:
        x (array): The input.
        axis (int, optional): The axis to normalise over. Default: ``-1``.

    Returns:
        array: Probabilities of the input's shape.
    """
    return mx.softmax(x, axis=axis)


@_compiled
def softplus(x):
    r"""Applies the softplus :math:`\log(1 + e^x)` element-wise, without overflow.

    Args:
        x (array): The input.

    Returns:
        array: ``mx.logaddexp(x, 0)``.
    """
    return mx.logaddexp(x, 0)


@_compiled
def softsign(x):
    r"""Applies the softsign :math:`x / (1 + |x|)` element-wise.

    Args:
        x (array): The input.

    Returns:
        array: The softsign of the input.
    """
    return mx.divide(x, 1 + mx.abs(x))


@_compiled
def softshrink(x, lambd: float = 0.5):
    r"""Applies soft shrinkage element-wise.

    Inputs within :math:`[-\lambda, \lambda]` become zero; the others move :math:`\lambda`
    towards zero.

    Args:
        x (array): The input.
        lambd (float, optional): The shrinkage :math:`\lambda`. Default: ``0.5``.

    Returns:
        array: The shrunk input.
    """
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


@_compiled
def celu(x, alpha=1.0):
    r"""Applies the continuously differentiable exponential linear unit element-wise.

    .. math::
        \max(0, x) + \min(0, \alpha (e^{x / \alpha} - 1))

    Args:
        x (array): The input.
        alpha (float, optional): The :math:`\alpha` of the formula. Default: ``1.0``.

    Returns:
        array: The CELU of the input.
    """
    # exp of min(x, 0) keeps the unused branch from overflowing for large positive x.
    return mx.maximum(x, 0.0) + alpha * (mx.exp(mx.minimum(x, 0.0) / alpha) - 1)


@_compiled
def silu(x):
    r"""Applies the sigmoid linear unit (swish) :math:`x \sigma(x)` element-wise.

    Args:
        x (array): The input.

    Returns:
        array: ``x * mx.sigmoid(x)``.
    """
    return x * mx.sigmoid(x)


@_compiled
def log_sigmoid(x):
    r"""Applies :math:`\log \sigma(x) = -\log(1 + e^{-x})` element-wise, without overflow.

    Args:
        x (array): The input.

    Returns:
        array: The log-sigmoid of the input.
    """
    return -softplus(-x)


@_compiled
def gelu(x) -> mx.array:
    r"""Applies the Gaussian error linear unit :math:`x \Phi(x)` element-wise.

    :math:`\Phi` is the standard normal CDF, computed exactly with ``erf``. See
    :func:`gelu_approx` and :func:`gelu_fast_approx` for cheaper approximations.

    Args:
        x (array): The input.

    Returns:
        array: The GELU of the input.
    """
    return x * (1 + mx.erf(x / math.sqrt(2))) / 2


@_compiled
def gelu_approx(x):
    r"""Applies the tanh approximation of :func:`gelu` element-wise.

    .. math::
        0.5 x \left(1 + \tanh\left(\sqrt{2 / \pi}\,(x + 0.044715 x^3)\right)\right)

    It is within ``0.0005`` of the exact GELU on ``[-6, 6]``.

    Args:
        x (array): The input.

    Returns:
        array: The approximate GELU of the input.
    """
    return 0.5 * x * (1 + mx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@_compiled
def gelu_fast_approx(x):
    r"""Applies the sigmoid approximation :math:`x \sigma(1.702 x)` of :func:`gelu`.

    It is within ``0.015`` of the exact GELU on ``[-6, 6]`` (Hendrycks and Gimpel, 2016,
    "Gaussian Error Linear Units").

    Args:
        x (array): The input.

    Returns:
        array: The fast approximate GELU of the input.
    """
    return x * mx.sigmoid(1.702 * x)


def glu(x: mx.array, axis: int = -1) -> mx.array:
    r"""Applies the gated linear unit.

    ``axis`` is cut into two equal halves :math:`a` and :math:`b`, and the result is
    :math:`a \sigma(b)`.

    Args:
        x (array): The input; its ``axis`` dimension must be even.
        axis (int, optional): The axis to split. Default: ``-1``.

    Returns:
        array: The gated output, half the input's size along ``axis``.
    """
    a, b = mx.split(x, indices_or_sections=2, axis=axis)
    return a * mx.sigmoid(b)


@_compiled
def step(x: mx.array, threshold: float = 0.0):
    r"""Applies a binary step: ``1`` where ``x >= threshold`` and ``0`` elsewhere.

    Args:
        x (array): The input.
        threshold (float, optional): The smallest input that maps to ``1``. Default: ``0.0``.

    Returns:
        array: An integer array of zeros and ones.
    """
    return mx.where(x >= threshold, 1, 0)


@_compiled
def selu(x):
    r"""Applies the scaled exponential linear unit element-wise.

    The result is :math:`\lambda x` for positive inputs and
    :math:`\lambda \alpha (e^x - 1)` elsewhere, with :math:`\lambda = 1.0507` and
    :math:`\alpha = 1.67326`. See also :func:`elu`.

    Args:
        x (array): The input.

    Returns:
        array: The SELU of the input.
    """
    return elu(x, 1.67326) * 1.0507


@_compiled
def prelu(x: mx.array, alpha: mx.array) -> mx.array:
    r"""Applies the parametric ReLU :math:`\max(0, x) + a \min(0, x)` element-wise.

    Args:
        x (array): The input.
        alpha (array): The negative slopes :math:`a`, broadcast against ``x``.

    Returns:
        array: The parametric-rectified input.
    """
    return mx.maximum(0, x) + alpha * mx.minimum(0, x)


@_compiled
def mish(x: mx.array) -> mx.array:
    r"""Applies Mish, :math:`x \tanh(\operatorname{softplus}(x))`, element-wise.

    Reference: Misra, 2019, "Mish: A Self Regularized Non-Monotonic Activation Function"
    (https://arxiv.org/abs/1908.08681).

    Args:
        x (array): The input.

    Returns:
        array: The Mish of the input.
    """
    return x * mx.tanh(softplus(x))


@_compiled
def hardswish(x):
    r"""Applies the hard swish :math:`x \min(\max(x + 3, 0), 6) / 6` element-wise.

    Args:
        x (array): The input.

    Returns:
        array: The hard swish of the input.
    """
    gate = mx.minimum(mx.maximum(x + 3, 0), 6)
    return x * gate / 6


@_compiled
def hard_tanh(x, min_val=-1.0, max_val=1.0):
    r"""Clamps the input to ``[min_val, max_val]`` element-wise.

    Args:
        x (array): The input.
        min_val (float, optional): The lower bound. Default: ``-1.0``.
        max_val (float, optional): The upper bound. Default: ``1.0``.

    Returns:
        array: :math:`\min(\max(x, \text{min\_val}), \text{max\_val})`.
    """
    return mx.minimum(mx.maximum(x, min_val), max_val)


@_compiled
def hard_shrink(x, lambd=0.5):
    r"""Applies hard shrinkage: inputs with :math:`|x| \le \lambda` become zero.

    Args:
        x (array): The input.
        lambd (float, optional): The threshold :math:`\lambda`. Default: ``0.5``.

    Returns:
        array: The input with its small entries zeroed.
    """
    return mx.where(mx.abs(x) > lambd, x, 0)


@_compiled
def softmin(x, axis=-1):
    r"""Applies the softmin :math:`e^{-x_i} / \sum_j e^{-x_j}` along ``axis``.

    Args:
        x (array): The input.
        axis (int, optional): The axis to normalise over. Default: ``-1``.

    Returns:
        array: ``mx.softmax(-x, axis=axis)``.
    """
    return mx.softmax(-x, axis=axis)


def tanh(x):
    """Applies the hyperbolic tangent element-wise.

    Args:
        x (array): The input.

    Returns:
        array: ``mx.tanh(x)``.
    """
    return mx.tanh(x)


# ---------------------------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------------------------


def _calls(function):
    """Class decorator: give a settings-free activation module a ``__call__`` of ``function``."""

    def attach(cls):
        def __call__(self, x):
            return function(x)

        __call__.__doc__ = f"Returns ``{function.__name__}(x)``."
        cls.__call__ = __call__
        return cls

    return attach


class GLU(Module):
    r"""Applies the gated linear unit :math:`a \sigma(b)`.

    See :func:`glu`.

    Args:
        axis (int, optional): The axis to split into the halves :math:`a` and :math:`b`.
            Default: ``-1``.
    """

    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = axis

    def __call__(self, x) -> Any:
        return glu(x=x, axis=self.axis)


@_calls(sigmoid)
class Sigmoid(Module):
    r"""Applies the logistic sigmoid element-wise. See :func:`sigmoid`."""


@_calls(mish)
class Mish(Module):
    r"""Applies Mish, :math:`x \tanh(\operatorname{softplus}(x))`. See :func:`mish`."""


@_calls(relu)
class ReLU(Module):
    r"""Applies the rectified linear unit :math:`\max(x, 0)`. See :func:`relu`."""


@_calls(relu2)
class ReLU2(Module):
    r"""Applies the squared ReLU :math:`\max(x, 0)^2`. See :func:`relu2`."""


@_calls(relu6)
class ReLU6(Module):
    r"""Applies ReLU capped at six. See :func:`relu6`."""


class LeakyReLU(Module):
    r"""Applies the leaky ReLU :math:`\max(\text{negative\_slope} \cdot x, x)`.

    See :func:`leaky_relu`.

    Args:
        negative_slope (float, optional): The slope for negative inputs. Default: ``1e-2``.
    """

    def __init__(self, negative_slope=1e-2):
        super().__init__()
        self._negative_slope = negative_slope

    def __call__(self, x):
        return leaky_relu(x, self._negative_slope)


class ELU(Module):
    r"""Applies the exponential linear unit. See :func:`elu`.

    Args:
        alpha (float, optional): The scale of the negative part. Default: ``1.0``.
    """

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return elu(x, self._alpha)


@_calls(softmax)
class Softmax(Module):
    r"""Applies the softmax over the last axis. See :func:`softmax`."""


@_calls(softplus)
class Softplus(Module):
    r"""Applies the softplus :math:`\log(1 + e^x)`. See :func:`softplus`."""


@_calls(softsign)
class Softsign(Module):
    r"""Applies the softsign :math:`x / (1 + |x|)`. See :func:`softsign`."""


class Softshrink(Module):
    r"""Applies soft shrinkage. See :func:`softshrink`.

    Args:
        lambd (float, optional): The shrinkage :math:`\lambda`. Default: ``0.5``.
    """

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return softshrink(x, self.lambd)


class CELU(Module):
    r"""Applies the continuously differentiable exponential linear unit. See :func:`celu`.

    Args:
        alpha (float, optional): The :math:`\alpha` of the formula. Default: ``1.0``.
    """

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return celu(x, self._alpha)


@_calls(silu)
class SiLU(Module):
    r"""Applies the sigmoid linear unit (swish) :math:`x \sigma(x)`. See :func:`silu`."""


@_calls(log_softmax)
class LogSoftmax(Module):
    r"""Applies the log-softmax over the last axis. See :func:`log_softmax`."""


@_calls(log_sigmoid)
class LogSigmoid(Module):
    r"""Applies :math:`\log \sigma(x)`. See :func:`log_sigmoid`."""


class PReLU(Module):
    r"""Applies the parametric ReLU :math:`\max(0, x) + a \min(0, x)` with learnt :math:`a`.

    The slopes are the parameter ``weight``, of shape ``(num_parameters,)``, broadcast
    against the input's last axis. See :func:`prelu`.

    Args:
        num_parameters (int, optional): How many slopes to learn. Default: ``1``.
        init (float, optional): The slopes' initial value. Default: ``0.25``.
    """

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.weight = mx.full([num_parameters], init)

    def __call__(self, x: mx.array):
        return prelu(x, self.weight)


class GELU(Module):
    r"""Applies the Gaussian error linear unit, exactly or approximately.

    ``approx`` selects the formula: ``'none'`` is the exact :func:`gelu`, ``'precise'`` (or
    its PyTorch-style alias ``'tanh'``) is :func:`gelu_approx`, and ``'fast'`` is
    :func:`gelu_fast_approx`.

    Args:
        approx (str, optional): ``'none'``, ``'precise'``, ``'tanh'`` or ``'fast'``.
            Default: ``'none'``.
    """

    def __init__(self, approx="none"):
        super().__init__()
        choices = ["none", "precise", "tanh", "fast"]
        if approx not in choices:
            raise ValueError(
                f"The approximation should be in {choices} but '{approx}' was given"
            )
        self._approx = approx

    def __call__(self, x):
        if self._approx == "none":
            return gelu(x)
        if self._approx in ("precise", "tanh"):
            return gelu_approx(x)
        return gelu_fast_approx(x)


@_calls(tanh)
class Tanh(Module):
    r"""Applies the hyperbolic tangent. See :func:`tanh`."""


@_calls(hardswish)
class Hardswish(Module):
    r"""Applies the hard swish. See :func:`hardswish`."""


class Step(Module):
    r"""Applies a binary step: ``1`` where ``x >= threshold`` and ``0`` elsewhere.

    See :func:`step`.

    Args:
        threshold (float, optional): The smallest input that maps to ``1``. Default: ``0.0``.
    """

    def __init__(self, threshold: float = 0.0):
        super().__init__()
        self.threshold = threshold

    def __call__(self, x: mx.array):
        return step(x, self.threshold)


@_calls(selu)
class SELU(Module):
    r"""Applies the scaled exponential linear unit. See :func:`selu`."""


@_calls(hard_tanh)
class HardTanh(Module):
    r"""Clamps the input to ``[-1, 1]``. See :func:`hard_tanh`."""


class HardShrink(Module):
    r"""Applies hard shrinkage. See :func:`hard_shrink`.

    Args:
        lambd (float, optional): The threshold :math:`\lambda`. Default: ``0.5``.
    """

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return hard_shrink(x, self.lambd)


@_calls(softmin)
class Softmin(Module):
    r"""Applies the softmin over the last axis. See :func:`softmin`."""
