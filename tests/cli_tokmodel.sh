#!/usr/bin/env bash
# The tokenizer is part of the model: a BPE model trained on token shards
# carries its tokenizer in model.safetensors and in a GGUF quantized from it,
# so sample, eval and encode/decode need the model file alone; a vocabulary
# that does not match the model's (bytes, another tokenizer) is an error
# naming both sizes.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# English text from Debian's licences: enough for a 512-token BPE and windows of 32
: > "$TMP/text.txt"
for f in /usr/share/common-licenses/*; do
  [[ -f $f ]] && cat "$f" >> "$TMP/text.txt"
  (( $(stat -c %s "$TMP/text.txt") > 200000 )) && break
done
(( $(stat -c %s "$TMP/text.txt") > 100000 )) || { fail "could not gather 100 kB of text"; finish; }
"$BIN" tokenizer train --vocab-size 512 --in "$TMP/text.txt" --out "$TMP/tok.json" --quiet >/dev/null || fail "tokenizer train"
"$BIN" prepare --tokenizer "$TMP/tok.json" --in "$TMP/text.txt" --out "$TMP/shards" --val-fraction 0.1 >/dev/null 2>&1 \
  || fail "prepare"
"$BIN" train --data "$TMP/shards" --out "$TMP/run" --dim 32 --layers 1 --heads 2 --seq 32 --steps 20 --batch 8 \
  --eval-every 0 --save-every 10 >/dev/null 2>&1 || fail "train on shards"

# The model moved away from its run folder (and its copied tokenizer files)
mkdir -p "$TMP/away"
cp "$TMP/run/model.safetensors" "$TMP/away/model.safetensors"
want=$("$BIN" sample --model "$TMP/run/model.safetensors" --tokenizer "$TMP/tok.json" --prompt "The license" --max-new 24 \
  --temperature 0 2>/dev/null)
got=$("$BIN" sample --model "$TMP/away/model.safetensors" --prompt "The license" --max-new 24 --temperature 0 2>/dev/null)
[[ -n $want && $got == "$want" ]] && pass "sample: a moved model decodes with the tokenizer it carries" \
  || fail "sample: a moved model decodes \"$got\", expected \"$want\""

# Quantized to GGUF: the tokenizer goes along
"$BIN" quantize --model "$TMP/run/model.safetensors" --type q8_0 --out "$TMP/away/model.gguf" >/dev/null 2>&1 || fail "quantize"
want=$("$BIN" sample --model "$TMP/away/model.gguf" --tokenizer "$TMP/tok.json" --prompt "The license" --max-new 24 \
  --temperature 0 2>/dev/null)
got=$("$BIN" sample --model "$TMP/away/model.gguf" --prompt "The license" --max-new 24 --temperature 0 2>/dev/null)
[[ -n $want && $got == "$want" ]] && pass "sample: a GGUF decodes with the tokenizer it carries" \
  || fail "sample: a GGUF decodes \"$got\", expected \"$want\""

# eval loss on the text equals eval loss on its shards: the text goes through the model's tokenizer
loss_of() { "$BIN" eval loss --model "$1" --data "$2" --json 2>&1 | sed -n 's/.*"loss":\([0-9.]*\).*/\1/p'; }
for m in model.safetensors model.gguf; do
  a=$(loss_of "$TMP/away/$m" "$TMP/text.txt"); b=$(loss_of "$TMP/away/$m" "$TMP/shards")
  if [[ -n $a && -n $b ]] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'; then
    pass "eval loss ($m): text $a = shards $b"
  else fail "eval loss ($m): text \"$a\", shards \"$b\""; fi
done

# encode / decode with --model: the same ids as with the tokenizer file
head -c 3000 "$TMP/text.txt" > "$TMP/small.txt"
"$BIN" encode --tokenizer "$TMP/tok.json" --in "$TMP/small.txt" > "$TMP/ids_file.txt" 2>/dev/null
"$BIN" encode --model "$TMP/away/model.gguf" --in "$TMP/small.txt" > "$TMP/ids_model.txt" 2>/dev/null
[[ -s $TMP/ids_file.txt ]] && cmp -s "$TMP/ids_file.txt" "$TMP/ids_model.txt" && pass "encode --model: the tokenizer file's ids" \
  || fail "encode --model: ids differ from the tokenizer file's"
# a Hugging Face folder's tokenizer.json is its model's, as sample takes it (da_tokenizer_read)
"$BIN" export --format hf --model "$TMP/away/model.safetensors" --out "$TMP/hf" >/dev/null 2>&1
"$BIN" encode --model "$TMP/hf" --in "$TMP/small.txt" > "$TMP/ids_hf.txt" 2>/dev/null
[[ -s $TMP/ids_hf.txt ]] && cmp -s "$TMP/ids_file.txt" "$TMP/ids_hf.txt" && pass "encode --model: a folder's tokenizer.json" \
  || fail "encode --model: a folder's tokenizer.json gives other ids"
# eval loss on text takes a folder's tokenizer.json too, as sample and encode do
a=$(loss_of "$TMP/away/model.safetensors" "$TMP/text.txt"); b=$(loss_of "$TMP/hf" "$TMP/text.txt")
if [[ -n $a && -n $b ]] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'; then
  pass "eval loss: a folder's text through its tokenizer.json ($b), as the model file's ($a)"
