"""Tessera: an array framework with MLX's API, autodiff and a distributed layer, for Linux.

``import tessera.core as mx`` gives the API of ``mlx.core``. To run code written for MLX
unchanged, see ``python -m tessera.mlx`` and ``tessera launch --mlx``.
"""

__version__ = "0.1.0"
