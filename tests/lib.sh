# The harness every tests/*.sh sources (docs/testing.md):
#
#   source "$(dirname "$0")/lib.sh"          # $BIN (the first argument, or build/diffattn), $TMP + trap
#   ok "the model loads" "$BIN" info --model "$TMP/m.gguf"         # exit 0
#   bad "a crash is not an error" "$BIN" info --model "$TMP/x"      # exit non-zero, any code
#   expect_error "a truncated GGUF" "truncated" "$BIN" info --model "$TMP/cut.gguf"   # exit 1, stderr has the text
#   expect_errors "a changed flag" "dim" "64" -- "$BIN" train ...   # exit 1, stderr has each text, in order
#   expect_one_line_error "a bad key" "config.json" "$BIN" info ...  # expect_error, and stderr is one line
#   check "two ids files agree" cmp -s "$TMP/a" "$TMP/b"             # any test command, true = pass
#   has "info names the format" "$out" "GGUF"                        # a text holds each text, in order
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

# in_order TEXT PATTERN...: TEXT holds each PATTERN (literal text, not a glob), one after the other.
in_order() {
  local rest=$1 p; shift
  for p in "$@"; do
    [[ $rest == *"$p"* ]] || return 1
    rest=${rest#*"$p"}
  done
}

# has WHAT TEXT PATTERN...: TEXT holds each PATTERN, in that order; a failure shows TEXT.
has() {
  local what=$1 text=$2; shift 2
  if in_order "$text" "$@"; then pass "$what"; else fail "$what" "expected $(printf "'%s' " "$@")in: $text"; fi
}

# expect_errors WHAT PATTERN... -- CMD...: CMD exits 1 and its stderr holds each PATTERN, in that order.
expect_errors() {
  local what=$1 pats=() rc err; shift
  while (($#)) && [[ $1 != -- ]]; do pats+=("$1"); shift; done
  shift
  "$@" >"$TMP/last.out" 2>"$TMP/last.err"
  rc=$?
  err=$(cat "$TMP/last.err")
  if [[ $rc == 1 ]] && in_order "$err" "${pats[@]}"; then pass "$what"
  else fail "$what" "rc=$rc, expected $(printf "'%s' " "${pats[@]}")in stderr: ${err:0:600}"; fi
}

# expect_one_line_error WHAT PATTERN CMD...: expect_error, and the message is one line.
expect_one_line_error() {
  local what=$1 pattern=$2; shift 2
  "$@" >"$TMP/last.out" 2>"$TMP/last.err"
  local rc=$? err
  err=$(cat "$TMP/last.err")
  if [[ $rc == 1 && $err == *"$pattern"* && $err != *$'\n'* ]]; then pass "$what"
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
