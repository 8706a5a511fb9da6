"""python -m tessera --cmake-dir | --include-dir | --version: where the installed package keeps
what C++ programs and extensions build against (as ``python -m mlx --cmake-dir``).

``--cmake-dir`` is the folder to give CMake as ``Tessera_ROOT`` (``find_package(Tessera)`` then
finds ``share/cmake/Tessera`` under it); ``--include-dir`` the public headers' root.
"""

import argparse
import os

import tessera


def main(argv=None) -> None:
    here = os.path.dirname(os.path.abspath(tessera.__file__))
    parser = argparse.ArgumentParser(prog="python -m tessera", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=tessera.__version__)
    parser.add_argument("--cmake-dir", action="store_true",
                        help="print the folder to pass to CMake as Tessera_ROOT")
    parser.add_argument("--include-dir", action="store_true",
                        help="print the folder holding the public headers (tessera/*.h)")
    args = parser.parse_args(argv)
    if not (args.cmake_dir or args.include_dir):
        parser.error("nothing to print: pass --cmake-dir, --include-dir or --version")
    config = os.path.join(here, "share", "cmake", "Tessera", "TesseraConfig.cmake")
    if not os.path.exists(config):
        parser.exit(1, f"python -m tessera: {config} is missing: this copy of Tessera was not "
                    "installed from a wheel (pip install . or pip install tessera-*.whl)\n")
    if args.cmake_dir:
        print(here)
    if args.include_dir:
        print(os.path.join(here, "include"))


if __name__ == "__main__":
    main()
