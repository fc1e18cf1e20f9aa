#!/usr/bin/env bash
# da_session_decode_batch without the server: tokens/s and user CPU time a
# token with 1, 2, 4 and 8 sessions in one pass (bench/decode_batch.c), on
# MODEL (default: the 220 M q8_0 model of bench/serve_throughput.sh, made in
# KEEP or a temporary folder). Links build/libdiffattn.a (run `make` first).
#
#   bench/decode_batch.sh [build-dir] [steps] [rounds]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-64}
ROUNDS=${3:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
T=${KEEP:-$TMP}
mkdir -p "$T"
MODEL=${MODEL:-$T/serve_220m.q8_0.gguf}
if [[ ! -f $MODEL ]]; then
  "$ROOT/$BUILD/diffattn" init --arch softmax --dim 1024 --layers 12 --heads 8 --vocab 32000 --ffn 2816 --seq 1024 \
    --rope-freq llama --out "$T/m.safetensors" >/dev/null
  "$ROOT/$BUILD/diffattn" quantize --model "$T/m.safetensors" --type q8_0 --out "$MODEL" >/dev/null
fi
BLAS_LIB=/usr/lib/x86_64-linux-gnu/openblas-openmp
gcc -O2 -fopenmp -I"$ROOT/include" "$ROOT/bench/decode_batch.c" "$ROOT/$BUILD/libdiffattn.a" \
    -L"$BLAS_LIB" -Wl,-rpath,"$BLAS_LIB" -lopenblas -lcjson -lpcre2-8 $(pkg-config --libs icu-uc cairo) -lm \
    -o "$TMP/decode_batch"
echo "# $(nproc) cores, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}, $(date -u +%FT%TZ), loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
${PERF:-} "$TMP/decode_batch" "$MODEL" "$STEPS" "$ROUNDS"
