#!/usr/bin/env bash
# bench/position_noise_study.sh end to end at a tiny shape (3 seeds of diff, diff2 and softmax, 3 steps, width 16,
# windows of 32; the project's docs as the target text, its C sources as the distractors): every run trained, scored
# at the three rates and reported with intervals; then the same folder continued with ARCHS="gda:noise-heads=1",
# which keeps every finished run's files and the budget columns' FFN widths, matches the new column's parameters
# to the budget's largest within half an FFN unit, and adds it to the report.
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -f $(dirname "$BIN")/libdiffattn.a ]] || skip "no libdiffattn.a beside $BIN (the plot program links it)"
out=$TMP/study
mkdir -p "$out/data"
cat "$root"/docs/*.md > "$out/data/target.txt"
cat "$root"/src/core/*.c > "$out/data/distract.txt"
TINY=(env OUT="$out" STEPS=3 SEEDS=3 WINDOWS=2 SEQ=32 DIM=16 BATCH=2 THREADS=1)
study() { "${TINY[@]}" "$@" bash "$root/bench/position_noise_study.sh" "$BIN"; }

ok "the tiny study" study
check "9 runs finished" test "$(ls "$out"/runs/*_train.json 2>/dev/null | wc -l)" -eq 9
check "27 scored files" test "$(ls "$out"/runs/*_rate*.json 2>/dev/null | wc -l)" -eq 27
has "its report has intervals and answers" "$(cat "$out/report/report.md" 2>/dev/null)" "seeds 1, 2, 3" \
  "| diff - softmax |" "## Answers" "- position, diff2 at rate 0.6:"
check "the report is not marked incomplete" bash -c "! grep -q incomplete '$out/report/report.md'"
check "a difference figure" test -s "$out/report/diff_diff2.png"

cp -r "$out/runs" "$TMP/runs_before" && cp "$out/data/ffn.txt" "$TMP/ffn_before"
ok "continued with a gda column" study ARCHS="gda:noise-heads=1" SEEDS=1
kept() { for f in "$TMP"/runs_before/*; do cmp -s "$f" "$out/runs/${f##*/}" || return 1; done; }
check "the finished runs' files are kept" kept
check "the budget columns' FFN widths are kept" cmp -s "$TMP/ffn_before" <(head -3 "$out/data/ffn.txt")
check "the gda column ran" test -s "$out/runs/gda-noise-heads1_seed1_train.json"
params() { "$BIN" init "$@" --dim 16 --layers 4 --heads 2 --seq 32 --out "$TMP/p.safetensors" | grep -o '[0-9]* parameters' | cut -d' ' -f1; }
ffn=$(awk '$1 == "gda-noise-heads1" {print $2}' "$out/data/ffn.txt")
most=$(for a in diff diff2 softmax; do params --arch "$a"; done | sort -n | tail -1) # at train's default FFN
got=$(params --arch gda --noise-heads 1 --ffn "${ffn:-0}")
check "its parameters ($got) match the budget's largest ($most) within half an FFN unit (96)" \
  test $(( ${got:-0} > ${most:-0} ? ${got:-0} - ${most:-0} : ${most:-0} - ${got:-0} )) -le 96
has "the report has it" "$(cat "$out/report/report.md" 2>/dev/null)" "gda-noise-heads1 loss (seeds: 1)" \
  "| gda-noise-heads1 - softmax"
finish
