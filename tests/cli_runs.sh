#!/usr/bin/env bash
# Run folders: a new run does not silently replace one (--force does), the
# command that started a run can be repeated with --resume, a changed model
# flag is refused naming the field, and --stop-at at the step reached takes
# no step. compare refuses an --out holding a compare the same way.
set -u
BIN=${1:?usage: cli_runs.sh path/to/diffattn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
cat include/*.h include/diffattn/*.h > "$T/corpus.txt"
RUN=(train --data "$T/corpus.txt" --out "$T/r" --arch softmax --dim 32 --layers 1 --heads 2 --seq 32 --batch 2
     --eval-batches 1 --log-every 1)
"$BIN" "${RUN[@]}" --steps 3 >/dev/null 2>&1 && ok "a run" || bad "a run"
sum=$(sha256sum "$T/r/model.safetensors")
err=$("$BIN" "${RUN[@]}" --steps 3 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"holds a run"*"--force"* ]] && ok "a new run into a run folder is refused" \
  || bad "a new run into a run folder is refused: rc=$rc $err"
[[ $(sha256sum "$T/r/model.safetensors") == "$sum" ]] && ok "the refused run left the model as it was" \
  || bad "the refused run left the model as it was"
"$BIN" "${RUN[@]}" --steps 5 --resume >/dev/null 2>&1 && ok "the same command with --resume" \
  || bad "the same command with --resume"
err=$("$BIN" "${RUN[@]}" --steps 7 --resume --dim 64 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"dim"*"64"*"32"* ]] && ok "a changed model flag is refused" || bad "a changed model flag: rc=$rc $err"
"$BIN" "${RUN[@]}" --steps 9 --resume --stop-at 5 >"$T/stop.log" 2>&1; rc=$?
steps=$(grep -c '"step":' "$T/r/metrics.jsonl")
[[ $rc == 0 ]] && ! grep -q '"step":6' "$T/r/metrics.jsonl" && ok "--stop-at at the step reached takes no step" \
  || bad "--stop-at at the step reached takes no step: rc=$rc, $(tail -2 "$T/r/metrics.jsonl")"
"$BIN" "${RUN[@]}" --steps 2 --force >/dev/null 2>&1 && grep -q '"step":2' "$T/r/metrics.jsonl" \
  && ! grep -q '"step":5' "$T/r/metrics.jsonl" && ok "--force starts again" || bad "--force starts again"
err=$("$BIN" "${RUN[@]}" --steps 2 --force --resume 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"choose one"* ]] && ok "--force with --resume refused" || bad "--force with --resume: $err"
mkdir -p "$T/c" && echo '{}' > "$T/c/report.json"
err=$("$BIN" compare --out "$T/c" --steps 2 --dim 32 --layers 1 --heads 2 --seq 256 --batch 2 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"holds a compare"*"--force"* ]] && ok "compare into a compare folder is refused" \
  || bad "compare into a compare folder is refused: rc=$rc $err"
echo "$pass passed, $fail failed"
((fail == 0))
