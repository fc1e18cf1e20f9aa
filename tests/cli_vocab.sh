#!/usr/bin/env bash
# A tokenizer whose vocabulary differs from the model's is an error naming
# both sizes (a smaller one dropped the ids it could not decode).
source "$(dirname "$0")/lib.sh"
cat include/diffattn/*.h > "$TMP/text.txt"
"$BIN" tokenizer train --vocab-size 300 --in "$TMP/text.txt" --out "$TMP/tok.json" >/dev/null 2>&1 || fail "tokenizer train"
"$BIN" init --out "$TMP/m.safetensors" --dim 32 --layers 1 --heads 2 --seq 32 --vocab 512 >/dev/null || fail "init"
expect_errors "sample: a smaller tokenizer is refused" "300 tokens" "vocabulary 512" -- \
  "$BIN" sample --model "$TMP/m.safetensors" --tokenizer "$TMP/tok.json" --prompt "a" --max-new 4
"$BIN" init --out "$TMP/m300.safetensors" --dim 32 --layers 1 --heads 2 --seq 32 --vocab 300 >/dev/null || fail "init 300"
ok "sample: the matching tokenizer" \
  "$BIN" sample --model "$TMP/m300.safetensors" --tokenizer "$TMP/tok.json" --prompt "a" --max-new 4
finish
