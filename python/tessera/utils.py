"""Trees of arrays: nested lists, tuples and dicts (an ``nn.Module`` is a dict), as ``mlx.utils``.

Keys of flattened trees join the path with dots (``"layers.0.weight"``): list and tuple items by
their index, dict items by their key.
"""

from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

__all__ = [
    "tree_map",
    "tree_map_with_path",
    "tree_flatten",
    "tree_unflatten",
    "tree_reduce",
    "tree_merge",
]


def _rebuild(tree, children):
    # A tuple subclass with fields (a namedtuple) takes its items as arguments.
    kind = type(tree)
    return kind(*children) if hasattr(tree, "_fields") else kind(children)


def tree_map(fn: Callable, tree: Any, *rest: Any, is_leaf: Optional[Callable] = None) -> Any:
    """Applies ``fn`` to every leaf of ``tree`` and returns a tree of the results.

    Each tree of ``rest`` must contain the structure of ``tree``; its matching leaves (or
    subtrees, where ``tree`` has a leaf) are passed to ``fn`` as further arguments.

    Args:
        fn (callable): Called as ``fn(leaf, *matching)``.
        tree (Any): The tree whose structure the result has.
        rest (tuple[Any]): More trees walked along with ``tree``.
        is_leaf (callable, optional): Returns ``True`` for a value to treat as a leaf even when
            it is a list, tuple or dict.

    Returns:
        A tree of ``fn``'s results with the structure of ``tree``.
    """
    if is_leaf is not None and is_leaf(tree):
        return fn(tree, *rest)
    if isinstance(tree, (list, tuple)):
        return _rebuild(
            tree,
            [tree_map(fn, c, *(r[i] for r in rest), is_leaf=is_leaf) for i, c in enumerate(tree)],
        )
    if isinstance(tree, dict):
        return {k: tree_map(fn, c, *(r[k] for r in rest), is_leaf=is_leaf) for k, c in tree.items()}
    return fn(tree, *rest)


def tree_map_with_path(
    fn: Callable,
    tree: Any,
    *rest: Any,
    is_leaf: Optional[Callable] = None,
    path: Optional[Any] = None,
) -> Any:
    """As :func:`tree_map`, with the leaf's dotted path as ``fn``'s first argument.

    Args:
        fn (callable): Called as ``fn(path, leaf, *matching)``.
        tree (Any): The tree whose structure the result has.
        rest (tuple[Any]): More trees walked along with ``tree``.
        is_leaf (callable, optional): Returns ``True`` for a value to treat as a leaf.
        path (Any, optional): A prefix of every path.

    Returns:
        A tree of ``fn``'s results with the structure of ``tree``.
    """
    if is_leaf is not None and is_leaf(tree):
        return fn(path, tree, *rest)
    prefix = f"{path}." if path else ""
    if isinstance(tree, (list, tuple)):
        return _rebuild(
            tree,
            [
                tree_map_with_path(
                    fn, c, *(r[i] for r in rest), is_leaf=is_leaf, path=f"{prefix}{i}"
                )
                for i, c in enumerate(tree)
            ],
        )
    if isinstance(tree, dict):
        return {
            k: tree_map_with_path(fn, c, *(r[k] for r in rest), is_leaf=is_leaf, path=f"{prefix}{k}")
            for k, c in tree.items()
        }
    return fn(path, tree, *rest)


def tree_flatten(
    tree: Any,
    prefix: str = "",
    is_leaf: Optional[Callable] = None,
    destination: Optional[Union[List[Tuple[str, Any]], Dict[str, Any]]] = None,
) -> Union[List[Tuple[str, Any]], Dict[str, Any]]:
    """The leaves of ``tree`` as ``(dotted key, leaf)`` pairs, in the tree's order.

    ``tree_flatten([[[0]]])`` is ``[("0.0.0", 0)]``; ``tree_flatten({"a": {"b": 1}},
    destination={})`` is ``{"a.b": 1}``.

    Args:
        tree (Any): The tree to flatten.
        prefix (str): Put before every key; its first character is dropped (``".p"`` gives
            keys ``"p.0"``, ...).
        is_leaf (callable, optional): Returns ``True`` for a value to treat as a leaf.
        destination (list or dict, optional): Where to add the pairs (a new list by default).

    Returns:
        ``destination`` with the pairs added.
    """
    if destination is None:
        destination = []
    if isinstance(destination, list):
        add = destination.append
    elif isinstance(destination, dict):
        def add(item):
            destination[item[0]] = item[1]
    else:
        raise ValueError(
            f"tree_flatten: destination must be a list, a dict or None, not {type(destination).__name__}")
    _flatten_into(tree, prefix, is_leaf, add)
    return destination


