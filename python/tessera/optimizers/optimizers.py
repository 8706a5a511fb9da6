"""The optimizers of ``mlx.optimizers``: the :class:`Optimizer` base and its update rules.

Every optimizer works leaf by leaf: :meth:`Optimizer.apply_gradients` walks the gradient tree
together with the parameter tree and the optimizer's state tree and calls
:meth:`Optimizer.apply_single` on each (gradient, parameter, per-parameter state) triple. The
state of an optimizer is one tree, :attr:`Optimizer.state`: ``"step"`` (a ``uint64`` count of
the updates applied so far), the scheduled or fixed hyper-parameters such as
``"learning_rate"`` (arrays), and, at each parameter's path, a dict of that parameter's arrays
(``{"m": ..., "v": ...}`` for Adam).

Everything an update computes is an array operation, so an update never waits for the device
and can be traced by :func:`tessera.core.compile`. The quantities that depend only on the step
and a dtype (the learning rate cast to the gradient's dtype, Adam's bias corrections, ...) are
computed once per :meth:`~Optimizer.apply_gradients` call and reused for every parameter.
"""

from typing import Callable, Optional, Tuple, Union

import tessera.core as mx
from tessera.optimizers._state_trees import _rebuild
from tessera.optimizers.base import Optimizer
# Adafactor and Muon treat parameters as matrices (matrix.py); named here as in MLX.
from tessera.optimizers.matrix import Adafactor, Muon
from tessera.utils import tree_map, tree_merge, tree_reduce

__all__ = [
    "Optimizer",
    "MultiOptimizer",
    "SGD",
    "RMSprop",
    "Adagrad",
    "AdaDelta",
    "Adam",
    "AdamW",
    "Adamax",
    "Lion",
    "Adafactor",
    "Muon",
    "clip_grad_norm",
]


class MultiOptimizer(Optimizer):
    """Updates different parameters with different optimizers.

    Each parameter goes to the first optimizer whose filter accepts it; a filter is called with
    the parameter's dotted path (as :func:`tessera.utils.tree_flatten` names it) and its
    gradient. The last optimizer takes every parameter no filter accepted and has no filter.

    Args:
        optimizers (list[Optimizer]): The optimizers to delegate to.
        filters (list[Callable[[str, array], bool]], optional): One predicate for each
            optimizer but the last. Default: none (a single optimizer).

    Example:
        >>> optimizer = optim.MultiOptimizer(
        ...     [optim.Muon(1e-2), optim.AdamW(1e-3)], [lambda path, g: g.ndim >= 2])
    """

    def __init__(self, optimizers, filters: Optional[list] = None):
        super().__init__()
        self._state = {}
        filters = list(filters or [])
        if len(filters) != len(optimizers) - 1:
            raise ValueError(
                f"Given {len(filters)} filters but {len(optimizers) - 1} needed."
            )
        self.optimizers = optimizers
        self.filters = filters + [lambda *args, **kwargs: True]

    def _split_dictionary(self, gradients: dict):
        """Splits ``gradients`` into one tree per optimizer (each keeps the containers on the
        way to its leaves; a sequence keeps its length, with ``{}`` where it has nothing)."""
        count = len(self.optimizers)
        if count == 1:
            return [gradients]
        filters = self.filters

        def split(node, path):
            # One subtree per optimizer, None where an optimizer gets nothing from ``node``.
            if isinstance(node, dict):
                children = [(k, split(v, f"{path}.{k}" if path else str(k))) for k, v in node.items()]
                parts = []
                for i in range(count):
                    part = {k: c[i] for k, c in children if c[i] is not None}
                    parts.append(part or None)
                return parts
            if isinstance(node, (list, tuple)):
                children = [split(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(node)]
                parts = []
                for i in range(count):
                    if all(c[i] is None for c in children):
                        parts.append(None)
                    else:
                        parts.append(_rebuild(node, [{} if c[i] is None else c[i] for c in children]))
                return parts
            parts = [None] * count
            for i, accept in enumerate(filters):
                if accept(path, node):
                    parts[i] = node
                    break
            return parts

        return [{} if part is None else part for part in split(gradients, "")]

    def init(self, parameters: dict):
        """Creates the state of every optimizer for the parameters it is given.

        Args:
            parameters (dict): A tree of parameters.
        """
        for optimizer, part in zip(self.optimizers, self._split_dictionary(parameters)):
            optimizer.init(part)

    def apply_gradients(self, gradients: dict, parameters: dict):
        """Returns the parameters after one update, each by its optimizer.

        Args:
            gradients (dict): A tree of gradients.
            parameters (dict): A tree of parameters holding at least the paths of
                ``gradients``.

        Returns:
            The updated parameters, in the structure of ``gradients``.
        """
        tree = {}
        for optimizer, part in zip(self.optimizers, self._split_dictionary(gradients)):
            tree = tree_merge(tree, optimizer.apply_gradients(part, parameters))
        return tree

    @property
    def state(self):
        """``{"states": [...]}``: the state of each optimizer, in order."""
        return {"states": [o.state for o in self.optimizers]}

    @state.setter
    def state(self, state: dict):
        if "states" not in state or len(state["states"]) != len(self.optimizers):
            got = len(state["states"]) if "states" in state else "no"
            raise ValueError(
                f"MultiOptimizer.state: expected {{'states': [...]}} with one state per optimizer "
                f"({len(self.optimizers)}), got {got} states")
        for optimizer, s in zip(self.optimizers, state["states"]):
            optimizer.state = s

    @property
    def step(self):
        """The step count of the first optimizer."""
        return self.optimizers[0].step

    @property
    def learning_rate(self):
        """The learning rate of the first optimizer; assigning sets every optimizer's."""
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array]):
        for optimizer in self.optimizers:
            optimizer.learning_rate = learning_rate


