#!/usr/bin/env bash
# compare --task: the retrieval tasks run from the CLI and print their report;
# a wrong task, a wrong list or text without --data are refused in one line.
set -u
BIN=${1:-build/diffattn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
check() { # check "what" condition-exit-code
  if [[ $2 == 0 ]]; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi
}
expect_error() {
  local what=$1 pattern=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  [[ $rc == 1 && $err == *"$pattern"* ]]; check "$what" $?
}

out=$(OMP_NUM_THREADS=1 "$BIN" compare --task noisy-recall --out "$T/nr" --seq 32 --noise 0,0.5 --vocab 32 \
      --noise-vocab 8 --steps 4 --eval-every 2 --eval-seqs 8 --dim 16 --layers 1 --batch 4 --quiet 2>&1)
[[ $out == *"| noise 0.00, seq 32 | DIFF |"* && $out == *"| noise 0.50, seq 32 | softmax |"* ]]; check "noisy-recall sweep prints its report" $?
[[ -s $T/nr/report.json && -s $T/nr/accuracy_1.png && -s $T/nr/lambda.png ]]; check "report.json and the figures written" $?
"$BIN" compare --task mqar --help | grep -q -- "--pairs"; check "compare --task mqar --help lists the task flags" $?
"$BIN" compare --help | grep -q -- "--task"; check "compare --help lists --task" $?
expect_error "a second comparison into the same folder is refused" "--force" "$BIN" compare --task noisy-recall --out "$T/nr" --steps 2
expect_error "unknown task" "--task: expected mqar" "$BIN" compare --task sorting
expect_error "bad sweep list" "--pairs" "$BIN" compare --task mqar --pairs 4,x
expect_error "text needs --data" "--task text trains on --data" "$BIN" compare --task text --out "$T/x"
expect_error "too many pairs" "pairs 32 must lie" "$BIN" compare --task mqar --pairs 32 --seq 64 --out "$T/y"
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
