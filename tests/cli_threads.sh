#!/usr/bin/env bash
# Threads: --threads N sets the thread count of any command, and the process
# waits passively (OMP_WAIT_POLICY=passive) unless the user chose a policy.
source "$(dirname "$0")/lib.sh"
"$BIN" init --out "$TMP/m.safetensors" --dim 64 --layers 1 --heads 2 --seq 64 >/dev/null || fail "init"
bench() { "$BIN" bench generate --model "$TMP/m.safetensors" --prompt 8 --gen 4 --reps 1 --json "$@"; }
out=$(env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BIN" --threads 1 bench generate --model "$TMP/m.safetensors" --prompt 8 --gen 4 --reps 1 --json)
has "--threads 1 before the command" "$out" '"threads":1,'
has "passive wait by default" "$out" '"wait_policy":"passive"'
out=$(env OMP_WAIT_POLICY=active OMP_NUM_THREADS=2 bash -c "$(declare -f bench); BIN='$BIN' TMP='$TMP' bench --threads=1")
has "--threads=1 after the command" "$out" '"threads":1,'
has "the user's policy is kept" "$out" '"wait_policy":"active"'
expect_error "--threads 0 refused" '--threads "0"' "$BIN" info --threads 0
finish
