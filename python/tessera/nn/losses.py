"""Loss functions for ``tessera.nn``, with the names, arguments and defaults of ``mlx.nn.losses``.

Every loss takes a ``reduction`` keyword: ``'none'`` returns the per-element (or per-sample)
losses, ``'mean'`` their average and ``'sum'`` their total. Any other value raises
``ValueError``.
"""

import math
from typing import Literal, Optional, get_args

import tessera.core as mx

Reduction = Literal["none", "mean", "sum"]

__all__ = [
    "binary_cross_entropy",
    "cosine_similarity_loss",
    "cross_entropy",
    "gaussian_nll_loss",
    "hinge_loss",
    "huber_loss",
    "kl_div_loss",
    "l1_loss",
    "log_cosh_loss",
    "margin_ranking_loss",
    "mse_loss",
    "nll_loss",
    "smooth_l1_loss",
    "triplet_loss",
]


def _reduce(loss: mx.array, reduction: Reduction = "none") -> mx.array:
    """Collapse a loss array as ``reduction`` asks ('none', 'mean' or 'sum')."""
    valid = get_args(Reduction)
    if reduction not in valid:
        raise ValueError(f"Invalid reduction {reduction!r}. Must be one of {valid}.")
    if reduction == "mean":
        return mx.mean(loss)
    if reduction == "sum":
        return mx.sum(loss)
    return loss


def _check_same_shape(first_name, first, second_name, second):
    if first.shape != second.shape:
        raise ValueError(
            f"{first_name} shape {first.shape} does not match {second_name} shape {second.shape}."
        )


def _apply_weights(loss: mx.array, weights: Optional[mx.array]) -> mx.array:
    if weights is None:
        return loss
    if weights.shape != loss.shape:
        raise ValueError(
            f"weights of shape {tuple(weights.shape)} do not match the loss of shape "
            f"{tuple(loss.shape)} (one weight per loss element)"
        )
    return loss * weights


def cross_entropy(
    logits: mx.array,
    targets: mx.array,
    weights: Optional[mx.array] = None,
    axis: int = -1,
    label_smoothing: float = 0.0,
    reduction: Reduction = "none",
) -> mx.array:
    """Cross entropy between unnormalised ``logits`` and ``targets``.

    The targets may be given in two forms. Class indices have the shape of ``logits`` without
    its ``axis`` dimension; class probabilities (for instance one-hot rows) have exactly the
    shape of ``logits``. The two forms are told apart by their number of dimensions.

    Args:
        logits (array): The unnormalised scores; ``axis`` runs over the classes.
        targets (array): Class indices, or class probabilities along ``axis``.
        weights (array, optional): Per-sample weights, of the shape of the unreduced loss.
            Default: ``None``.
        axis (int, optional): The class axis of ``logits``. Default: ``-1``.
        label_smoothing (float, optional): How much of the target mass to spread uniformly
            over all classes, in ``[0, 1)``. Default: ``0``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'none'``.

    Returns:
        array: The cross entropy loss.
    """
    if label_smoothing < 0 or label_smoothing >= 1:
        raise ValueError(f"Label smoothing must be in [0, 1), got {label_smoothing}.")

    probabilities_given = targets.ndim == logits.ndim
    if probabilities_given:
        expected_shape = tuple(logits.shape)
    else:
        reduced = list(logits.shape)
        reduced.pop(axis)
        expected_shape = tuple(reduced)
    if tuple(targets.shape) != expected_shape:
        raise ValueError(
            f"cross_entropy: targets of shape {tuple(targets.shape)} do not fit logits of shape "
            f"{tuple(logits.shape)}: class "
            f"{'probabilities' if probabilities_given else 'indices'} need shape {expected_shape}"
        )

    if (not probabilities_given and label_smoothing == 0 and logits.dtype != mx.float64
            and axis in (-1, logits.ndim - 1) and mx.issubdtype(targets.dtype, mx.integer)):
        # Class indices over the last axis: one fused kernel, forward and gradient (no
        # (N, C) temporary), in float32, then the logits' dtype as MLX's composition gives
        # (float64 logits keep the composition, in float64).
        loss = mx.fast.cross_entropy(logits, targets).astype(logits.dtype)
        return _reduce(_apply_weights(loss, weights), reduction)

    # Only differences between logits matter; removing the (constant) maximum first keeps
    # the log-sum-exp and the target score on the same scale, so large logits keep their gaps.
    logits = logits - mx.stop_gradient(mx.max(logits, axis=axis, keepdims=True))

    if probabilities_given:
        target_score = mx.sum(logits * targets, axis=axis)
    else:
        picked = mx.take_along_axis(logits, mx.expand_dims(targets, axis), axis)
        target_score = mx.squeeze(picked, axis)

    normaliser = mx.logsumexp(logits, axis=axis)
    if label_smoothing > 0:
        # Smoothed targets put (1 - s) on the labelled class and s/C on every class; the
        # second part contributes -s * mean(logits).
        uniform_part = mx.mean(logits, axis=axis) * label_smoothing
        loss = normaliser - (1 - label_smoothing) * target_score - uniform_part
    else:
        loss = normaliser - target_score

    loss = _apply_weights(loss, weights)
    return _reduce(loss, reduction)


