#!/usr/bin/env bash
# make fuzz: runs every libFuzzer target of a TESSERA_FUZZ build (tests/fuzz) for RUNS inputs
# each, from its checked-in seeds (tests/fuzz/corpus/<target>) plus what earlier runs found
# (<build>/corpus/<target>), within libFuzzer's memory limits. A finding is written to
# <build>/findings/ and fails the run; fix the parser, then add the input to the checked-in
# corpus so `make test` replays it for good.
set -euo pipefail
build=$1
runs=${2:-1000000}
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
shopt -s nullglob
targets=("$build"/fuzz_*)
if [ ${#targets[@]} -eq 0 ]; then
  echo "no fuzz targets in $build (configure it with -DTESSERA_FUZZ=ON)" >&2
  exit 1
fi
mkdir -p "$build/findings"
printf '%-16s %12s %10s %s\n' target executions seconds result
for bin in "${targets[@]}"; do
  name=$(basename "$bin")
  short=${name#fuzz_}
  mkdir -p "$build/corpus/$short"
  log="$build/findings/$short.log"
  start=$(date +%s)
  if "$bin" -runs="$runs" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=30 \
      -artifact_prefix="$build/findings/$short-" "$build/corpus/$short" \
      "$root/tests/fuzz/corpus/$short" >"$log" 2>&1; then
    result=clean
  else
    result="FINDING (see $log)"
    status=1
  fi
  execs=$(grep -o 'Done [0-9]* runs' "$log" | awk '{print $2}' || true)
  printf '%-16s %12s %10s %s\n' "$short" "${execs:-?}" "$(( $(date +%s) - start ))" "$result"
done
exit $status
