#!/usr/bin/env bash
# Peak RSS of each fuzz corpus and regression input, replayed alone through
# its harness (build/replay_<target>), against the input's size: the largest
# (RSS - the same harness's RSS on an empty input) / size says whether any
# loader's memory follows a count a file claims instead of its bytes.
#
#   bash bench/fuzz_rss.sh [BUILD_DIR]      # default: build
set -u
B=${1:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
: >"$T/empty"
export OMP_NUM_THREADS=1
rss() { /usr/bin/time -f %M -o "$T/rss" "$@" >/dev/null 2>&1; cat "$T/rss"; }
for dir in tests/fuzz/corpus/* tests/fuzz/regressions/*; do
  target=$(basename "$dir")
  [[ -x $B/replay_$target ]] || continue
  base=$(rss "$B/replay_$target" "$T/empty")
  for f in "$dir"/*; do
    [[ -f $f ]] || continue
    size=$(stat -c %s "$f")
    kb=$(rss "$B/replay_$target" "$f")
    extra=$((kb > base ? kb - base : 0))
    printf '%-16s %-44s %10d %10d %8.2f\n' "$target" "$(basename "$f" | cut -c1-44)" "$size" "$extra" \
      "$(awk -v e="$extra" -v s="$size" 'BEGIN {print e * 1024 / (s > 0 ? s : 1)}')"
  done
done >"$T/all"
printf '%-16s %-44s %10s %10s %8s\n' target input bytes "extra KB" "ratio"
echo "largest ratio, inputs of 4 KB or more:"
awk '$3 >= 4096' "$T/all" | sort -k5 -g -r | head -8
echo "largest extra RSS, any input:"
sort -k4 -g -r "$T/all" | head -5
echo "(ratio: peak RSS above the harness's own on an empty input, per input byte; $(wc -l <"$T/all") inputs;"
echo " below 4 KB the ratio is the process's fixed costs: page faults of code first run, allocator arenas)"
