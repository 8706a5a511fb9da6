#!/usr/bin/env bash
# Peers for `make bench-dist` (benchmarks/collectives.cpp): Gloo (libgloo-dev), Open MPI
# (openmpi-bin, libopenmpi-dev) from Debian, MLX's CPU wheel from PyPI. Installs only what is
# missing; a peer that cannot be installed leaves an empty column in the tables, not a failure.
set -uo pipefail
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
need=()
for p in libgloo-dev openmpi-bin libopenmpi-dev; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "[bench-dist] installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"; } \
    || echo "[bench-dist] could not install ${need[*]}; those columns will be empty"
fi
python3 -c 'import mlx.core' 2>/dev/null || python3 -m pip install -q "mlx[cpu]" \
  || echo "[bench-dist] MLX's CPU wheel does not install here; its columns will be empty"
exit 0