class SGD(Optimizer):
    r"""Stochastic gradient descent, with optional momentum and weight decay.

    With momentum :math:`\mu`, dampening :math:`\tau` and learning rate :math:`\lambda`:

    .. math::

        v_{t+1} &= \mu v_t + (1 - \tau) g_t \\
        w_{t+1} &= w_t - \lambda v_{t+1}

    Nesterov momentum steps with :math:`g_t + \mu v_{t+1}` instead of :math:`v_{t+1}`. Weight
    decay adds :math:`\text{weight\_decay} \cdot w_t` to the gradient first.

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`, or a schedule.
        momentum (float, optional): The momentum :math:`\mu`. Default: ``0``
        weight_decay (float, optional): The L2 penalty added to the gradient. Default: ``0``
        dampening (float, optional): The dampening :math:`\tau` of the momentum. Default: ``0``
        nesterov (bool, optional): Use Nesterov momentum (needs ``momentum > 0`` and no
            dampening). Default: ``False``
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array]],
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
    ):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                "Nesterov momentum requires a momentum and zero dampening "
                f"(got momentum={momentum}, dampening={dampening})."
            )
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def init_single(self, parameter: mx.array, state: dict):
        """Creates the momentum buffer ``v`` (zeros)."""
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after one SGD step; stores the momentum in ``state["v"]``."""
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        lr = self._lr(gradient.dtype)
        if self.momentum <= 0:
            return parameter - lr * gradient

        v = self.momentum * state.get("v")
        if self.dampening > 0:
            v = v + (1 - self.dampening) * gradient
        else:
            v = v + gradient
        state["v"] = v
        step = gradient + self.momentum * v if self.nesterov else v
        return parameter - lr * step


