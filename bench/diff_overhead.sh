#!/usr/bin/env bash
# DIFF's training-step cost over the softmax baseline at equal parameters
# (issue 3's "DIFF step <= 1.05 x baseline", E=768 config by default).
# The two archs alternate, ROUNDS times, each run the best of STEPS steps, so a
# slow spell of the shared machine hits both; the ratio is reported from the
# best runs (min/min) and from the per-round ratios (median and worst).
#
#   [ARCH=diff2] bench/diff_overhead.sh [--bf16] [--native-blas] [model flags ...]
#
# ARCH picks the DIFF variant set against softmax (diff, the default, or diff2).
# --native-blas unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for this
# command only. Check that /proc/loadavg is near zero first.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/diffattn}
ARCH=${ARCH:-diff}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-3}
extra=()
model=(--dim 768 --layers 6 --heads 6 --seq 512 --batch 4)
custom=()
for a in "$@"; do
  case $a in
    --native-blas) unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
                   echo "note: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for this measurement" ;;
    --bf16) extra+=(--bf16) ;;
    --help|-h) sed -n 2,13p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) custom+=("$a") ;;
  esac
done
[[ ${#custom[@]} -gt 0 ]] && model=("${custom[@]}")
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg), threads: ${OMP_NUM_THREADS:-$(nproc)}, model: ${model[*]} ${extra[*]}"
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p"; }
d_all=() s_all=() ratios=()
for r in $(seq "$ROUNDS"); do
  d=$("$BIN" bench train --arch "$ARCH" "${model[@]}" "${extra[@]}" --steps "$STEPS" --json | field ms_per_step)
  s=$("$BIN" bench train --arch softmax "${model[@]}" "${extra[@]}" --steps "$STEPS" --json | field ms_per_step)
  d_all+=("$d") s_all+=("$s") ratios+=("$(awk "BEGIN { printf \"%.4f\", $d / $s }")")
  echo "round $r: $ARCH $d ms, softmax $s ms, ratio ${ratios[-1]}"
done
dmin=$(printf '%s\n' "${d_all[@]}" | sort -g | head -1)
smin=$(printf '%s\n' "${s_all[@]}" | sort -g | head -1)
sorted=($(printf '%s\n' "${ratios[@]}" | sort -g))
n=${#sorted[@]}
echo "best $ARCH $dmin ms / best softmax $smin ms = $(awk "BEGIN { printf \"%.3f\", $dmin / $smin }")"
echo "per-round ratio: median ${sorted[$((n / 2))]}, best ${sorted[0]}, worst ${sorted[$((n - 1))]}"
