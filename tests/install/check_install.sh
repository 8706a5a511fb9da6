#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a consumer program
# twice: with find_package(Tessera) (which must carry C++20 itself: the consumer does not ask for
# it) and with pkg-config (whose flags must carry an rpath: neither run sets LD_LIBRARY_PATH).
# Then every C++ snippet of README.md and docs/*.md is built the same way and run, so the
# examples users copy compile as shown. Usage: check_install.sh BUILD_DIR SRC_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH
# Kernels compile builds stay here (and the installed tree's headers are the ones it must use).
export TESSERA_COMPILE_CACHE_DIR="$tmp/kernels"
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
libdir=$(ls -d "$tmp"/prefix/lib* | head -n 1)
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" > /dev/null
cmake --build "$tmp/consumer" > /dev/null
"$tmp/consumer/consumer"
"$tmp/prefix/bin/tessera" env > /dev/null  # the command finds its library by itself
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs tessera)
g++ "$src/tests/install/consumer/main.cpp" -o "$tmp/consumer_pc" $flags
"$tmp/consumer_pc"
echo "install check passed (find_package and pkg-config)"

# Snippets: each ```cpp block is a whole program.
n=0
for doc in "$src/README.md" "$src"/docs/*.md; do
  awk -v dir="$tmp" -v base="$(basename "$doc" .md)" '
    /^```cpp$/ { inside = 1; k += 1; file = dir "/snippet_" base "_" k ".cpp"; next }
    /^```$/ { inside = 0; next }
    inside { print > file }' "$doc"
done
for f in "$tmp"/snippet_*.cpp; do
  [ -e "$f" ] || continue
  exe="${f%.cpp}"
  if ! g++ "$f" -o "$exe" $flags 2> "$exe.log"; then
    echo "snippet $(basename "$f") does not compile:"; cat "$f"; cat "$exe.log"; exit 1
  fi
  if ! (cd "$tmp" && timeout 60 "$exe") > "$exe.out" 2>&1; then  # files they write land in $tmp
    echo "snippet $(basename "$f") failed:"; cat "$f"; cat "$exe.out"; exit 1
  fi
  if grep -q "warning" "$exe.out"; then  # e.g. compile's fused kernels not building
    echo "snippet $(basename "$f") warned:"; cat "$exe.out"; exit 1
  fi
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "no C++ snippets found in README.md and docs/"; exit 1; }
echo "$n documentation snippets build and run"
