#!/usr/bin/env bash
# The shared benchmark environment ($1, default build/bench-venv): Tessera's package and the
# Python peers of `make bench-py` (NumPy, MLX's CPU wheel, PyTorch). Tests never need these. A
# peer that does not install leaves its column empty.
set -uo pipefail
VENV=${1:-build/bench-venv}
PY_BUILD=${2:-build/py-bench}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -r scripts/venv_requirements.txt
"$VENV/bin/python" -c 'import mlx.core' 2>/dev/null || "$VENV/bin/pip" install -q "mlx[cpu]" \
  || echo "[bench-py] MLX's CPU wheel does not install here; its column will be empty"
"$VENV/bin/python" -c 'import torch' 2>/dev/null || "$VENV/bin/pip" install -q torch \
  || echo "[bench-py] PyTorch does not install here; its column will be empty"
# Built for this machine's CPU (as the C++ build is): the distributed wheel picks AVX2 / AVX-512
# copies of its elementwise loops, GEMM and convolution at run time, but its reductions and copies
# keep the baseline's vector width, which would measure that gap instead.
rm -f "$PY_BUILD/.skbuild-info.json"  # incremental under build isolation (see the Makefile)
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$VENV/bin/pip" install -q \
  --config-settings=build-dir="$PY_BUILD" --config-settings=cmake.define.TESSERA_NATIVE_ARCH=ON .
