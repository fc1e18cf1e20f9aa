#!/usr/bin/env bash
# Issue 33's study: differential attention built in against retrofitted, at equal compute.
#
# Per seed, a softmax model is pretrained for N steps (P). It then continues for M steps as
#   (a) softmax                     train --init P
#   (b) DIFF V1 by preserve         convert P --to diff  --recipe preserve, train --init --lambda-ramp RAMP
#   (c) DIFF V1 by split            convert P --to diff  --recipe split,    train --init
#   (d) DIFF V2 by preserve         convert P --to diff2 --recipe preserve, train --init --lambda-ramp RAMP
# against models trained from scratch for N + M steps:
#   (e) DIFF V1   (f) DIFF V2   (g) softmax.
# Every continuation starts a fresh optimizer and schedule (warmup, cosine to LR/10 over its M steps); a
# scratch run has one schedule over N + M. Measured per arm and seed:
#   - validation loss: `eval loss` over WINDOWS fixed windows of the corpus's held-out tail (the last 10%),
#     the same windows for every arm;
#   - task accuracy, by a short task fine-tune (not mixed into the pretraining data): each final model is
#     trained TASK_STEPS more steps (`train --init`) on mqar (multi-query associative recall) and on
#     counterfactual (the answer given in context against the fact memorised), and scored on the task's 256
#     held-out episodes at the end (the accuracy train logs);
#   - split's step-0 loss gap and its gap after 100 steps: (c)'s validation loss against (a)'s at the same
#     step of the continuation (train's own evaluation, EVAL_BATCHES x BATCH windows).
# The table gives each arm's mean over seeds with a 95% t interval (mean +- t(n-1) sd / sqrt n).
# "Equal compute" is equal steps and tokens: (b)'s heads keep the source's size d with a 2d-wide value,
# so its attention has twice softmax's value and output width (more FLOPs per step than (e)).
#
# Settings, chosen before any result (2026-12-03) and not to be tuned on the outcome:
#   CORPUS  tools/english_corpus.sh: 5-6 MB of English that Debian packages ship (the fortunes, the common
#           licences, the packages' copyright files, then gzipped docs and man pages), bytes as tokens
#           (vocabulary 256); its size and sha256 are printed with the table, since the installed
#           packages decide its content.
#   model   --dim 256 --layers 4 --heads 4 (softmax: 8 heads of 32; DIFF V1: 4 DIFF heads of 2 x 32; DIFF V2:
#           8 output heads of 32, 16 query heads), --seq 256, --batch 16, byte vocabulary
#   N=2000  pretraining steps (8.2 M tokens); M=1000 continuation steps (4.1 M tokens)
#   LR=1e-3, WARMUP=100, RAMP=200 (the preserve arms' second map comes in over the first 200 steps)
#   SEEDS="1 2 3"; WINDOWS=256; TASK_STEPS=300 on mqar (seq 64, 8 pairs, vocabulary 64) and counterfactual
#   (160 entities, 32 attributes: vocabulary 194)
# Every setting is an environment variable; a smoke run: N=20 M=10 DIM=32 LAYERS=1 ... (see the end).
#
#   bench/retrofit_study.sh OUT_DIR [build/diffattn]     # resumable: finished runs are kept
# JOBS (default 1) seeds run at once, each with OMP_NUM_THREADS=THREADS (default nproc / JOBS).
# Writes OUT_DIR/results.tsv (arm, seed, validation loss, mqar and counterfactual accuracy per line) and
# OUT_DIR/table.md, and prints the table with the command's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/retrofit_study.sh OUT_DIR [build/diffattn]}
BIN=$(realpath "${2:-build/diffattn}")
N=${N:-2000} M=${M:-1000} SEEDS=${SEEDS:-"1 2 3"}
DIM=${DIM:-256} LAYERS=${LAYERS:-4} HEADS=${HEADS:-4} SEQ=${SEQ:-256} BATCH=${BATCH:-16}
LR=${LR:-1e-3} WARMUP=${WARMUP:-100} RAMP=${RAMP:-200} WINDOWS=${WINDOWS:-256} EVAL_BATCHES=${EVAL_BATCHES:-4}
TASK_STEPS=${TASK_STEPS:-300} TASK_BATCH=${TASK_BATCH:-32}
JOBS=${JOBS:-1}
THREADS=${THREADS:-$(($(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1))}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
CORPUS=${CORPUS:-$OUT/corpus.txt}
[[ -s $CORPUS ]] || tools/english_corpus.sh "$CORPUS"
START=$(date +%s)

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
# train DIR ARGS...: a run to its end, kept when a finished one is there (DIR/done)
train() {
  local dir=$1; shift
  [[ -f $dir/done ]] && return 0
  log "train $(basename "$dir")"
  "$BIN" train "$@" --out "$dir" --force >"$dir.log" 2>&1 || { echo "train $dir failed: see $dir.log" >&2; return 1; }
  touch "$dir/done"
}
val_loss() { "$BIN" eval loss --model "$1" --data "$CORPUS" --seq "$SEQ" --windows "$WINDOWS" --json |
  sed 's/.*"loss":\([^,]*\),.*/\1/'; }
# the value of KEY on metrics line STEP of run DIR ("" when absent)
metric() { grep "\"step\":$2," "$1/metrics.jsonl" | grep -o "\"$3\":[^,}]*" | cut -d: -f2 || true; }
last_accuracy() { grep -o '"accuracy":[^,}]*' "$1/metrics.jsonl" | tail -1 | cut -d: -f2; }

# The two task files: a one-step compare run writes each (task.txt: the stream and the held-out episodes)
task_file() {
  local name=$1; shift
  if [[ ! -f $OUT/tasks/$name/task.txt ]]; then
    "$BIN" compare --out "$OUT/tasks/$name.run" --steps 1 --seeds 1 --archs softmax --dim 32 --layers 1 \
      --heads 1 --quiet --force "$@" >/dev/null
    mkdir -p "$OUT/tasks/$name"
    cp "$OUT"/tasks/$name.run/runs/*/task.txt "$OUT/tasks/$name/task.txt"
  fi
}
task_file mqar --task mqar --seq 64 --pairs 8 --vocab 64
task_file counterfactual --task counterfactual --entities 160 --attributes 32
task_seq() { sed -n 's/^seq //p' "$OUT/tasks/$1/task.txt"; }

MODEL=(--dim "$DIM" --layers "$LAYERS" --heads "$HEADS" --seq "$SEQ")
RUN=(--data "$CORPUS" --batch "$BATCH" --lr "$LR" --min-lr "$(python3 -c "print($LR / 10)")" --warmup "$WARMUP"
  --eval-batches "$EVAL_BATCHES" --log-every 50 --save-every 500)

one_seed() {
  local s=$1 d=$OUT/seed$1
  mkdir -p "$d"
  export OMP_NUM_THREADS=$THREADS
  train "$d/pre" --arch softmax "${MODEL[@]}" "${RUN[@]}" --steps "$N" --eval-every 0 --seed "$s"
  local P=$d/pre/model.safetensors
  [[ -f $d/b.safetensors ]] || "$BIN" convert --model "$P" --to diff --recipe preserve --out "$d/b.safetensors" --seed "$s" >/dev/null
  [[ -f $d/c.safetensors ]] || "$BIN" convert --model "$P" --to diff --recipe split --out "$d/c.safetensors" --seed "$s" >/dev/null
  [[ -f $d/d.safetensors ]] || "$BIN" convert --model "$P" --to diff2 --recipe preserve --out "$d/d.safetensors" --seed "$s" >/dev/null
  local CONT=("${RUN[@]}" --steps "$M" --seq "$SEQ" --eval-every 100 --seed "$s")
  train "$d/a" --init "$P" "${CONT[@]}"
  train "$d/b" --init "$d/b.safetensors" "${CONT[@]}" --lambda-ramp "$RAMP"
  train "$d/c" --init "$d/c.safetensors" "${CONT[@]}"
  train "$d/d" --init "$d/d.safetensors" "${CONT[@]}" --lambda-ramp "$RAMP"
  local SCR=("${RUN[@]}" --steps $((N + M)) --eval-every 0 --seed "$s")
  train "$d/e" --arch diff "${MODEL[@]}" "${SCR[@]}"
  train "$d/f" --arch diff2 "${MODEL[@]}" "${SCR[@]}"
  train "$d/g" --arch softmax "${MODEL[@]}" "${SCR[@]}"
  : >"$d/results.tsv"
  for arm in a b c d e f g; do
    local acc=()
    for t in mqar counterfactual; do
      train "$d/${arm}_$t" --init "$d/$arm/model.safetensors" --data "$OUT/tasks/$t/task.txt" --seq "$(task_seq $t)" \
        --steps "$TASK_STEPS" --batch "$TASK_BATCH" --lr "$LR" --warmup $((TASK_STEPS / 10)) --eval-every 0 \
        --log-every 50 --seed "$s"
      acc+=("$(last_accuracy "$d/${arm}_$t")")
    done
    printf '%s\t%s\t%s\t%s\t%s\n' "$arm" "$s" "$(val_loss "$d/$arm/model.safetensors")" "${acc[0]}" "${acc[1]}" \
      >>"$d/results.tsv"
  done
  # split's gap against the softmax continuation at steps 0 and 100 (train's own evaluation)
  printf 'gap0\t%s\t%s\t\t\n' "$s" "$(python3 -c "print($(metric "$d/c" 0 val_loss) - $(metric "$d/a" 0 val_loss))")" \
    >>"$d/results.tsv"
  local c100 a100
  c100=$(metric "$d/c" 100 val_loss) a100=$(metric "$d/a" 100 val_loss)
  [[ -n $c100 && -n $a100 ]] && printf 'gap100\t%s\t%s\t\t\n' "$s" "$(python3 -c "print($c100 - $a100)")" >>"$d/results.tsv"
  log "seed $s done"
}

pids=()
for s in $SEEDS; do
  one_seed "$s" &
  pids+=($!)
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
done
for p in "${pids[@]}"; do wait "$p"; done
WALL=$(($(date +%s) - START))

cat "$OUT"/seed*/results.tsv >"$OUT/results.tsv"
python3 - "$OUT/results.tsv" "$N" "$M" "$WALL" "$(stat -c %s "$CORPUS")" "$(sha256sum "$CORPUS" | cut -c1-16)" "$*" \
  >"$OUT/table.md" <<'PY'
import math, sys
path, N, M, wall, size, sha, args = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:8]
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
rows = {}
for line in open(path):
    f = line.rstrip("\n").split("\t")
    rows.setdefault(f[0], []).append([float(x) if x else None for x in f[2:]])
def cell(vals, fmt):
    v = [x for x in vals if x is not None]
    if not v: return "-"
    m = sum(v) / len(v)
    if len(v) < 2: return fmt % m
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))
    h = T975.get(len(v) - 1, 1.96) * sd / math.sqrt(len(v))
    return fmt % m + " ± " + fmt.replace("+", "") % h
