#!/usr/bin/env bash
# Syntax- and warning-check one binding file of python/src without building the whole module
# (needs build/venv with nanobind: make test creates it). Usage: scripts/pycheck.sh FILE.cpp
set -euo pipefail
cd "$(dirname "$0")/.."
PY=build/venv/bin/python
NB=$($PY -m nanobind --include_dir)/..
INC=$($PY -c "import sysconfig; print(sysconfig.get_paths()['include'])")
exec g++ -std=c++20 -fsyntax-only -fvisibility=hidden -Wall -Wextra -Werror -Wno-unused-parameter \
  -Wno-restrict -I include -I src -I python/src -I "$NB/include" -I "$NB/ext/robin_map/include" \
  -I "$INC" "$@"
