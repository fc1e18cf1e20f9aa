#!/usr/bin/env bash
# OMP_NUM_THREADS is capped like --threads, at 4096, with a message: 100,000
# took 95 s and 2.2 GB of thread stacks, then SIGSEGV. --threads N still
# overrides it; --threads past 4096 is refused.
source "$(dirname "$0")/lib.sh"
"$BIN" init --out "$TMP/m.safetensors" --dim 32 --layers 1 --heads 2 --ffn 64 --seq 16 >/dev/null || exit 1
echo "1 2 3 4" >"$TMP/ids"
OMP_NUM_THREADS=100000 ok "OMP_NUM_THREADS=100000: info runs" "$BIN" info --model "$TMP/m.safetensors"
check "... saying it uses 4096" grep -q "OMP_NUM_THREADS=100000 is more than 4096 threads; using 4096" "$TMP/last.err"
OMP_NUM_THREADS=100000 ok "OMP_NUM_THREADS=100000 with --threads 2: logits run" "$BIN" logits --threads 2 \
  --model "$TMP/m.safetensors" --ids "$TMP/ids" --out "$TMP/l.npy"
OMP_NUM_THREADS=4096 ok "OMP_NUM_THREADS=4096 is taken as it is" "$BIN" info --model "$TMP/m.safetensors"
check "... without a message" test ! -s "$TMP/last.err"
expect_error "--threads 4097 is refused" "expected a number of threads, 1..4096" "$BIN" info --threads 4097 \
  --model "$TMP/m.safetensors"
finish
