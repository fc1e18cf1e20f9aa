#!/usr/bin/env bash
# Grouped differential attention with PolyNorm (Motif's forms) through the
# commands: export --format gguf writes general.architecture motif and its
# logits are the model's; quantize q8_0, q4_0, q4_k and AWQ (--calib) write
# files that load and eval ppl against the model (the vectors' f32 type:
# tests/test_gguf_gda.c).
source "$(dirname "$0")/lib.sh"

for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog, and then some $((i * 7 % 13))."; done >"$TMP/text.txt"
M="$TMP/m.safetensors"
# 4 signal heads in 2 groups over 1 K/V pair; widths of 256 so that q4_k has no fallback
ok "init gda polynorm" $BIN init --arch gda --mlp polynorm --heads 4 --noise-heads 2 --kv-heads 1 --dim 256 --ffn 256 \
  --layers 2 --seq 64 --out "$M"
ok "export gguf" $BIN export --model "$M" --format gguf --type f32 --out "$TMP/f32.gguf"
has "export names the motif architecture" "$(cat "$TMP/last.out")" "architecture motif"
echo "3 1 4 1 5 9 2 6 5 3 5 8" >"$TMP/ids.txt"
ok "logits of the model" $BIN logits --model "$M" --ids "$TMP/ids.txt" --out "$TMP/ref.npy"
ok "logits of the f32 GGUF" $BIN logits --model "$TMP/f32.gguf" --ids "$TMP/ids.txt" --out "$TMP/got.npy"
out=$(/usr/bin/python3 - "$TMP/ref.npy" "$TMP/got.npy" <<'EOF'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
print("maxrel %.3g" % (np.abs(a - b).max() / np.abs(a).max()))
EOF
)
rel=${out#maxrel }
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$rel') <= 1e-5 else 1)" \
  && pass "f32 GGUF logits within 1e-5 ($out)" || fail "f32 GGUF logits within 1e-5" "$out"
for t in q8_0 q4_0 q4_k; do
  ok "quantize $t" $BIN quantize --model "$M" --type $t --out "$TMP/$t.gguf"
  info=$($BIN info --model "$TMP/$t.gguf")
  has "$t: the file's matmuls are $t, none fell back" "$info" "weights        $t,"
  [[ $info != *"poly.weight"* && $info != *"lambda_q1"* ]] && pass "$t: no vector listed in another type" \
    || fail "$t: no vector listed in another type" "$info"
  ok "eval ppl $t" $BIN eval ppl --model "$TMP/$t.gguf" --base "$M" --data "$TMP/text.txt" --chunks 2 --ctx 64 --json
done
ok "quantize with AWQ" $BIN quantize --model "$M" --type q4_k --out "$TMP/awq.gguf" --calib "$TMP/text.txt" --calib-samples 4
has "AWQ ran" "$(cat "$TMP/last.err")" "AWQ"
ok "eval ppl AWQ" $BIN eval ppl --model "$TMP/awq.gguf" --base "$M" --data "$TMP/text.txt" --chunks 2 --ctx 64 --json
finish
