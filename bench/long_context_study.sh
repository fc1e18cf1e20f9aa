#!/usr/bin/env bash
# Where each attention stops retrieving (issue 32's study): DIFF, DIFF2,
# softmax, a 256-key window, NSA and MoBA at equal parameters on RULER's niah
# and niah-multikey, two noise levels, trained on a 256 -> 512 length
# curriculum and evaluated up to 4,096 tokens; the effective length per
# architecture comes from each report's "Accuracy per length" table.
#
# The budget, fixed before any result (docs/tasks.md defines the tasks):
#   columns   diff, diff2, softmax, swa (--swa-window 256), nsa, moba, with
#             --match-params (every column at the largest one's parameters);
#   model     dim 64, 2 layers, 1 DIFF head (softmax, swa, MoBA and NSA: 2
#             heads; DIFF2 2 output heads), vocabulary 256;
#   tasks     niah and niah-multikey (4 needles, one asked), one value token,
#             noise 0.2 and 0.6 (MAD's noisy-recall levels, as shares of the
#             haystack that are distractors);
#   training  --train-seq 256,512 (equal step shares), 1,500 steps, batch 16,
#             compare --task's optimizer defaults (lr 3e-3, warmup 10%, cosine
#             to a tenth), 3 seeds;
#   scoring   --seq 256,512,1024,2048,4096 on 256 held-out episodes each,
#             exact match of the answer (string_match_all) with partial
#             credit beside it; effective length = the longest evaluated
#             length with accuracy >= 0.9 (and >= 0.5).
# Cost: 72 runs. niah's 36 took 4.5 core-hours of training and about half an
# hour of scoring on AVX-512 cores (two at a time), about 2.5 hours with
# --jobs 2; niah-multikey costs the same, so about 5 hours in all.
#
#   bench/long_context_study.sh [BINARY]        (default build/diffattn)
#
# Environment: OUT (default runs/long-context; --resume continues a study
# there), JOBS (2), SMALL=1 (a minutes-long check of the script: 8 steps, one
# seed, lengths 64,128 and 64..256).
set -euo pipefail
BIN=$(realpath "${1:-build/diffattn}")
OUT=${OUT:-runs/long-context}
JOBS=${JOBS:-2}
STEPS=1500 SEEDS=3 TRAIN=256,512 EVAL=256,512,1024,2048,4096 EPISODES=256
if [[ -n ${SMALL:-} ]]; then STEPS=8 SEEDS=1 TRAIN=64,128 EVAL=64,128,256 EPISODES=16; fi
start=$(date +%s)
for task in niah niah-multikey; do
  resume=()
  [[ -f $OUT/$task/report.json || -d $OUT/$task/runs ]] && resume=(--resume)
  "$BIN" compare --task "$task" --out "$OUT/$task" "${resume[@]}" \
    --archs diff,diff2,softmax,swa,nsa,moba --swa-window 256 --match-params \
    --dim 64 --layers 2 --heads 1 --vocab 256 --needles 4 --value-len 1 --noise 0.2,0.6 \
    --train-seq "$TRAIN" --seq "$EVAL" --steps "$STEPS" --batch 16 --seeds "$SEEDS" \
    --eval-seqs "$EPISODES" --jobs "$JOBS" --quiet
done
echo "wall time: $(( $(date +%s) - start )) s; reports: $OUT/niah/report.md, $OUT/niah-multikey/report.md"
