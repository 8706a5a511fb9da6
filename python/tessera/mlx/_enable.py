"""`tessera mlx enable | disable | status`: the per-environment opt-in that lets programs written
for MLX (console scripts of other packages included: mlx_lm.generate, mlx_lm.lora, ...) import
Tessera as `mlx` without `python -m tessera.mlx`.

`enable` writes one file, `tessera-mlx.pth`, into this environment's site-packages. Its single
line runs tessera/mlx/_hook.py at start-up if Tessera is still installed (and does nothing
otherwise): the hook adds an import finder and imports nothing until a program imports `mlx`,
then steps aside if a real MLX is installed. `disable` removes the file.
"""

import os
import sys
import sysconfig

PTH_NAME = "tessera-mlx.pth"

# One line (site runs lines that start with "import"); it must not fail when Tessera is gone.
PTH_LINE = ("import os, importlib.util as u; s = u.find_spec('tessera'); "
            "h = s and os.path.join(s.submodule_search_locations[0], 'mlx', '_hook.py'); "
            "h and os.path.isfile(h) and exec(compile(open(h).read(), h, 'exec'), "
            "{'__name__': 'tessera_mlx_hook'})\n")

USAGE = ("usage: tessera mlx enable | disable | status\n"
         "  enable   programs of this Python environment that import mlx get Tessera\n"
         "           (writes {pth} into its site-packages; steps aside for a real MLX)\n"
         "  disable  removes that file again\n"
         "  status   says whether it is enabled here and what `import mlx` gives\n")


def pth_path() -> str:
    return os.path.join(sysconfig.get_paths()["purelib"], PTH_NAME)


def _real_mlx_origin():
    """The file of a real MLX package this interpreter would import, or None."""
    for finder in sys.meta_path:  # not importlib.util.find_spec: the hook itself would answer
        if getattr(finder, "tessera_mlx_hook", False) or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec("mlx", None)
        if spec is not None and spec.origin not in (None, "namespace") and spec.loader is not None:
            return spec.origin
    return None


def main(args) -> int:
    if len(args) != 1 or args[0] not in ("enable", "disable", "status"):
        sys.stderr.write(USAGE.format(pth=PTH_NAME))
        return 0 if args and args[0] in ("-h", "--help") else 2
    path = pth_path()
    if args[0] == "enable":
        real = _real_mlx_origin()
        if real is not None:
            sys.stderr.write(f"tessera mlx: a real MLX is installed in this environment ({real}); "
                             "the hook would step aside for it. Uninstall it (pip uninstall mlx) "
                             "or use another environment, then enable again.\n")
            return 1
        try:
            with open(path, "w") as f:
                f.write(PTH_LINE)
        except OSError as e:
            sys.stderr.write(f"tessera mlx: cannot write {path}: {e.strerror}\n")
            return 1
        print(f"enabled: programs run by {sys.executable} that import mlx get Tessera ({path}); "
              "`tessera mlx disable` undoes it")
    elif args[0] == "disable":
        if os.path.exists(path):
            try:
                os.remove(path)
            except OSError as e:
                sys.stderr.write(f"tessera mlx: cannot remove {path}: {e.strerror}\n")
                return 1
            print(f"disabled: removed {path}")
        else:
            print(f"not enabled for {sys.executable} (no {path})")
    else:
        enabled = os.path.exists(path)
        real = _real_mlx_origin()
        print(f"{'enabled' if enabled else 'not enabled'} for {sys.executable} ({path})")
        if real is not None:
            print(f"a real MLX is installed ({real}): `import mlx` gives it")
        elif enabled:
            print("`import mlx` gives Tessera")
    return 0
