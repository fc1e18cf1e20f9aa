#!/usr/bin/env bash
# export --format hf: trained DIFF (GQA, norm_eps 1e-3, the DIFF RoPE rule)
# and softmax (GQA, tied, llama3 scaling) models, and both with an explicit
# head_dim, are written as Hugging Face folders; diffattn reads them back to the same logits (1e-5), and the
# float64 PyTorch port of transformers' DiffLlama/Llama forward
# (tools/make_hf_fixtures.py --check) run on the folder matches diffattn's
# logits of the original model (1e-4). A folder's tokenizer.json travels;
# diff2, a window and another format are refused by name. The PyTorch part
# skips (exit 77, after every other check passed) where python3-torch is
# missing.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# Debian's python3 has numpy and torch (tools/README.md); another python3 first on PATH may not
PY=python3 TORCH=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import torch, numpy' 2>/dev/null; then PY=$p TORCH=1; break; fi
  if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; fi
done
# max |a - b| / max |b| of two .npy files, within tol
close() { "$PY" - "$1" "$2" "$3" <<'EOF'
import sys
import numpy as np
a, b = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
err = np.abs(a - b).max() / np.abs(b).max() if a.shape == b.shape else float("inf")
print(f"max error / max |logit| = {err:.2e}")
sys.exit(0 if err <= float(sys.argv[3]) else 1)
EOF
}

cat include/*.h include/diffattn/*.h src/io/*.c >"$TMP/corpus.txt"
echo "10 101 32 116 104 101 32 113 117 105 99 107 32 98 114 111 119 110 32 102 111 120 46 10" >"$TMP/ids.txt"
# a few steps at a high learning rate move subln, the norms and the lambdas
# away from their initial values, so that each fold shows in the logits
common=(--dim 64 --layers 3 --seq 32 --batch 2 --steps 6 --warmup 1 --lr 0.05 --eval-every 0 --log-every 6
        --data "$TMP/corpus.txt")
ok "train a DIFF model" "$BIN" train --arch diff --heads 4 --kv-heads 2 --norm-eps 1e-3 "${common[@]}" \
  --out "$TMP/diff"
ok "train a softmax model" "$BIN" train --arch softmax --heads 2 --kv-heads 1 --tie-embeddings \
  --rope-scaling llama3 --rope-factor 8 --rope-original-max-pos 512 "${common[@]}" --out "$TMP/soft"
# an explicit head size (head_dim 24, not 64 / 4 = 16): config.json's head_dim, read back as it is
ok "train a DIFF model with --head-dim 24" "$BIN" train --arch diff --heads 2 --head-dim 24 "${common[@]}" \
  --out "$TMP/diff_hd"
ok "train a softmax model with --head-dim 24" "$BIN" train --arch softmax --heads 2 --kv-heads 1 --head-dim 24 \
  "${common[@]}" --out "$TMP/soft_hd"

for m in diff soft diff_hd soft_hd; do
  ok "export $m" "$BIN" export --format hf --model "$TMP/$m/model.safetensors" --out "$TMP/hf_$m"
  for f in config.json model.safetensors; do
    [ -f "$TMP/hf_$m/$f" ] && pass "$m: $f written" || fail "$m: no $f"
  done
  ok "logits of the $m model" "$BIN" logits --model "$TMP/$m/model.safetensors" --ids "$TMP/ids.txt" \
    --out "$TMP/$m.npy"
  ok "logits of its folder" "$BIN" logits --model "$TMP/hf_$m" --ids "$TMP/ids.txt" --out "$TMP/hf_$m.npy"
  if r=$(close "$TMP/hf_$m.npy" "$TMP/$m.npy" 1e-5); then pass "$m round trip: $r"; else fail "$m round trip: $r"; fi
done
grep -Eq '"model_type":[[:space:]]*"diffllama"' "$TMP/hf_diff/config.json" && grep -q DiffLlamaForCausalLM "$TMP/hf_diff/config.json" &&
  pass "DIFF is DiffLlamaForCausalLM" || fail "DIFF config: $(cat "$TMP/hf_diff/config.json")"
grep -Eq '"model_type":[[:space:]]*"llama"' "$TMP/hf_soft/config.json" && grep -q '"LlamaForCausalLM"' "$TMP/hf_soft/config.json" &&
  pass "softmax is LlamaForCausalLM" || fail "softmax config: $(cat "$TMP/hf_soft/config.json")"

# an exported folder exports again, its tokenizer.json with it
cp -r tests/fixtures/hf_llama_tied "$TMP/src"
cp tests/fuzz/corpus/tokenizer_json/strings.json "$TMP/src/tokenizer.json"
ok "export a Hugging Face folder" "$BIN" export --format hf --model "$TMP/src" --out "$TMP/again"
cmp -s "$TMP/src/tokenizer.json" "$TMP/again/tokenizer.json" && pass "its tokenizer.json travels" ||
  fail "tokenizer.json differs or is missing"

ok "init diff2" "$BIN" init --arch diff2 --dim 64 --layers 1 --heads 2 --out "$TMP/d2.safetensors"
expect_one_line_error "diff2 refused" "arch diff2" "$BIN" export --format hf --model "$TMP/d2.safetensors" --out "$TMP/x"
ok "init a window" "$BIN" init --dim 64 --layers 1 --heads 2 --window 8 --out "$TMP/w.safetensors"
expect_one_line_error "a window refused" "window 8" "$BIN" export --format hf --model "$TMP/w.safetensors" --out "$TMP/x"
expect_one_line_error "another format refused" '--format "onnx" is not supported (supported: hf, gguf)' \
  "$BIN" export --format onnx --model "$TMP/w.safetensors" --out "$TMP/x"
[ -e "$TMP/x" ] && fail "a refused export left $TMP/x" || pass "a refused export writes nothing"

if ((TESTS_FAILED == 0)) && [[ -z $TORCH ]]; then
  skip "$TESTS_PASSED passed; python3-torch is missing: the PyTorch comparison skipped"
fi
# the four folders in one run of the port (torch is imported once); a line "ok   FOLDER ..." for each that matches
args=()
for m in diff soft diff_hd soft_hd; do args+=("$TMP/hf_$m" "$TMP/ids.txt" "$TMP/$m.npy"); done
r=$("$PY" tools/make_hf_fixtures.py --check "${args[@]}" 1e-4 2>&1)
for m in diff soft diff_hd soft_hd; do
  line=$(grep -F -- " $TMP/hf_$m " <<<"$r")
  if [[ $line == "ok   $TMP/hf_$m "* ]]; then pass "PyTorch port: $line"
  else fail "PyTorch port on hf_$m: ${line:-$(tail -c 600 <<<"$r")}"; fi
done
finish