class RMSprop(Optimizer):
    r"""RMSprop (Tieleman and Hinton, 2012): steps scaled by a running RMS of the gradients.

    .. math::

        v_{t+1} &= \alpha v_t + (1 - \alpha) g_t^2 \\
        w_{t+1} &= w_t - \lambda \frac{g_t}{\sqrt{v_{t+1}} + \epsilon}

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`, or a schedule.
        alpha (float, optional): The smoothing constant :math:`\alpha`. Default: ``0.99``
        eps (float, optional): The :math:`\epsilon` added to the denominator; must be
            positive. Default: ``1e-8``
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array]],
        alpha: float = 0.99,
        eps: float = 1e-8,
    ):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.alpha = alpha
        self.eps = eps
        if self.alpha < 0.0:
            raise ValueError(f"RMSprop alpha should be >=0, {self.alpha} was provided instead")
        if self.eps <= 0.0:
            raise ValueError(f"RMSprop epsilon should be >0, {self.eps} was provided instead")

    def init_single(self, parameter: mx.array, state: dict):
        """Creates the running mean of squared gradients ``v`` (zeros)."""
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after one RMSprop step; stores ``v`` in ``state``."""
        alpha = self.alpha
        v = alpha * state["v"] + (1 - alpha) * mx.square(gradient)
        state["v"] = v
        return parameter - self._lr(gradient.dtype) * gradient / (mx.sqrt(v) + self.eps)


class Adagrad(Optimizer):
    r"""Adagrad (Duchi, Hazan and Singer, 2011): steps scaled by the root of the sum of all
    squared gradients so far.

    .. math::

        v_{t+1} &= v_t + g_t^2 \\
        w_{t+1} &= w_t - \lambda \frac{g_t}{\sqrt{v_{t+1}} + \epsilon}

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`, or a schedule.
        eps (float, optional): The :math:`\epsilon` added to the denominator; must be
            positive. Default: ``1e-8``
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array]],
        eps: float = 1e-8,
    ):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        if self.eps <= 0.0:
            raise ValueError(f"Adagrad epsilon should be >0, {self.eps} was provided instead")

    def init_single(self, parameter: mx.array, state: dict):
        """Creates the sum of squared gradients ``v`` (zeros)."""
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after one Adagrad step; stores ``v`` in ``state``."""
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - self._lr(gradient.dtype) * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    r"""AdaDelta (Zeiler, 2012), with a learning rate.

    .. math::

        v_{t+1} &= \rho v_t + (1 - \rho) g_t^2 \\
        \Delta w_{t+1} &= \frac{\sqrt{u_t + \epsilon}}{\sqrt{v_{t+1} + \epsilon}} g_t \\
        u_{t+1} &= \rho u_t + (1 - \rho) \Delta w_{t+1}^2 \\
        w_{t+1} &= w_t - \lambda \Delta w_{t+1}

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`, or a schedule.
        rho (float, optional): The decay :math:`\rho` of both running averages.
            Default: ``0.9``
        eps (float, optional): The :math:`\epsilon` inside the square roots; must be
            positive. Default: ``1e-6``
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array]],
        rho: float = 0.9,
        eps: float = 1e-6,
    ):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.rho = rho
        self.eps = eps
        if self.rho < 0.0:
            raise ValueError(f"AdaDelta rho should be >=0, {self.rho} was provided instead")
        if self.eps <= 0.0:
            raise ValueError(f"AdaDelta epsilon should be >0, {self.eps} was provided instead")

    def init_single(self, parameter: mx.array, state: dict):
        """Creates the running averages ``v`` (squared gradients) and ``u`` (squared steps)."""
        state["v"] = mx.zeros_like(parameter)
        state["u"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after one AdaDelta step; stores ``v`` and ``u`` in ``state``."""
        rho, eps = self.rho, self.eps
        u = state["u"]
        v = rho * state["v"] + (1 - rho) * mx.square(gradient)
        delta = mx.sqrt(u + eps) / mx.sqrt(v + eps) * gradient
        state["v"] = v
        state["u"] = rho * u + (1 - rho) * mx.square(delta)
        return parameter - self._lr(gradient.dtype) * delta


