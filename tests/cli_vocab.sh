#!/usr/bin/env bash
# A tokenizer whose vocabulary differs from the model's is an error naming
# both sizes (a smaller one dropped the ids it could not decode).
set -u
BIN=${1:?usage: cli_vocab.sh path/to/diffattn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
cat include/diffattn/*.h > "$T/text.txt"
"$BIN" tokenizer train --vocab-size 300 --in "$T/text.txt" --out "$T/tok.json" >/dev/null 2>&1 || bad "tokenizer train"
"$BIN" init --out "$T/m.safetensors" --dim 32 --layers 1 --heads 2 --seq 32 --vocab 512 >/dev/null || bad "init"
err=$("$BIN" sample --model "$T/m.safetensors" --tokenizer "$T/tok.json" --prompt "a" --max-new 4 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"300 tokens"*"vocabulary 512"* ]] && ok "sample: a smaller tokenizer is refused" \
  || bad "sample: a smaller tokenizer is refused: rc=$rc $err"
"$BIN" init --out "$T/m300.safetensors" --dim 32 --layers 1 --heads 2 --seq 32 --vocab 300 >/dev/null || bad "init 300"
"$BIN" sample --model "$T/m300.safetensors" --tokenizer "$T/tok.json" --prompt "a" --max-new 4 >/dev/null 2>&1 \
  && ok "sample: the matching tokenizer" || bad "sample: the matching tokenizer"
echo "$pass passed, $fail failed"
((fail == 0))
