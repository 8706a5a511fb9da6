#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a consumer program
# twice: with find_package(Tessera) and with pkg-config. Usage: check_install.sh BUILD_DIR SRC_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
libdir=$(ls -d "$tmp"/prefix/lib* | head -n 1)
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" > /dev/null
cmake --build "$tmp/consumer" > /dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/consumer/consumer"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs tessera)
g++ "$src/tests/install/consumer/main.cpp" -o "$tmp/consumer_pc" $flags
LD_LIBRARY_PATH="$libdir" "$tmp/consumer_pc"
echo "install check passed (find_package and pkg-config)"
