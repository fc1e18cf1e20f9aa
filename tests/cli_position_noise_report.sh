#!/usr/bin/env bash
# bench/position_noise_study.sh's report rebuilt from run files alone (REPORT_ONLY), on the fixture runs in
# tests/fixtures/position_noise (diff, diff2 and softmax, 4 seeds, rates 0, 0.3 and 0.6, made-up losses):
# tests/position_noise_check.py recomputes every paired difference, slope and rate growth with numpy and
# checks each interval against the exact bootstrap distribution. With 2 finished seeds and one unfinished
# run the report says the study is incomplete, lists the runs, and gives curves without any interval.
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
fix=$root/tests/fixtures/position_noise
PY=
for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && { PY=$p; break; }; done
[[ -n $PY ]] || skip "no python3 with numpy (the check's independent arithmetic)"
[[ -f $(dirname "$BIN")/libdiffattn.a ]] || skip "no libdiffattn.a beside $BIN (the plot program links it)"
report() { REPORT_ONLY=$1 REPORT_DEST=$2 bash "$root/bench/position_noise_study.sh" "$BIN"; }

ok "the report from the fixture runs" report "$fix" "$TMP/full"
ok "its numbers match numpy's, intervals the exact bootstrap's" "$PY" "$root/tests/position_noise_check.py" \
  "$fix" "$TMP/full/report.json" complete
cat "$TMP/last.out"
md=$(cat "$TMP/full/report.md" 2>/dev/null)
has "the report answers per column and rate" "$md" "## Answers" "- position, diff at rate 0:" \
  "- rate (0.6 vs 0), diff at positions 256-1024:"
check "the fixture's DIFF gains on softmax with position at rate 0.6 (slope -0.0048 built in)" \
  grep -q "position, diff at rate 0.6: the difference grows in the column's favour" "$TMP/full/report.md"
for f in loss_rate0.png loss_rate0.3.png loss_rate0.6.png diff_diff.png diff_diff2.png; do
  check "figure $f" test -s "$TMP/full/$f"
done
ok "the same report a second time" python3 "$root/bench/position_noise_report.py" "$fix" "$TMP/again"
check "the bootstrap is deterministic: report.json identical" cmp -s "$TMP/full/report.json" "$TMP/again/report.json"

# seeds 1 and 2 finished; diff seed 3 scored at rate 0 only and not finished (no train file)
mkdir -p "$TMP/part"
cp "$fix"/*_seed[12]_*.json "$TMP/part/" && cp "$fix/diff_seed3_rate0.json" "$TMP/part/"
ok "the report of an incomplete study" report "$TMP/part" "$TMP/inc"
ok "its means match numpy's, no interval" "$PY" "$root/tests/position_noise_check.py" \
  "$TMP/part" "$TMP/inc/report.json" incomplete
cat "$TMP/last.out"
md=$(cat "$TMP/inc/report.md" 2>/dev/null)
has "it says so and lists the runs" "$md" "**The study is incomplete:** 2 seed(s)" "| diff | 1 | yes | 1000 |" \
  "| diff | 3 | no | - | - | 0 |" "### Distractor rate 0.6" "diff loss (seeds: 2)" "None yet"
check "no interval anywhere in it" bash -c "! grep -qE '\[[-+][0-9.]+, [-+][0-9.]+\]' '$TMP/inc/report.md'"
check "a figure from the finished runs" test -s "$TMP/inc/diff_diff.png"
finish