def binary_cross_entropy(
    inputs: mx.array,
    targets: mx.array,
    weights: Optional[mx.array] = None,
    with_logits: bool = True,
    reduction: Reduction = "mean",
) -> mx.array:
    """Binary cross entropy between predictions and binary targets.

    With ``with_logits=True`` (the default) ``inputs`` are pre-sigmoid scores and the loss is
    computed in a numerically stable closed form. With ``with_logits=False`` they are
    probabilities, and both logarithms are clipped below at ``-100`` so that probabilities of
    exactly 0 or 1 give a finite loss.

    Args:
        inputs (array): Logits, or probabilities when ``with_logits`` is ``False``.
        targets (array): Targets in ``[0, 1]``, of the shape of ``inputs``.
        weights (array, optional): Element weights, of the shape of ``inputs``.
            Default: ``None``.
        with_logits (bool, optional): Whether ``inputs`` are logits. Default: ``True``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'mean'``.

    Returns:
        array: The binary cross entropy loss.
    """
    _check_same_shape("Inputs", inputs, "targets", targets)

    if with_logits:
        # log(1 + e^x) - x * y, with log(1 + e^x) evaluated stably.
        loss = mx.logaddexp(0.0, inputs) - inputs * targets
    else:
        log_p = mx.clip(mx.log(inputs), a_min=-100, a_max=None)
        log_not_p = mx.clip(mx.log(1 - inputs), a_min=-100, a_max=None)
        loss = -(targets * log_p + (1 - targets) * log_not_p)

    loss = _apply_weights(loss, weights)
    return _reduce(loss, reduction)


def l1_loss(
    predictions: mx.array, targets: mx.array, reduction: Reduction = "mean"
) -> mx.array:
    """Absolute-error (L1) loss.

    Args:
        predictions (array): The predicted values.
        targets (array): The target values, of the shape of ``predictions``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'mean'``.

    Returns:
        array: ``|predictions - targets|``, reduced.
    """
    _check_same_shape("Predictions", predictions, "targets", targets)
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(
    predictions: mx.array, targets: mx.array, reduction: Reduction = "mean"
) -> mx.array:
    """Squared-error loss (the mean squared error with the default reduction).

    Args:
        predictions (array): The predicted values.
        targets (array): The target values, of the shape of ``predictions``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'mean'``.

    Returns:
        array: ``(predictions - targets) ** 2``, reduced.
    """
    _check_same_shape("Predictions", predictions, "targets", targets)
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(
    inputs: mx.array, targets: mx.array, axis: int = -1, reduction: Reduction = "none"
) -> mx.array:
    """Negative log likelihood of class indices under log-probabilities.

    Args:
        inputs (array): Log-probabilities; ``axis`` runs over the classes.
        targets (array): Class indices, of the shape of ``inputs`` without ``axis``.
        axis (int, optional): The class axis. Default: ``-1``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'none'``.

    Returns:
        array: Minus the log-probability of each target class, reduced.
    """
    picked = mx.take_along_axis(inputs, mx.expand_dims(targets, axis), axis)
    return _reduce(-mx.squeeze(picked, axis), reduction)