def _flatten_into(tree, prefix, is_leaf, add):
    if is_leaf is not None and is_leaf(tree):
        add((prefix[1:], tree))
    elif isinstance(tree, (list, tuple)):
        for i, item in enumerate(tree):
            _flatten_into(item, f"{prefix}.{i}", is_leaf, add)
    elif isinstance(tree, dict):
        for key, value in tree.items():
            _flatten_into(value, f"{prefix}.{key}", is_leaf, add)
    else:
        add((prefix[1:], tree))


def tree_unflatten(tree: Union[List[Tuple[str, Any]], Dict[str, Any]]) -> Any:
    """The tree whose :func:`tree_flatten` is ``tree``.

    A level whose keys are all integers becomes a list (missing indices are empty dicts);
    any other level a dict. ``tree_unflatten([("a.0", 1), ("a.1", 2)])`` is ``{"a": [1, 2]}``.

    Args:
        tree (list[tuple[str, Any]] or dict[str, Any]): Dotted keys and their leaves.

    Returns:
        The nested tree.
    """
    items = list(tree.items()) if isinstance(tree, dict) else list(tree)
    if len(items) == 1 and items[0][0] == "":
        return items[0][1]
    children = defaultdict(list)
    for key, value in items:
        head, _, tail = key.partition(".")
        children[head].append((tail, value))
    try:
        indices = {int(k): k for k in children}
    except ValueError:
        indices = None
    if indices is not None and len(indices) == len(children):
        out = []
        for i, k in sorted(indices.items()):
            out.extend({} for _ in range(i - len(out)))
            out.append(tree_unflatten(children[k]))
        return out
    return {k: tree_unflatten(v) for k, v in children.items()}


def tree_reduce(fn: Callable, tree: Any, initializer: Any = None, is_leaf: Optional[Callable] = None) -> Any:
    """Folds ``fn(accumulator, leaf)`` over the leaves of ``tree``.

    ``tree_reduce(lambda acc, x: acc + x, {"a": [1, 2, 3], "b": [4, 5]}, 0)`` is 15.

    Args:
        fn (callable): Called as ``fn(accumulator, leaf)``; returns the new accumulator.
        tree (Any): The tree to fold.
        initializer (Any, optional): The first accumulator; without it, the first leaf.
        is_leaf (callable, optional): Returns ``True`` for a value to treat as a leaf.

    Returns:
        The last accumulator.
    """
    if is_leaf is not None and is_leaf(tree):
        return tree if initializer is None else fn(initializer, tree)
    if isinstance(tree, (list, tuple, dict)):
        acc = initializer
        for item in tree.values() if isinstance(tree, dict) else tree:
            acc = tree_reduce(fn, item, acc, is_leaf)
        return acc
    return tree if initializer is None else fn(initializer, tree)


def tree_merge(tree_a: Any, tree_b: Any, merge_fn: Optional[Callable] = None) -> Any:
    """One tree with the leaves of both, like a deep ``dict.update`` that refuses to overwrite.

    Empty containers are empty subtrees. Where both trees have a leaf at one path, ``merge_fn``
    (if given) combines them; otherwise that is a ``ValueError``.

    Args:
        tree_a (Any): The first tree.
        tree_b (Any): The second tree.
        merge_fn (callable, optional): Called as ``merge_fn(leaf_a, leaf_b)``.

    Returns:
        The merged tree.
    """
    containers = (dict, list, tuple)
    empty_a = isinstance(tree_a, containers) and len(tree_a) == 0
    empty_b = isinstance(tree_b, containers) and len(tree_b) == 0
    if empty_a and empty_b:
        if type(tree_a) is not type(tree_b):
            raise ValueError(f"tree_merge: cannot merge a {type(tree_a).__name__} with a {type(tree_b).__name__}")
        return type(tree_a)()
    if empty_a or tree_a is None:
        return tree_b
    if empty_b or tree_b is None:
        return tree_a
    if isinstance(tree_a, (list, tuple)) and isinstance(tree_b, (list, tuple)):
        if type(tree_a) is not type(tree_b):
            raise ValueError(f"tree_merge: cannot merge a {type(tree_a).__name__} with a {type(tree_b).__name__}")
        n = max(len(tree_a), len(tree_b))
        merged = [
            tree_merge(tree_a[i] if i < len(tree_a) else None, tree_b[i] if i < len(tree_b) else None, merge_fn)
            for i in range(n)
        ]
        return _rebuild(tree_a, merged)
    if isinstance(tree_a, dict) and isinstance(tree_b, dict):
        out = dict(tree_a)
        for k, v in tree_b.items():
            out[k] = tree_merge(tree_a.get(k), v, merge_fn)
        return out
    if isinstance(tree_a, containers) or isinstance(tree_b, containers):
        raise ValueError(f"tree_merge: cannot merge a {type(tree_a).__name__} with a {type(tree_b).__name__}")
    if merge_fn is None:
        raise ValueError("tree_merge: both trees have a leaf at the same place; pass merge_fn to combine them")
    return merge_fn(tree_a, tree_b)
