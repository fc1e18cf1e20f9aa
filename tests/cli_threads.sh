#!/usr/bin/env bash
# Threads: --threads N sets the thread count of any command, and the process
# waits passively (OMP_WAIT_POLICY=passive) unless the user chose a policy.
set -u
BIN=${1:?usage: cli_threads.sh path/to/diffattn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
"$BIN" init --out "$T/m.safetensors" --dim 64 --layers 1 --heads 2 --seq 64 >/dev/null || bad "init"
bench() { "$BIN" bench generate --model "$T/m.safetensors" --prompt 8 --gen 4 --reps 1 --json "$@"; }
out=$(env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BIN" --threads 1 bench generate --model "$T/m.safetensors" --prompt 8 --gen 4 --reps 1 --json)
grep -q '"threads":1,' <<<"$out" && ok "--threads 1 before the command" || bad "--threads 1 before the command: $out"
grep -q '"wait_policy":"passive"' <<<"$out" && ok "passive wait by default" || bad "passive wait by default: $out"
out=$(env OMP_WAIT_POLICY=active OMP_NUM_THREADS=2 bash -c "$(declare -f bench); BIN='$BIN' T='$T' bench --threads=1")
grep -q '"threads":1,' <<<"$out" && ok "--threads=1 after the command" || bad "--threads=1 after the command: $out"
grep -q '"wait_policy":"active"' <<<"$out" && ok "the user's policy is kept" || bad "the user's policy is kept: $out"
err=$("$BIN" info --threads 0 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *'--threads "0"'* ]] && ok "--threads 0 refused" || bad "--threads 0 refused: rc=$rc $err"
echo "$pass passed, $fail failed"
((fail == 0))
