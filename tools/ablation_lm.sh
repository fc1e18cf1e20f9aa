#!/usr/bin/env bash
# The paper's Table 6 rows (arXiv 2410.05258) as language models: DIFF, DIFF
# without its head norm, DIFF with lambda_init fixed at 0.8 and at 0.5,
# softmax, softmax with a head norm, and DIFF2, each trained STEPS steps of
# 8 x 256 bytes of Debian's fortunes with SEEDS seeds; then a table of the
# final validation loss (nats per byte, the train's own evaluation at the last
# step), mean ± sd over seeds.
#
#   tools/ablation_lm.sh [OUT]        (default runs/ablation-lm)
#
# Environment: BIN (build/diffattn), JOBS (processes, one thread each; default
# 2), SEEDS ("1 2 3"), STEPS (500), MODEL (model flags; default
# "--dim 128 --layers 2 --heads 2"), NICE (19). Rerunning the same command
# continues: finished runs are kept, an interrupted one resumes from its last
# checkpoint (train --resume).
set -euo pipefail
BIN=${BIN:-build/diffattn}
OUT=${1:-runs/ablation-lm}
JOBS=${JOBS:-2}
SEEDS=${SEEDS:-"1 2 3"}
STEPS=${STEPS:-500}
MODEL=${MODEL:-"--dim 128 --layers 2 --heads 2"}
NICE=${NICE:-19}
export BIN OUT STEPS MODEL NICE
mkdir -p "$OUT"
if [[ ! -s $OUT/corpus.txt ]]; then
  find -L /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort | xargs cat \
    > "$OUT/corpus.txt"
fi
# column name, then its train flags
COLUMNS=(
  "diff|--arch diff"
  "diff:head-norm=off|--arch diff --head-norm off"
  "diff:lambda-init=0.8|--arch diff --lambda-init 0.8"
  "diff:lambda-init=0.5|--arch diff --lambda-init 0.5"
  "softmax|--arch softmax"
  "softmax:head-norm=on|--arch softmax --head-norm on"
  "diff2|--arch diff2"
)

run_one() {
  local name=$1 flags=$2 seed=$3 dir resume=
  dir="$OUT/${name}_seed$seed"
  [[ -f $dir/done ]] && return 0
  [[ -f $dir/train_state.safetensors ]] && resume=--resume
  # shellcheck disable=SC2086
  if OMP_NUM_THREADS=1 nice -n "$NICE" "$BIN" train $flags $MODEL --data "$OUT/corpus.txt" --out "$dir" \
      --steps "$STEPS" --eval-every 100 --seed "$seed" $resume > "$dir.log" 2>&1; then
    touch "$dir/done"
  else
    echo "ablation_lm: $name seed $seed failed (see $dir.log)" >&2
  fi
}
export -f run_one

# seed by seed, so a run stopped early covers every column with fewer seeds
for seed in $SEEDS; do
  for col in "${COLUMNS[@]}"; do printf '%s\t%s\t%s\n' "${col%%|*}" "${col#*|}" "$seed"; done
done | xargs -P "$JOBS" -d '\n' -I{} bash -c 'IFS=$'"'"'\t'"'"' read -r n f s <<< "{}"; run_one "$n" "$f" "$s"'

# the table: final val_loss of each finished run
{
  echo "| column | parameters | final validation loss (nats/byte), mean ± sd | seeds |"
  echo "|---|---|---|---|"
  for col in "${COLUMNS[@]}"; do
    name=${col%%|*}
    losses=()
    params=
    for seed in $SEEDS; do
      dir="$OUT/${name}_seed$seed"
      [[ -f $dir/done ]] || continue
      losses+=("$(grep '"val_loss"' "$dir/metrics.jsonl" | tail -1 | sed 's/.*"val_loss":\([^,}]*\).*/\1/')")
      [[ -n $params ]] || params=$("$BIN" info --model "$dir/model.safetensors" | awk '/^parameters/ {print $2}')
    done
    if (( ${#losses[@]} )); then
      stats=$(printf '%s\n' "${losses[@]}" | awk '{s+=$1; q+=$1*$1; n++; v=v (n>1?", ":"") sprintf("%.4f",$1)}
        END {m=s/n; sd=n>1?sqrt((q-n*m*m)/(n-1)):0; printf "%.4f ± %.4f (%s)", m, sd, v}')
      echo "| $name | $params | $stats | ${#losses[@]} |"
    else
      echo "| $name | | not run | 0 |"
    fi
  done
} | tee "$OUT/table.md"
