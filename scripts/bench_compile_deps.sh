#!/usr/bin/env bash
# The peers of make bench-compile and make bench-train: those of make bench-py (NumPy, MLX's CPU
# wheel, PyTorch) and JAX's CPU wheel, in the shared benchmark environment. A peer that does not
# install leaves its column empty. Tests never need these.
set -uo pipefail
VENV=${1:-build/bench-venv}
bash scripts/bench_py_deps.sh "$VENV" "${2:-build/py-bench}"
"$VENV/bin/python" -c 'import jax' 2>/dev/null || "$VENV/bin/pip" install -q "jax[cpu]" \
  || echo "[bench-compile] JAX does not install here; its column will be empty"
