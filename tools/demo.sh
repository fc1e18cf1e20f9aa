#!/usr/bin/env bash
# make demo: a small study of where each architecture learns retrieval. DIFF,
# DIFF2 and the softmax baseline (equal parameters, the same initialisation
# where shapes agree, the same data stream and held-out set) are trained on
# multi-query associative recall (docs/tasks.md) at 1, 2 and 4 DIFF heads,
# 3 seeds each: 27 runs. runs/demo/report.md says in one paragraph what the
# grid shows, then gives per cell the seeds that learned the task (>= 90%)
# with a Wilson interval, median steps, final accuracy and the verdict
# against softmax (Fisher's exact test and a bootstrap), heatmaps
# (success_<arch>.png, success_<arch>_vs_softmax.png), and the attention,
# outlier and quantized-logit analyses. The task and training are the
# earlier single-shape demo's (docs/results.md, "Retrieval that is learned"),
# unchanged. The seeds are what the 10-minute budget allows: one seed of the
# nine cells costs about 300 s of CPU (27 to 41 s per run, DIFF2 at 4 heads
# the dearest), so 3 seeds on 2 single-thread processes take about 8 minutes;
# 5 seeds took about 16 (docs/results.md). Extra flags go to
# `diffattn compare --task mqar` (see its --help); `--seeds 5` gives the
# 5-seed grid, and a killed demo continues with `bash tools/demo.sh --resume`.
set -euo pipefail
BIN=${BIN:-build/diffattn}
OUT=${OUT:-runs/demo}
JOBS=${JOBS:-$(nproc)}
echo "demo: loadavg at start $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores, $JOBS processes"
start=$(date +%s)
# One thread per run, one run per core: at dim 64 and 32-token sequences the
# matrices are too small for a second thread to pay (bench/study.sh measures
# both ways).
force=--force
for a in "$@"; do [[ $a == --resume ]] && force=; done
OMP_NUM_THREADS=1 "$BIN" compare --task mqar --out "$OUT" --pairs 4 --seq 32 --vocab 32 --dim 64 --layers 2 \
  --grid heads=1,2,4 --batch 32 --lr 3e-3 --steps 1500 --eval-every 50 --seeds 3 --jobs "$JOBS" $force "$@"
echo "demo: wall time $(( $(date +%s) - start )) s, loadavg at end $(cut -d' ' -f1-3 /proc/loadavg)"
