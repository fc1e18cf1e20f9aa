#!/usr/bin/env bash
# compare --task studies: --jobs 2 (single-thread processes) writes the same
# per-run results, bit for bit, as one process running the runs in turn; a
# study killed (kill -9) mid-way and continued with --resume writes the same
# report as an uninterrupted one; a second study into the folder is refused
# without --resume or --force.
set -u
BIN=${1:-build/diffattn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
check() { # check "what" condition-exit-code
  if [[ $2 == 0 ]]; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi
}
# a grid of 2 cells x 2 archs x 2 seeds = 8 runs
ARGS=(--task mqar --archs diff,softmax --pairs 2 --seq 16 --vocab 16 --dim 16 --layers 1 --batch 4 --steps 60
      --eval-every 20 --eval-seqs 8 --seeds 2 --grid heads=1,2 --quiet)
study() { # study OUT [extra flags]
  local out=$1; shift
  OMP_NUM_THREADS=1 "$BIN" compare "${ARGS[@]}" --out "$out" "$@"
}
# the report without what depends on the machine: wall and training times
strip_times() { sed -E 's/Wall time [0-9]+ s\.//; s/"(wall|train)_seconds":[0-9.]+//g' "$1"; }

study "$T/serial" --jobs 1 > /dev/null 2>&1; check "a study in one process" $?
study "$T/jobs" --jobs 2 > /dev/null 2>&1; check "the same study in 2 processes" $?
n=$(ls "$T/serial/runs" | grep -c '\.run$')
[[ $n == 8 ]]; check "8 run files" $?
same=1
for f in "$T"/serial/runs/*.run; do # every byte but the last field (train_s, a time)
  cmp -s <(head -c -8 "$f") <(head -c -8 "$T/jobs/runs/$(basename "$f")") || same=0
done
[[ $same == 1 ]]; check "--jobs 2 gives bit-identical per-run results" $?
cmp -s <(strip_times "$T/serial/report.json") <(strip_times "$T/jobs/report.json"); check "and the same report.json" $?

OMP_NUM_THREADS=1 "$BIN" compare "${ARGS[@]}" --out "$T/killed" --jobs 1 > /dev/null 2>&1 & # the process itself, so kill -9 ends it
pid=$!
for _ in $(seq 1 600); do # until two runs have finished
  [[ $(ls "$T/killed/runs" 2>/dev/null | grep -c '\.run$') -ge 2 ]] && break
  sleep 0.05
done
kill -9 $pid 2> /dev/null; wait $pid 2> /dev/null
left=$(ls "$T/killed/runs" | grep -c '\.run$')
[[ $left -ge 2 && $left -lt 8 && ! -e $T/killed/report.md ]]; check "killed with $left of 8 runs done" $?
err=$(study "$T/killed" --jobs 1 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"--resume"* ]]; check "a study in a folder holding one is refused, naming --resume" $?
study "$T/killed" --jobs 1 --resume > /dev/null 2>&1; check "--resume finishes it" $?
cmp -s <(strip_times "$T/serial/report.md") <(strip_times "$T/killed/report.md"); check "the same report.md as uninterrupted" $?
cmp -s <(strip_times "$T/serial/report.json") <(strip_times "$T/killed/report.json"); check "the same report.json" $?
[[ -s $T/serial/success_diff.png && -s $T/serial/success_diff_vs_softmax.png ]]; check "heatmaps written" $?
grep -q "| heads 1 | DIFF |\|pairs 2, seq 16; heads 1 | DIFF |" "$T/serial/report.md"; check "the study table names each cell" $?
out=$(study "$T/serial" --force 2>&1); check "--force replaces a study" $?
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