def gaussian_nll_loss(
    inputs: mx.array,
    targets: mx.array,
    vars: mx.array,
    full: bool = False,
    eps: float = 1e-6,
    reduction: Reduction = "mean",
) -> mx.array:
    r"""Negative log likelihood of ``targets`` under Gaussians.

    Each target is scored under a normal distribution with mean ``inputs`` and variance
    ``vars``; the variance is clamped below at ``eps``:

    .. math::
        \frac{1}{2}\left(\log v + \frac{(\text{targets} - \text{inputs})^2}{v}\right),
        \quad v = \max(\text{vars}, \epsilon)

    plus :math:`\frac{1}{2}\log(2\pi)` when ``full`` is true.

    Args:
        inputs (array): The predicted means.
        targets (array): The observed values, of the shape of ``inputs``.
        vars (array): The predicted variances, of the shape of ``inputs``.
        full (bool, optional): Whether to add the constant term. Default: ``False``.
        eps (float, optional): Lower bound on the variance. Default: ``1e-6``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'mean'``.

    Returns:
        array: The Gaussian negative log likelihood.
    """
    _check_same_shape("Inputs", inputs, "targets", targets)
    _check_same_shape("Inputs", inputs, "vars", vars)

    variance = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(variance) + mx.square(targets - inputs) / variance)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def kl_div_loss(
    inputs: mx.array, targets: mx.array, axis: int = -1, reduction: Reduction = "none"
) -> mx.array:
    """Kullback-Leibler divergence of the predicted from the target distribution.

    Both arguments are log-probabilities; before reduction the result is
    ``sum(exp(targets) * (targets - inputs), axis)``.

    Args:
        inputs (array): Log-probabilities of the predicted distribution.
        targets (array): Log-probabilities of the target distribution.
        axis (int, optional): The distribution axis. Default: ``-1``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'none'``.

    Returns:
        array: The KL divergence loss.
    """
    loss = mx.sum(mx.exp(targets) * (targets - inputs), axis)
    return _reduce(loss, reduction)


def smooth_l1_loss(
    predictions: mx.array,
    targets: mx.array,
    beta: float = 1.0,
    reduction: Reduction = "mean",
) -> mx.array:
    r"""Smooth L1 loss: quadratic for small errors, linear for large ones.

    With :math:`d = |x - y|` the loss is :math:`0.5 d^2 / \beta` where :math:`d < \beta`
    and :math:`d - 0.5 \beta` elsewhere.

    Args:
        predictions (array): The predicted values.
        targets (array): The target values, of the shape of ``predictions``.
        beta (float, optional): Where the loss switches from quadratic to linear.
            Default: ``1.0``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'mean'``.

    Returns:
        array: The smooth L1 loss.
    """
    _check_same_shape("Predictions", predictions, "targets", targets)

    gap = mx.abs(predictions - targets)
    loss = mx.where(gap < beta, 0.5 * mx.square(gap) / beta, gap - 0.5 * beta)
    return _reduce(loss, reduction)


def triplet_loss(
    anchors: mx.array,
    positives: mx.array,
    negatives: mx.array,
    axis: int = -1,
    p: int = 2,
    margin: float = 1.0,
    eps: float = 1e-6,
    reduction: Reduction = "none",
) -> mx.array:
    r"""Triplet margin loss for anchor, positive and negative samples.

    .. math::
        \max\left(\|A - P\|_p - \|A - N\|_p + \text{margin}, 0\right)

    where each distance is :math:`(\sum |a - b|^p + \epsilon)^{1/p}` over ``axis``.

    Args:
        anchors (array): The anchor samples.
        positives (array): Samples that should be near the anchors.
        negatives (array): Samples that should be far from the anchors.
        axis (int, optional): The feature axis the distance runs over. Default: ``-1``.
        p (int, optional): The degree of the norm. Default: ``2``.
        margin (float, optional): The required gap between the two distances.
            Default: ``1.0``.
        eps (float, optional): Added to the sum of powers before the ``1/p`` root.
            Default: ``1e-6``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'none'``.

    Returns:
        array: The triplet loss; with ``'none'`` it has the inputs' shape without ``axis``.
    """

    def distance(a, b):
        powered = mx.sum(mx.power(mx.abs(a - b), p), axis)
        return mx.power(powered + eps, 1.0 / p)

    loss = mx.maximum(distance(anchors, positives) - distance(anchors, negatives) + margin, 0)
    return _reduce(loss, reduction)