class Adam(Optimizer):
    r"""Adam (Kingma and Ba, 2015).

    .. math::

        m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t \\
        v_{t+1} &= \beta_2 v_t + (1 - \beta_2) g_t^2 \\
        w_{t+1} &= w_t - \lambda \frac{m_{t+1}}{\sqrt{v_{t+1}} + \epsilon}

    With ``bias_correction``, :math:`m_{t+1}` is divided by :math:`1 - \beta_1^{t+1}` and
    :math:`\sqrt{v_{t+1}}` by :math:`\sqrt{1 - \beta_2^{t+1}}` (the ``eps`` is added after).

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`, or a schedule.
        betas (Tuple[float, float], optional): The decays :math:`(\beta_1, \beta_2)` of the
            running averages of the gradient and of its square, each in ``[0, 1)``.
            Default: ``(0.9, 0.999)``
        eps (float, optional): The :math:`\epsilon` added to the denominator; at least 0.
            Default: ``1e-8``
        bias_correction (bool, optional): Correct the bias of the running averages towards
            zero. Default: ``False``
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array]],
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        bias_correction: bool = False,
    ):
        super().__init__()
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(
                    f"Adam beta{i + 1} should be in [0, 1), {beta} was provided instead"
                )
        if not 0.0 <= eps:
            raise ValueError(f"Adam: eps must be at least 0, got {eps}")
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = list(betas)
        self.eps = eps
        self.bias_correction = bias_correction

    def init_single(self, parameter: mx.array, state: dict):
        """Creates the running averages ``m`` (gradient) and ``v`` (squared gradient)."""
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def _corrections(self, dtype):
        # (learning rate / (1 - b1^t), 1 / sqrt(1 - b2^t)), both in ``dtype``.
        def make():
            b1, b2 = self.betas
            step = self.step
            lr = self._lr(dtype)
            return (
                (lr / (1 - b1**step)).astype(dtype),
                mx.rsqrt(1 - b2**step).astype(dtype),
            )

        return self._per_step(("adam_bias", dtype), make)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after one Adam step; stores ``m`` and ``v`` in ``state``."""
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = b2 * state["v"] + (1 - b2) * mx.square(gradient)
        state["m"] = m
        state["v"] = v
        if self.bias_correction:
            c1, c2 = self._corrections(gradient.dtype)
            return parameter - (c1 * m) / (mx.sqrt(v) * c2 + self.eps)
        return parameter - self._lr(gradient.dtype) * m / (mx.sqrt(v) + self.eps)


class AdamW(Adam):
    r"""AdamW (Loshchilov and Hutter, 2019): Adam with decoupled weight decay.

    The parameter is first shrunk by :math:`1 - \alpha\lambda`, then takes Adam's step:

    .. math::

        m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t \\
        v_{t+1} &= \beta_2 v_t + (1 - \beta_2) g_t^2 \\
        w_{t+1} &= w_t - \alpha \left(\frac{m_{t+1}}{\sqrt{v_{t+1}} + \epsilon}
                   + \lambda w_t\right)

    Args:
        learning_rate (float or callable): The learning rate :math:`\alpha`, or a schedule.
        betas (Tuple[float, float], optional): The decays :math:`(\beta_1, \beta_2)` of the
            running averages. Default: ``(0.9, 0.999)``
        eps (float, optional): The :math:`\epsilon` added to the denominator.
            Default: ``1e-8``
        weight_decay (float, optional): The weight decay :math:`\lambda`. Default: ``0.01``
        bias_correction (bool, optional): Correct the bias of the running averages.
            Default: ``False``
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array]],
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        bias_correction: bool = False,
    ):
        super().__init__(
            learning_rate=learning_rate,
            betas=betas,
            eps=eps,
            bias_correction=bias_correction,
        )
        self.weight_decay = weight_decay

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after the decay and one Adam step."""
        dtype = gradient.dtype
        shrink = self._per_step(
            ("adamw_shrink", dtype), lambda: 1 - self._lr(dtype) * self.weight_decay
        )
        return super().apply_single(gradient, parameter * shrink, state)


