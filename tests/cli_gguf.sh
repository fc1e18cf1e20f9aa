#!/usr/bin/env bash
# quantize, eval ppl and bench generate end to end on a tiny model; every
# command that takes a model takes its GGUF; bad GGUF files get a one-line error.
set -u
BIN=${1:-build/diffattn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
expect_ok() { local what=$1; shift; if "$@" >"$T/out" 2>"$T/err"; then ok "$what"; else bad "$what: rc=$? $(head -c 300 "$T/err")"; fi; }
expect_error() {
  local what=$1 pattern=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [[ $rc == 1 && $err == *"$pattern"* ]]; then ok "$what"; else bad "$what: rc=$rc, stderr: $err"; fi
}
# expect_json_keys "what" key...: the last command's stdout holds every key
expect_json_keys() {
  local what=$1; shift
  for k in "$@"; do grep -q "\"$k\":" "$T/out" || { bad "$what: no key $k in $(cat "$T/out")"; return; }; done
  ok "$what"
}

for cmd in "quantize" "eval ppl" "bench generate"; do expect_ok "$cmd --help" $BIN $cmd --help; done
for i in $(seq 1 300); do echo "line $i: the quick brown fox jumps over the lazy dog, and then some $((i * 7 % 13))."; done >"$T/text.txt"

M="$T/m.safetensors"
expect_ok "init" $BIN init --out "$M" --dim 256 --layers 1 --heads 2 --ffn 256 --seq 64
for t in q8_0 q4_0 q4_k; do expect_ok "quantize $t" $BIN quantize --model "$M" --type $t --out "$T/$t.gguf"; done
# the 4-bit files keep the LM head in q6_K, as llama.cpp's quantizer does (dim 256: one super-block a row)
out=$($BIN info --model "$T/q4_0.gguf")
[[ $out == *"output.weight: q6_k"* ]] && ok "q4_0's head is q6_k" || bad "q4_0's head is q6_k: $out"
# a width off q4_k's 256 (dim 128) is an error naming the tensor, unless --fallback q8_0 allows it
"$BIN" init --out "$T/m128.safetensors" --dim 128 --layers 1 --heads 2 --seq 64 >/dev/null
err=$($BIN quantize --model "$T/m128.safetensors" --type q4_k --out "$T/k.gguf" 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"q_proj.weight has 128 columns"* && ! -e "$T/k.gguf" ]] && ok "q4_k refuses a width off its block" \
  || bad "q4_k refuses a width off its block: rc=$rc $err"
out=$($BIN quantize --model "$T/m128.safetensors" --type q4_k --out "$T/k.gguf" --fallback q8_0 2>/dev/null)
[[ $out == *"q4_k weights, 7 matmuls q8_0 by --fallback"* ]] && ok "--fallback q8_0 says what fell back" \
  || bad "--fallback q8_0 says what fell back: $out"
# a tied model's one embedding table is stored in the head's type (q8_0 here), and the loaded engine
# uses it as it is for both (no f32 copy), unless --output-type f32
"$BIN" init --out "$T/tied.safetensors" --dim 64 --layers 1 --heads 2 --ffn 64 --seq 32 --tie-embeddings >/dev/null
$BIN quantize --model "$T/tied.safetensors" --type q4_0 --out "$T/tied.gguf" >/dev/null 2>&1
out=$($BIN info --model "$T/tied.gguf")
[[ $out == *"lm head        q8_0, the tied embedding itself"* ]] && ok "tied head: the q8_0 embedding itself" \
  || bad "tied head: the q8_0 embedding itself: $out"
$BIN quantize --model "$T/tied.safetensors" --type q4_0 --output-type f32 --out "$T/tied32.gguf" >/dev/null 2>&1
out=$($BIN info --model "$T/tied32.gguf")
[[ $out == *"lm head        f32, the tied embedding itself"* ]] && ok "--output-type f32 keeps the tied embedding" \
  || bad "--output-type f32 keeps the tied embedding: $out"
expect_ok "the tied copy decodes" $BIN sample --model "$T/tied.gguf" --prompt "ab" --max-new 8
# DIFF2's lambda_proj always stays f32: not a fallback
"$BIN" init --arch diff2 --out "$T/d2.safetensors" --dim 64 --layers 2 --heads 2 --ffn 64 --seq 32 >/dev/null
out=$($BIN quantize --model "$T/d2.safetensors" --type q8_0 --out "$T/d2.gguf" 2>/dev/null)
[[ $out == *"q8_0 weights ("* && $out != *"--fallback"* ]] && ok "lambda_proj kept f32 is not called a fallback" \
  || bad "lambda_proj kept f32 is not called a fallback: $out"
out=$($BIN info --model "$T/k.gguf")
[[ $out == *"weights        q4_k"* && $out == *"layers.0.feed_forward.w2.weight: q8_0 [128, 384]"* ]] \
  && ok "info lists the tensors of another type" || bad "info lists the tensors of another type: $out"
expect_ok "quantize --calib" $BIN quantize --model "$M" --type q4_0 --out "$T/awq.gguf" --calib "$T/text.txt" --calib-samples 4 --act int8-static
grep -q "warning: 4 calibration sequences" "$T/err" && ok "warns below the needed calibration sequences" || bad "no calibration warning: $(cat "$T/err")"
grep -q "AWQ" "$T/err" && ok "AWQ reports its alphas" || bad "no AWQ line"

