#!/usr/bin/env bash
# Runs libFuzzer targets one after another (one process, one core), each for
# SECONDS, and prints a table of executions, coverage and crashes per target.
#   tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS TARGET...
# New inputs go to BUILD_DIR/fuzz-corpus/<target> (the committed seeds in
# tests/fuzz/corpus are read, never written); crashes, leaks, timeouts and
# out-of-memory inputs to BUILD_DIR/fuzz-crashes/<target>/. Copy each one to
# tests/fuzz/regressions/<target>/ once fixed: `make test` replays them.
# Exit status 1 when any target found something.
set -u
build=$1 seconds=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
summary=()
found=0
for t in "$@"; do
  bin=$build/fuzz_$t
  [ -x "$bin" ] || { echo "run_fuzz: $bin is missing (make fuzz builds it)" >&2; exit 2; }
  mkdir -p "$build/fuzz-corpus/$t" "$build/fuzz-crashes/$t"
  log=$build/fuzz-$t.log
  echo "== fuzz_$t: ${seconds}s"
  # Memory and time per input are bounded: a file of a few kilobytes that
  # makes a reader allocate 512 MB or think for 10 s is a finding.
  "$bin" "$build/fuzz-corpus/$t" "$root/tests/fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-crashes/$t/" >"$log" 2>&1
  rc=$?
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  crashes=$(find "$build/fuzz-crashes/$t" -type f | wc -l)
  [ "$rc" -ne 0 ] && grep -E 'ERROR: |SUMMARY: |runtime error' "$log" | head -5
  [ "$crashes" -gt 0 ] && found=1
  summary+=("$(printf '%-16s %12s %8s %8s %8s %6s' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$crashes" "$rc")")
done
echo
printf '%-16s %12s %8s %8s %8s %6s\n' target executions cov ft crashes rc
printf '%s\n' "${summary[@]}"
exit $found
