#!/usr/bin/env bash
# Built in against retrofitted, at equal steps (docs/model.md, "Converting a
# softmax model"). For each seed:
#   pre  softmax from scratch for N steps;
#   (a)  pre + M steps as softmax;
#   (b)  pre converted to DIFF V1 by preserve, + M steps (--lambda-ramp RAMP);
#   (c)  pre converted to DIFF V1 by split, + M steps;
#   (d)  pre converted to DIFF V2 by preserve, + M steps (--lambda-ramp RAMP);
#   (e)  DIFF V1, (f) DIFF V2 and (g) softmax from scratch for N + M steps.
# Every continuation is `train --init` with a fresh optimizer and schedule.
#
# The budget, fixed before any result:
#   model     byte-level, dim 64, 2 layers, 2 DIFF heads (softmax and DIFF V2:
#             4 heads), seq 256, batch 8, lr 1e-3, warmup 50, min-lr 1e-4,
#             train's other defaults;
#   steps     N = 800, M = 400, RAMP = 100; seeds 1, 2, 3;
#   corpus    tools/english_corpus.sh (5-6 MB of the English Debian ships:
#             fortunes, licenses, copyright files, docs), its first 90% for
#             training and its last 10% held out, plus 4 MB of the built-in
#             needle mix (filler sentences with "The special magic K number
#             is: V." needles, each asked once; written by compare) in both
#             phases' training data;
#   measures  validation loss (nats/byte) on the held-out English, 64 windows;
#             needle retrieval on held-out prompts (eval needle: 2 needles,
#             1 asked, 192-byte prompts, 5 depths x 8 prompts, seed 7);
#             mean and a 95% t-interval over the seeds.
# The task suite's counterfactual accuracy is not measured here: its episodes
# are token-level, not bytes.
#
#   bench/retrofit_study.sh [BINARY]      (default build/diffattn)
#
# Environment: N, M, RAMP, SEEDS ("1 2 3"), JOBS (2: runs at a time, one
# thread each), OUT (the study folder; default runs/retrofit; kept, and runs
# already finished in it are reused), SMALL=1 (a seconds-long check of the
# script: N=20, M=10, one seed).
set -euo pipefail
BIN=$(realpath "${1:-build/diffattn}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-800}
M=${M:-400}
RAMP=${RAMP:-100}
SEEDS=${SEEDS:-1 2 3}
JOBS=${JOBS:-2}
OUT=${OUT:-runs/retrofit}
if [[ -n ${SMALL:-} ]]; then N=20 M=10 RAMP=5 SEEDS=1; fi
MODEL=(--dim 64 --layers 2 --seq 256)
TRAIN=(--batch 8 --lr 1e-3 --warmup 50 --min-lr 1e-4 --eval-every 0 --save-every 0 --log-every 50)
export OMP_NUM_THREADS=1
mkdir -p "$OUT/data"
OUT=$(realpath "$OUT")
INIT=--init
"$BIN" train --help | grep -q -- '--init ' || INIT=--init-from
start=$(date +%s)

# The corpus and the needle mix, once.
if [[ ! -f $OUT/data/train/needle_mix.txt ]]; then
  bash "$ROOT/tools/english_corpus.sh" "$OUT/data/english.txt"
  size=$(stat -c %s "$OUT/data/english.txt")
  mkdir -p "$OUT/data/train"
  head -c $((size * 9 / 10)) "$OUT/data/english.txt" > "$OUT/data/train/english.txt"
  "$BIN" compare --steps 1 --archs softmax --dim 16 --layers 1 --heads 1 --seq 256 --batch 2 \
    --out "$OUT/data/mixgen" --quiet --force > /dev/null
  mv "$OUT/data/mixgen/needle_mix.txt" "$OUT/data/train/needle_mix.txt"
  rm -rf "$OUT/data/mixgen"
fi
DATA=$OUT/data/train

# train OUTDIR STEPS ARGS...: one run, skipped when its model exists.
train() {
  local dir=$1 steps=$2
  shift 2
  [[ -f $dir/model.safetensors ]] && return 0
  "$BIN" train --data "$DATA" --out "$dir" --steps "$steps" "${TRAIN[@]}" --force "$@" > "$dir.log" 2>&1 ||
    { echo "retrofit_study: $dir failed; see $dir.log" >&2; return 1; }
}

# seed_runs S: every arm of one seed, in order (the retrofits need pre).
seed_runs() {
  local s=$1 d=$OUT/seed$1
  mkdir -p "$d"
  train "$d/pre" "$N" --arch softmax --heads 4 "${MODEL[@]}" --seed "$s"
  train "$d/a_softmax" "$M" "$INIT" "$d/pre/model.safetensors" --seed "$s"
  [[ -f $d/b_diff_preserve.safetensors ]] ||
    "$BIN" convert --model "$d/pre/model.safetensors" --to diff --recipe preserve --out "$d/b_diff_preserve.safetensors" --seed "$s" > /dev/null
  train "$d/b_diff_preserve" "$M" "$INIT" "$d/b_diff_preserve.safetensors" --lambda-ramp "$RAMP" --seed "$s"
  [[ -f $d/c_diff_split.safetensors ]] ||
    "$BIN" convert --model "$d/pre/model.safetensors" --to diff --recipe split --out "$d/c_diff_split.safetensors" --seed "$s" > /dev/null
  train "$d/c_diff_split" "$M" "$INIT" "$d/c_diff_split.safetensors" --seed "$s"
  [[ -f $d/d_diff2_preserve.safetensors ]] ||
    "$BIN" convert --model "$d/pre/model.safetensors" --to diff2 --recipe preserve --out "$d/d_diff2_preserve.safetensors" --seed "$s" > /dev/null
  train "$d/d_diff2_preserve" "$M" "$INIT" "$d/d_diff2_preserve.safetensors" --lambda-ramp "$RAMP" --seed "$s"
}
scratch_run() { # scratch_run SEED ARCH HEADS NAME
  mkdir -p "$OUT/seed$1"
  train "$OUT/seed$1/$4" $((N + M)) --arch "$2" --heads "$3" "${MODEL[@]}" --seed "$1"
}

# The queue: one line a job; JOBS at a time.
{
  for s in $SEEDS; do
    echo "seed_runs $s"
    echo "scratch_run $s diff 2 e_diff_scratch"
    echo "scratch_run $s diff2 2 f_diff2_scratch"
    echo "scratch_run $s softmax 4 g_softmax_scratch"
  done
} > "$OUT/queue.txt"
export -f train seed_runs scratch_run
export BIN N M RAMP OUT DATA INIT
export MODEL_S="${MODEL[*]}" TRAIN_S="${TRAIN[*]}"
xargs -P "$JOBS" -I{} bash -c 'read -ra MODEL <<< "$MODEL_S"; read -ra TRAIN <<< "$TRAIN_S"; {}' < "$OUT/queue.txt"

# Measures per run.
for s in $SEEDS; do
  for r in a_softmax b_diff_preserve c_diff_split d_diff2_preserve e_diff_scratch f_diff2_scratch g_softmax_scratch pre; do
    m=$OUT/seed$s/$r/model.safetensors
    [[ -f $OUT/seed$s/$r.eval.json ]] && continue
    # english.txt's tail 10% is exactly the held-out part.
    loss=$("$BIN" eval loss --model "$m" --data "$OUT/data/english.txt" --val-fraction 0.1 --windows 64 --json)
    needle=$("$BIN" eval needle --model "$m" --needles 2 --queries 1 --context 192 --samples 8 --seed 7 --json)
    params=$("$BIN" info --model "$m" | awk '$1 == "parameters" {print $2}')
    printf '{"loss": %s, "needle": %s, "parameters": %s}\n' "$loss" "$needle" "$params" > "$OUT/seed$s/$r.eval.json"
  done
done
python3 "$ROOT/bench/retrofit_table.py" "$OUT" $SEEDS | tee "$OUT/table.md"
echo "wall time: $(( $(date +%s) - start )) s (N=$N, M=$M, RAMP=$RAMP, seeds: $SEEDS, $JOBS jobs)" | tee -a "$OUT/table.md"
