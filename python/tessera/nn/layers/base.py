"""``Module``: the base of every layer, with MLX's semantics.

A module is a ``dict``: its arrays, lists, tuples and dicts (sub-modules included) are entries,
reached as attributes (``self.weight``); everything else is a plain attribute. Parameters are
the array entries whose keys do not start with ``_``; ``freeze`` hides them from
``trainable_parameters``.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable, List, Optional, Tuple, Union

import tessera.core as mx
from tessera.utils import tree_flatten, tree_unflatten

_CONTAINERS = (mx.array, dict, list, tuple)


class Module(dict):
    """The base class of layers and models.

    Subclasses call ``super().__init__()`` first, then assign their parameters and
    sub-modules as attributes. ``model.parameters()`` is the tree of every parameter,
    ``model.update(tree)`` replaces them, and ``model(x)`` calls ``__call__``.
    """

    __call__: Callable

    def __init__(self):
        self._no_grad = set()
        self._training = True

    @property
    def training(self) -> bool:
        """Whether the module is in training mode (see :meth:`train` and :meth:`eval`)."""
        return self._training

    @property
    def state(self) -> "Module":
        """The module itself: its parameters and every other entry (for ``mx.compile``)."""
        return self

    def _extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        children = tree_flatten(self.children(), is_leaf=self.is_module)
        text = f"{type(self).__name__}({self._extra_repr()}"
        for key, child in children:
            text += "\n" + textwrap.indent(f"({key}): {child!r}", "  ")
        return text + ("\n)" if children else ")")

    def __getattr__(self, key: str):
        # Only reached when normal lookup fails: entries of the dict.
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}") from None

    def __setattr__(self, key: str, value: Any):
        if isinstance(value, _CONTAINERS):
            # An attribute of this name would shadow the entry: it goes.
            if key in self.__dict__:
                del self.__dict__[key]
            self[key] = value
        else:
            super().__setattr__(key, value)
            self.pop(key, None)

    def __delattr__(self, key: str):
        if key in self:
            del self[key]
        else:
            super().__delattr__(key)

    # ---- weights on disk ----

    def load_weights(
        self,
        file_or_weights: Union[str, List[Tuple[str, mx.array]]],
        strict: bool = True,
    ) -> "Module":
        """Loads parameters from a ``.npz`` or ``.safetensors`` file, or a list of pairs.

        Args:
            file_or_weights (str or list(tuple(str, array))): A file path, or
                ``(dotted key, array)`` pairs as :func:`tessera.utils.tree_flatten` gives.
            strict (bool): Require exactly the model's parameters with their shapes: a
                missing, extra or mis-shaped key is a ``ValueError`` naming it. Without it, the
                weights given replace the matching ones. Default: ``True``.

        Returns:
            The module.
        """
        weights = file_or_weights
        if isinstance(weights, str):
            weights = list(mx.load(weights).items())
        elif isinstance(weights, dict):
            weights = list(weights.items())
        if strict:
            given = dict(weights)
            current = tree_flatten(self.parameters(), destination={})
            extra = sorted(given.keys() - current.keys())
            if extra:
                raise ValueError(
                    f"load_weights: {len(extra)} parameters are not in the model: " + ", ".join(extra)
                    + " (strict=False loads the others and ignores these)")
            missing = sorted(current.keys() - given.keys())
            if missing:
                raise ValueError(
                    f"load_weights: {len(missing)} parameters of the model are missing: "
                    + ", ".join(missing) + " (strict=False keeps their current values)")
            for key, value in current.items():
                new = given[key]
                if not isinstance(new, mx.array):
                    raise ValueError(
                        f"load_weights: parameter {key} must be an array, not {type(new).__name__}")
                if new.shape != value.shape:
                    raise ValueError(
                        f"load_weights: parameter {key} has shape {tuple(new.shape)} in the weights "
                        f"but {tuple(value.shape)} in the model")
        if weights:
            self.update(tree_unflatten(weights), strict=False)
        return self

    def save_weights(self, file: str):
        """Saves the parameters to ``file`` (``.npz`` or ``.safetensors``, by its extension)."""
        flat = tree_flatten(self.parameters(), destination={})
        if file.endswith(".npz"):
            mx.savez(file, **flat)
        elif file.endswith(".safetensors"):
            mx.save_safetensors(file, flat)
        else:
            raise ValueError(
                f"save_weights: cannot tell the format of {file!r}; name it *.npz or *.safetensors")

    # ---- filters ----

    @staticmethod
    def is_module(value) -> bool:
        return isinstance(value, Module)

    @staticmethod
    def valid_child_filter(module, key, value) -> bool:
        return isinstance(value, (dict, list))

    @staticmethod
    def valid_parameter_filter(module, key, value) -> bool:
        return isinstance(value, (dict, list, mx.array)) and not key.startswith("_")

    @staticmethod
    def trainable_parameter_filter(module, key, value) -> bool:
        return Module.valid_parameter_filter(module, key, value) and key not in module._no_grad

    def filter_and_map(
        self,
        filter_fn: Callable[["Module", str, Any], bool],
        map_fn: Optional[Callable] = None,
        is_leaf_fn: Optional[Callable[["Module", str, Any], bool]] = None,
    ) -> dict:
        """The tree of the entries ``filter_fn(module, key, value)`` accepts, ``map_fn`` applied.

        Args:
            filter_fn (callable): Which entries to keep, asked of every module on the way.
            map_fn (callable, optional): Applied to every kept leaf.
            is_leaf_fn (callable, optional): Which values are leaves (by default anything that
                is not a module, dict or list).

        Returns:
            A dict tree (modules become dicts).
        """
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or (lambda m, k, v: not isinstance(v, (Module, dict, list)))
        return {
            k: _walk(self, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in self.items()
            if filter_fn(self, k, v)
        }

    def parameters(self) -> dict:
        """Every parameter (array entries whose keys do not start with ``_``), as a tree."""
        return self.filter_and_map(self.valid_parameter_filter)

    def trainable_parameters(self) -> dict:
        """The parameters that are not frozen, as a tree."""
        return self.filter_and_map(self.trainable_parameter_filter)

    def children(self) -> dict:
        """The direct sub-modules (in their dicts and lists), as a tree."""
        return self.filter_and_map(self.valid_child_filter, is_leaf_fn=lambda m, k, v: isinstance(v, Module))

    def leaf_modules(self) -> dict:
        """The sub-modules that have no sub-modules, as a tree."""

        def leaf(m, k, v):
            return isinstance(v, Module) and not tree_flatten(v.children())

        return self.filter_and_map(self.valid_child_filter, is_leaf_fn=leaf)

    # ---- updating ----

    def update(self, parameters: dict, strict: bool = True) -> "Module":
        """Replaces parameters with those of the tree ``parameters`` (a subset of the model's).

        Args:
            parameters (dict): A tree like :meth:`parameters` returns.
            strict (bool): A key the model does not have, a list index past its end, or a
                non-array where the model has an array is a ``ValueError``. Default: ``True``.

        Returns:
            The module.
        """
        _update(self, parameters, strict, "", arrays=True)
        return self

    def apply(
        self,
        map_fn: Callable[[mx.array], mx.array],
        filter_fn: Optional[Callable[["Module", str, Any], bool]] = None,
    ) -> "Module":
        """Replaces every parameter ``p`` (or every entry ``filter_fn`` accepts) by ``map_fn(p)``."""
        self.update(self.filter_and_map(filter_fn or Module.valid_parameter_filter, map_fn))
        return self

    def update_modules(self, modules: dict, strict: bool = True) -> "Module":
        """Replaces sub-modules with those of the tree ``modules`` (as :meth:`children` gives).

        Args:
            modules (dict): A tree of modules.
            strict (bool): A key the model does not have is a ``ValueError``. Default: ``True``.

        Returns:
            The module.
        """
        _update(self, modules, strict, "", arrays=False)
        return self

    def apply_to_modules(self, apply_fn: Callable[[str, "Module"], Any]) -> "Module":
        """Calls ``apply_fn(dotted name, module)`` for this module and every sub-module."""
        stack = [("", self)]
        while stack:
            name, module = stack.pop()
            apply_fn(name, module)
            prefix = "." + name if name else ""
            stack.extend(tree_flatten(module.children(), prefix=prefix, is_leaf=self.is_module))
        return self

    def modules(self) -> list:
        """This module and every sub-module."""
        found = []
        self.apply_to_modules(lambda _, m: found.append(m))
        return found

    def named_modules(self) -> list:
        """``(dotted name, module)`` for this module (name ``""``) and every sub-module."""
        found = []
        self.apply_to_modules(lambda name, m: found.append((name, m)))
        return found

    # ---- freezing ----

    def _check_keys(self, keys, strict):
        keys = keys if isinstance(keys, list) else [keys]
        if strict:
            for k in keys:
                if k not in self:
                    raise KeyError(f"{type(self).__name__} has no member {k!r}")
        return keys

    def _check_keys_anywhere(self, keys):
        keys = keys if isinstance(keys, list) else [keys]
        modules = self.modules()
        for k in keys:
            if not any(k in m for m in modules):
                raise KeyError(f"no module of this {type(self).__name__} has a member {k!r}")

    def freeze(
        self,
        *,
        recurse: bool = True,
        keys: Optional[Union[str, List[str]]] = None,
        strict: bool = False,
    ) -> "Module":
        """Excludes parameters from :meth:`trainable_parameters` (and so from gradients).

        Args:
            recurse (bool): Sub-modules too. Default: ``True``.
            keys (str or list(str), optional): Only these local keys (``"bias"``); by default
                every parameter.
            strict (bool): A key that no module has is a ``KeyError``. Default: ``False``.

        Returns:
            The module.
        """

        def freeze_one(_, m):
            local = keys
            if local is None:
                local = [
                    k
                    for k, _ in tree_flatten(
                        m.filter_and_map(
                            lambda mm, k, v: not isinstance(v, Module) and mm.valid_parameter_filter(mm, k, v)
                        )
                    )
                ]
            m._no_grad.update(m._check_keys(local, strict and not recurse))

        if recurse:
            if strict and keys is not None:
                self._check_keys_anywhere(keys)
            self.apply_to_modules(freeze_one)
        else:
            freeze_one("", self)
        return self

    def unfreeze(
        self,
        *,
        recurse: bool = True,
        keys: Optional[Union[str, List[str]]] = None,
        strict: bool = False,
    ) -> "Module":
        """Makes frozen parameters trainable again (the arguments as :meth:`freeze`)."""

        def unfreeze_one(_, m):
            if keys is None:
                m._no_grad.clear()
            else:
                m._no_grad.difference_update(m._check_keys(keys, strict and not recurse))

        if recurse:
            if strict and keys is not None:
                self._check_keys_anywhere(keys)
            self.apply_to_modules(unfreeze_one)
        else:
            unfreeze_one("", self)
        return self

    # ---- modes and dtypes ----

    def _set_training_mode(self, mode: bool):
        self._training = mode

    def train(self, mode: bool = True) -> "Module":
        """Sets training mode (``mode=True``) or evaluation mode on every module."""
        self.apply_to_modules(lambda _, m: m._set_training_mode(mode))
        return self

    def eval(self) -> "Module":
        """Sets evaluation mode on every module (``train(False)``)."""
        return self.train(False)

    def set_dtype(
        self,
        dtype: mx.Dtype,
        predicate: Optional[Callable[[mx.Dtype], bool]] = lambda t: mx.issubdtype(t, mx.floating),
    ):
        """Casts the parameters whose dtype ``predicate`` accepts (by default floating ones)."""
        accept = predicate if predicate is not None else (lambda _: True)
        self.apply(lambda x: x.astype(dtype) if accept(x.dtype) else x)


def _update(dst, src, strict, path, arrays):
    """Writes the leaves of ``src`` into ``dst``: arrays (``arrays``) or modules."""
    where = f" at {path!r}" if path else ""
    if isinstance(src, dict):
        if not isinstance(dst, dict):
            if strict:
                raise ValueError(f"update: got a dict{where} where the model has a {type(dst).__name__}")
            return
        items = ((k, k in dst) for k in src)
    elif isinstance(src, list):
        if not isinstance(dst, list):
            if strict:
                raise ValueError(f"update: got a list{where} where the model has a {type(dst).__name__}")
            return
        items = ((i, i < len(dst)) for i in range(len(src)))
    else:
        if strict:
            raise ValueError(f"update: got a {type(src).__name__}{where}; expected a dict or a list")
        return
    kind = "parameter" if arrays else "sub-module"
    for key, present in items:
        sub = f"{path}.{key}" if path else str(key)
        if not present:
            if strict:
                if isinstance(src, dict):
                    raise ValueError(f'update: the model has no {kind} named "{sub}"')
                raise ValueError(f"update: list index {key} at {path!r} is past the end (length {len(dst)})")
            continue
        current, new = dst[key], src[key]
        if arrays and isinstance(current, mx.array):
            if strict and not isinstance(new, mx.array):
                raise ValueError(f"update: {sub} must be an array, not {type(new).__name__}")
            dst[key] = new
        elif not arrays and isinstance(current, Module) and isinstance(new, Module):
            dst[key] = new
        elif isinstance(current, (dict, list)):
            _update(current, new, strict, sub, arrays)
        elif isinstance(new, (dict, list)) and not new:
            continue  # what parameters() / children() give for a non-array leaf: left as it is
        elif strict:
            raise ValueError(f"update: {sub} is a {type(current).__name__} in the model; cannot set it to a {type(new).__name__}")


def _walk(module, key, value, filter_fn, map_fn, is_leaf_fn):
    if is_leaf_fn(module, key, value):
        return map_fn(value)
    if isinstance(value, Module):
        return {k: _walk(value, k, v, filter_fn, map_fn, is_leaf_fn) for k, v in value.items() if filter_fn(value, k, v)}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            sub = f"{key}.{k}"
            out[k] = _walk(module, sub, v, filter_fn, map_fn, is_leaf_fn) if filter_fn(module, sub, v) else {}
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            sub = f"{key}.{i}"
            out.append(_walk(module, sub, v, filter_fn, map_fn, is_leaf_fn) if filter_fn(module, sub, v) else {})
        return out
    raise RuntimeError(f"Module: unexpected value of type {type(value).__name__} under {key!r}")
