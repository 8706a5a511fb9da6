"""python -m tessera.mlx [--force] script.py [args...]   runs an MLX script on Tessera;
python -m tessera.mlx [--force] -m module [args...]       runs a module as ``python -m`` does."""

import runpy
import sys

from tessera.mlx import install


def main() -> None:
    args = sys.argv[1:]
    force = False
    if args and args[0] == "--force":
        force, args = True, args[1:]
    if not args:
        sys.exit("usage: python -m tessera.mlx [--force] script.py [args...]\n"
                 "       python -m tessera.mlx [--force] -m module [args...]")
    if args[0] == "-m" and len(args) < 2:
        sys.exit("tessera.mlx: -m needs a module name (python -m tessera.mlx -m mlx_lm generate ...)")
    try:
        install(force=force)
    except RuntimeError as e:
        sys.exit(f"tessera.mlx: {e}")
    if args[0] == "-m":
        # As `python -m`: argv[0] is the module's file, its directory is not on sys.path.
        sys.argv = [args[1]] + args[2:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
