"""Building C++ extensions of Tessera with setuptools, as MLX's ``mlx.extension`` does.

``CMakeExtension(name, sourcedir)`` names a CMake project that builds the extension module
``name`` (``package._ext``); ``CMakeBuild`` (``cmdclass={"build_ext": CMakeBuild}``) configures
and builds it with this interpreter, ``Tessera_ROOT`` pointing at the installed package, so the
project's ``find_package(Tessera CONFIG REQUIRED)`` finds the headers and libtessera that
``tessera.core`` itself loads. ``CMAKE_ARGS`` (split on spaces) adds CMake settings;
``CMAKE_BUILD_PARALLEL_LEVEL`` the build's parallelism. examples/extension is a whole example.
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension
from setuptools.command.build_ext import build_ext

import tessera

TESSERA_ROOT = str(Path(tessera.__file__).resolve().parent)


class CMakeExtension(Extension):
    """An extension module built by the CMake project in ``sourcedir`` (no source list)."""

    def __init__(self, name: str, sourcedir: str = "") -> None:
        super().__init__(name, sources=[])
        self.sourcedir = os.fspath(Path(sourcedir).resolve())


class CMakeBuild(build_ext):
    """build_ext for CMakeExtension: the module lands where setuptools expects it."""

    def build_extension(self, ext: Extension) -> None:
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        extdir = (Path.cwd() / self.get_ext_fullpath(ext.name)).parent.resolve()
        config = "Debug" if (self.debug or int(os.environ.get("DEBUG", "0") or 0)) else "Release"
        args = [f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={extdir}{os.sep}",
                f"-DCMAKE_BUILD_TYPE={config}",
                f"-DPython_EXECUTABLE={sys.executable}",
                f"-DTessera_ROOT={TESSERA_ROOT}"]
        args += [a for a in os.environ.get("CMAKE_ARGS", "").split(" ") if a]
        build_args = []
        if "CMAKE_BUILD_PARALLEL_LEVEL" not in os.environ:
            build_args.append(f"-j{os.cpu_count() or 1}")
        build_temp = Path(self.build_temp) / ext.name
        build_temp.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cmake", ext.sourcedir, *args], cwd=build_temp, check=True)
        subprocess.run(["cmake", "--build", ".", *build_args], cwd=build_temp, check=True)
