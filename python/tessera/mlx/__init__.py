"""Run code written for MLX on Tessera: ``import mlx.core as mx`` gives ``tessera.core``.

``python -m tessera.mlx script.py [args]`` (or ``tessera launch --mlx -n 4 script.py``) runs an
unmodified MLX script. A real MLX installation is never shadowed unless ``--force`` (or
``install(force=True)``) asks for it.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

_SUBMODULES = ("random", "linalg", "fast", "distributed", "metal", "cuda")


def _real_mlx_installed() -> bool:
    # A directory named mlx on sys.path (a namespace package) is not an MLX installation; a
    # package with a core module is.
    try:
        return importlib.util.find_spec("mlx.core") is not None
    except (ImportError, ValueError):
        return False
    finally:
        mod = sys.modules.get("mlx")
        if mod is not None and not getattr(mod, "__tessera__", False) and getattr(mod, "__file__", None) is None:
            del sys.modules["mlx"]  # the namespace package find_spec imported


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``mlx.<path>`` below the registered packages (``mlx.nn.layers.linear``,
    ``mlx.optimizers.optimizers``, ...) as the very module ``tessera.<path>``: one copy of each
    module, so ``isinstance`` holds whichever path a program imported a class by."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("mlx.") or fullname in sys.modules:
            return None
        if importlib.util.find_spec("tessera." + fullname[4:]) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return importlib.import_module("tessera." + spec.name[4:])

    def exec_module(self, module):
        pass  # tessera.<path> ran when create_module imported it


def install(force: bool = False) -> None:
    """Makes ``import mlx`` / ``mlx.core`` / ``mlx.core.<submodule>`` import Tessera."""
    if "mlx" in sys.modules and getattr(sys.modules["mlx"], "__tessera__", False):
        return
    if not force and _real_mlx_installed():
        raise RuntimeError(
            "a real MLX is installed in this environment; tessera.mlx does not shadow it. "
            "Uninstall it, run in another environment, or pass --force (install(force=True)).")
    import tessera.core as core

    pkg = types.ModuleType("mlx", "Tessera standing in for MLX (tessera.mlx).")
    pkg.__path__ = []  # a package, so that `import mlx.core` looks in sys.modules
    # importlib.util.find_spec("mlx") (transformers asks it) needs a spec.
    pkg.__spec__ = importlib.machinery.ModuleSpec("mlx", None, is_package=True)
    pkg.__tessera__ = True
    pkg.core = core
    sys.modules["mlx"] = pkg
    sys.modules["mlx.core"] = core
    for name in _SUBMODULES:
        sub = getattr(core, name, None)
        if sub is not None:
            sys.modules["mlx.core." + name] = sub
    for name in ("nn", "optimizers", "utils"):  # the pure-Python layers, once they exist
        spec = importlib.util.find_spec("tessera." + name)
        if spec is not None:
            mod = importlib.import_module("tessera." + name)
            sys.modules["mlx." + name] = mod
            setattr(pkg, name, mod)
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
