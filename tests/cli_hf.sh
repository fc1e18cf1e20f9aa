#!/usr/bin/env bash
# --model takes a Hugging Face folder: info names the format and the RoPE
# rule, logits and quantize read it, the GGUF keeps the llama3 rule, and a
# bad config.json gets a one-line error naming the key.
source "$(dirname "$0")/lib.sh"
# what the last ok printed
last_out() { cat "$TMP/last.out"; }

F=tests/fixtures/hf_diffllama_gqa
ok "info on a folder" $BIN info --model $F
has "info names the format" "$(last_out)" "Hugging Face folder"
has "info names the rope rule" "$(last_out)" "rope_scaling   llama3"
echo "1 5 9 13 2 60" >"$TMP/ids.txt"
ok "logits on a folder" $BIN logits --model $F --ids "$TMP/ids.txt" --out "$TMP/l.npy"
# 6 positions x 61 logits, float32, after the .npy header
size=$(stat -c %s "$TMP/l.npy")
if ((size >= 6 * 61 * 4 && size <= 6 * 61 * 4 + 256)); then pass "logits size"; else fail "logits size $size"; fi
ok "bench generate on a folder" $BIN bench generate --model $F --prompt 8 --gen 8 --reps 1
# a folder's size is that of its safetensors files (two shards here)
shards=$(cat $F/*.safetensors | wc -c)
has "bench generate reports the folder's size" "$(last_out)" "$(awk -v b="$shards" 'BEGIN { printf "%.2f MB", b / 1e6 }')"
ok "quantize a folder" $BIN quantize --model $F --type f16 --out "$TMP/m.gguf"
ok "info on its GGUF" $BIN info --model "$TMP/m.gguf"
has "the GGUF keeps the llama3 rule" "$(last_out)" "rope_original_max_pos 64"
# export --format gguf reads the folder one tensor at a time: its f32 file gives the folder's logits, bit for bit
ok "export a folder to GGUF" $BIN export --model $F --format gguf --type f32 --out "$TMP/e.gguf"
ok "logits of the export" $BIN logits --model "$TMP/e.gguf" --ids "$TMP/ids.txt" --out "$TMP/le.npy"
cmp -s "$TMP/l.npy" "$TMP/le.npy" && pass "the export's logits are the folder's" || fail "the export's logits are the folder's"
for mf in hf_motif_gda hf_motif_v1_tied; do
  ok "logits of $mf" $BIN logits --model tests/fixtures/$mf --ids "$TMP/ids.txt" --out "$TMP/lm.npy"
  ok "export $mf to GGUF" $BIN export --model tests/fixtures/$mf --format gguf --type f32 --out "$TMP/$mf.gguf"
  has "$mf: architecture motif" "$(last_out)" "architecture motif"
  ok "logits of its GGUF" $BIN logits --model "$TMP/$mf.gguf" --ids "$TMP/ids.txt" --out "$TMP/lme.npy"
  cmp -s "$TMP/lm.npy" "$TMP/lme.npy" && pass "$mf: the GGUF's logits are the folder's" \
    || fail "$mf: the GGUF's logits are the folder's"
done

# fine-tuning a folder: byte-level text for its 256-token vocabulary
for i in $(seq 1 300); do echo "line $i: the quick brown fox jumps over the lazy dog."; done >"$TMP/text.txt"
ok "train --init a folder" $BIN train --init tests/fixtures/hf_llama_tied --data "$TMP/text.txt" \
  --out "$TMP/run" --steps 4 --batch 2 --seq 32 --log-every 2
ok "info on the fine-tuned model" $BIN info --model "$TMP/run/model.safetensors"
has "it keeps the folder's RoPE rule" "$(last_out)" "rope_freq      llama"
expect_one_line_error "model flags with --init" "--dim cannot be set with --init" \
  $BIN train --init tests/fixtures/hf_llama_tied --dim 64 --data "$TMP/text.txt" --out "$TMP/run2" --steps 1

mkdir "$TMP/bad"
cp $F/*.safetensors $F/model.safetensors.index.json "$TMP/bad/"
sed 's/"hidden_act": "silu"/"hidden_act": "gelu_new"/' $F/config.json >"$TMP/bad/config.json"
expect_one_line_error "unknown hidden_act" 'config.json: hidden_act "gelu_new" is not supported' $BIN info --model "$TMP/bad"
sed 's/"attention_bias": false/"attention_bias": true/' $F/config.json >"$TMP/bad/config.json"
expect_one_line_error "attention_bias" "config.json: attention_bias is true" $BIN info --model "$TMP/bad"
sed 's/"rope_type": "llama3"/"rope_type": "yarn"/' $F/config.json >"$TMP/bad/config.json"
expect_one_line_error "unknown rope type" 'rope_scaling.rope_type "yarn" is not supported' $BIN info --model "$TMP/bad"
# a config.json declaring far more than the files hold is refused from the files' shapes, before any
# allocation (not "out of memory allocating 48 G parameters")
sed -e 's/"intermediate_size": 48/"intermediate_size": 500000/' -e 's/"num_hidden_layers": 2/"num_hidden_layers": 1000/' \
  $F/config.json >"$TMP/bad/config.json"
expect_one_line_error "a declared size the files do not hold" "mlp.gate_proj.weight has shape [48, 64], expected [500000, 64]" \
  $BIN info --model "$TMP/bad"
finish
