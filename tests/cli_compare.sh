#!/usr/bin/env bash
# Plain compare (the byte-level needle mix) reads --archs as compare --task
# does: swa with its --swa-window, and arch:flag=value columns, each trained
# as its own run folder and reported under its own name.
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
has "the swa run trains with the window" "$("$BIN" info --model "$TMP/c/swa_seed1337/model.safetensors" 2>&1)" \
  "window         64"
has "the column's run trains with its option" \
  "$("$BIN" info --model "$TMP/c/diff:head-norm=off_seed1337/model.safetensors" 2>&1)" "head_norm      off"
finish