class Adamax(Adam):
    r"""Adamax (Kingma and Ba, 2015): Adam with an infinity-norm second moment.

    .. math::

        m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t \\
        v_{t+1} &= \max(\beta_2 v_t, |g_t|) \\
        w_{t+1} &= w_t - \lambda \frac{m_{t+1}}{v_{t+1} + \epsilon}

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`, or a schedule.
        betas (Tuple[float, float], optional): The decays :math:`(\beta_1, \beta_2)` of the
            running average of the gradient and of the infinity norm.
            Default: ``(0.9, 0.999)``
        eps (float, optional): The :math:`\epsilon` added to the denominator.
            Default: ``1e-8``
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array]],
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        super().__init__(learning_rate, betas, eps)

    def init_single(self, parameter: mx.array, state: dict):
        """Creates ``m`` (running average of the gradient) and ``v`` (the decayed maximum)."""
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after one Adamax step; stores ``m`` and ``v`` in ``state``."""
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = mx.maximum(b2 * state["v"], mx.abs(gradient))
        state["m"] = m
        state["v"] = v
        return parameter - self._lr(gradient.dtype) * m / (v + self.eps)


class Lion(Optimizer):
    r"""Lion (Chen et al., 2023): steps by the sign of an interpolated momentum.

    Its steps have a larger norm than SGD's or Adam's: a learning rate 3-10x smaller and a
    weight decay 3-10x larger than AdamW's keep ``lr * weight_decay`` comparable.

    .. math::

        c_{t + 1} &= \beta_1 m_t + (1 - \beta_1) g_t \\
        m_{t + 1} &= \beta_2 m_t + (1 - \beta_2) g_t \\
        w_{t + 1} &= w_t - \eta (\text{sign}(c_{t+1}) + \lambda w_t)

    Args:
        learning_rate (float or callable): The learning rate :math:`\eta`, or a schedule.
        betas (Tuple[float, float], optional): :math:`(\beta_1, \beta_2)`, for the step
            direction and for the momentum, each in ``[0, 1)``. Default: ``(0.9, 0.99)``
        weight_decay (float, optional): The weight decay :math:`\lambda`. Default: ``0.0``
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array]],
        betas: Tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
    ):
        super().__init__()
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(
                    f"Lion beta{i + 1} should be in [0, 1), {beta} was provided instead"
                )
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = list(betas)
        self.weight_decay = weight_decay

    def init_single(self, parameter: mx.array, state: dict):
        """Creates the momentum ``m`` (zeros)."""
        state["m"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after one Lion step; stores ``m`` in ``state``."""
        dtype = gradient.dtype
        lr = self._lr(dtype)
        b1, b2 = self.betas
        m = state["m"]
        direction = b1 * m + (1 - b1) * gradient
        state["m"] = b2 * m + (1 - b2) * gradient
        if self.weight_decay > 0:
            shrink = self._per_step(("lion_shrink", dtype), lambda: 1 - lr * self.weight_decay)
            parameter = shrink * parameter
        return parameter - lr * mx.sign(direction)


def clip_grad_norm(grads, max_norm):
    """Scales a tree of gradients down so that its global L2 norm is at most ``max_norm``.

    The global norm is the square root of the sum of the squares of every element of every
    gradient. Gradients whose norm is already below ``max_norm`` are multiplied by (almost
    exactly) one.

    Args:
        grads (dict): A tree of gradient arrays.
        max_norm (float): The largest global norm to allow; at least 0.

    Returns:
        (dict, array): The rescaled gradients and the global norm before rescaling.

    Example:
        >>> grads = {"w1": mx.array([2.0, 3.0]), "w2": mx.array([1.0])}
        >>> clipped, norm = optim.clip_grad_norm(grads, max_norm=2.0)
    """
    if max_norm < 0:
        raise ValueError(f"clip_grad_norm: max_norm must be at least 0, got {max_norm}")
    squared = tree_reduce(lambda total, g: total + g.square().sum(), grads, 0.0)
    total_norm = mx.sqrt(squared)
    factor = mx.minimum(max_norm / (total_norm + 1e-6), 1.0)
    return tree_map(lambda g: g * factor, grads), total_norm

