#!/usr/bin/env bash
# What `make fuzz` needs beyond scripts/deps.sh: clang and its libFuzzer runtime (Debian's
# libclang-rt-<version>-dev), installed only when missing.
set -euo pipefail
have_runtime() {
  local dir
  dir=$(clang++ -print-runtime-dir 2>/dev/null || true)
  [ -n "$dir" ] && ls "$dir"/libclang_rt.fuzzer*.a >/dev/null 2>&1 && return 0
  dir=$(clang++ -print-resource-dir 2>/dev/null || true)
  [ -n "$dir" ] && ls "$dir"/lib/linux/libclang_rt.fuzzer*.a >/dev/null 2>&1
}
if command -v clang++ >/dev/null && have_runtime; then exit 0; fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
command -v clang++ >/dev/null || $sudo apt-get install -y -qq clang
version=$(clang++ --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
have_runtime || $sudo apt-get install -y -qq "libclang-rt-${version}-dev"
