#!/usr/bin/env bash
# The peers of `make bench-llm`, in the shared benchmark environment ($1, default build/bench-venv):
# MLX's CPU wheel with mlx-lm, PyTorch with transformers and PEFT, and llama.cpp through llama-cpp-python,
# built once from its sdist with its default native flags (GGML_NATIVE: this CPU's AVX-512, BF16
# and VNNI), plus the gguf writer. Tessera itself runs from the test environment ($2, default
# build/venv: the package as `pip install .` builds it). A peer that does not install leaves its
# column empty. Tests never need these.
set -uo pipefail
VENV=${1:-build/bench-venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/python" -c 'import mlx.core, mlx_lm' 2>/dev/null \
  || "$VENV/bin/pip" install -q "mlx[cpu]==0.32.4" "mlx-lm==0.32.2" \
  || echo "[bench-llm] MLX's CPU wheel does not install here; its column will be empty"
"$VENV/bin/python" -c 'import torch, transformers, peft' 2>/dev/null \
  || "$VENV/bin/pip" install -q torch transformers peft \
  || echo "[bench-llm] PyTorch or PEFT does not install here; its column will be empty"
"$VENV/bin/python" -c 'import gguf' 2>/dev/null || "$VENV/bin/pip" install -q gguf
"$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null \
  || CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$VENV/bin/pip" install -q --no-binary llama-cpp-python \
       llama-cpp-python \
  || echo "[bench-llm] llama-cpp-python does not build here; its column will be empty"
