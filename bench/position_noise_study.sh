#!/usr/bin/env bash
# Does differential attention's advantage grow with position and with noise?
# (issue 47). DIFF, DIFF2 and softmax at equal parameters (--match-params'
# rule: each column's SwiGLU FFN widened to the largest column's parameter
# count) trained on byte-level English at T = 1,024 with distractor spans
# inserted (a share P of each window, P drawn per window from {0, 0.3, 0.6});
# each model's loss by position bin (1, 2-3, 4-7, ..., 1024) on held-out
# text at rates 0, 0.3 and 0.6, scored on the target text's tokens only.
#
# Data: tools/english_corpus.sh; the target text is its fortunes (the head,
# up to the first of the common licenses), the distractors the rest (the
# licenses and the packages' copyright files: another document set). The
# held-out text is the target's last 10% (train's --val-fraction), the same
# evenly spaced windows for every model, with the distractors' places drawn
# from --seed 1 (the same for every model).
#
# The budget, fixed before any result of this study:
#   columns   diff, diff2, softmax (grouped differential attention is not in
#             this tree: the Motif issue has not landed it);
#   model     dim 128, 4 layers, --heads 2 (2 DIFF heads; softmax 4 heads,
#             DIFF2 4 output heads), vocabulary 256, FFN matched as above;
#   training  T = 1,024, batch 8, 1,000 steps (8.2 M tokens, about 3.5 passes
#             over the 2.3 MB of training text), train's defaults otherwise
#             (lr 1e-3, warmup 50, cosine to 1e-4), --distract-rate 0,0.3,0.6,
#             --distract-span 32;
#   seeds     5 (1..5), run seed by seed so that every column has seed k
#             before any has seed k + 1; the report needs 3 and uses every
#             seed all three columns finished;
#   scoring   eval loss --by-position --distract at rates 0, 0.3 and 0.6,
#             64 windows of 1,024 each; the difference from softmax per bin
#             paired by seed with a 95% bootstrap interval over seeds; its
#             least-squares slope against log2 position per seed, with a
#             bootstrap interval.
# Cost, measured before the budget was fixed with `bench train --profile`
# at this shape (batch 8, T 1,024, OMP_NUM_THREADS=2, 3 timed steps) on the
# 2-core machine while other agents loaded it (load average 14): 13.2 s a
# step for DIFF, 9.6 for DIFF2, 10.3 for softmax; matmuls (forward and
# backward) take 45-50% of a step, attention (forward and backward) 45-55%,
# everything else under 5%. At that speed a run of 1,000 steps takes about
# 3 hours, the first 3 seeds (9 runs) about 28 hours and all 5 about 46
# hours at JOBS=1, over several sessions (a rerun continues); a less loaded
# machine shortens it in proportion. Scoring adds about 1% (forward passes
# only).
#
#   bench/position_noise_study.sh [BINARY]        (default build/diffattn)
#   REPORT_ONLY=RUNS bench/position_noise_study.sh [BINARY]   (the report from result files alone)
#
# Environment: OUT (default runs/position-noise; rerunning continues a study
# there: finished runs are kept, an interrupted one resumes from its last
# checkpoint), JOBS (1: runs at a time), THREADS (2: OMP_NUM_THREADS per run),
# ARCHS (the columns, default the budget's "diff diff2 softmax"; a column beyond
# the budget, e.g. ARCHS="gda:noise-heads=1" once the budget's runs are done:
# --arch gda --noise-heads 1, files named gda-noise-heads1, its FFN matched to
# the budget columns' largest parameter count), and for a check of the script
# STEPS, SEEDS, WINDOWS, SEQ, BATCH, DIM.
# Result files (small, committed): $OUT/runs/ARCH_seedS_rateR.json and
# ARCH_seedS_train.json; the report: $OUT/report/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${1:-build/diffattn}")
OUT=${OUT:-runs/position-noise}
JOBS=${JOBS:-1} THREADS=${THREADS:-2}
STEPS=${STEPS:-1000} SEEDS=${SEEDS:-5} WINDOWS=${WINDOWS:-64} SEQ=${SEQ:-1024} BATCH=${BATCH:-8} DIM=${DIM:-128}
LAYERS=4 HEADS=2 SPAN=32 TRAIN_RATES=0,0.3,0.6 EVAL_RATES="0 0.3 0.6" BUDGET_ARCHS="diff diff2 softmax"
ARCHS=${ARCHS:-$BUDGET_ARCHS}
export OMP_NUM_THREADS=$THREADS

