"""The optimizers of ``mlx.optimizers`` that treat a parameter as a matrix: :class:`Adafactor`
(a factored second moment: row and column averages instead of one value per element) and
:class:`Muon` (momentum orthogonalised by Newton-Schulz iterations). Built on
:class:`tessera.optimizers.base.Optimizer`.
"""

from typing import Callable, Optional, Tuple, Union

import tessera.core as mx
from tessera.optimizers.base import Optimizer

__all__ = ["Adafactor", "Muon"]


class Adafactor(Optimizer):
    r"""Adafactor (Shazeer and Stern, 2018): adaptive steps with a factored second moment.

    For parameters of 2 or more dimensions the running average of the squared gradient is kept
    as its row and column means only (over the last two axes), which takes sublinear memory.

    Args:
        learning_rate (float or callable, optional): The learning rate, used when
            ``relative_step`` is ``False``. Default: ``None``.
        eps (tuple(float, float), optional): :math:`(\epsilon_1, \epsilon_2)`: :math:`\epsilon_1`
            is added to the squared gradient, :math:`\epsilon_2` is the smallest parameter
            scale when ``scale_parameter`` is set. Default: ``(1e-30, 1e-3)``.
        clip_threshold (float, optional): The RMS above which the unscaled update is scaled
            down. Default: ``1.0``.
        decay_rate (float, optional): The exponent :math:`c` of the second-moment decay
            :math:`\beta_2 = 1 - t^{c}`. Default: ``-0.8``.
        beta_1 (float, optional): If given, the decay of a running average of the updates
            (a first moment). Default: ``None``.
        weight_decay (float, optional): The weight decay :math:`\lambda`. Default: ``0.0``.
        scale_parameter (bool, optional): Scale the step size by
            :math:`\max(\epsilon_2, \text{RMS}(w_{t-1}))`. Default: ``True``.
        relative_step (bool, optional): Ignore ``learning_rate`` and use the relative step
            size :math:`\min(10^{-2}, 1/\sqrt{t})`. Default: ``True``.
        warmup_init (bool, optional): With ``relative_step``, use
            :math:`\min(10^{-6} t, 1/\sqrt{t})` instead (a warm-up). Default: ``False``.
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array], None] = None,
        eps: Tuple[float, float] = (1e-30, 1e-3),
        clip_threshold: float = 1.0,
        decay_rate: float = -0.8,
        beta_1: Optional[float] = None,
        weight_decay: float = 0.0,
        scale_parameter: bool = True,
        relative_step: bool = True,
        warmup_init: bool = False,
    ):
        super().__init__()
        if learning_rate is not None:
            self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        self.clip_threshold = clip_threshold
        self.decay_rate = decay_rate
        self.beta_1 = beta_1
        self.weight_decay = weight_decay
        self.scale_parameter = scale_parameter
        self.relative_step = relative_step
        self.warmup_init = warmup_init

    def init_single(self, parameter: mx.array, state: dict):
        """Creates the second-moment estimate (factored for 2 or more dimensions) and, with
        ``beta_1``, the running average of the updates."""
        if parameter.ndim >= 2:
            shape, dtype = parameter.shape, parameter.dtype
            state["exp_avg_sq_row"] = mx.zeros(shape[:-1], dtype=dtype)
            state["exp_avg_sq_col"] = mx.zeros(shape[:-2] + shape[-1:], dtype=dtype)
        else:
            state["exp_avg_sq"] = mx.zeros_like(parameter)
        if self.beta_1 is not None:
            state["exp_avg"] = mx.zeros_like(parameter)

    def _compute_rms(self, inputs):
        return mx.sqrt(mx.mean(mx.square(inputs)))

    def _relative_step_size(self, step, dtype):
        # The step size before the parameter scale, in ``dtype``.
        def make():
            if self.relative_step:
                limit = 1e-6 * step if self.warmup_init else 1e-2
                size = mx.minimum(limit, mx.rsqrt(step))
            else:
                size = self.learning_rate
            return size.astype(dtype)

        return self._per_step(("adafactor_size", dtype), make)

    def _compute_learning_rate(self, step, parameter_rms):
        size = self._relative_step_size(step, parameter_rms.dtype)
        if self.scale_parameter:
            return mx.maximum(self.eps[1], parameter_rms) * size
        return size

    def _approximate_exp_moving_avg(self, exp_avg_sq_row, exp_avg_sq_col):
        row_factor = mx.rsqrt(exp_avg_sq_row / mx.mean(exp_avg_sq_row, axis=-1, keepdims=True))
        col_factor = mx.rsqrt(exp_avg_sq_col)
        return mx.expand_dims(row_factor, axis=-1) * mx.expand_dims(col_factor, axis=-2)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after one Adafactor step; updates ``state`` in place."""
        step = self.step
        parameter_rms = self._compute_rms(parameter)
        dtype = parameter_rms.dtype
        learning_rate = self._compute_learning_rate(step, parameter_rms)

        def decays():
            beta_2 = 1.0 - (step**self.decay_rate).astype(dtype)
            return beta_2, 1 - beta_2

        beta_2, one_minus_beta_2 = self._per_step(("adafactor_beta2", dtype), decays)
        squared = mx.square(gradient) + self.eps[0]

        if gradient.ndim >= 2:
            row = beta_2 * state["exp_avg_sq_row"] + one_minus_beta_2 * mx.mean(squared, axis=-1)
            col = beta_2 * state["exp_avg_sq_col"] + one_minus_beta_2 * mx.mean(squared, axis=-2)
            state["exp_avg_sq_row"] = row
            state["exp_avg_sq_col"] = col
            update = self._approximate_exp_moving_avg(row, col) * gradient
        else:
            second = beta_2 * state["exp_avg_sq"] + one_minus_beta_2 * squared
            state["exp_avg_sq"] = second
            update = mx.rsqrt(second) * gradient

        update = update / mx.maximum(1.0, self._compute_rms(update) / self.clip_threshold)
        update = learning_rate * update

        if self.beta_1 is not None:
            average = self.beta_1 * state["exp_avg"] + (1 - self.beta_1) * update
            state["exp_avg"] = average
            update = average

        if self.weight_decay != 0:
            parameter = parameter + parameter * (-self.weight_decay * learning_rate)
        return parameter - update


