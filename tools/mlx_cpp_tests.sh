#!/usr/bin/env bash
# Builds MLX's own C++ tests (tests/*.cpp of an MLX source tree, doctest) against Tessera and
# prints, per file and in all, the test cases that pass, fail and do not build.
#
#   tools/mlx_cpp_tests.sh [--skip-if-missing] MLX_SOURCE BUILD_DIR [OUT_DIR]
#
# MLX_SOURCE: a checkout of github.com/ml-explore/mlx (0.32.x; MLX publishes no source archive
# on PyPI, so it cannot be fetched here). BUILD_DIR: a Tessera build tree (libtessera.so).
# MLX's files are read where they are, never copied: each is compiled as it is, with a folder of
# generated `mlx/*.h` headers in front that map `mlx::core` onto `tessera` (and answer MLX's
# GPU-backend queries with "not available"). A file that does not compile counts its test cases
# as not built; the others link into one doctest runner, and each test case runs in a process of
# its own (a crash or a hang costs that case only, bounded by a timeout).
# GPU-only files (gpu_tests.cpp, residency_tests.cpp) are left out: they are not CPU cases.
set -uo pipefail
skip_if_missing=0
if [ "${1:-}" = "--skip-if-missing" ]; then skip_if_missing=1; shift; fi
mlx=${1:-${MLX_SRC:-}}
build=${2:-}
out=${3:-${build:-.}/mlx-cpp-tests}
if [ -z "$mlx" ] || [ ! -f "$mlx/tests/tests.cpp" ]; then
  msg="MLX's C++ tests not found (MLX_SOURCE='$mlx'): pass a checkout of github.com/ml-explore/mlx"
  if [ "$skip_if_missing" = 1 ]; then echo "mlx_cpp_tests: skipped: $msg"; exit 0; fi
  echo "mlx_cpp_tests: $msg" >&2; exit 2
fi
if [ -z "$build" ] || [ ! -e "$build/libtessera.so" ]; then
  echo "mlx_cpp_tests: no libtessera.so in BUILD_DIR='$build' (build Tessera first)" >&2; exit 2
fi
if [ ! -f /usr/include/doctest/doctest.h ]; then
  echo "mlx_cpp_tests: doctest is missing: apt-get install doctest-dev" >&2; exit 2
fi
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
mkdir -p "$out/compat/mlx/backend/cuda" "$out/compat/mlx/backend/metal" "$out/obj"
out=$(cd "$out" && pwd)

# The mapping: every MLX header the tests include is this one.
cat > "$out/compat/mlx/compat.h" <<'EOF'
#pragma once
#include <tessera/primitives.h>
#include <tessera/tessera.h>
namespace mlx::core {
using namespace tessera;
namespace gpu {
inline bool is_available() { return false; }
}  // namespace gpu
namespace cu {
inline bool is_available() { return false; }
}  // namespace cu
}  // namespace mlx::core
EOF
for h in mlx.h primitives.h scheduler.h memory.h allocator.h stream.h ops.h graph_utils.h \
         export.h device.h backend/cuda/cuda.h backend/metal/device.h; do
  echo '#include "mlx/compat.h"' > "$out/compat/mlx/$h"
done
# doctest/doctest.h as the tests include it (Debian's doctest-dev).
flags=(-std=c++20 -O1 -w -I"$out/compat" -I"$src/include" -I/usr/include)

files=()
for f in "$mlx"/tests/*_tests.cpp; do
  case "$(basename "$f")" in gpu_tests.cpp|residency_tests.cpp) continue ;; esac
  files+=("$f")
done
cases_in() { grep -c '^TEST_CASE(' "$1"; }

built=()
declare -A not_built
for f in "${files[@]}"; do
  name=$(basename "$f" .cpp)
  if g++ "${flags[@]}" -c "$f" -o "$out/obj/$name.o" 2> "$out/obj/$name.log"; then
    built+=("$out/obj/$name.o")
  else
    not_built[$name]=$(cases_in "$f")
  fi
done
g++ "${flags[@]}" -c "$mlx/tests/tests.cpp" -o "$out/obj/main.o" || exit 1
g++ "${built[@]}" "$out/obj/main.o" -o "$out/runner" -L"$build" -Wl,-rpath,"$build" -ltessera \
  -lpthread || exit 1

# Each test case by itself. doctest filters split on commas and treat * ? [ as wildcards:
# those characters become '?' (one character) in the filter.
: > "$out/results.txt"
"$out/runner" --list-test-cases --no-colors 2> /dev/null | sed -n '/^=====/,/^=====/p' \
  | grep -v '^=====' | sed '/^$/d' > "$out/cases.txt"
while IFS= read -r tc; do
  filter=$(printf '%s' "$tc" | sed 's/[],*?[]/?/g')
  if (cd "$out" && timeout 300 ./runner --no-colors -tc="$filter" > "$out/last.log" 2>&1); then
    echo "passed	$tc" >> "$out/results.txt"
  else
    echo "failed	$tc" >> "$out/results.txt"
    { echo "=== $tc"; tail -n 20 "$out/last.log"; } >> "$out/failures.log"
  fi
done < "$out/cases.txt"

passed=$(grep -c '^passed' "$out/results.txt")
failed=$(grep -c '^failed' "$out/results.txt")
unbuilt=0
for n in "${!not_built[@]}"; do unbuilt=$((unbuilt + not_built[$n])); done
total=$((passed + failed + unbuilt))
echo "MLX C++ test cases against Tessera ($mlx):"
for n in "${!not_built[@]}"; do
  echo "  not built: $n (${not_built[$n]} cases; errors in $out/obj/$n.log)"
done
grep '^failed' "$out/results.txt" | sed 's/^failed\t/  failed: /'
echo "passed $passed, failed $failed, not built $unbuilt, of $total:" \
     "$(awk -v p="$passed" -v t="$total" 'BEGIN { printf "%.1f%% passed", t ? 100 * p / t : 0 }')"
