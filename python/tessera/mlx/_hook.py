"""The import hook `tessera mlx enable` puts in an environment (see tessera/mlx/_enable.py).

Python's `site` runs this file at every start-up through the one line of `tessera-mlx.pth`, without
importing Tessera: it only adds a finder for the name `mlx`. The first `import mlx...` of a program
then asks the finder, which steps aside when a real MLX is installed (the other finders find an
`mlx` package with a file) and otherwise registers Tessera as `mlx` (tessera.mlx.install).
"""

import importlib.machinery
import sys


class TesseraMlxFinder:
    """Finds `mlx` as Tessera unless a real MLX package is there to be found."""

    tessera_mlx_hook = True  # how `tessera mlx status` and repeated start-ups recognise it

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "mlx":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            # A namespace package (a folder named mlx without __init__.py) is not MLX.
            if spec is not None and spec.origin not in (None, "namespace") and spec.loader is not None:
                return None
        import tessera.mlx

        tessera.mlx.install(force=True)  # the check above is install()'s own, made here
        return importlib.machinery.ModuleSpec("mlx", self, is_package=True)

    def create_module(self, spec):
        return sys.modules["mlx"]

    def exec_module(self, module):
        pass


if not any(getattr(f, "tessera_mlx_hook", False) for f in sys.meta_path):
    sys.meta_path.insert(0, TesseraMlxFinder())
