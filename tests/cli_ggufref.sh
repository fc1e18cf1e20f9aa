#!/usr/bin/env bash
# A GGUF written by diffattn parses with a reader it did not write:
# @huggingface/gguf (npm, tools/ggufref, installed by tools/install-deps.sh).
# Exits 77 (ctest: skipped) when node or the package is missing.
set -u
BIN=${1:-build/diffattn}
REF=tools/ggufref
command -v node >/dev/null || { echo "skip: node is not installed (tools/install-deps.sh)"; exit 77; }
[[ -d $REF/node_modules/@huggingface/gguf ]] || { echo "skip: $REF/node_modules missing (tools/install-deps.sh)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
check() { if [[ $2 == *"$3"* ]]; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1: expected $3 in $2"; fi; }

"$BIN" init --out "$T/m.safetensors" --arch softmax --dim 256 --layers 2 --heads 2 --ffn 512 --seq 64 >/dev/null || exit 1
for t in q8_0 q4_0 q4_k; do
  "$BIN" quantize --model "$T/m.safetensors" --type $t --out "$T/$t.gguf" >/dev/null || exit 1
  out=$(node $REF/check.mjs "$T/$t.gguf" 2>&1)
  check "$t: version 3" "$out" '"version":3'
  check "$t: architecture" "$out" '"architecture":"llama"'
  check "$t: hyperparameters under llama." "$out" '"block_count":2,"embedding_length":256,"head_count":4'
  check "$t: every tensor (2 per model + 9 per layer + output)" "$out" '"tensor_count":21,"tensors":21'
  case $t in
    q8_0) want='"q_proj":{"shape":[256,256],"type":"Q8_0"' ;;
    q4_0) want='"q_proj":{"shape":[256,256],"type":"Q4_0"' ;;
    q4_k) want='"q_proj":{"shape":[256,256],"type":"Q4_K"' ;;
  esac
  check "$t: q_proj type and shape" "$out" "$want"
  check "$t: alignment" "$out" '"alignment":32'
done

# A model trained on token shards carries its tokenizer: llama.cpp's tokenizer.ggml.* keys
for f in /usr/share/common-licenses/*; do [[ -f $f ]] && cat "$f" >> "$T/text.txt"; done
"$BIN" tokenizer train --vocab-size 300 --in "$T/text.txt" --out "$T/tok.json" --quiet >/dev/null 2>&1 || exit 1
"$BIN" prepare --tokenizer "$T/tok.json" --in "$T/text.txt" --out "$T/shards" >/dev/null 2>&1 || exit 1
"$BIN" train --data "$T/shards" --out "$T/run" --dim 32 --layers 1 --heads 2 --seq 32 --steps 1 --batch 2 \
  >/dev/null 2>&1 || exit 1
"$BIN" quantize --model "$T/run/model.safetensors" --type q8_0 --out "$T/bpe.gguf" >/dev/null || exit 1
out=$(node $REF/check.mjs "$T/bpe.gguf" 2>&1)
check "tokenizer: gpt2 model, GPT-2 pre-tokeniser" "$out" '"tokenizer":{"model":"gpt2","pre":"gpt-2"'
check "tokenizer: a token and a type per id" "$out" '"tokens":300,"token_type":300'
check "tokenizer: merges as \"a b\"" "$out" '"merges":43,"first_merge":"'
check "tokenizer: <|endoftext|> is bos and eos" "$out" '"eos_text":"<|endoftext|>","hf_json":"string"'
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