# The plotting program: bench/position_noise_plot.c against the binary's library.
plot_program() {
  local lib blas=/usr/lib/x86_64-linux-gnu/openblas-openmp
  lib=$(dirname "$BIN")/libdiffattn.a
  local san=() # a sanitized library (DA_SANITIZE) needs its runtime
  if nm "$lib" 2>/dev/null | grep __asan_init >/dev/null; then san=(-fsanitize=address,undefined); fi
  gcc -O2 -fopenmp "${san[@]}" -I"$ROOT/src" -I"$ROOT/include" "$ROOT/bench/position_noise_plot.c" "$lib" -L"$blas" -Wl,-rpath,"$blas" \
    -lopenblas -lcjson -lpcre2-8 $(pkg-config --libs icu-uc cairo) -lm -o "$1"
}

report() { # RUNS DEST
  mkdir -p "$2"
  plot_program "$2/.plot"
  # under a sanitized library: fontconfig keeps its caches to the end, which LeakSanitizer counts as leaks
  printf 'leak:libfontconfig\n' > "$2/.lsan"
  LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(realpath "$2/.lsan") \
    python3 "$ROOT/bench/position_noise_report.py" "$1" "$2" "$2/.plot"
  rm -f "$2/.plot" "$2/.lsan"
  echo "report: $2/report.md"
}

if [[ -n ${REPORT_ONLY:-} ]]; then report "$REPORT_ONLY" "${REPORT_DEST:-$REPORT_ONLY/../report}"; exit 0; fi

mkdir -p "$OUT/data" "$OUT/train" "$OUT/runs"
DATA=$OUT/data/target.txt NOISE=$OUT/data/distract.txt
if [[ ! -s $NOISE ]]; then
  bash "$ROOT/tools/english_corpus.sh" "$OUT/data/corpus.txt"
  # the fortunes come first in the corpus; the target ends where the first license begins
  cut=$(grep -b -m1 -E '^ *(Apache License|GNU GENERAL PUBLIC LICENSE)' "$OUT/data/corpus.txt" | cut -d: -f1 || true)
  size=$(stat -c %s "$OUT/data/corpus.txt")
  [[ -n $cut && $cut -gt 1000000 ]] || cut=$((size / 2))
  head -c "$cut" "$OUT/data/corpus.txt" > "$DATA"
  tail -c +$((cut + 1)) "$OUT/data/corpus.txt" > "$NOISE.tmp" && mv "$NOISE.tmp" "$NOISE"
  rm "$OUT/data/corpus.txt"
fi

# A column: an arch, or arch:flag=value,... (gda:noise-heads=1: --arch gda --noise-heads 1), named in file
# names by its label (gda-noise-heads1).
label() { local c=${1//:/-}; c=${c//,/-}; echo "${c//=/}"; }
arch_flags() { # the train/init flags of column $1
  local a=${1%%:*} f=() kv
  if [[ $1 == *:* ]]; then
    IFS=, read -ra kv <<< "${1#*:}"
    for x in "${kv[@]}"; do f+=("--${x%%=*}" "${x#*=}"); done
  fi
  echo "--arch $a ${f[*]}"
}

# --match-params: each column's FFN widened to the largest budget column's parameter count (a column that
# ARCHS adds is matched to the same count, its FFN narrowed if it is larger).
SHAPE=(--dim "$DIM" --layers $LAYERS --heads $HEADS --seq "$SEQ")
ffn_widths() { # COLUMN...: append their parameter counts to params.txt and their FFN widths to ffn.txt
  for c in "$@"; do
    p=$("$BIN" init $(arch_flags "$c") "${SHAPE[@]}" --out "$OUT/data/init.safetensors" | grep -o '[0-9]* parameters' | cut -d' ' -f1)
    echo "$(label "$c") $p"
  done >> "$OUT/data/params.txt"
  python3 - "$OUT/data/params.txt" "$DIM" $LAYERS "$BUDGET_ARCHS" "$(for c in "$@"; do label "$c"; done)" \
    >> "$OUT/data/ffn.txt" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1])]
