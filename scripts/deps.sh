#!/usr/bin/env bash
# Install the build and test dependencies that are missing (Debian packages); skip what is present.
# (iproute2: the simulated multi-host tests, tests/cluster, build network namespaces with `ip`.)
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
for p in cmake ninja-build g++ pkg-config libopenblas-dev liblapacke-dev nlohmann-json3-dev \
         libgtest-dev libgmock-dev libbenchmark-dev iproute2; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "[deps] installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
