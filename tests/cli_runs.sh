#!/usr/bin/env bash
# Run folders: a new run does not silently replace one (--force does), the
# command that started a run can be repeated with --resume, a changed model
# flag is refused naming the field, and --stop-at at the step reached takes
# no step. compare refuses an --out holding a compare the same way.
source "$(dirname "$0")/lib.sh"
cat include/*.h include/diffattn/*.h > "$TMP/corpus.txt"
RUN=(train --data "$TMP/corpus.txt" --out "$TMP/r" --arch softmax --dim 32 --layers 1 --heads 2 --seq 32 --batch 2
     --eval-batches 1 --log-every 1)
ok "a run" "$BIN" "${RUN[@]}" --steps 3
sum=$(sha256sum "$TMP/r/model.safetensors")
expect_errors "a new run into a run folder is refused" "holds a run" "--force" -- "$BIN" "${RUN[@]}" --steps 3
check "the refused run left the model as it was" [ "$(sha256sum "$TMP/r/model.safetensors")" == "$sum" ]
ok "the same command with --resume" "$BIN" "${RUN[@]}" --steps 5 --resume
expect_errors "a changed model flag is refused" "dim" "64" "32" -- "$BIN" "${RUN[@]}" --steps 7 --resume --dim 64
"$BIN" "${RUN[@]}" --steps 9 --resume --stop-at 5 >"$TMP/stop.log" 2>&1; rc=$?
if [[ $rc == 0 ]] && ! grep -q '"step":6' "$TMP/r/metrics.jsonl"; then pass "--stop-at at the step reached takes no step"
else fail "--stop-at at the step reached takes no step" "rc=$rc, $(tail -2 "$TMP/r/metrics.jsonl")"; fi
"$BIN" "${RUN[@]}" --steps 2 --force >/dev/null 2>&1 && grep -q '"step":2' "$TMP/r/metrics.jsonl" &&
  ! grep -q '"step":5' "$TMP/r/metrics.jsonl" && pass "--force starts again" || fail "--force starts again"
expect_error "--force with --resume refused" "choose one" "$BIN" "${RUN[@]}" --steps 2 --force --resume
mkdir -p "$TMP/c" && echo '{}' > "$TMP/c/report.json"
expect_errors "compare into a compare folder is refused" "holds a compare" "--force" -- \
  "$BIN" compare --out "$TMP/c" --steps 2 --dim 32 --layers 1 --heads 2 --seq 256 --batch 2
finish
