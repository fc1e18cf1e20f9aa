#!/usr/bin/env bash
# quantize, eval ppl and bench generate end to end on a tiny model; every
# command that takes a model takes its GGUF; bad GGUF files get a one-line error.
source "$(dirname "$0")/lib.sh"
# json_keys "what" key...: the last command's stdout holds every key
json_keys() {
  local what=$1 k; shift
  for k in "$@"; do grep -q "\"$k\":" "$TMP/last.out" || { fail "$what" "no key $k in $(cat "$TMP/last.out")"; return; }; done
  pass "$what"
}

for cmd in "quantize" "eval ppl" "bench generate"; do ok "$cmd --help" $BIN $cmd --help; done
for i in $(seq 1 300); do echo "line $i: the quick brown fox jumps over the lazy dog, and then some $((i * 7 % 13))."; done >"$TMP/text.txt"

M="$TMP/m.safetensors"
ok "init" $BIN init --out "$M" --dim 256 --layers 1 --heads 2 --ffn 256 --seq 64
for t in q8_0 q4_0 q4_k; do ok "quantize $t" $BIN quantize --model "$M" --type $t --out "$TMP/$t.gguf"; done
# the 4-bit files keep the LM head in q6_K, as llama.cpp's quantizer does (dim 256: one super-block a row)
out=$($BIN info --model "$TMP/q4_0.gguf")
has "q4_0's head is q6_k" "$out" "output.weight: q6_k"
# a width off q4_k's 256 (dim 128) is an error naming the tensor, unless --fallback q8_0 allows it
"$BIN" init --out "$TMP/m128.safetensors" --dim 128 --layers 1 --heads 2 --seq 64 >/dev/null
err=$($BIN quantize --model "$TMP/m128.safetensors" --type q4_k --out "$TMP/k.gguf" 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"q_proj.weight has 128 columns"* && ! -e "$TMP/k.gguf" ]] && pass "q4_k refuses a width off its block" \
  || fail "q4_k refuses a width off its block" "rc=$rc $err"
out=$($BIN quantize --model "$TMP/m128.safetensors" --type q4_k --out "$TMP/k.gguf" --fallback q8_0 2>/dev/null)
has "--fallback q8_0 says what fell back" "$out" "q4_k weights, 7 matmuls q8_0 by --fallback"
# a tied model's one embedding table is stored in the head's type (q8_0 here), and the loaded engine
# uses it as it is for both (no f32 copy), unless --output-type f32
"$BIN" init --out "$TMP/tied.safetensors" --dim 64 --layers 1 --heads 2 --ffn 64 --seq 32 --tie-embeddings >/dev/null
$BIN quantize --model "$TMP/tied.safetensors" --type q4_0 --out "$TMP/tied.gguf" >/dev/null 2>&1
out=$($BIN info --model "$TMP/tied.gguf")
has "tied head: the q8_0 embedding itself" "$out" "lm head        q8_0, the tied embedding itself"
$BIN quantize --model "$TMP/tied.safetensors" --type q4_0 --output-type f32 --out "$TMP/tied32.gguf" >/dev/null 2>&1
out=$($BIN info --model "$TMP/tied32.gguf")
has "--output-type f32 keeps the tied embedding" "$out" "lm head        f32, the tied embedding itself"
ok "the tied copy decodes" $BIN sample --model "$TMP/tied.gguf" --prompt "ab" --max-new 8
# DIFF2's lambda_proj always stays f32: not a fallback
"$BIN" init --arch diff2 --out "$TMP/d2.safetensors" --dim 64 --layers 2 --heads 2 --ffn 64 --seq 32 >/dev/null
out=$($BIN quantize --model "$TMP/d2.safetensors" --type q8_0 --out "$TMP/d2.gguf" 2>/dev/null)
[[ $out == *"q8_0 weights ("* && $out != *"--fallback"* ]] && pass "lambda_proj kept f32 is not called a fallback" \
  || fail "lambda_proj kept f32 is not called a fallback" "$out"
out=$($BIN info --model "$TMP/k.gguf")
[[ $out == *"weights        q4_k"* && $out == *"layers.0.feed_forward.w2.weight: q8_0 [128, 384]"* ]] \
  && pass "info lists the tensors of another type" || fail "info lists the tensors of another type" "$out"
ok "quantize --calib" $BIN quantize --model "$M" --type q4_0 --out "$TMP/awq.gguf" --calib "$TMP/text.txt" --calib-samples 4 --act int8-static
err=$(cat "$TMP/last.err")
has "warns below the needed calibration sequences" "$err" "warning: 4 calibration sequences"
has "AWQ reports its alphas" "$err" "AWQ"

# every model-taking command takes the GGUF
echo "1 2 3 4 5 6 7 8" >"$TMP/ids.txt"
ok "logits from GGUF" $BIN logits --model "$TMP/q8_0.gguf" --ids "$TMP/ids.txt" --out "$TMP/l.npy"
ok "sample from GGUF" $BIN sample --model "$TMP/q4_k.gguf" --prompt "ab" --max-new 8
ok "info on GGUF" $BIN info --model "$TMP/q4_0.gguf"
ok "eval loss on GGUF" $BIN eval loss --model "$TMP/q4_0.gguf" --data "$TMP/text.txt" --windows 2 --json
ok "eval outliers on GGUF" $BIN eval outliers --model "$TMP/q8_0.gguf" --data "$TMP/text.txt" --windows 1

