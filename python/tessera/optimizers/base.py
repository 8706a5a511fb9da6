"""The base class of ``mlx.optimizers``' optimizers, :class:`Optimizer` (optimizers.py and
matrix.py derive their update rules from it; it is importable from either module's namespace as
``tessera.optimizers.optimizers.Optimizer``, as in MLX).

An optimizer works leaf by leaf: :meth:`Optimizer.apply_gradients` walks the gradient tree
together with the parameter tree and the optimizer's state tree and calls
:meth:`Optimizer.apply_single` on each (gradient, parameter, per-parameter state) triple.
"""

from typing import Callable, Union

import tessera.core as mx
from tessera.optimizers._state_trees import _apply_tree, _fill_state, _init_leaves

__all__ = ["Optimizer"]

_array = mx.array


class Optimizer:
    """The base class of the optimizers.

    A derived class states its update for one parameter (:meth:`apply_single`) and the
    per-parameter state it needs (:meth:`init_single`); the base class applies them over whole
    trees of parameters, counts the steps and evaluates the schedules.

    Args:
        schedulers (dict, optional): Maps the name of a state entry (such as
            ``"learning_rate"``) to a function of the step; the entry is set from it before
            every update. Default: ``None``.
    """

    def __init__(self, schedulers=None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = dict(schedulers or {})
        # Per-step values shared by all parameters; a dict only while apply_gradients runs.
        self._step_cache = None

    def update(self, model, gradients: dict):
        """Applies ``gradients`` to the parameters of ``model`` and updates ``model`` in place.

        Args:
            model (tessera.nn.Module): The model to update; anything with an ``update(params)``
                method whose items are its parameters.
            gradients (dict): A tree of gradients with the structure of (part of) the model's
                parameters, as :func:`tessera.nn.value_and_grad` returns.
        """
        model.update(self.apply_gradients(gradients, model))

    def init(self, parameters: dict):
        """Creates the optimizer's state for the parameters in ``parameters``.

        The state is created on the first :meth:`apply_gradients` anyway; calling this first
        makes :attr:`state` complete before any update. Entries already in the state (for
        example a state restored from a file) are kept.

        Args:
            parameters (dict): A tree of parameters.

        Example:
            >>> optimizer = optim.SGD(learning_rate=0.1, momentum=0.9)
            >>> optimizer.init({"weight": mx.zeros((2, 2)), "bias": mx.zeros((2,))})
            >>> list(optimizer.state)
            ['step', 'learning_rate', 'weight', 'bias']
        """
        if not isinstance(parameters, dict):
            # The state dict holds "step" next to the parameters' entries, so the top of the
            # tree must be a dict too.
            raise TypeError(
                f"optimizer parameters must be a dict tree, not {type(parameters).__name__}"
            )
        _fill_state(parameters, self._state)
        _init_leaves(self.init_single, parameters, self._state)
        self._initialized = True

    def init_single(self, parameter: mx.array, state: dict):
        """Fills ``state`` with the optimizer's arrays for one parameter (derived classes).

        Args:
            parameter (array): The parameter the state belongs to.
            state (dict): The parameter's (empty) state dict, to fill in place.
        """
        raise NotImplementedError()

    def apply_gradients(self, gradients: dict, parameters: dict):
        """Returns the parameters after one update with ``gradients``.

        Creates the state on the first call, sets the scheduled entries of the state from the
        current step, then increments the step and updates every parameter.
        ``model.update(optimizer.apply_gradients(grads, model))`` is :meth:`update`.

        Args:
            gradients (dict): A tree of gradients.
            parameters (dict): A tree of parameters holding at least the paths of
                ``gradients``; it may hold more.

        Returns:
            The updated parameters, in the structure of ``gradients``.
        """
        if not self._initialized:
            self.init(gradients)
        state = self.state
        for name, schedule in self._schedulers.items():
            value = schedule(state["step"])
            state[name] = value if isinstance(value, _array) else mx.array(value)
        state["step"] = state["step"] + 1
        self._step_cache = {}
        try:
            return _apply_tree(self.apply_single, gradients, parameters, state)
        finally:
            self._step_cache = None

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """Returns one parameter after its update (derived classes).

        Args:
            gradient (array): The gradient of ``parameter``.
            parameter (array): The parameter to update.
            state (dict): The parameter's state dict; the new state is written into it.

        Returns:
            array: The updated parameter.
        """
        raise NotImplementedError()

    @property
    def state(self):
        """The optimizer's state, a tree (dict) of arrays."""
        return self._state

    @state.setter
    def state(self, state: dict):
        self._initialized = False
        self._state = state

    @property
    def step(self):
        """The number of updates applied so far (a ``uint64`` array)."""
        return self.state["step"]

    @property
    def learning_rate(self):
        """The learning rate (an array); assigning a number or an array sets it."""
        return self.state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array]):
        self.state["learning_rate"] = mx.array(learning_rate)

    def _maybe_schedule(self, name: str, param: Union[float, Callable[[mx.array], mx.array]]):
        """Stores hyper-parameter ``name`` in the state; a callable ``param`` is a schedule
        that is re-evaluated before every update."""
        if callable(param):
            self._schedulers[name] = param
            value = param(self.step)
            value = value if isinstance(value, _array) else mx.array(value)
        else:
            value = mx.array(param)
        self.state[name] = value

    # Per-step values. Everything below depends only on the step, the hyper-parameters and a
    # dtype, so inside one apply_gradients call it is computed once and shared.

    def _per_step(self, key, make):
        cache = self._step_cache
        if cache is None:
            return make()
        value = cache.get(key)
        if value is None:
            value = cache[key] = make()
        return value

    def _lr(self, dtype):
        # The learning rate cast to ``dtype``.
        cache = self._step_cache
        if cache is None:
            return self.learning_rate.astype(dtype)
        value = cache.get(dtype)
        if value is None:
            value = cache[dtype] = self.learning_rate.astype(dtype)
        return value
