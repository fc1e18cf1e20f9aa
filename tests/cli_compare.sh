#!/usr/bin/env bash
# Plain compare (the byte-level needle mix) reads --archs as compare --task
# does: swa with its --swa-window, and arch:flag=value columns, each trained
# as its own run folder and reported under its own name. It runs through the
# study scheduler: --jobs N single-thread processes give the report of one
# process, and --resume keeps the runs with a valid result file.
source "$(dirname "$0")/lib.sh"
CMP=(compare --steps 3 --dim 32 --layers 1 --heads 1 --seq 256 --batch 2 --quiet)
expect_error "swa without --swa-window is refused" "--swa-window" "$BIN" "${CMP[@]}" --out "$TMP/a" --archs diff,swa
expect_error "an unknown column option names the flags" "head-norm, lambda-init" \
  "$BIN" "${CMP[@]}" --out "$TMP/a" --archs diff:colour=red
ok "softmax, swa and a diff column side by side" \
  "$BIN" "${CMP[@]}" --out "$TMP/c" --archs softmax,swa,diff:head-norm=off --swa-window 64
has "the report names each column" "$(cat "$TMP/last.out")" "softmax, SWA and diff:head-norm=off side by side" \
  "SWA vs softmax" "diff:head-norm=off vs softmax"
check "report.json has one entry per column" grep -q '"swa":\[.*"diff:head-norm=off":\[' "$TMP/c/report.json"
has "the swa run trains with the window" "$("$BIN" info --model "$TMP/c/runs/swa_seed1337/model.safetensors" 2>&1)" \
  "window         64"
has "the column's run trains with its option" \
  "$("$BIN" info --model "$TMP/c/runs/diff:head-norm=off_seed1337/model.safetensors" 2>&1)" "head_norm      off"
J=(--out "$TMP/j" --archs diff,softmax --seeds 2)
ok "--jobs 2: four runs as processes" "$BIN" "${CMP[@]}" "${J[@]}" --jobs 2
check "every run left its result file" [ "$(ls "$TMP"/j/runs/*/result.bin | wc -l)" == 4 ]
ok "the same compare in this process" "$BIN" "${CMP[@]}" --out "$TMP/one" --archs diff,softmax --seeds 2
strip() { grep -o '"val_loss":[0-9.]*,"needle":[0-9.]*' "$1/report.json"; }
check "--jobs gives the numbers of one process" [ "$(strip "$TMP/j")" == "$(strip "$TMP/one")" ] 
check "and the numbers are there" [ "$(strip "$TMP/j" | wc -l)" == 4 ]
R=$TMP/j/runs/softmax_seed1338
sum=$(sha256sum "$TMP/j/runs/diff_seed1337/result.bin")
rm "$R/result.bin"; head -c 100 "$TMP/j/runs/diff_seed1338/result.bin" > "$TMP/j/runs/diff_seed1338/result.bin.cut"
mv "$TMP/j/runs/diff_seed1338/result.bin.cut" "$TMP/j/runs/diff_seed1338/result.bin"
ok "--resume with a run's result missing and another's cut" "$BIN" compare --steps 3 --dim 32 --layers 1 --heads 1 \
  --seq 256 --batch 2 "${J[@]}" --jobs 2 --resume
has "it names the two runs it does again, and only those" "$(cat "$TMP/last.err")" "2 runs to do"
check "a kept run's result file is untouched" [ "$(sha256sum "$TMP/j/runs/diff_seed1337/result.bin")" == "$sum" ]
check "the resumed report is the whole one" [ "$(strip "$TMP/j")" == "$(strip "$TMP/one")" ]
expect_error "--budget-minutes with --jobs is refused" "--steps" \
  "$BIN" compare --budget-minutes 1 --out "$TMP/b" --jobs 2 --dim 32 --layers 1 --heads 1 --seq 256 --batch 2
finish