class Muon(Optimizer):
    r"""Muon (MomentUm Orthogonalized by Newton-Schulz, Jordan et al., 2024).

    The momentum of a matrix parameter is replaced by an approximation of its nearest
    semi-orthogonal matrix (a quintic Newton-Schulz iteration) before the step; parameters of
    more than 2 dimensions are treated as matrices of their first axis by the rest, and 0-D and
    1-D parameters take the plain momentum step.

    Note:
        Muon is meant for hidden layers: embeddings, the output layer and 0-D/1-D parameters
        are better trained with another optimizer (for example :class:`AdamW`, combined via
        :class:`MultiOptimizer`).

    Args:
        learning_rate (float or callable): The learning rate, or a schedule.
        momentum (float, optional): The momentum. Default: ``0.95``
        weight_decay (float, optional): The L2 penalty added to the gradient.
            Default: ``0.01``
        nesterov (bool, optional): Use Nesterov momentum. Default: ``True``
        ns_steps (int, optional): The number of Newton-Schulz iterations. Default: ``5``
    """

    def __init__(
        self,
        learning_rate: Union[float, Callable[[mx.array], mx.array]],
        momentum: float = 0.95,
        weight_decay: float = 0.01,
        nesterov: bool = True,
        ns_steps: int = 5,
    ):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.ns_steps = ns_steps

    def init_single(self, parameter: mx.array, state: dict):
        """Creates the momentum buffer ``v`` (zeros)."""
        state["v"] = mx.zeros_like(parameter)

    def _zeropower_via_newtonschulz5(self, X, steps: int):
        """Approximately orthogonalises the matrix ``X`` with ``steps`` quintic
        Newton-Schulz iterations (coefficients 3.4445, -4.7750, 2.0315)."""
        if X.ndim != 2:
            raise ValueError(
                f"Expected a 2D array for Newton-Schulz iteration, got shape {X.shape} instead."
            )
        a, b, c = 3.4445, -4.7750, 2.0315
        tall = X.shape[-2] > X.shape[-1]
        if tall:
            X = X.T
        X = X / (mx.linalg.norm(X, keepdims=True) + 1e-7)
        for _ in range(steps):
            gram = X @ X.T
            poly = mx.addmm(b * gram, gram, gram, alpha=c, beta=1.0)
            X = mx.addmm(a * X, poly, X, alpha=1.0, beta=1.0)
        return X.T if tall else X

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns the parameter after one Muon step; stores ``v`` in ``state``."""
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        mu = self.momentum
        v = mu * state["v"] + (1 - mu) * gradient
        state["v"] = v
        update = gradient * (1 - mu) + v * mu if self.nesterov else v
        lr = self._lr(gradient.dtype)

        if update.ndim >= 2:
            shape = update.shape
            if update.ndim > 2:
                update = mx.reshape(update, (shape[0], -1))
            update = self._zeropower_via_newtonschulz5(update, steps=self.ns_steps)
            if len(shape) > 2:
                update = mx.reshape(update, shape)
            # As MLX: the aspect ratio of the last two axes of the original shape.
            scale = max(1, shape[-2] / shape[-1]) ** 0.5
            lr = self._per_step(("muon_lr", gradient.dtype, scale), lambda: lr * scale)
        return parameter - lr * update
