#!/usr/bin/env bash
# Motif's Hugging Face folders as published (tests/fixtures/hf_motif_*, from
# tools/motif_reference.py), through every command that takes a model: info,
# export --format hf and back (the same tensors and logits), a config.json
# turning on what diffattn does not implement (refused, naming the key),
# sample, serve with one chat completion, eval needle|attention|outliers|
# quant-logits, and train --init with --resume continuing bit for bit.
# (Logits and gradients against the float64 reference: test_motif.)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
last_out() { cat "$TMP/last.out"; }
GDA=tests/fixtures/hf_motif_gda
V1=tests/fixtures/hf_motif_v1

ok "info on a Motif GDA folder" "$BIN" info --model $GDA
has "info names the folder and the variant" "$(last_out)" "Hugging Face folder" "gda"
has "10 query heads = 8 signal heads in 2 groups" "$(last_out)" "gda_noise_heads 2"

# folder -> export --format hf -> folder: the same tensors (as float32) and the same logits, bit for bit
tensors_equal() { # DIR1 DIR2: every tensor of the two folders, as float32, equal
  python3 - "$1" "$2" <<'PY'
import json, os, struct, sys
def load(d):  # name -> (shape, float32 bytes); BF16 widened exactly (its two bytes on top of two zeros)
    out = {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".safetensors"): continue
        b = open(os.path.join(d, f), "rb").read()
        n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
        for k, t in h.items():
            if k == "__metadata__": continue
            lo, hi = t["data_offsets"]; raw = b[8 + n + lo:8 + n + hi]
            if t["dtype"] == "BF16": raw = b"".join(b"\0\0" + raw[i:i + 2] for i in range(0, len(raw), 2))
            elif t["dtype"] != "F32": sys.exit("%s: dtype %s" % (k, t["dtype"]))
            out[k] = (t["shape"], raw)
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
bad = sorted(set(a) ^ set(b)) + sorted(k for k in set(a) & set(b) if a[k] != b[k])
print("%d tensors; differing: %s" % (len(a), bad[:4]))
sys.exit(1 if bad else 0)
PY
}
for F in $GDA $V1 tests/fixtures/hf_motif_v1_tied; do
  n=$(basename $F)
  ok "$n: export --format hf" "$BIN" export --model $F --format hf --out "$TMP/$n.rt"
  has "$n: the export is a Motif folder" "$(cat "$TMP/$n.rt/config.json")" '"MotifForCausalLM"' '"poly_norm"'
  ok "$n: logits of the folder" "$BIN" logits --model $F --ids $F.ids.txt --out "$TMP/$n.a.npy"
  ok "$n: logits of its export" "$BIN" logits --model "$TMP/$n.rt" --ids $F.ids.txt --out "$TMP/$n.b.npy"
  check "$n: the same logits, bit for bit" cmp -s "$TMP/$n.a.npy" "$TMP/$n.b.npy"
  check "$n: the same tensors" tensors_equal $F "$TMP/$n.rt"
done
check "GDA's export names its noise heads" grep -qE '"num_noise_heads":[[:space:]]*2' "$TMP/hf_motif_gda.rt/config.json"
if grep -q num_noise_heads "$TMP/hf_motif_v1.rt/config.json"; then fail "V1's export has no num_noise_heads (Motif-2.6B)"
else pass "V1's export has no num_noise_heads (Motif-2.6B)"; fi

# a key that turns on what diffattn does not implement is refused, naming it; the fixtures' off values pass
mkdir "$TMP/bad"
cp $GDA/*.safetensors $GDA/model.safetensors.index.json "$TMP/bad/"
refused() { # WHAT SED-EXPR MESSAGE
  sed "$2" $GDA/config.json >"$TMP/bad/config.json"
  expect_one_line_error "$1" "$3" "$BIN" info --model "$TMP/bad"
}
refused "use_bias true" 's/"use_bias": false/"use_bias": true/' "config.json: use_bias is true"
refused "use_sliding_window true" 's/"use_sliding_window": false/"use_sliding_window": true/' \
  "config.json: use_sliding_window is true"
refused "k_ratio 2" 's/"k_ratio": 1/"k_ratio": 2/' "config.json: k_ratio must be 1"
refused "a rope_scaling type" 's/"rope_scaling": null/"rope_scaling": {"rope_type": "yarn", "factor": 4.0}/' \
  'rope_scaling.rope_type "yarn" is not supported'
refused "hidden_act gelu" 's/"hidden_act": "poly_norm"/"hidden_act": "gelu"/' 'config.json: hidden_act "gelu" is not supported'
refused "num_noise_heads not dividing the heads" 's/"num_noise_heads": 2/"num_noise_heads": 3/' \
  "config.json: num_noise_heads 3 must divide num_attention_heads 10"
refused "no num_noise_heads: V1's H/2 groups do not fit the K/V pairs" '/"num_noise_heads"/d' \
  "divides num_noise_heads 5 (not given: H/2)"
refused "attention_bias true" 's/"use_bias": false/"attention_bias": true/' "config.json: attention_bias is true"
sed 's/"hidden_act": "poly_norm"/"hidden_act": "silu"/' $GDA/config.json >"$TMP/bad/config.json"
expect_one_line_error "silu with PolyNorm's tensors in the files" "unexpected tensor model.layers.0.mlp.act_fn" \
  "$BIN" info --model "$TMP/bad"

ok "sample" "$BIN" sample --model $GDA --prompt "ab" --max-new 8 --temperature 0
start_server motif --model $V1 --parallel 1 || fail "serve starts on a Motif folder"
if [[ -n ${SPID:-} ]]; then
  code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"temperature":0}')
  [[ $code == 200 ]] && pass "one chat completion" || fail "one chat completion" "status $code: $(head -c 300 "$TMP/resp")"
  has "it has a message" "$(py 'r["choices"][0]["message"]["role"]')" "assistant"
  stop_server
fi

for i in $(seq 1 120); do echo "line $i: the quick brown fox jumps over the lazy dog."; done >"$TMP/text.txt"
ok "eval needle" "$BIN" eval needle --model $GDA --context 128 --needles 2 --queries 1 --samples 1 --depths 0,100
ok "eval attention" "$BIN" eval attention --model $GDA --context 128 --needles 1 --queries 1 --samples 1 --depths 0,100
ok "eval outliers" "$BIN" eval outliers --model $GDA --data "$TMP/text.txt" --seq 32 --windows 2
ok "eval quant-logits" "$BIN" eval quant-logits --model $V1 --data "$TMP/text.txt" --seq 64 --windows 2 --bits 8 \
  --samples 1

# fine-tuning: --init for 6 steps equals --init for 3, then --resume for 3 more
R=(--init $GDA --data "$TMP/text.txt" --seq 32 --batch 2 --eval-every 0 --log-every 100 --save-every 3)
ok "train --init a Motif folder, 6 steps" "$BIN" train "${R[@]}" --steps 6 --out "$TMP/full"
ok "the same, 3 steps" "$BIN" train "${R[@]}" --steps 3 --out "$TMP/part"
ok "--resume to 6" "$BIN" train "${R[@]}" --steps 6 --out "$TMP/part" --resume
check "--init then --resume equals the uninterrupted run, bit for bit" \
  cmp -s "$TMP/full/model.safetensors" "$TMP/part/model.safetensors"
ok "export the fine-tuned model as a Motif folder" "$BIN" export --model "$TMP/full/model.safetensors" --format hf \
  --out "$TMP/tuned_hf"
ok "it loads" "$BIN" info --model "$TMP/tuned_hf"
finish
