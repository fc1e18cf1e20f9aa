#!/usr/bin/env bash
# tools/check_file_cycles.py passes on the tree, and fails on a copy of it with
# a circle planted: between two .c files, between a header's inline function
# and the .c file it calls back, round a .c file, a header inline and a second
# .c file, and through a public header's inline function.
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
check="$root/tools/check_file_cycles.py"
python3 "$check" "$root" >"$TMP/tree.out" || { fail "the tree itself fails the check" "$(cat "$TMP/tree.out")"; finish; }
# plant WHAT EXPECTED FILE LINE [FILE LINE]...: copy the tree, append each LINE to its FILE (a public header's:
# inside its C++ guard, before the guard's closing), expect a failure whose output holds EXPECTED
plant() {
    local what=$1 expected=$2 out
    shift 2
    rm -rf "$TMP/t" && mkdir -p "$TMP/t" && cp -r "$root/src" "$root/include" "$TMP/t/"
    while (($#)); do
        if [[ $1 == include/* ]]; then
            python3 -c 'import sys; p, line = sys.argv[1:]; s = open(p).read(); i = s.rindex("#ifdef __cplusplus")
open(p, "w").write(s[:i] + line + "\n" + s[i:])' "$TMP/t/$1" "$2"
        else
            printf '%s\n' "$2" >>"$TMP/t/$1"
        fi
        shift 2
    done
    if out=$(python3 "$check" "$TMP/t"); then fail "$what" "not caught: $out"
    else has "$what is caught" "$out" "$expected"; fi
}
plant "a circle of two .c files" "cycle core/clock.c <-> core/rng.c" \
    src/core/clock.c 'void da_planted_clock(da_rng *r) { da_rng_seed(r, 1); }' \
    src/core/rng.c 'void da_planted_rng(void) { da_now_ns(); }'
plant "a header inline calling back the .c that calls it" "cycle core/clock.h <-> core/rng.c" \
    src/core/clock.h 'static inline void da_planted_seed(da_rng *r) { da_rng_seed(r, 1); }' \
    src/core/rng.c 'void da_planted_rng(da_rng *r) { da_planted_seed(r); }'
plant "a circle through a header inline and a second .c" "cycle core/clock.c <-> core/clock.h <-> core/rng.c" \
    src/core/clock.h 'static inline uint64_t da_planted_now(void) { return da_now_ns(); }' \
    src/core/clock.c 'void da_planted_clock(da_rng *r) { da_rng_seed(r, 1); }' \
    src/core/rng.c 'void da_planted_rng(void) { da_planted_now(); }'
plant "a public header's inline, inside its C++ guard, calling back its caller" \
    "cycle core/rng.c <-> include/diffattn/rng.h" \
    include/diffattn/rng.h 'static inline float da_planted_uniform(da_rng *r) { return da_rng_uniform(r); }' \
    src/core/rng.c 'float da_planted_rng(da_rng *r) { return da_planted_uniform(r); }'
finish
