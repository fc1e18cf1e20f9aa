#!/usr/bin/env bash
# Runs libFuzzer targets, each for SECONDS on one core, FUZZ_JOBS of them at
# a time (default 1: one after another), and prints a table of executions,
# coverage and crashes per target.
#   [FUZZ_JOBS=N] tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS TARGET...
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
jobs=${FUZZ_JOBS:-1}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "run_fuzz: FUZZ_JOBS=$jobs must be a positive number" >&2; exit 2; }
for t in "$@"; do
  [ -x "$build/fuzz_$t" ] || { echo "run_fuzz: $build/fuzz_$t is missing (make fuzz builds it)" >&2; exit 2; }
done

# One target: its log in BUILD_DIR/fuzz-<t>.log, its table row in fuzz-<t>.row.
fuzz_one() {
  local t=$1 bin=$build/fuzz_$1 log=$build/fuzz-$1.log
  mkdir -p "$build/fuzz-corpus/$t" "$build/fuzz-crashes/$t"
  echo "== fuzz_$t: ${seconds}s"
  # Memory and time per input are bounded: a file of a few kilobytes that
  # makes a reader allocate 512 MB or think for 10 s is a finding.
  "$bin" "$build/fuzz-corpus/$t" "$root/tests/fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-crashes/$t/" >"$log" 2>&1
  local rc=$? last execs cov ft crashes
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  crashes=$(find "$build/fuzz-crashes/$t" -type f | wc -l)
  [ "$rc" -ne 0 ] && grep -E 'ERROR: |SUMMARY: |runtime error' "$log" | head -5
  printf '%-16s %12s %8s %8s %8s %6s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$crashes" "$rc" >"$build/fuzz-$t.row"
}

for t in "$@"; do
  while (( $(jobs -rp | wc -l) >= jobs )); do wait -n; done
  fuzz_one "$t" &
done
wait
echo
printf '%-16s %12s %8s %8s %8s %6s\n' target executions cov ft crashes rc
found=0
for t in "$@"; do
  cat "$build/fuzz-$t.row"
  [ "$(awk '{print $5}' "$build/fuzz-$t.row")" != 0 ] && found=1
done
exit $found
