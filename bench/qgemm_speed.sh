#!/usr/bin/env bash
# The Q8_0 matmul kernel on one thread: a decoding step's weights (the 220 M
# model, 199 MB) against 1, 2, 4 and 8 tokens, and the same bytes read with
# plain loads. Built against build/libdiffattn.a (run `make` first).
#
#   bench/qgemm_speed.sh [build-dir] [reps]
set -euo pipefail
BUILD=${1:-build}
REPS=${2:-5}
LIB=${LIB:-$BUILD/libdiffattn.a} # another build's library to compare (a path under the root, or absolute)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
BLAS_LIB=/usr/lib/x86_64-linux-gnu/openblas-openmp
gcc -O2 -fopenmp -I"$ROOT/src" -I"$ROOT/include" "$ROOT/bench/qgemm_speed.c" "$(cd "$ROOT" && realpath "$LIB")" \
    -L"$BLAS_LIB" -Wl,-rpath,"$BLAS_LIB" -lopenblas -lcjson -lpcre2-8 $(pkg-config --libs icu-uc cairo) -lm \
    -o "$TMP/qgemm_speed"
echo "# $(nproc) cores, $(date -u +%FT%TZ), loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
"$TMP/qgemm_speed" "$REPS"
