"""python -m tessera.mlx [--force] script.py [args...]: runs an MLX script on Tessera."""

import runpy
import sys

from tessera.mlx import install


def main() -> None:
    args = sys.argv[1:]
    force = False
    if args and args[0] == "--force":
        force, args = True, args[1:]
    if not args:
        sys.exit("usage: python -m tessera.mlx [--force] script.py [args...]")
    try:
        install(force=force)
    except RuntimeError as e:
        sys.exit(f"tessera.mlx: {e}")
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
