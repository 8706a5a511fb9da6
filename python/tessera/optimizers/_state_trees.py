"""The walks of an optimizer over the gradient, parameter and state trees (optimizers.py):
one update per leaf, and a state entry for every parameter."""

import tessera.core as mx
from tessera.utils import tree_map

_array = mx.array


def _rebuild(node, children):
    # The same kind of sequence as ``node``; a namedtuple takes its items as arguments.
    kind = type(node)
    if kind is list:
        return children
    return kind(*children) if hasattr(node, "_fields") else kind(children)


def _apply_tree(apply, gradients, parameters, state):
    # Walks ``gradients`` (which decides the structure of the result) and looks the matching
    # parameter and per-parameter state up by key or index.
    if type(gradients) is _array:
        return apply(gradients, parameters, state)
    if isinstance(gradients, dict):
        return {
            k: _apply_tree(apply, g, parameters[k], state[k]) for k, g in gradients.items()
        }
    if isinstance(gradients, (list, tuple)):
        return _rebuild(
            gradients,
            [_apply_tree(apply, g, parameters[i], state[i]) for i, g in enumerate(gradients)],
        )
    return apply(gradients, parameters, state)


def _empty_states(tree):
    # One empty dict for every leaf of ``tree``, in ``tree``'s structure.
    return tree_map(lambda _: {}, tree)


def _fill_state(parameters, state):
    """Returns ``state`` with a (possibly empty) entry for every leaf of ``parameters``.

    Entries already present are kept (they may hold a restored state); dicts are filled in
    place, sequences are returned as new lists or tuples.
    """
    if isinstance(parameters, (list, tuple)):
        items = list(state)
        for i in range(min(len(items), len(parameters))):
            items[i] = _fill_state(parameters[i], items[i])
        items.extend(_empty_states(list(parameters[len(items):])))
        return tuple(items) if isinstance(parameters, tuple) else items
    if isinstance(parameters, dict):
        for key, value in parameters.items():
            if key in state:
                state[key] = _fill_state(value, state[key])
            else:
                state[key] = _empty_states(value)
        return state
    return state


def _init_leaves(init_single, parameters, state):
    # Calls ``init_single`` for every parameter whose state dict is still empty.
    if isinstance(parameters, dict):
        for key, value in parameters.items():
            _init_leaves(init_single, value, state[key])
    elif isinstance(parameters, (list, tuple)):
        for i, value in enumerate(parameters):
            _init_leaves(init_single, value, state[i])
    elif not state:
        init_single(parameters, state)
