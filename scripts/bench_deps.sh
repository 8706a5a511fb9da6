#!/usr/bin/env bash
# Peers for `make bench`, in the shared benchmark environment ($1, default build/bench-venv):
# NumPy, SciPy, MLX's CPU wheel and PyTorch from PyPI. Tests never need these; a peer that does not
# install leaves its column empty.
set -uo pipefail
VENV=${1:-build/bench-venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -c 'import numpy, scipy' 2>/dev/null || "$VENV/bin/pip" install -q numpy scipy
"$VENV/bin/python" -c 'import mlx.core' 2>/dev/null || "$VENV/bin/pip" install -q "mlx[cpu]" \
  || echo "[bench] MLX's CPU wheel does not install here; its column will be empty"
"$VENV/bin/python" -c 'import torch' 2>/dev/null || "$VENV/bin/pip" install -q torch \
  || echo "[bench] PyTorch does not install here; its column will be empty"
exit 0
