#!/usr/bin/env bash
# GGUF files that mix float and integer-quantized matrices, as llama.cpp's
# quantizer writes them (--output-tensor-type, --tensor-type), made with
# gguf-py (tools/gguf_retype.py) from a llama.cpp `llama` F16 file:
#   - every matrix F16, output.weight Q8_0;
#   - a Q4_0 blk.0.attn_q in an F16 model;
#   - a Q4_K(_M) model with one BF16 matrix (blk.1.ffn_down);
# each runs, every matrix in its own type, for prompts of 1 to 100 tokens
# (2..15 crashed: a NULL dequantization buffer), and where llama.cpp's driver
# is built, its logits at the last position of a 40-token prompt are
# llama.cpp's on the same file (KL <= 1e-3). An F16 file whose
# diffattn.weight_type says q8_0 contradicts its tensors and is refused.
# Exits 77 without python3-numpy or node-llama-cpp's gguf-py.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gguf_py_lib.sh"
find_gguf_py || skip "$GGUF_PY_MISSING"
DRV=${LLAMA_DRIVER:-$(dirname "$BIN")/llama_driver}
[[ -x $DRV ]] || { echo "NOTE: no llama.cpp driver ($DRV): the comparison with llama.cpp is skipped"; DRV=; }
R() { "$PY" tools/gguf_retype.py --gguf-py "$GP" "$@"; }

# peaked logits (embedding and head std 0.5) over a quiet residual stream (matrices 0.05), so that a
# wrong matrix shows in the KL and float rounding does not
"$PY" tools/llama_gguf_write.py --gguf-py "$GP" --out "$TMP/f16.gguf" --dim 256 --layers 2 --heads 4 --vocab 512 \
  --std 0.05 --emb-std 0.5 --type f16 --untied >/dev/null || exit 1
R "$TMP/f16.gguf" "$TMP/f16_outq8.gguf" output.weight=Q8_0 || exit 1
R "$TMP/f16.gguf" "$TMP/f16_q4q.gguf" blk.0.attn_q.weight=Q4_0 || exit 1
if [[ -n $DRV ]]; then
  "$DRV" quantize "$TMP/f16.gguf" "$TMP/q4k.gguf" Q4_K_M >/dev/null 2>&1 || exit 1
else # diffattn's own Q4_K file of a model of the same width (an FFN of 768: Q4_K's rows are 256-blocks)
  "$BIN" init --arch softmax --dim 256 --layers 2 --heads 2 --vocab 512 --ffn 768 --rope-freq llama --seq 256 \
    --out "$TMP/m.safetensors" >/dev/null && "$BIN" quantize --model "$TMP/m.safetensors" --type q4_k \
    --out "$TMP/q4k.gguf" >/dev/null || exit 1
fi
R "$TMP/q4k.gguf" "$TMP/q4k_bf16.gguf" blk.1.ffn_down.weight=BF16 || exit 1

for f in f16_outq8 f16_q4q q4k_bf16; do
  for p in 1 2 7 15 16 40 100; do
    ok "$f: a prompt of $p tokens" "$BIN" bench generate --model "$TMP/$f.gguf" --prompt $p --gen 2 --json
  done
done
out=$("$BIN" info --model "$TMP/q4k_bf16.gguf" 2>&1)
check "q4k_bf16: info names the BF16 matrix's type" grep -q bf16 <<<"$out"

