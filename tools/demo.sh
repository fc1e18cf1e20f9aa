#!/usr/bin/env bash
# make demo: the main job on its built-in default. DIFF and the softmax
# baseline (equal parameters, data, tokens and seed) are trained on the
# built-in needle mix, evaluated alike, and compared side by side in
# runs/demo/report.md and report.json. About 7-8 minutes on 2 cores.
set -euo pipefail
BIN=${BIN:-build/diffattn}
OUT=${OUT:-runs/demo}
"$BIN" compare --out "$OUT" "$@"
