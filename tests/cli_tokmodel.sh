#!/usr/bin/env bash
# The tokenizer is part of the model: a BPE model trained on token shards
# carries its tokenizer in model.safetensors and in a GGUF quantized from it,
# so sample, eval and encode/decode need the model file alone; a vocabulary
# that does not match the model's (bytes, another tokenizer) is an error
# naming both sizes.
set -u
BIN=${1:-build/diffattn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
expect_error() { # name pattern cmd...
  local name=$1 pat=$2; shift 2
  local out; out=$("$@" 2>&1) && { bad "$name: succeeded"; return; }
  [[ $out == *"$pat"* ]] && ok "$name" || bad "$name: expected \"$pat\" in: $out"
}

# English text from Debian's licences: enough for a 512-token BPE and windows of 32
: > "$T/text.txt"
for f in /usr/share/common-licenses/*; do
  [[ -f $f ]] && cat "$f" >> "$T/text.txt"
  (( $(stat -c %s "$T/text.txt") > 200000 )) && break
done
(( $(stat -c %s "$T/text.txt") > 100000 )) || { bad "could not gather 100 kB of text"; echo "$pass passed, $fail failed"; exit 1; }
"$BIN" tokenizer train --vocab-size 512 --in "$T/text.txt" --out "$T/tok.json" --quiet >/dev/null || bad "tokenizer train"
"$BIN" prepare --tokenizer "$T/tok.json" --in "$T/text.txt" --out "$T/shards" --val-fraction 0.1 >/dev/null 2>&1 \
  || bad "prepare"
"$BIN" train --data "$T/shards" --out "$T/run" --dim 32 --layers 1 --heads 2 --seq 32 --steps 20 --batch 8 \
  --eval-every 0 --save-every 10 >/dev/null 2>&1 || bad "train on shards"

# The model moved away from its run folder (and its copied tokenizer files)
mkdir -p "$T/away"
cp "$T/run/model.safetensors" "$T/away/model.safetensors"
want=$("$BIN" sample --model "$T/run/model.safetensors" --tokenizer "$T/tok.json" --prompt "The license" --max-new 24 \
  --temperature 0 2>/dev/null)
got=$("$BIN" sample --model "$T/away/model.safetensors" --prompt "The license" --max-new 24 --temperature 0 2>/dev/null)
[[ -n $want && $got == "$want" ]] && ok "sample: a moved model decodes with the tokenizer it carries" \
  || bad "sample: a moved model decodes \"$got\", expected \"$want\""

# Quantized to GGUF: the tokenizer goes along
"$BIN" quantize --model "$T/run/model.safetensors" --type q8_0 --out "$T/away/model.gguf" >/dev/null 2>&1 || bad "quantize"
want=$("$BIN" sample --model "$T/away/model.gguf" --tokenizer "$T/tok.json" --prompt "The license" --max-new 24 \
  --temperature 0 2>/dev/null)
got=$("$BIN" sample --model "$T/away/model.gguf" --prompt "The license" --max-new 24 --temperature 0 2>/dev/null)
[[ -n $want && $got == "$want" ]] && ok "sample: a GGUF decodes with the tokenizer it carries" \
  || bad "sample: a GGUF decodes \"$got\", expected \"$want\""

# eval loss on the text equals eval loss on its shards: the text goes through the model's tokenizer
loss_of() { "$BIN" eval loss --model "$1" --data "$2" --json 2>&1 | sed -n 's/.*"loss":\([0-9.]*\).*/\1/p'; }
for m in model.safetensors model.gguf; do
  a=$(loss_of "$T/away/$m" "$T/text.txt"); b=$(loss_of "$T/away/$m" "$T/shards")
  if [[ -n $a && -n $b ]] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'; then
    ok "eval loss ($m): text $a = shards $b"
  else bad "eval loss ($m): text \"$a\", shards \"$b\""; fi
done

# encode / decode with --model: the same ids as with the tokenizer file
head -c 3000 "$T/text.txt" > "$T/small.txt"
"$BIN" encode --tokenizer "$T/tok.json" --in "$T/small.txt" > "$T/ids_file.txt" 2>/dev/null
"$BIN" encode --model "$T/away/model.gguf" --in "$T/small.txt" > "$T/ids_model.txt" 2>/dev/null
[[ -s $T/ids_file.txt ]] && cmp -s "$T/ids_file.txt" "$T/ids_model.txt" && ok "encode --model: the tokenizer file's ids" \
  || bad "encode --model: ids differ from the tokenizer file's"
"$BIN" decode --model "$T/away/model.safetensors" --ids "$T/ids_model.txt" --out "$T/back.txt" 2>/dev/null
cmp -s "$T/small.txt" "$T/back.txt" && ok "decode --model: the text back" || bad "decode --model: not the text"

# Another tokenizer than the model's, or bytes for a BPE model: errors naming both sizes
"$BIN" tokenizer train --vocab-size 512 --in "$T/small.txt" --out "$T/other.json" --quiet >/dev/null 2>&1
expect_error "sample: a --tokenizer other than the model's" "differs from the tokenizer" \
  "$BIN" sample --model "$T/away/model.safetensors" --tokenizer "$T/other.json" --max-new 4
expect_error "encode: --tokenizer and --model disagree" "differs from the tokenizer" \
  "$BIN" encode --model "$T/away/model.safetensors" --tokenizer "$T/other.json" --in "$T/small.txt"
"$BIN" tokenizer train --vocab-size 512 --in "$T/shards/val_000000.bin" "$T/small.txt" --out "$T/other512.json" \
  --quiet >/dev/null 2>&1
"$BIN" prepare --tokenizer "$T/other512.json" --in "$T/text.txt" --out "$T/shards2" >/dev/null 2>&1
expect_error "train --resume with shards of another tokenizer of the same size" "differs from the one" \
  "$BIN" train --data "$T/shards2" --out "$T/run" --resume --steps 30
expect_error "train --resume of a shard run with a text file" "vocabulary 256) but the model's vocabulary has 512" \
  "$BIN" train --data "$T/text.txt" --out "$T/run" --resume --steps 30
"$BIN" init --out "$T/bare.safetensors" --dim 32 --layers 1 --heads 2 --seq 32 --vocab 512 >/dev/null
expect_error "eval loss: text for a BPE model without a tokenizer" "256 but the model's has 512" \
  "$BIN" eval loss --model "$T/bare.safetensors" --data "$T/text.txt"
expect_error "sample: a BPE model without a tokenizer" "carries no tokenizer" \
  "$BIN" sample --model "$T/bare.safetensors" --max-new 4
expect_error "encode --model without a tokenizer" "carries no tokenizer" \
  "$BIN" encode --model "$T/bare.safetensors" --in "$T/small.txt"
echo "$pass passed, $fail failed"
((fail == 0))
