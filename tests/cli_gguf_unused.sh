#!/usr/bin/env bash
# A GGUF's tensors are each read or the file is refused naming one: an
# attention bias (blk.N.attn_q.bias, which llama.cpp's llama loads), a block
# past block_count, tensors of no model at all. They were dropped silently,
# so diffattn's answer differed from llama.cpp's on the same file.
# Exits 77 without python3-numpy or node-llama-cpp's gguf-py.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gguf_py_lib.sh"
find_gguf_py || skip "$GGUF_PY_MISSING"
R() { "$PY" tools/gguf_retype.py --gguf-py "$GP" "$@"; }
"$PY" tools/llama_gguf_write.py --gguf-py "$GP" --out "$TMP/m.gguf" --dim 64 --layers 2 --heads 2 --vocab 300 \
  --type f16 --untied >/dev/null || exit 1
ok "the file as written loads" "$BIN" info --model "$TMP/m.gguf"

R "$TMP/m.gguf" "$TMP/bias.gguf" --add-tensor blk.0.attn_q.bias=64 || exit 1
expect_error "blk.0.attn_q.bias is refused by name" 'tensor "blk.0.attn_q.bias" is not one a softmax model' \
  "$BIN" info --model "$TMP/bias.gguf"
check "... saying the layers have no biases" grep -q "have no biases" "$TMP/last.err"

R "$TMP/m.gguf" "$TMP/blk2.gguf" --add-tensor-like blk.2.attn_q.weight=blk.1.attn_q.weight || exit 1
expect_error "a block past block_count is refused" 'tensor "blk.2.attn_q.weight"' "$BIN" info --model "$TMP/blk2.gguf"
check "... saying what block_count says" grep -q "block_count says 2 layers" "$TMP/last.err"

junk=()
for i in $(seq 1 300); do junk+=(--add-tensor "junk.$i=4"); done
R "$TMP/m.gguf" "$TMP/junk.gguf" "${junk[@]}" || exit 1
expect_error "300 junk tensors are refused, counted" "(300 such tensors)" "$BIN" logits --model "$TMP/junk.gguf" \
  --ids <(echo 1 2 3) --out "$TMP/l.npy"
finish