arms = [("a", "softmax, continued", f"{N} + {M}"), ("b", "DIFF V1 by preserve", f"{N} + {M}"),
        ("c", "DIFF V1 by split", f"{N} + {M}"), ("d", "DIFF V2 by preserve", f"{N} + {M}"),
        ("e", "DIFF V1 from scratch", f"{N + M}"), ("f", "DIFF V2 from scratch", f"{N + M}"),
        ("g", "softmax from scratch", f"{N + M}")]
print("| arm | model | steps | seeds | validation loss (nats/byte) | mqar accuracy | counterfactual accuracy |")
print("|---|---|---|---|---|---|---|")
for k, name, steps in arms:
    r = rows.get(k, [])
    print(f"| ({k}) | {name} | {steps} | {len(r)} | {cell([x[0] for x in r], '%.4f')} | "
          f"{cell([x[1] for x in r], '%.3f')} | {cell([x[2] for x in r], '%.3f')} |")
for k, what in (("gap0", "at step 0"), ("gap100", "after 100 steps")):
    r = rows.get(k, [])
    print(f"\nsplit's validation-loss gap to the softmax continuation {what}: {cell([x[0] for x in r], '%+.4f')} "
          f"({len(r)} seeds)")
print(f"\nmean ± 95% t interval over seeds. Corpus: {size} bytes, sha256 {sha}... (tools/english_corpus.sh).")
print(f"Wall time: {wall} s. Command: bench/retrofit_study.sh {args}")
PY
cat "$OUT/table.md"
# Smoke run (minutes on 2 cores, meaningless numbers):
#   N=20 M=10 DIM=32 LAYERS=1 HEADS=2 SEQ=64 BATCH=4 RAMP=5 WARMUP=2 WINDOWS=8 EVAL_BATCHES=1 TASK_STEPS=10 \
#   TASK_BATCH=8 SEEDS="1 2" bench/retrofit_study.sh /tmp/rs
