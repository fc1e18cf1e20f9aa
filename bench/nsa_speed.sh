#!/usr/bin/env bash
# NSA against softmax, to run on an idle machine (issue 20, "Speed"):
# dim 768, --heads 6 --kv-heads 2 (12 query heads of 64, 4 KV heads), NSA's
# defaults (l 32, s 16, l' 64, n 16, w 512), one alternating run each:
#   train: one layer's attention forward+backward at T = 16384 and T = 4096
#          (NSA's efficient kernels vs the softmax flash kernel of `bench attn`)
#   decode: one token's attention at a 16k context (NSA's decoding step vs a
#          softmax step over an f32 cache written with the same loops)
# Usage: bash bench/nsa_speed.sh [build-dir] [reps]   (after `make`)
# Prints one JSON line per measurement; "speedup" = softmax time / NSA time.
set -euo pipefail
BUILD=${1:-build}
REPS=${2:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(mktemp -d)/nsa_kernels
BLAS_INC=/usr/include/x86_64-linux-gnu/openblas-openmp
BLAS_LIB=/usr/lib/x86_64-linux-gnu/openblas-openmp
gcc -O2 -march=native -fno-math-errno -fopenmp -I"$ROOT/src" -I"$ROOT/include" -I"$BLAS_INC" \
    "$ROOT/bench/nsa_kernels.c" "$ROOT/$BUILD/libdiffattn.a" -L"$BLAS_LIB" -Wl,-rpath,"$BLAS_LIB" -lopenblas \
    -lcjson -lpcre2-8 $(pkg-config --libs icu-uc cairo) -lm -o "$BIN"
echo "# $(nproc) cores, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}, $(date -u +%FT%TZ)"
"$BIN" train 16384 "$REPS"
"$BIN" train 4096 "$REPS"
"$BIN" decode 16384 64
# When --arch nsa is registered in the CLI (docs/model.md), the same comparison through the commands:
#   build/diffattn bench attn --arch nsa     --dim 768 --heads 6 --kv-heads 2 --seq 16384 --batch 1 --steps 3
#   build/diffattn bench attn --arch softmax --dim 768 --heads 6 --kv-heads 2 --seq 16384 --batch 1 --steps 3
