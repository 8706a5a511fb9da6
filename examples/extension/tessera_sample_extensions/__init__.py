"""A sample C++ extension of Tessera (examples/extension)."""

import tessera.core  # noqa: F401  (registers the array type the extension's functions take)

from ._ext import axpby

__all__ = ["axpby"]
