#!/usr/bin/env bash
# tools/check_public_api.py passes on include/, and fails on a copy of it
# with a report header added, and with lines enough to pass the budget.
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
check="$root/tools/check_public_api.py"
python3 "$check" "$root" >/dev/null || { fail "include/ itself fails the check"; finish; }
pass "include/ is within the budget"
copy() { rm -rf "$TMP/t" && mkdir -p "$TMP/t" && cp -r "$root/include" "$TMP/t/"; }
caught() { # caught NAME TEXT: the check fails on the copy, naming TEXT
    local out
    if out=$(python3 "$check" "$TMP/t"); then fail "$1" "not caught"; else has "$1 is caught" "$out" "$2"; fi
}
copy && printf '#pragma once\n' > "$TMP/t/include/diffattn/report.h"
caught "a report header in include/" "include/diffattn/report.h: a study"
copy && printf '#pragma once\n' > "$TMP/t/include/diffattn/study_grid.h"
caught "a study header in include/" "include/diffattn/study_grid.h: a study"
copy && lines=$(cat "$root"/include/*.h "$root"/include/*/*.h | wc -l) \
  && yes '/* padding */' | head -n $((1500 - lines)) > "$TMP/t/include/diffattn/padding.h"
caught "include/ at 1,500 lines" "the budget is under 1500"
finish