# the last position of a 40-token prompt: KL(llama.cpp || diffattn) <= 1e-3
kl_last() {
  "$PY" - "$1" "$2" <<'PY'
import sys
import numpy as np
a, b = (np.load(p)[-1].astype(np.float64) for p in sys.argv[1:3])
la, lb = a - a.max(), b - b.max()
pa, pb = np.exp(la) / np.exp(la).sum(), np.exp(lb) / np.exp(lb).sum()
print("%.3g" % float((pb * (np.log(pb) - np.log(pa))).sum()))
PY
}
printf '%s ' $(seq 3 11 430) >"$TMP/ids40"
if [[ -n $DRV ]]; then
  for f in f16_outq8 f16_q4q q4k_bf16; do
    "$BIN" logits --model "$TMP/$f.gguf" --ids "$TMP/ids40" --out "$TMP/d.npy" >/dev/null &&
      "$DRV" logits "$TMP/$f.gguf" "$TMP/ids40" "$TMP/l.npy" >/dev/null 2>&1 || { fail "$f: logits"; continue; }
    kl=$(kl_last "$TMP/d.npy" "$TMP/l.npy")
    echo "     $f: KL at the last of 40 positions $kl"
    check "$f: the last position's KL to llama.cpp <= 1e-3" awk -v k="$kl" 'BEGIN { exit !(k + 0 <= 1e-3) }'
  done
fi

# diffattn.weight_type that no matrix has: refused, whatever general.file_type says
R "$TMP/f16.gguf" "$TMP/key.gguf" --key diffattn.weight_type=q8_0 || exit 1
R "$TMP/f16.gguf" "$TMP/key7.gguf" --key diffattn.weight_type=q8_0 --u32-key general.file_type=7 || exit 1
for f in key key7; do
  expect_error "$f: weight_type q8_0 over F16 matrices" "diffattn.weight_type = q8_0 contradicts the tensors" \
    "$BIN" bench generate --model "$TMP/$f.gguf" --prompt 2 --gen 2
done
# llama.cpp's quantizer copies an f16 export's key into its Q4_K file: the key is stale, not a contradiction
R "$TMP/q4k.gguf" "$TMP/stale.gguf" --key diffattn.weight_type=f16 --u32-key general.file_type=15 || exit 1
ok "a stale f16 key in a Q4_K file (llama.cpp requantized an export)" "$BIN" bench generate --model "$TMP/stale.gguf" \
  --prompt 2 --gen 2

# NSA's 2-D attention parameters (read by its kernels as f32) stored as F16 or Q8_0: converted at load, so
# the logits are those of the same values stored as f32 (read raw, they were other numbers, or past the tensor)
"$BIN" init --arch nsa --dim 64 --layers 1 --heads 2 --vocab 256 --seq 128 --nsa-block 16 --nsa-stride 8 \
  --nsa-select 32 --nsa-topn 3 --nsa-window 32 --out "$TMP/nsa.safetensors" >/dev/null &&
  "$BIN" quantize --model "$TMP/nsa.safetensors" --type f16 --out "$TMP/nsa.gguf" >/dev/null || exit 1
P=blk.0.attn
printf '%s ' $(seq 5 5 200) >"$TMP/nsa_ids"
for t in F16 Q8_0; do
  if [[ $t == F16 ]]; then set -- $P.cmp_k.weight $P.cmp_v.weight $P.cmp_pe_k $P.cmp_pe_v $P.gate.weight
  else set -- $P.cmp_k.weight $P.cmp_v.weight $P.gate.weight; fi # cmp_pe_* are 16 wide: no Q8_0 block
  R "$TMP/nsa.gguf" "$TMP/nsa_$t.gguf" $(printf "%s=$t " "$@") &&
    R "$TMP/nsa_$t.gguf" "$TMP/nsa_${t}_f32.gguf" $(printf '%s=F32 ' "$@") || exit 1
  for f in nsa_$t nsa_${t}_f32; do
    "$BIN" logits --model "$TMP/$f.gguf" --ids "$TMP/nsa_ids" --out "$TMP/$f.npy" >/dev/null 2>"$TMP/$f.err" ||
      fail "$f: logits" "$(cat "$TMP/$f.err")"
  done
  check "NSA parameters stored $t: the logits of their f32 values" cmp -s "$TMP/nsa_$t.npy" "$TMP/nsa_${t}_f32.npy"
done
finish
