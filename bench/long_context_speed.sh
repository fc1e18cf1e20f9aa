#!/usr/bin/env bash
# Training speed at small width and long sequences (issue 32's regime), to run
# on an idle machine: `bench train --dim 64 --layers 2 --heads 1`, one thread,
# softmax, NSA and MoBA one after another in each round (so each ratio comes
# from adjacent runs), at T = 2,048 and 4,096 (batch 8) and 8,192 (batch 2).
# With a second binary, its NSA runs beside this one's in each round (a
# before/after of NSA's kernels).
#
#   bash bench/long_context_speed.sh [BINARY] [BASE_BINARY] [ROUNDS]
#
# BINARY defaults to build/diffattn, ROUNDS to 3. OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE are unset, so OpenBLAS picks this CPU's own kernels. Prints
# one line per run: tokens/s (best of 4 steps after one warm-up), the median
# step, the same run's single-thread sgemm peak and the 1-minute load.
set -euo pipefail
BIN=$(realpath "${1:-build/diffattn}")
BASE=${2:+$(realpath "$2")}
ROUNDS=${3:-3}
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_NUM_THREADS=1
echo "# $("$BIN" info --system | awk '/best level/ {print $3}'), $(nproc --all) cores, $(date -u +%FT%TZ), loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
runs=("softmax $BIN" "nsa $BIN" "moba $BIN")
[[ -n $BASE ]] && runs+=("nsa $BASE")
for round in $(seq "$ROUNDS"); do
  for T in 8192 4096 2048; do
    B=8
    [[ $T == 8192 ]] && B=2
    for run in "${runs[@]}"; do
      read -r arch bin <<<"$run"
      out=$("$bin" bench train --arch "$arch" --dim 64 --layers 2 --heads 1 --seq "$T" --batch "$B" --steps 4 --warmup-steps 1 2>&1)
      label=$arch
      [[ $bin == "$BASE" ]] && label="$arch (base)"
      printf 'round %s T %s batch %s %-11s %s tokens/s, median %s ms, sgemm peak %s GFLOP/s, load %s\n' "$round" "$T" "$B" \
        "$label:" "$(grep -o '[0-9.]* tokens/s' <<<"$out" | head -1 | cut -d' ' -f1)" \
        "$(grep -o 'median [0-9.]*' <<<"$out" | cut -d' ' -f2)" "$(grep -o 'sgemm peak [0-9.]*' <<<"$out" | cut -d' ' -f3)" \
        "$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
