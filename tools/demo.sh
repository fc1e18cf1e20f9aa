#!/usr/bin/env bash
# make demo: train a small DIFF Transformer on English text that Debian ships
# (the fortunes package), then sample from it. About 5-10 minutes on 2 cores.
set -euo pipefail
BIN=${BIN:-build/diffattn}
OUT=${OUT:-runs/demo}
STEPS=${STEPS:-500}
mkdir -p "$OUT"
CORPUS="$OUT/corpus.txt"
if [[ ! -s $CORPUS ]]; then
  src=/usr/share/games/fortunes
  if [[ -d $src ]]; then
    # the text files only: no .dat indexes, no .u8 duplicate links
    find -L "$src" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort | xargs cat > "$CORPUS"
  else
    cat /usr/share/common-licenses/* > "$CORPUS"
  fi
fi
echo "corpus: $CORPUS ($(wc -c < "$CORPUS") bytes)"
"$BIN" train --data "$CORPUS" --out "$OUT/diff" --steps "$STEPS" --eval-every 100 --save-every 100
"$BIN" info --model "$OUT/diff/model.safetensors"
echo "--- sample ---"
"$BIN" sample --model "$OUT/diff/model.safetensors" --prompt "The " --max-new 200 --temperature 0.8 --seed 1
