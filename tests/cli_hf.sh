#!/usr/bin/env bash
# --model takes a Hugging Face folder: info names the format and the RoPE
# rule, logits and quantize read it, the GGUF keeps the llama3 rule, and a
# bad config.json gets a one-line error naming the key.
set -u
BIN=${1:-build/diffattn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
expect_ok() { local what=$1; shift; if "$@" >"$T/out" 2>"$T/err"; then ok "$what"; else bad "$what: rc=$? $(head -c 300 "$T/err")"; fi; }
expect_out() { local what=$1 pattern=$2; if grep -q -- "$pattern" "$T/out"; then ok "$what"; else bad "$what: no '$pattern' in $(cat "$T/out")"; fi; }
expect_error() {
  local what=$1 pattern=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [[ $rc == 1 && $err == *"$pattern"* && $(printf '%s' "$err" | wc -l) -le 1 ]]; then ok "$what"; else bad "$what: rc=$rc, stderr: $err"; fi
}

F=tests/fixtures/hf_diffllama_gqa
expect_ok "info on a folder" $BIN info --model $F
expect_out "info names the format" "Hugging Face folder"
expect_out "info names the rope rule" "rope_scaling   llama3"
echo "1 5 9 13 2 60" >"$T/ids.txt"
expect_ok "logits on a folder" $BIN logits --model $F --ids "$T/ids.txt" --out "$T/l.npy"
# 6 positions x 61 logits, float32, after the .npy header
size=$(stat -c %s "$T/l.npy")
if ((size >= 6 * 61 * 4 && size <= 6 * 61 * 4 + 256)); then ok "logits size"; else bad "logits size $size"; fi
expect_ok "bench generate on a folder" $BIN bench generate --model $F --prompt 8 --gen 8 --reps 1
# a folder's size is that of its safetensors files (two shards here)
shards=$(cat $F/*.safetensors | wc -c)
expect_out "bench generate reports the folder's size" "$(awk -v b="$shards" 'BEGIN { printf "%.2f MB", b / 1e6 }')"
expect_ok "quantize a folder" $BIN quantize --model $F --type f16 --out "$T/m.gguf"
expect_ok "info on its GGUF" $BIN info --model "$T/m.gguf"
expect_out "the GGUF keeps the llama3 rule" "rope_original_max_pos 64"

# fine-tuning a folder: byte-level text for its 256-token vocabulary
for i in $(seq 1 300); do echo "line $i: the quick brown fox jumps over the lazy dog."; done >"$T/text.txt"
expect_ok "train --init-from a folder" $BIN train --init-from tests/fixtures/hf_llama_tied --data "$T/text.txt" \
  --out "$T/run" --steps 4 --batch 2 --seq 32 --log-every 2
expect_ok "info on the fine-tuned model" $BIN info --model "$T/run/model.safetensors"
expect_out "it keeps the folder's RoPE rule" "rope_freq      llama"
expect_error "model flags with --init-from" "--dim cannot be set with --init-from" \
  $BIN train --init-from tests/fixtures/hf_llama_tied --dim 64 --data "$T/text.txt" --out "$T/run2" --steps 1

mkdir "$T/bad"
cp $F/*.safetensors $F/model.safetensors.index.json "$T/bad/"
sed 's/"hidden_act": "silu"/"hidden_act": "gelu_new"/' $F/config.json >"$T/bad/config.json"
expect_error "unknown hidden_act" 'config.json: hidden_act "gelu_new" is not supported' $BIN info --model "$T/bad"
sed 's/"attention_bias": false/"attention_bias": true/' $F/config.json >"$T/bad/config.json"
expect_error "attention_bias" "config.json: attention_bias is true" $BIN info --model "$T/bad"
sed 's/"rope_type": "llama3"/"rope_type": "yarn"/' $F/config.json >"$T/bad/config.json"
expect_error "unknown rope type" 'rope_scaling.rope_type "yarn" is not supported' $BIN info --model "$T/bad"
# a config.json declaring far more than the files hold is refused from the files' shapes, before any
# allocation (not "out of memory allocating 48 G parameters")
sed -e 's/"intermediate_size": 48/"intermediate_size": 500000/' -e 's/"num_hidden_layers": 2/"num_hidden_layers": 1000/' \
  $F/config.json >"$T/bad/config.json"
expect_error "a declared size the files do not hold" "mlp.gate_proj.weight has shape [48, 64], expected [500000, 64]" \
  $BIN info --model "$T/bad"
echo "$passed passed, $failed failed"
((failed == 0))
