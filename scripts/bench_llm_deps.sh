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
# On a CPU with AMX, native flags compile ggml's AMX int8 kernels, and llama-cpp-python 0.3.36's
# segfault in the first Q4_0 product (ggml_backend_amx_mul_mat, seen on a Xeon whose kernel grants
# AMX): there llama.cpp is built without AMX (explicit -mno-amx-* win over -march=native), the
# rest native, and a marker in the venv says so. (Tessera uses no AMX either.)
LLAMA_ARGS=""
MARK=native
if grep -qw amx_int8 /proc/cpuinfo; then
  NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  LLAMA_ARGS="-DCMAKE_C_FLAGS=\"$NO_AMX\" -DCMAKE_CXX_FLAGS=\"$NO_AMX\""
  MARK=native-without-amx
fi
if ! "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null || \
   [ "$(cat "$VENV/.llama-build" 2>/dev/null || echo native)" != "$MARK" ]; then
  echo "[bench-llm] building llama-cpp-python from its sdist ($MARK)"
  "$VENV/bin/pip" uninstall -q -y llama-cpp-python 2>/dev/null
  if CMAKE_ARGS="$LLAMA_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$VENV/bin/pip" install -q \
       --no-cache-dir --no-binary llama-cpp-python llama-cpp-python; then
    echo "$MARK" > "$VENV/.llama-build"
  else
    echo "[bench-llm] llama-cpp-python does not build here; its column will be empty"
  fi
fi
