#!/usr/bin/env bash
# make demo: retrieval that is learned. DIFF, DIFF2 and the softmax baseline
# (equal parameters, the same initialisation where shapes agree, the same data
# stream and held-out set) are trained on multi-query associative recall
# (docs/tasks.md), three seeds each; runs/demo/report.md holds the learning
# curves, steps to 50/90/99% answer accuracy with verdicts, and the attention,
# outlier and quantized-logit analyses of the trained models. How the task
# size was chosen: docs/results.md, "Retrieval that is learned". Extra flags
# go to `diffattn compare --task mqar` (see its --help). The byte-level
# needle/text comparison is `diffattn compare` without --task.
set -euo pipefail
BIN=${BIN:-build/diffattn}
OUT=${OUT:-runs/demo}
echo "demo: loadavg at start $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
start=$(date +%s)
# One thread: at dim 64 and 32-token sequences the matrices are too small for
# a second thread to pay, and on a shared machine two spinning OpenMP
# threads ran several times slower than one.
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$BIN" compare --task mqar --out "$OUT" --pairs 4 --seq 32 --vocab 32 \
  --dim 64 --layers 2 --heads 1 --batch 32 --lr 3e-3 --steps 1500 --eval-every 50 --seeds 3 --force "$@"
echo "demo: wall time $(( $(date +%s) - start )) s, loadavg at end $(cut -d' ' -f1-3 /proc/loadavg)"
