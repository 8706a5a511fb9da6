#!/usr/bin/env bash
# Install the build and test dependencies that are missing (Debian packages); skip what is present.
# (iproute2 and openssh: the simulated multi-host tests, tests/cluster, build network namespaces
# with `ip` and run an sshd in each; slurm-wlm and openmpi-bin: a real srun and a real mpirun
# starting ring jobs without a hostfile; openmpi-bin and mpich: the MPI backend's tests under
# both MPIs, whose libraries it loads at run time; graphviz: `tessera config --dot` output is
# checked with its parser; doctest-dev: MLX's own C++ tests, built by tools/mlx_cpp_tests.py.)
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
for p in cmake ninja-build g++ pkg-config libopenblas-dev liblapacke-dev nlohmann-json3-dev \
         libgtest-dev libgmock-dev libbenchmark-dev iproute2 zlib1g-dev openssh-server \
         openssh-client slurm-wlm openmpi-bin mpich graphviz doctest-dev; do
  have_pkg "$p" || need+=("$p")
done
# The Python package: venv + ensurepip (make test's virtual environment) and Python.h (the
# extension's build); a Debian python3 needs python3-venv and python3-dev for them.
if ! python3 -c "import venv, ensurepip" 2>/dev/null; then need+=(python3-venv); fi
if ! python3 -c "import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" 2>/dev/null; then
  need+=(python3-dev)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "[deps] installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
