#!/usr/bin/env bash
# libdiffattn.so exports the public API and nothing else: its defined dynamic
# symbols are exactly the functions and variables include/ declares
# (tools/export_map.py), so no internal da_* function leaks into the ABI.
# Usage: shared_exports.sh LIBDIFFATTN_SO
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
command -v nm >/dev/null || skip "no nm (apt-get install binutils)"
python3 "$root/tools/export_map.py" "$root" --list | sort > "$TMP/public.txt"
nm -D --defined-only "$1" | awk '$2 ~ /^[TDRBVWiu]$/ { sub(/@.*/, "", $3); print $3 }' | sort -u > "$TMP/exported.txt"
(( $(wc -l < "$TMP/public.txt") > 100 )) || fail "the headers' list is short: $(wc -l < "$TMP/public.txt") names"
extra=$(comm -13 "$TMP/public.txt" "$TMP/exported.txt" | head -20)
missing=$(comm -23 "$TMP/public.txt" "$TMP/exported.txt" | head -20)
[[ -z $extra ]] && pass "no symbol beyond include/'s is exported" || fail "exported but not public" "$(echo $extra)"
[[ -z $missing ]] && pass "every function and variable include/ declares is exported" ||
  fail "public but not exported" "$(echo $missing)"
finish