else fail "eval loss: a folder's text \"$b\", the model file's \"$a\"" "$("$BIN" eval loss --model "$TMP/hf" --data "$TMP/text.txt" 2>&1 | tail -1)"; fi
# quantize --calib reads a folder's calibration text through its tokenizer.json, as the other commands do: the
# GGUF (AWQ scales, int8 ranges) is the one calibrated on that text's token shards (q4_0: dim 32 is off q4_k's block)
"$BIN" prepare --tokenizer "$TMP/tok.json" --in "$TMP/small.txt" --out "$TMP/calib_shards" --val-fraction 0.1 \
  >/dev/null 2>&1 || fail "prepare the calibration shards"
for c in small.txt calib_shards; do
  "$BIN" quantize --model "$TMP/hf" --type q4_0 --calib "$TMP/$c" --calib-samples 8 --act int8-static \
    --out "$TMP/calib_$c.gguf" >/dev/null 2>"$TMP/err.txt" || fail "quantize --calib $c" "$(tail -1 "$TMP/err.txt")"
done
[[ -s $TMP/calib_small.txt.gguf ]] && cmp -s "$TMP/calib_small.txt.gguf" "$TMP/calib_calib_shards.gguf" \
  && pass "quantize --calib: a folder's text through its tokenizer.json, as its token shards" \
  || fail "quantize --calib: a folder's text gives another GGUF than its token shards"
"$BIN" decode --model "$TMP/away/model.safetensors" --ids "$TMP/ids_model.txt" --out "$TMP/back.txt" 2>/dev/null
cmp -s "$TMP/small.txt" "$TMP/back.txt" && pass "decode --model: the text back" || fail "decode --model: not the text"
# --tokenizer reads a tokenizer from any file, as --model does (da_tokenizer_read): a model file's own
for m in model.gguf model.safetensors; do
  "$BIN" encode --tokenizer "$TMP/away/$m" --in "$TMP/small.txt" > "$TMP/ids_tokm.txt" 2>"$TMP/err.txt"
  [[ -s $TMP/ids_tokm.txt ]] && cmp -s "$TMP/ids_file.txt" "$TMP/ids_tokm.txt" \
    && pass "encode --tokenizer $m: the ids of the tokenizer it carries" \
    || fail "encode --tokenizer $m: ids differ from the tokenizer file's" "$(head -c 300 "$TMP/err.txt")"
done
# an older model without its tokenizer, the files saved beside it: encode and sample take the same ones
mkdir -p "$TMP/old"
"$BIN" init --out "$TMP/old/model.safetensors" --dim 32 --layers 1 --heads 2 --seq 32 --vocab 512 >/dev/null
cp "$TMP/tok.json" "$TMP/old/tokenizer.json"
"$BIN" encode --model "$TMP/old/model.safetensors" --in "$TMP/small.txt" > "$TMP/ids_old.txt" 2>/dev/null
[[ -s $TMP/ids_old.txt ]] && cmp -s "$TMP/ids_file.txt" "$TMP/ids_old.txt" \
  && pass "encode --model: the tokenizer saved beside an older model" || fail "encode --model: not the files beside"
want=$("$BIN" sample --model "$TMP/old/model.safetensors" --tokenizer "$TMP/tok.json" --prompt "The license" \
  --max-new 8 --temperature 0 2>/dev/null)
got=$("$BIN" sample --model "$TMP/old/model.safetensors" --prompt "The license" --max-new 8 --temperature 0 2>/dev/null)
[[ -n $want && $got == "$want" ]] && pass "sample: the tokenizer saved beside an older model" \
  || fail "sample: beside an older model \"$got\", expected \"$want\""

# Another tokenizer than the model's, or bytes for a BPE model: errors naming both sizes
"$BIN" tokenizer train --vocab-size 512 --in "$TMP/small.txt" --out "$TMP/other.json" --quiet >/dev/null 2>&1
expect_error "sample: a --tokenizer other than the model's" "differs from the tokenizer" \
  "$BIN" sample --model "$TMP/away/model.safetensors" --tokenizer "$TMP/other.json" --max-new 4
expect_error "encode: --tokenizer and --model disagree" "differs from the tokenizer" \
  "$BIN" encode --model "$TMP/away/model.safetensors" --tokenizer "$TMP/other.json" --in "$TMP/small.txt"
"$BIN" tokenizer train --vocab-size 512 --in "$TMP/shards/val_000000.bin" "$TMP/small.txt" --out "$TMP/other512.json" \
  --quiet >/dev/null 2>&1
"$BIN" prepare --tokenizer "$TMP/other512.json" --in "$TMP/text.txt" --out "$TMP/shards2" >/dev/null 2>&1
expect_error "train --resume with shards of another tokenizer of the same size" "differs from the one" \
  "$BIN" train --data "$TMP/shards2" --out "$TMP/run" --resume --steps 30
expect_error "train --resume of a shard run with a text file" "vocabulary 256) but the model's vocabulary has 512" \
  "$BIN" train --data "$TMP/text.txt" --out "$TMP/run" --resume --steps 30
"$BIN" init --out "$TMP/bare.safetensors" --dim 32 --layers 1 --heads 2 --seq 32 --vocab 512 >/dev/null
expect_error "eval loss: text for a BPE model without a tokenizer" "256 but the model's has 512" \
  "$BIN" eval loss --model "$TMP/bare.safetensors" --data "$TMP/text.txt"
expect_error "sample: a BPE model without a tokenizer" "carries no tokenizer" \
  "$BIN" sample --model "$TMP/bare.safetensors" --max-new 4
expect_error "encode --model without a tokenizer" "carries no tokenizer" \
  "$BIN" encode --model "$TMP/bare.safetensors" --in "$TMP/small.txt"
finish