dim, layers, budget, new = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(), sys.argv[5].split()
ffn0 = -(-math.ceil(8 * dim / 3) // 64) * 64  # 8 dim / 3 rounded up to a multiple of 64, train's default
most = max(int(p) for a, p in rows if a in budget)
for a, p in rows:
    if a in new:
        print(a, ffn0 + int((most - int(p)) / (3 * dim * layers) + 0.5))
PY
  rm -f "$OUT/data/init.safetensors"
}
[[ -s $OUT/data/ffn.txt ]] || { rm -f "$OUT/data/params.txt"; ffn_widths $BUDGET_ARCHS; }
missing=()
for c in $ARCHS; do grep -q "^$(label "$c") " "$OUT/data/ffn.txt" || missing+=("$c"); done
(( ${#missing[@]} == 0 )) || ffn_widths "${missing[@]}"

# One column and seed: train (or resume it from its last checkpoint), score it at each rate, then write its
# train file, which marks the run finished (a finished run is kept by a rerun, its model no longer needed).
one() {
  local c=$1 s=$2 a ffn mode=()
  a=$(label "$c")
  local dir=$OUT/train/${a}_seed$s
  [[ -f $OUT/runs/${a}_seed${s}_train.json ]] && return 0
  ffn=$(awk -v a="$a" '$1 == a {print $2}' "$OUT/data/ffn.txt")
  local RUN=(--data "$DATA" --distract "$NOISE" --distract-rate $TRAIN_RATES --distract-span $SPAN
             --steps "$STEPS" --batch "$BATCH" --eval-every 0 --save-every 50 --log-every 50)
  if ! grep -q "\"step\":$STEPS,.*val_loss" "$dir/metrics.jsonl" 2>/dev/null; then
    if [[ -f $dir/train_state.safetensors ]]; then
      "$BIN" train "${RUN[@]}" --out "$dir" --resume >>"$dir/log.txt" 2>&1
    else
      [[ -d $dir ]] && mode=(--force) # started, stopped before its first checkpoint
      mkdir -p "$dir"
      "$BIN" train $(arch_flags "$c") "${SHAPE[@]}" --ffn "$ffn" --seed "$s" "${RUN[@]}" --out "$dir" "${mode[@]}" \
        >>"$dir/log.txt" 2>&1
    fi
  fi
  for r in $EVAL_RATES; do
    local f=$OUT/runs/${a}_seed${s}_rate$r.json
    [[ -s $f ]] && continue
    "$BIN" eval loss --model "$dir/model.safetensors" --data "$DATA" --seq "$SEQ" --windows "$WINDOWS" --batch 4 \
      --by-position --distract "$NOISE" --distract-rate "$r" --distract-span $SPAN --seed 1 --json > "$f.tmp"
    mv "$f.tmp" "$f"
  done
  python3 - "$dir" "$a" "$s" "$ffn" "$STEPS" "$BATCH" "$SEQ" > "$OUT/runs/${a}_seed${s}_train.json.tmp" <<'PY'
import json, sys
d, a, s, ffn, steps, batch, seq = sys.argv[1:]
lines = [json.loads(l) for l in open(d + '/metrics.jsonl')]
last = [l for l in lines if 'val_loss' in l][-1]
# training time: each invocation's elapsed_s starts at 0, so sum each segment's last value
wall, prev = 0.0, 0.0
for l in lines:
    e = l.get('elapsed_s')
    if e is None:
        continue
    if e < prev:
        wall += prev
    prev = e
wall += prev
print(json.dumps({'arch': a, 'seed': int(s), 'ffn': int(ffn), 'steps': int(steps), 'batch': int(batch),
                  'seq': int(seq), 'final_step': last['step'], 'val_loss': last['val_loss'], 'wall_s': round(wall, 1)}))
PY
  mv "$OUT/runs/${a}_seed${s}_train.json.tmp" "$OUT/runs/${a}_seed${s}_train.json"
}

start=$(date +%s)
for s in $(seq 1 "$SEEDS"); do
  for c in $ARCHS; do
    one "$c" "$s" &
    while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
  done
done
wait
echo "wall time: $(( $(date +%s) - start )) s"
report "$OUT/runs" "$OUT/report"
