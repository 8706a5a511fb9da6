"""python -m tessera.mlx [--force] script [args...]   runs an MLX program on Tessera: a Python file
                                                 or a command (mlx_lm.generate, ...) of this
                                                 interpreter's environment or PATH;
python -m tessera.mlx [--force] -m module [args...] runs a module as ``python -m`` does."""

import os
import runpy
import shutil
import sys

from tessera.mlx import install

USAGE = ("usage: python -m tessera.mlx [--force] script [args...]   (a Python file, or a command "
         "of this environment or PATH)\n       python -m tessera.mlx [--force] -m module [args...]")


def _python_program(name: str) -> str:
    """The file to run for `name`: itself if it exists, else the command of that name among this
    interpreter's scripts or on PATH, which must be a Python program (a console script's
    `#!...python` line)."""
    if os.path.isfile(name):
        return name
    found = None
    if os.sep not in name:
        # A console script of this interpreter's environment first (on a remote host its folder
        # is often not on PATH), then PATH.
        found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if found is None:
        sys.exit(f"tessera.mlx: '{name}' is neither a file, nor a command of "
                 f"{os.path.dirname(sys.executable)}, nor on PATH")
    with open(found, "rb") as f:
        first = f.readline(256)
    if not (first.startswith(b"#!") and b"python" in first):
        sys.exit(f"tessera.mlx: {found} (found for '{name}') is not a Python program; "
                 "only Python can import mlx")
    return found


def main() -> None:
    args = sys.argv[1:]
    force = False
    if args and args[0] == "--force":
        force, args = True, args[1:]
    if not args or args[0] in ("-h", "--help"):
        sys.exit(USAGE)
    if args[0] == "-m" and len(args) < 2:
        sys.exit("tessera.mlx: -m needs a module name (python -m tessera.mlx -m mlx_lm generate ...)")
    program = None if args[0] == "-m" else _python_program(args[0])
    try:
        install(force=force)
    except RuntimeError as e:
        sys.exit(f"tessera.mlx: {e}")
    if program is None:
        # As `python -m`: argv[0] is the module's file, its directory is not on sys.path.
        sys.argv = [args[1]] + args[2:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        # As `python script`: the script's folder, not the working directory, is sys.path[0].
        sys.argv = [program] + args[1:]
        sys.path[0] = os.path.dirname(os.path.abspath(program))
        runpy.run_path(program, run_name="__main__")


if __name__ == "__main__":
    main()