# every model-taking command takes the GGUF
echo "1 2 3 4 5 6 7 8" >"$T/ids.txt"
expect_ok "logits from GGUF" $BIN logits --model "$T/q8_0.gguf" --ids "$T/ids.txt" --out "$T/l.npy"
expect_ok "sample from GGUF" $BIN sample --model "$T/q4_k.gguf" --prompt "ab" --max-new 8
expect_ok "info on GGUF" $BIN info --model "$T/q4_0.gguf"
expect_ok "eval loss on GGUF" $BIN eval loss --model "$T/q4_0.gguf" --data "$T/text.txt" --windows 2 --json
expect_ok "eval outliers on GGUF" $BIN eval outliers --model "$T/q8_0.gguf" --data "$T/text.txt" --windows 1

expect_ok "eval ppl" $BIN eval ppl --model "$T/q8_0.gguf" --base "$M" --data "$T/text.txt" --chunks 4 --json
expect_json_keys "eval ppl --json keys" ppl base_ppl delta_ppl_pct kld same_top1
expect_ok "eval ppl int8 KV, dynamic w8a8" $BIN eval ppl --model "$T/q8_0.gguf" --base "$M" --data "$T/text.txt" --chunks 2 --kv int8 --act int8-dynamic --json
expect_ok "eval ppl static w8a8" $BIN eval ppl --model "$T/awq.gguf" --base "$M" --data "$T/text.txt" --chunks 2 --act int8-static --json
grep -q '"act":"int8-static"' "$T/out" && ok "static ranges used" || bad "static: $(cat "$T/out")"
expect_ok "bench generate" $BIN bench generate --model "$M" --also "$T/q8_0.gguf,$T/q4_0.gguf" --prompt 16 --gen 8 --reps 1 --json
expect_json_keys "bench generate --json keys" prompt_tok_per_s decode_tok_per_s file_bytes
[[ $(grep -c prompt_tok_per_s "$T/out") == 3 ]] && ok "bench generate: one line per model" || bad "bench lines: $(cat "$T/out")"
# --bandwidth: bytes read per decoded token against the measured copy bandwidth; a q8_0 model reads fewer
expect_ok "bench generate --bandwidth" $BIN bench generate --model "$M" --also "$T/q8_0.gguf" --prompt 16 --gen 8 --reps 1 --json --bandwidth
expect_json_keys "bench generate --bandwidth keys" decode_bytes_per_token copy_bandwidth_gbs bandwidth_fraction
bytes=($(sed -n 's/.*"decode_bytes_per_token":\([0-9]*\).*/\1/p' "$T/out"))
bw=$(sed -n 's/.*"copy_bandwidth_gbs":\([0-9.]*\).*/\1/p' "$T/out" | head -1)
[[ ${#bytes[@]} == 2 && ${bytes[1]} -lt ${bytes[0]} && ${bytes[0]} -gt 0 ]] && awk "BEGIN { exit !($bw > 0.5) }" \
  && ok "bench generate --bandwidth: $bw GB/s, ${bytes[0]} > ${bytes[1]} bytes per token" \
  || bad "bench generate --bandwidth: $(cat "$T/out")"

# errors
expect_error "quantize: unknown type" "type \"q3_k\" is not one of q8_0" $BIN quantize --model "$M" --type q3_k --out "$T/x.gguf"
expect_error "quantize: GGUF input" "already a GGUF" $BIN quantize --model "$T/q8_0.gguf" --type q4_0 --out "$T/x.gguf"
expect_error "eval ppl: static without ranges" "calibrated" $BIN eval ppl --model "$T/q8_0.gguf" --base "$M" --data "$T/text.txt" --act int8-static
expect_error "eval ppl: bad --kv" "expected f32, f16 or int8" $BIN eval ppl --model "$T/q8_0.gguf" --base "$M" --data "$T/text.txt" --kv int4
head -c 3000 "$T/q8_0.gguf" >"$T/trunc.gguf"
expect_error "sample: truncated GGUF" "trunc.gguf" $BIN sample --model "$T/trunc.gguf" --max-new 4
expect_error "eval ppl: truncated GGUF" "truncated" $BIN eval ppl --model "$T/trunc.gguf" --base "$M" --data "$T/text.txt"
printf 'GGUF\003\0\0\0\0\0\0\0\0\0\0\0\001\0\0\0\0\0\0\0\024\0\0\0\0\0\0\0general.architecture\010\0\0\0\006\0\0\0\0\0\0\0falcon' >"$T/falcon.gguf"
expect_error "sample: another architecture" '"falcon"' $BIN sample --model "$T/falcon.gguf" --max-new 4
expect_error "bench generate: another architecture" "diffattn" $BIN bench generate --model "$T/falcon.gguf"
printf 'GGUF\003\0\0\0\0\0\0\0\0\0\0\0\001\0\0\0\0\0\0\0\024\0\0\0\0\0\0\0general.architecture\010\0\0\0\005\0\0\0\0\0\0\0llama' >"$T/llama.gguf"
expect_error "sample: a llama file without its keys" "llama.context_length" $BIN sample --model "$T/llama.gguf" --max-new 4
expect_error "bench generate: a llama file without its keys" "llama.context_length" $BIN bench generate --model "$T/llama.gguf"

# export names the architecture it writes: llama.cpp's llama only without a head norm (or a window)
for hn in off on; do
  "$BIN" init --arch softmax --head-norm $hn --dim 64 --layers 1 --heads 2 --vocab 256 --out "$T/hn_$hn.safetensors" >/dev/null
  out=$("$BIN" export --format gguf --model "$T/hn_$hn.safetensors" --out "$T/hn_$hn.gguf")
  want=llama; [[ $hn == on ]] && want=diffattn-softmax
  [[ $out == *"architecture $want,"* ]] && ok "export of softmax --head-norm $hn says architecture $want" ||
    bad "export --head-norm $hn: $out"
done

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
