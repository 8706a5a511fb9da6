#!/usr/bin/env bash
# Peers for `make bench`: NumPy and MLX's CPU build from PyPI (MLX only where a wheel installs).
set -uo pipefail
python3 -c 'import numpy' 2>/dev/null || python3 -m pip install -q numpy
python3 -c 'import mlx.core' 2>/dev/null || python3 -m pip install -q "mlx[cpu]" \
  || echo "[bench] MLX's CPU wheel does not install here; its column will be empty"
exit 0