def hinge_loss(
    inputs: mx.array, targets: mx.array, reduction: Reduction = "none"
) -> mx.array:
    r"""Hinge loss :math:`\max(0, 1 - y \hat{y})`.

    Args:
        inputs (array): The predicted scores.
        targets (array): The labels, ``-1`` or ``1``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'none'``.

    Returns:
        array: The hinge loss.
    """
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def huber_loss(
    inputs: mx.array,
    targets: mx.array,
    delta: float = 1.0,
    reduction: Reduction = "none",
) -> mx.array:
    r"""Huber loss of the error :math:`a = \text{inputs} - \text{targets}`.

    The loss is :math:`\frac{1}{2} a^2` where :math:`|a| \le \delta` and
    :math:`\delta (|a| - \frac{1}{2}\delta)` elsewhere.

    Args:
        inputs (array): The predicted values.
        targets (array): The target values.
        delta (float, optional): Where the loss switches from quadratic to linear.
            Default: ``1.0``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'none'``.

    Returns:
        array: The Huber loss.
    """
    size = mx.abs(inputs - targets)
    inner = mx.minimum(size, delta)
    loss = 0.5 * inner**2 + delta * (size - inner)
    return _reduce(loss, reduction)


def log_cosh_loss(
    inputs: mx.array, targets: mx.array, reduction: Reduction = "none"
) -> mx.array:
    r"""Log-cosh loss :math:`\log(\cosh(\text{inputs} - \text{targets}))`.

    It behaves like half the squared error for small errors and like the absolute error for
    large ones. It is evaluated as ``logaddexp(e, -e) - log(2)``, which does not overflow.

    Args:
        inputs (array): The predicted values.
        targets (array): The target values.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'none'``.

    Returns:
        array: The log-cosh loss.
    """
    error = inputs - targets
    loss = mx.logaddexp(error, -error) - math.log(2)
    return _reduce(loss, reduction)


def cosine_similarity_loss(
    x1: mx.array,
    x2: mx.array,
    axis: int = 1,
    eps: float = 1e-8,
    reduction: Reduction = "none",
) -> mx.array:
    r"""Cosine similarity of two sets of vectors along ``axis``.

    .. math::
        \frac{x_1 \cdot x_2}{\max(\|x_1\| \|x_2\|, \epsilon)}

    Args:
        x1 (array): The first vectors.
        x2 (array): The second vectors.
        axis (int, optional): The axis the vectors lie along. Default: ``1``.
        eps (float, optional): Lower bound on the product of the norms. Default: ``1e-8``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'none'``.

    Returns:
        array: The cosine similarity.
    """
    norms = mx.linalg.norm(x1, axis=axis) * mx.linalg.norm(x2, axis=axis)
    loss = mx.sum(x1 * x2, axis=axis) / mx.maximum(norms, eps)
    return _reduce(loss, reduction)


def margin_ranking_loss(
    inputs1: mx.array,
    inputs2: mx.array,
    targets: mx.array,
    margin: float = 0.0,
    reduction: Reduction = "none",
) -> mx.array:
    r"""Margin ranking loss :math:`\max(0, -y (x_1 - x_2) + \text{margin})`.

    Args:
        inputs1 (array): Scores of the first items.
        inputs2 (array): Scores of the second items.
        targets (array): ``1`` where the first item should rank higher, ``-1`` where the
            second should.
        margin (float, optional): The gap the scores should be apart by. Default: ``0.0``.
        reduction (str, optional): ``'none'``, ``'mean'`` or ``'sum'``. Default: ``'none'``.

    Returns:
        array: The margin ranking loss.
    """
    if not (inputs1.shape == inputs2.shape == targets.shape):
        raise ValueError(
            f"margin_ranking_loss: inputs1 {tuple(inputs1.shape)}, inputs2 {tuple(inputs2.shape)} "
            f"and targets {tuple(targets.shape)} must have one shape"
        )
    loss = mx.maximum(0, -targets * (inputs1 - inputs2) + margin)
    return _reduce(loss, reduction)
