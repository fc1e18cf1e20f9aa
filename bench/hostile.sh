#!/usr/bin/env bash
# Issue 23's hostile files, timed: wall time and peak RSS (/usr/bin/time -v)
# of loading each with one or more diffattn binaries (an old build beside the
# current one shows before -> after). A refused file should take
# milliseconds and megabytes; the old loaders took seconds and gigabytes.
#
#   bash bench/hostile.sh [BIN...]        # default: build/diffattn
#   bash bench/hostile.sh /path/to/old/diffattn build/diffattn
#
# Cases: an 8.4 MB Hugging Face folder whose tensors all overlap (403 M
# parameters declared), a 4.5 MB GGUF likewise, and sharded indexes of 10 k,
# 40 k and 80 k entries (bench/hostile_files.py writes them). Each load runs
# under a 300 s timeout; "timeout" in the result means it was still loading.
set -u
BINS=("$@")
[[ ${#BINS[@]} == 0 ]] && BINS=(build/diffattn)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 "$(dirname "$0")/hostile_files.py" "$T" 10000 40000 80000 || exit 1
printf '%-14s %-40s %8s %10s %5s  %s\n' case binary seconds "peak MB" exit "first line of stderr"
for bin in "${BINS[@]}"; do
  for c in hf_overlap overlap.gguf hf_index_10000 hf_index_40000 hf_index_80000; do
    /usr/bin/time -v -o "$T/time" timeout 300 "$bin" info --model "$T/$c" >/dev/null 2>"$T/err"
    rc=$?
    s=$(awk -F': ' '/Elapsed/ {split($2, a, ":"); t = 0; for (i = 1; i <= length(a); i++) t = t * 60 + a[i]; print t}' "$T/time")
    kb=$(awk -F': ' '/Maximum resident/ {print $2}' "$T/time")
    [[ $rc == 124 ]] && rc=timeout
    printf '%-14s %-40s %8.2f %10.1f %5s  %s\n' "$c" "$bin" "$s" "$(echo "$kb / 1024" | bc -l)" "$rc" \
      "$(head -1 "$T/err" | cut -c1-120)"
  done
done
echo "(loadavg $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores)"
