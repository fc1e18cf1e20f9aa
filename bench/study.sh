#!/usr/bin/env bash
# How a study's runs should use the cores: the same 18-run study (mqar, the
# demo's task and model, 300 steps, heads 1 and 2, 3 archs x 3 seeds) as
#   (a) one process, runs in turn, OMP_NUM_THREADS = nproc (--jobs 1);
#   (b) one process, runs in turn, one thread;
#   (c) nproc single-thread processes (--jobs nproc).
# Prints the wall time of each; the per-run results of (b) and (c) are
# bit-identical (tests/cli_study.sh), (a) may differ in the last bits.
# Run on an idle machine: bash bench/study.sh [build/diffattn]
set -euo pipefail
BIN=${1:-build/diffattn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
N=$(nproc)
study() {
  "$BIN" compare --task mqar --out "$T/$1" --pairs 4 --seq 32 --vocab 32 --dim 64 --layers 2 --grid heads=1,2 \
    --batch 32 --lr 3e-3 --steps 300 --eval-every 50 --seeds 3 --quiet --force "${@:2}" > /dev/null
}
echo "loadavg $(cut -d' ' -f1-3 /proc/loadavg), $N cores"
for mode in "a:--jobs 1:$N" "b:--jobs 1:1" "c:--jobs $N:1"; do
  IFS=: read -r name flags threads <<< "$mode"
  s=$(date +%s.%N)
  OMP_NUM_THREADS=$threads study "$name" $flags
  printf '%s  %-10s OMP_NUM_THREADS=%-3s %6.1f s\n' "$name" "$flags" "$threads" "$(echo "$(date +%s.%N) - $s" | bc)"
done
