#!/usr/bin/env bash
# A GGUF written by diffattn parses with a reader it did not write:
# @huggingface/gguf (npm, tools/ggufref, installed by tools/install-deps.sh).
# Exits 77 (ctest: skipped) when node or the package is missing.
source "$(dirname "$0")/lib.sh"
REF=tools/ggufref
command -v node >/dev/null || skip "node is not installed (tools/install-deps.sh)"
[[ -d $REF/node_modules/@huggingface/gguf ]] || skip "$REF/node_modules missing (tools/install-deps.sh)"

"$BIN" init --out "$TMP/m.safetensors" --arch softmax --dim 256 --layers 2 --heads 2 --ffn 512 --seq 64 >/dev/null || exit 1
for t in q8_0 q4_0 q4_k; do
  "$BIN" quantize --model "$TMP/m.safetensors" --type $t --out "$TMP/$t.gguf" >/dev/null || exit 1
  out=$(node $REF/check.mjs "$TMP/$t.gguf" 2>&1)
  has "$t: version 3" "$out" '"version":3'
  has "$t: architecture" "$out" '"architecture":"llama"'
  has "$t: hyperparameters under llama." "$out" '"block_count":2,"embedding_length":256,"head_count":4'
  has "$t: every tensor (2 per model + 9 per layer + output)" "$out" '"tensor_count":21,"tensors":21'
  case $t in
    q8_0) want='"q_proj":{"shape":[256,256],"type":"Q8_0"' ;;
    q4_0) want='"q_proj":{"shape":[256,256],"type":"Q4_0"' ;;
    q4_k) want='"q_proj":{"shape":[256,256],"type":"Q4_K"' ;;
  esac
  has "$t: q_proj type and shape" "$out" "$want"
  has "$t: alignment" "$out" '"alignment":32'
done

# A model trained on token shards carries its tokenizer: llama.cpp's tokenizer.ggml.* keys
for f in /usr/share/common-licenses/*; do [[ -f $f ]] && cat "$f" >> "$TMP/text.txt"; done
"$BIN" tokenizer train --vocab-size 300 --in "$TMP/text.txt" --out "$TMP/tok.json" --quiet >/dev/null 2>&1 || exit 1
"$BIN" prepare --tokenizer "$TMP/tok.json" --in "$TMP/text.txt" --out "$TMP/shards" >/dev/null 2>&1 || exit 1
"$BIN" train --data "$TMP/shards" --out "$TMP/run" --dim 32 --layers 1 --heads 2 --seq 32 --steps 1 --batch 2 \
  >/dev/null 2>&1 || exit 1
"$BIN" quantize --model "$TMP/run/model.safetensors" --type q8_0 --out "$TMP/bpe.gguf" >/dev/null || exit 1
out=$(node $REF/check.mjs "$TMP/bpe.gguf" 2>&1)
has "tokenizer: gpt2 model, GPT-2 pre-tokeniser" "$out" '"tokenizer":{"model":"gpt2","pre":"gpt-2"'
has "tokenizer: a token and a type per id" "$out" '"tokens":300,"token_type":300'
has "tokenizer: merges as \"a b\"" "$out" '"merges":43,"first_merge":"'
has "tokenizer: <|endoftext|> is bos and eos" "$out" '"eos_text":"<|endoftext|>","hf_json":"string"'
finish
