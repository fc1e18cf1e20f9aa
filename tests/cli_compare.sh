#!/usr/bin/env bash
# Plain compare (the byte-level needle mix) reads --archs as compare --task
# does: swa with its --swa-window, and arch:flag=value columns, each trained
# as its own run folder and reported under its own name. It runs through the
# study scheduler: --jobs N single-thread processes give the report of one
# process, and --resume keeps the runs with a valid result file. --grid
# makes cells whose runs are ordinary run folders (info, eval loss and train
# --resume work on them); a grid study killed (kill -9) mid-way continues
# with --resume to the report of the uninterrupted one, times aside.
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

G=(compare --steps 4 --dim 32 --layers 1 --heads 1 --seq 256 --batch 2 --archs diff,softmax --seeds 2 --grid heads=1,2
   --quiet)
expect_error "a bad grid axis is refused" "unknown axis" "$BIN" "${G[@]}" --out "$TMP/gx" --grid colour=1,2
expect_error "--budget-minutes with --grid is refused" "--steps" "$BIN" compare --budget-minutes 1 --grid heads=1,2 \
  --out "$TMP/gx" --dim 32 --layers 1 --heads 1 --seq 256 --batch 2
ok "--grid heads=1,2 with 2 seeds: 8 runs" env OMP_NUM_THREADS=1 "$BIN" "${G[@]}" --out "$TMP/g"
check "each run folder holds model.safetensors, train_state.safetensors, metrics.jsonl and result.bin" \
  [ "$(ls "$TMP"/g/runs/cell{0,1}_{diff,softmax}_seed{1337,1338}/{model,train_state}.safetensors \
       "$TMP"/g/runs/cell{0,1}_{diff,softmax}_seed{1337,1338}/{metrics.jsonl,result.bin} | wc -l)" = 32 ]
has "the report has a table and figures per cell" "$(cat "$TMP/g/report.md")" "## heads 1" "| metric | DIFF | softmax |" \
  "needle_by_depth_0.png" "## heads 2" "needle_by_depth_1.png"
check "report.json has both cells" [ "$(grep -o '"name":"heads [12]"' "$TMP/g/report.json" | wc -l)" = 2 ]
has "info reads a cell's run: the baseline at heads 2 has 4 heads" \
  "$("$BIN" info --model "$TMP/g/runs/cell1_softmax_seed1338/model.safetensors" 2>&1)" "n_heads        4"
R=$TMP/g/runs/cell1_diff_seed1338
ok "eval loss on a cell's run" "$BIN" eval loss --model "$R/model.safetensors" --data "$TMP/g/needle_mix.txt" --windows 4
check "  prints a finite loss" grep -q "loss [0-9]" "$TMP/last.out" "$TMP/last.err"
ok "train --resume continues a cell's run" "$BIN" train --resume --out "$R" --data "$TMP/g/needle_mix.txt" --steps 6
check "  to step 6" grep -q '"step":6,' "$R/metrics.jsonl"

# killed with kill -9 after two runs, then --resume: the uninterrupted report, times aside
results() { ls "$1"/runs/*/result.bin 2>/dev/null | wc -l; }
strip_times() { grep -v '^| training time' "$1" | sed -E 's/"(train|eval)_seconds":[0-9.]+//g'; }
OMP_NUM_THREADS=1 "$BIN" "${G[@]}" --out "$TMP/gk" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 1200); do (($(results "$TMP/gk") >= 2)) && break; sleep 0.05; done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
left=$(results "$TMP/gk")
check "killed with $left of 8 runs done" [ "$left" -ge 2 -a "$left" -lt 8 -a ! -e "$TMP/gk/report.md" ]
expect_error "the same study again is refused, naming --resume" "--resume" "$BIN" "${G[@]}" --out "$TMP/gk"
ok "--resume finishes it" env OMP_NUM_THREADS=1 "$BIN" "${G[@]}" --out "$TMP/gk" --resume
check "the same report.md as uninterrupted" cmp -s <(strip_times "$TMP/g/report.md" | sed "s|$TMP/g/|DIR/|") \
  <(strip_times "$TMP/gk/report.md" | sed "s|$TMP/gk/|DIR/|")
check "the same report.json" cmp -s <(strip_times "$TMP/g/report.json" | sed "s|$TMP/g/|DIR/|") \
  <(strip_times "$TMP/gk/report.json" | sed "s|$TMP/gk/|DIR/|")
finish
