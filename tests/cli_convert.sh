#!/usr/bin/env bash
# diffattn convert: preserve gives the source's logits (diff and diff2, GQA,
# a Hugging Face Llama folder, a GGUF f16), split makes a DiffLlama-paired
# model, a quantized source is refused in one line; --lambda-ramp ramps the
# second map in and a resumed run continues the ramp bit for bit.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "python3 (comparing .npy logits)"

# max |a - b| / max |a| of two float32 .npy files of the same shape
relerr() {
  python3 - "$1" "$2" <<'PY'
import struct, sys
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<H', b[8:10])[0]
    d = b[10 + n:]
    return struct.unpack('<%df' % (len(d) // 4), d)
a, b = load(sys.argv[1]), load(sys.argv[2])
assert len(a) == len(b) and a, "shapes differ"
print('%.3g' % (max(abs(x - y) for x, y in zip(a, b)) / max(abs(x) for x in a)))
PY
}
# within WHAT A.npy B.npy TOL: their relative error is at most TOL
within() {
  local e
  e=$(relerr "$2" "$3") || { fail "$1" "cannot compare"; return; }
  if python3 -c "import sys; sys.exit(0 if float('$e') <= float('$4') else 1)"; then pass "$1 (rel err $e)"
  else fail "$1" "rel err $e > $4"; fi
}

head -c 60000 /usr/share/games/fortunes/fortunes >"$TMP/text.txt" 2>/dev/null ||
  for i in $(seq 1 600); do echo "the quick brown fox $i jumps over the lazy dog, twice $((i * 7))"; done >"$TMP/text.txt"
python3 -c "import sys; print(' '.join(str(b) for b in open(sys.argv[1], 'rb').read()[1000:1512]))" "$TMP/text.txt" >"$TMP/ids.txt"

F=(--dim 64 --layers 2 --seq 512 --batch 2 --steps 12 --eval-every 0 --log-every 100 --data "$TMP/text.txt")
ok "a softmax model with GQA trains" "$BIN" train --arch softmax --heads 2 --kv-heads 1 "${F[@]}" --out "$TMP/soft"
S="$TMP/soft/model.safetensors"
ok "logits of the source" "$BIN" logits --model "$S" --ids "$TMP/ids.txt" --out "$TMP/src.npy"

for to in diff diff2; do
  ok "convert --to $to --recipe preserve" "$BIN" convert --model "$S" --to $to --recipe preserve --out "$TMP/$to.safetensors"
  ok "logits of the $to model" "$BIN" logits --model "$TMP/$to.safetensors" --ids "$TMP/ids.txt" --out "$TMP/$to.npy"
  within "preserve to $to: the source's logits over 512 tokens" "$TMP/src.npy" "$TMP/$to.npy" 1e-5
done
out=$("$BIN" info --model "$TMP/diff.safetensors")
has "the preserve diff model: head norm off, head_dim 16, the second map held back" "$out" "head_norm" "off" \
  "head_dim" "16" "lambda_hold" "1"

# the explicit head size through a GGUF and back
ok "export the preserve model as GGUF" "$BIN" export --model "$TMP/diff.safetensors" --format gguf --type f32 \
  --out "$TMP/diff.gguf"
ok "logits of the GGUF" "$BIN" logits --model "$TMP/diff.gguf" --ids "$TMP/ids.txt" --out "$TMP/diff_gguf.npy"
within "head_dim round-trips through GGUF" "$TMP/diff.npy" "$TMP/diff_gguf.npy" 1e-6

# a GGUF f16 source
ok "export the softmax model as GGUF f16" "$BIN" export --model "$S" --format gguf --type f16 --out "$TMP/soft.gguf"
ok "convert a GGUF f16" "$BIN" convert --model "$TMP/soft.gguf" --to diff --recipe preserve --out "$TMP/g.safetensors"
ok "logits of the f16 source" "$BIN" logits --model "$TMP/soft.gguf" --ids "$TMP/ids.txt" --out "$TMP/g_src.npy"
ok "logits of its conversion" "$BIN" logits --model "$TMP/g.safetensors" --ids "$TMP/ids.txt" --out "$TMP/g.npy"
within "preserve from a GGUF f16: the source's logits" "$TMP/g_src.npy" "$TMP/g.npy" 1e-5

# a Hugging Face Llama folder (GQA, llama3 RoPE scaling; its context is 64 tokens)
H=tests/fixtures/hf_llama_gqa
python3 -c "print(' '.join(str((7 * i + 3) % 61) for i in range(64)))" >"$TMP/ids_hf.txt"
ok "convert a Llama folder" "$BIN" convert --model $H --to diff --recipe preserve --out "$TMP/hf.safetensors"
ok "logits of the folder" "$BIN" logits --model $H --ids "$TMP/ids_hf.txt" --out "$TMP/hf_src.npy"
ok "logits of its conversion" "$BIN" logits --model "$TMP/hf.safetensors" --ids "$TMP/ids_hf.txt" --out "$TMP/hf.npy"
within "preserve from a Llama folder: the source's logits" "$TMP/hf_src.npy" "$TMP/hf.npy" 1e-5
ok "convert a Llama folder to diff2" "$BIN" convert --model $H --to diff2 --recipe preserve --out "$TMP/hf2.safetensors"
ok "logits of the diff2 conversion" "$BIN" logits --model "$TMP/hf2.safetensors" --ids "$TMP/ids_hf.txt" --out "$TMP/hf2.npy"
within "preserve from a Llama folder to diff2: the source's logits" "$TMP/hf_src.npy" "$TMP/hf2.npy" 1e-5

# a Llama folder of 512 tokens' context: the trained GQA source exported
ok "export the softmax model as a Llama folder" "$BIN" export --model "$S" --format hf --out "$TMP/soft_hf"
ok "convert that folder" "$BIN" convert --model "$TMP/soft_hf" --to diff --recipe preserve --out "$TMP/hf512.safetensors"
ok "logits of the folder over 512 tokens" "$BIN" logits --model "$TMP/soft_hf" --ids "$TMP/ids.txt" \
  --out "$TMP/hf512_src.npy"
ok "logits of its conversion" "$BIN" logits --model "$TMP/hf512.safetensors" --ids "$TMP/ids.txt" --out "$TMP/hf512.npy"
within "preserve from a Llama folder: the source's logits over 512 tokens" "$TMP/hf512_src.npy" "$TMP/hf512.npy" 1e-5

# split: DiffLlama's pairing, the head norm on; exportable, unlike preserve V1
ok "convert --recipe split" "$BIN" convert --model $H --to diff --recipe split --out "$TMP/split.safetensors"
out=$("$BIN" info --model "$TMP/split.safetensors")
has "split: 4 DIFF heads of 8, 1 KV group of 2" "$out" "n_heads" "4" "n_kv_heads" "1"
ok "export --format hf of a split model" "$BIN" export --model "$TMP/split.safetensors" --format hf --out "$TMP/split_hf"
expect_error "export --format hf of a preserve diff model says why" "(1 - lambda_init) scale" \
  "$BIN" export --model "$TMP/diff.safetensors" --format hf --out "$TMP/no_hf"
expect_error "split to diff2 is refused" "use --recipe preserve" \
  "$BIN" convert --model $H --to diff2 --recipe split --out "$TMP/x.safetensors"
expect_error "a diff source is refused" "convert takes softmax models" \
  "$BIN" convert --model "$TMP/diff.safetensors" --to diff --recipe preserve --out "$TMP/x.safetensors"

# split of a trained model, trained on, exported: DiffLlama's forward (the float64 PyTorch port of
# tools/make_hf_fixtures.py, where python3 has torch) gives its logits
ok "split the trained softmax model" "$BIN" convert --model "$S" --to diff --recipe split --out "$TMP/s.safetensors"
ok "train the split model 3 steps" "$BIN" train --init "$TMP/s.safetensors" --seq 512 --batch 2 --steps 3 \
  --warmup 1 --lr 0.02 --eval-every 0 --log-every 100 --data "$TMP/text.txt" --out "$TMP/st"
ok "export it as a DiffLlama folder" "$BIN" export --model "$TMP/st/model.safetensors" --format hf --out "$TMP/st_hf"
ok "logits of the trained split model" "$BIN" logits --model "$TMP/st/model.safetensors" --ids "$TMP/ids.txt" \
  --out "$TMP/st.npy"
if /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
  if r=$(/usr/bin/python3 tools/make_hf_fixtures.py --check "$TMP/st_hf" "$TMP/ids.txt" "$TMP/st.npy" 1e-4); then
    pass "DiffLlama's forward on the exported split model: $r"
  else fail "DiffLlama's forward on the exported split model: $r"; fi
fi

# a quantized source: one line, exit 1
ok "quantize the source" "$BIN" quantize --model "$S" --type q8_0 --out "$TMP/q8.gguf"
expect_one_line_error "a quantized source is refused" "is quantized" \
  "$BIN" convert --model "$TMP/q8.gguf" --to diff --recipe preserve --out "$TMP/x.safetensors"

# --lambda-ramp: the converted model starts at its source, and a resumed ramp equals an uninterrupted one
R=(--init "$TMP/diff.safetensors" --seq 512 --batch 2 --eval-every 0 --log-every 100 --lambda-ramp 6
  --data "$TMP/text.txt" --save-every 4)
ok "train a preserve model with --lambda-ramp 6, 8 steps" "$BIN" train "${R[@]}" --steps 8 --out "$TMP/full"
ok "the same, 4 steps" "$BIN" train "${R[@]}" --steps 4 --out "$TMP/part"
out=$("$BIN" info --model "$TMP/part/model.safetensors")
has "after 4 of 6 ramp steps, half the second map is held back" "$out" "lambda_hold" "0.5"
ok "... resumed to 8 steps" "$BIN" train "${R[@]}" --steps 8 --out "$TMP/part" --resume
check "the resumed ramp equals the uninterrupted run, bit for bit" \
  cmp -s "$TMP/full/model.safetensors" "$TMP/part/model.safetensors"
finish
