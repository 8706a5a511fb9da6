"""Learning-rate schedules: functions of the step count that optimizers call once per step.

Each maker returns a callable ``schedule(step)``. Given the optimizer's step (a ``uint64``
array) it returns an array, so a schedule also works inside :func:`tessera.core.compile`; given
a Python number it may return a Python number or an array.
"""

import math
from typing import Callable, List

import tessera.core as mx

__all__ = [
    "exponential_decay",
    "step_decay",
    "cosine_decay",
    "join_schedules",
    "linear_schedule",
]


def exponential_decay(init: float, decay_rate: float) -> Callable:
    r"""Make a schedule that multiplies the value by ``decay_rate`` at every step.

    The value at step :math:`t` is :math:`\text{init} \cdot \text{decay\_rate}^t`.

    Args:
        init (float): The value at step 0.
        decay_rate (float): The factor applied once per step.

    Returns:
        Callable: The schedule, a function of the step.

    Example:
        >>> schedule = optim.exponential_decay(1e-1, 0.9)
        >>> optimizer = optim.SGD(learning_rate=schedule)
        >>> for _ in range(5): optimizer.update({}, {})
        >>> optimizer.learning_rate
        array(0.06561, dtype=float32)
    """

    def schedule(step):
        return init * decay_rate**step

    return schedule


def step_decay(init: float, decay_rate: float, step_size: int) -> Callable:
    r"""Make a schedule that multiplies the value by ``decay_rate`` every ``step_size`` steps.

    The value at step :math:`t` is
    :math:`\text{init} \cdot \text{decay\_rate}^{\lfloor t / \text{step\_size} \rfloor}`.

    Args:
        init (float): The value at step 0.
        decay_rate (float): The factor applied at the end of each period.
        step_size (int): The length of a period in steps; at least 1.

    Returns:
        Callable: The schedule, a function of the step.

    Example:
        >>> schedule = optim.step_decay(1e-1, 0.9, 10)
        >>> schedule(25)
        0.081...
    """
    if step_size < 1:
        raise ValueError(f"step_size must be greater than 0, but got {step_size}.")

    def schedule(step):
        return init * (decay_rate ** (step // step_size))

    return schedule


def cosine_decay(init: float, decay_steps: int, end: float = 0.0) -> Callable:
    r"""Make a schedule that follows half a cosine period from ``init`` down to ``end``.

    The value at step :math:`t` is
    :math:`\text{end} + \tfrac{1}{2}(1 + \cos(\pi \min(t, T) / T))(\text{init} - \text{end})`
    with :math:`T` = ``decay_steps``: it stays at ``end`` once :math:`t \ge T`.

    Args:
        init (float): The value at step 0.
        decay_steps (int): The number of steps the decay takes; at least 1.
        end (float, optional): The value reached after ``decay_steps`` steps. Default: ``0``.

    Returns:
        Callable: The schedule, a function of the step.

    Example:
        >>> schedule = optim.cosine_decay(1e-1, 1000)
        >>> optimizer = optim.SGD(learning_rate=schedule)
        >>> for _ in range(5): optimizer.update({}, {})
        >>> optimizer.learning_rate
        array(0.0999961, dtype=float32)
    """
    if decay_steps < 1:
        raise ValueError(f"decay_steps must be greater than 0, but got {decay_steps}.")
    frequency = math.pi / decay_steps

    def schedule(step):
        clamped = mx.minimum(step, decay_steps)
        weight = 0.5 * (1.0 + mx.cos(frequency * clamped))
        return end + weight * (init - end)

    return schedule


def join_schedules(schedules: List[Callable], boundaries: List[int]) -> Callable:
    r"""Make a schedule that runs several schedules one after another.

    Schedule ``schedules[0]`` is used for steps below ``boundaries[0]``; from step
    ``boundaries[i]`` on, ``schedules[i + 1]`` is used and is called with the number of steps
    since that boundary (``step - boundaries[i]``).

    Args:
        schedules (list(Callable)): The schedules, in the order they run; at least one.
        boundaries (list(int)): The steps at which each next schedule takes over; one fewer
            than ``schedules``.

    Returns:
        Callable: The joined schedule, a function of the step that returns an array.

    Example:
        >>> warmup = optim.linear_schedule(0, 1e-1, steps=10)
        >>> decay = optim.cosine_decay(1e-1, 200)
        >>> schedule = optim.join_schedules([warmup, decay], [10])
        >>> optimizer = optim.Adam(learning_rate=schedule)
        >>> for _ in range(12): optimizer.update({}, {})
        >>> optimizer.learning_rate
        array(0.0999938, dtype=float32)
    """
    if len(schedules) == 0:
        raise ValueError("Must provide at least 1 schedule to join.")
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(
            f"Received {len(boundaries)} boundaries but expected {len(schedules) - 1}."
        )
    first = schedules[0]
    rest = list(zip(boundaries, schedules[1:]))

    def schedule(step):
        value = first(step)
        for boundary, later in rest:
            value = mx.where(step < boundary, value, later(step - boundary))
        return value

    return schedule


def linear_schedule(init: float, end: float, steps: int) -> Callable:
    r"""Make a schedule that moves in a straight line from ``init`` to ``end``.

    The value at step :math:`t` is
    :math:`\text{init} + \min(t, \text{steps}) (\text{end} - \text{init}) / \text{steps}`: it
    stays at ``end`` once :math:`t \ge` ``steps``.

    Args:
        init (float): The value at step 0.
        end (float): The value reached after ``steps`` steps.
        steps (int): The number of steps the ramp takes; at least 1.

    Returns:
        Callable: The schedule, a function of the step.

    Example:
        >>> schedule = optim.linear_schedule(0, 1e-1, 100)
        >>> optimizer = optim.Adam(learning_rate=schedule)
        >>> for _ in range(101): optimizer.update({}, {})
        >>> optimizer.learning_rate
        array(0.1, dtype=float32)
    """
    if steps < 1:
        raise ValueError(f"steps must be greater than 0, but got {steps}.")
    slope = (end - init) / steps

    def schedule(step):
        return mx.minimum(step, steps) * slope + init

    return schedule
