# The harness every tests/*.sh sources (docs/testing.md):
#
#   source "$(dirname "$0")/lib.sh"          # $BIN (the first argument, or build/diffattn), $TMP + trap
#   ok "the model loads" "$BIN" info --model "$TMP/m.gguf"         # exit 0
#   bad "a crash is not an error" "$BIN" info --model "$TMP/x"      # exit non-zero, any code
#   expect_error "a truncated GGUF" "truncated" "$BIN" info --model "$TMP/cut.gguf"   # exit 1, stderr has the text
#   check "two ids files agree" cmp -s "$TMP/a" "$TMP/b"             # any test command, true = pass
#   pass "what"; fail "what" "why"                                   # record an outcome computed by hand
#   finish                                                           # "N passed, M failed"; exit code 0/1
#
# A skipped test exits 77 through skip "why" (ctest's SKIP_RETURN_CODE).
set -u
BIN=${1:-build/diffattn}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TESTS_PASSED=0
TESTS_FAILED=0

pass() { TESTS_PASSED=$((TESTS_PASSED + 1)); echo "ok   $1"; }
fail() { TESTS_FAILED=$((TESTS_FAILED + 1)); echo "FAIL $1${2:+: $2}"; }

# ok WHAT CMD...: CMD exits 0 (its output is kept in $TMP/last.out and .err).
ok() {
  local what=$1; shift
  "$@" >"$TMP/last.out" 2>"$TMP/last.err"
  local rc=$?
  if ((rc == 0)); then pass "$what"; else fail "$what" "rc=$rc, stderr: $(head -c 600 "$TMP/last.err")"; fi
}

# bad WHAT CMD...: CMD exits non-zero without a signal (codes >= 128 are crashes).
bad() {
  local what=$1; shift
  "$@" >"$TMP/last.out" 2>"$TMP/last.err"
  local rc=$?
  if ((rc != 0 && rc < 128)); then pass "$what"; else fail "$what" "rc=$rc"; fi
}

# expect_error WHAT PATTERN CMD...: CMD exits 1 and its stderr contains PATTERN.
expect_error() {
  local what=$1 pattern=$2; shift 2
  "$@" >"$TMP/last.out" 2>"$TMP/last.err"
  local rc=$? err
  err=$(cat "$TMP/last.err")
  if [[ $rc == 1 && $err == *"$pattern"* ]]; then pass "$what"
  else fail "$what" "rc=$rc, stderr: ${err:0:600}"; fi
}

# check WHAT CMD...: CMD (any test: [[ ]], cmp, grep -q, a function) is true.
check() {
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

skip() { echo "SKIP: $1"; exit 77; }

finish() {
  echo "$TESTS_PASSED passed, $TESTS_FAILED failed"
  ((TESTS_FAILED == 0))
  exit $?
}
