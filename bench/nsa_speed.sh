#!/usr/bin/env bash
# NSA against softmax, to run on an idle machine (issue 20, "Speed"):
# dim 768, --heads 6 --kv-heads 2 (12 query heads of 64, 4 KV heads), NSA's
# defaults (l 32, s 16, l' 64, n 16, w 512), alternating NSA and softmax:
#   1. kernels (bench/nsa_kernels.c): one layer's attention forward+backward
#      at T = 16384 and 4096 (NSA's efficient kernels vs softmax's flash
#      kernel), and one token's attention at a 16k context (NSA's decoding
#      step vs a softmax step over an f32 cache written with the same loops);
#   2. the commands: `bench attn` (one layer's attention, forward+backward,
#      through the variant table) at T = 16384 and 4096, REPS alternating
#      rounds; `bench generate` of two one-layer models (random init, one
#      training step) with a 16,320-token prompt and 64 decoded tokens,
#      interleaved: decoding per token at a 16k context, the whole model
#      (attention, FFN, head) per token.
# Usage: bash bench/nsa_speed.sh [build-dir] [reps]   (after `make`)
# Prints one JSON line per kernel measurement, then the commands' outputs;
# "speedup" = softmax time / NSA time.
set -euo pipefail
BUILD=${1:-build}
REPS=${2:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DA="$ROOT/$BUILD/diffattn"
TMP=$(mktemp -d)
BIN=$TMP/nsa_kernels
BLAS_INC=/usr/include/x86_64-linux-gnu/openblas-openmp
BLAS_LIB=/usr/lib/x86_64-linux-gnu/openblas-openmp
gcc -O2 -march=native -fno-math-errno -fopenmp -I"$ROOT/src" -I"$ROOT/include" -I"$BLAS_INC" \
    "$ROOT/bench/nsa_kernels.c" "$ROOT/$BUILD/libdiffattn.a" -L"$BLAS_LIB" -Wl,-rpath,"$BLAS_LIB" -lopenblas \
    -lcjson -lpcre2-8 $(pkg-config --libs icu-uc cairo) -lm -o "$BIN"
echo "# $(nproc) cores, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}, $(date -u +%FT%TZ), loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## 1. kernels"
"$BIN" train 16384 "$REPS"
"$BIN" train 4096 "$REPS"
"$BIN" decode 16384 64

echo "## 2a. bench attn (forward+backward of one layer's attention), alternating"
SHAPE="--dim 768 --heads 6 --kv-heads 2"
for T in 16384 4096; do
  for r in $(seq "$REPS"); do
    for arch in nsa softmax; do
      printf 'T=%s round %s %s: ' "$T" "$r" "$arch"
      "$DA" bench attn --arch "$arch" $SHAPE --seq "$T" --batch 1 --steps 1 --warmup-steps 1 --json
    done
  done
done

echo "## 2b. bench generate: one-layer models, a 16,320-token prompt, 64 tokens decoded, interleaved"
head -c 4000000 /dev/urandom | base64 > "$TMP/data.txt"
for arch in nsa softmax; do
  "$DA" train --arch "$arch" $SHAPE --layers 1 --seq 16384 --batch 1 --steps 1 --warmup 1 --eval-every 0 \
    --eval-batches 1 --val-fraction 0.5 --data "$TMP/data.txt" --out "$TMP/$arch" --force > "$TMP/$arch.log"
done
"$DA" info --model "$TMP/nsa/model.safetensors" | grep -E "parameters|kv cache" || true
"$DA" bench generate --model "$TMP/nsa/model.safetensors" --also "$TMP/softmax/model.safetensors" \
  --prompt 16320 --gen 64 --reps "$REPS" --json
rm -rf "$TMP"
