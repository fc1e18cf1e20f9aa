#!/usr/bin/env bash
# make demo: the main job on its built-in default. DIFF and the softmax
# baseline (equal parameters, data, tokens and seed) are trained on the
# built-in needle mix, evaluated alike (loss, needle retrieval, attention on
# the answer, outliers, quantized logits), and compared side by side in
# runs/demo/report.md, report.json and seven PNG figures. About 8 minutes
# on 2 cores. Extra flags go to `diffattn compare` (see its --help).
set -euo pipefail
BIN=${BIN:-build/diffattn}
OUT=${OUT:-runs/demo}
"$BIN" compare --out "$OUT" "$@"
