# Writes mlx_0_32_4_names.json beside this file with MLX's CPU package (mlx[cpu]==0.32.4): the
# public names (dir() without a leading '_') of mlx.core, its submodules, mlx.core.array,
# mlx.nn and its losses / init / utils, mlx.optimizers and mlx.utils, leaving out modules and
# what a module re-imports from typing or the standard library. The tests read the file and
# never need MLX. Run: python make_mlx_names.py
import importlib
import inspect
import json
import os

import mlx.core as mx

MODULES = ["mlx.core", "mlx.core.fft", "mlx.core.linalg", "mlx.core.random", "mlx.core.fast",
           "mlx.core.distributed", "mlx.core.metal", "mlx.core.cuda", "mlx.nn", "mlx.nn.losses",
           "mlx.nn.init", "mlx.nn.utils", "mlx.optimizers", "mlx.utils"]


def foreign(value):
    """A module, or something a module imported from typing or the standard library."""
    if inspect.ismodule(value):
        return True
    origin = (getattr(value, "__module__", None) or "").split(".")[0].lstrip("_")
    return origin in {"typing", "functools", "collections", "itertools", "math"}


out = {"_about": "Public names of MLX 0.32.4 (mlx[cpu] 0.32.4 on PyPI, Linux x86-64): dir() of "
                 "each module without names starting with '_', which matched the wheel's .pyi "
                 "stubs; for mlx.core.array, the array class. Names mlx re-imports from typing "
                 "or the standard library are left out. Written by make_mlx_names.py.",
       "version": mx.__version__}
for name in MODULES:
    module = importlib.import_module(name)
    out[name] = sorted(n for n in dir(module) if not n.startswith("_")
                       and not foreign(getattr(module, n)))
out["mlx.core.array"] = sorted(n for n in dir(mx.array) if not n.startswith("_"))
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlx_0_32_4_names.json"), "w") as f:
    json.dump(out, f, indent=1)