ok "eval ppl" $BIN eval ppl --model "$TMP/q8_0.gguf" --base "$M" --data "$TMP/text.txt" --chunks 4 --json
json_keys "eval ppl --json keys" ppl base_ppl delta_ppl_pct kld same_top1
ok "eval ppl int8 KV, dynamic w8a8" $BIN eval ppl --model "$TMP/q8_0.gguf" --base "$M" --data "$TMP/text.txt" --chunks 2 --kv int8 --act int8-dynamic --json
ok "eval ppl static w8a8" $BIN eval ppl --model "$TMP/awq.gguf" --base "$M" --data "$TMP/text.txt" --chunks 2 --act int8-static --json
grep -q '"act":"int8-static"' "$TMP/last.out" && pass "static ranges used" || fail "static ranges used" "$(cat "$TMP/last.out")"
ok "bench generate" $BIN bench generate --model "$M" --also "$TMP/q8_0.gguf,$TMP/q4_0.gguf" --prompt 16 --gen 8 --reps 1 --json
json_keys "bench generate --json keys" prompt_tok_per_s decode_tok_per_s file_bytes
[[ $(grep -c prompt_tok_per_s "$TMP/last.out") == 3 ]] && pass "bench generate: one line per model" ||
  fail "bench generate: one line per model" "$(cat "$TMP/last.out")"
# --bandwidth: bytes read per decoded token against the measured copy bandwidth; a q8_0 model reads fewer
ok "bench generate --bandwidth" $BIN bench generate --model "$M" --also "$TMP/q8_0.gguf" --prompt 16 --gen 8 --reps 1 --json --bandwidth
json_keys "bench generate --bandwidth keys" decode_bytes_per_token copy_bandwidth_gbs bandwidth_fraction
bytes=($(sed -n 's/.*"decode_bytes_per_token":\([0-9]*\).*/\1/p' "$TMP/last.out"))
bw=$(sed -n 's/.*"copy_bandwidth_gbs":\([0-9.]*\).*/\1/p' "$TMP/last.out" | head -1)
[[ ${#bytes[@]} == 2 && ${bytes[1]} -lt ${bytes[0]} && ${bytes[0]} -gt 0 ]] && awk "BEGIN { exit !($bw > 0.5) }" \
  && pass "bench generate --bandwidth: $bw GB/s, ${bytes[0]} > ${bytes[1]} bytes per token" \
  || fail "bench generate --bandwidth" "$(cat "$TMP/last.out")"

# errors
expect_error "quantize: unknown type" "type \"q3_k\" is not one of q8_0" $BIN quantize --model "$M" --type q3_k --out "$TMP/x.gguf"
expect_error "quantize: GGUF input" "already a GGUF" $BIN quantize --model "$TMP/q8_0.gguf" --type q4_0 --out "$TMP/x.gguf"
expect_error "eval ppl: static without ranges" "calibrated" $BIN eval ppl --model "$TMP/q8_0.gguf" --base "$M" --data "$TMP/text.txt" --act int8-static
expect_error "eval ppl: bad --kv" "expected f32, f16 or int8" $BIN eval ppl --model "$TMP/q8_0.gguf" --base "$M" --data "$TMP/text.txt" --kv int4
head -c 3000 "$TMP/q8_0.gguf" >"$TMP/trunc.gguf"
expect_error "sample: truncated GGUF" "trunc.gguf" $BIN sample --model "$TMP/trunc.gguf" --max-new 4
expect_error "eval ppl: truncated GGUF" "truncated" $BIN eval ppl --model "$TMP/trunc.gguf" --base "$M" --data "$TMP/text.txt"
printf 'GGUF\003\0\0\0\0\0\0\0\0\0\0\0\001\0\0\0\0\0\0\0\024\0\0\0\0\0\0\0general.architecture\010\0\0\0\006\0\0\0\0\0\0\0falcon' >"$TMP/falcon.gguf"
expect_error "sample: another architecture" '"falcon"' $BIN sample --model "$TMP/falcon.gguf" --max-new 4
expect_error "bench generate: another architecture" "diffattn" $BIN bench generate --model "$TMP/falcon.gguf"
printf 'GGUF\003\0\0\0\0\0\0\0\0\0\0\0\001\0\0\0\0\0\0\0\024\0\0\0\0\0\0\0general.architecture\010\0\0\0\005\0\0\0\0\0\0\0llama' >"$TMP/llama.gguf"
expect_error "sample: a llama file without its keys" "llama.context_length" $BIN sample --model "$TMP/llama.gguf" --max-new 4
expect_error "bench generate: a llama file without its keys" "llama.context_length" $BIN bench generate --model "$TMP/llama.gguf"

# export names the architecture it writes: llama.cpp's llama only without a head norm (or a window)
for hn in off on; do
  "$BIN" init --arch softmax --head-norm $hn --dim 64 --layers 1 --heads 2 --vocab 256 --out "$TMP/hn_$hn.safetensors" >/dev/null
  out=$("$BIN" export --format gguf --model "$TMP/hn_$hn.safetensors" --out "$TMP/hn_$hn.gguf")
  want=llama; [[ $hn == on ]] && want=diffattn-softmax
  has "export of softmax --head-norm $hn says architecture $want" "$out" "architecture $want,"
done

finish
