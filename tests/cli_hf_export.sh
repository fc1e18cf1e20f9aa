#!/usr/bin/env bash
# export --format hf: trained DIFF (GQA, norm_eps 1e-3, the DIFF RoPE rule)
# and softmax (GQA, tied, llama3 scaling) models are written as Hugging Face
# folders; diffattn reads them back to the same logits (1e-5), and the
# float64 PyTorch port of transformers' DiffLlama/Llama forward
# (tools/make_hf_fixtures.py --check) run on the folder matches diffattn's
# logits of the original model (1e-4). A folder's tokenizer.json travels;
# diff2, a window and another format are refused by name. The PyTorch part
# skips (exit 77, after every other check passed) where python3-torch is
# missing.
set -u
BIN=${1:-build/diffattn}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
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
  if [[ $rc == 1 && $err == *"$pattern"* && $(printf '%s' "$err" | wc -l) -le 1 ]]; then ok "$what"; else bad "$what: rc=$rc, stderr: $err"; fi
}
# Debian's python3 has numpy and torch (tools/README.md); another python3 first on PATH may not
PY=python3
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import torch, numpy' 2>/dev/null; then PY=$p; break; fi
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

cat include/*.h include/diffattn/*.h src/io/*.c >"$T/corpus.txt"
echo "10 101 32 116 104 101 32 113 117 105 99 107 32 98 114 111 119 110 32 102 111 120 46 10" >"$T/ids.txt"
# a few steps at a high learning rate move subln, the norms and the lambdas
# away from their initial values, so that each fold shows in the logits
common=(--dim 64 --layers 3 --seq 32 --batch 2 --steps 6 --warmup 1 --lr 0.05 --eval-every 0 --log-every 6
        --data "$T/corpus.txt")
expect_ok "train a DIFF model" "$BIN" train --arch diff --heads 4 --kv-heads 2 --norm-eps 1e-3 "${common[@]}" \
  --out "$T/diff"
expect_ok "train a softmax model" "$BIN" train --arch softmax --heads 2 --kv-heads 1 --tie-embeddings \
  --rope-scaling llama3 --rope-factor 8 --rope-original-max-pos 512 "${common[@]}" --out "$T/soft"

for m in diff soft; do
  expect_ok "export $m" "$BIN" export --format hf --model "$T/$m/model.safetensors" --out "$T/hf_$m"
  for f in config.json model.safetensors; do
    [ -f "$T/hf_$m/$f" ] && ok "$m: $f written" || bad "$m: no $f"
  done
  expect_ok "logits of the $m model" "$BIN" logits --model "$T/$m/model.safetensors" --ids "$T/ids.txt" \
    --out "$T/$m.npy"
  expect_ok "logits of its folder" "$BIN" logits --model "$T/hf_$m" --ids "$T/ids.txt" --out "$T/hf_$m.npy"
  if r=$(close "$T/hf_$m.npy" "$T/$m.npy" 1e-5); then ok "$m round trip: $r"; else bad "$m round trip: $r"; fi
done
grep -Eq '"model_type":[[:space:]]*"diffllama"' "$T/hf_diff/config.json" && grep -q DiffLlamaForCausalLM "$T/hf_diff/config.json" &&
  ok "DIFF is DiffLlamaForCausalLM" || bad "DIFF config: $(cat "$T/hf_diff/config.json")"
grep -Eq '"model_type":[[:space:]]*"llama"' "$T/hf_soft/config.json" && grep -q '"LlamaForCausalLM"' "$T/hf_soft/config.json" &&
  ok "softmax is LlamaForCausalLM" || bad "softmax config: $(cat "$T/hf_soft/config.json")"

# an exported folder exports again, its tokenizer.json with it
cp -r tests/fixtures/hf_llama_tied "$T/src"
cp tests/fuzz/corpus/tokenizer_json/strings.json "$T/src/tokenizer.json"
expect_ok "export a Hugging Face folder" "$BIN" export --format hf --model "$T/src" --out "$T/again"
cmp -s "$T/src/tokenizer.json" "$T/again/tokenizer.json" && ok "its tokenizer.json travels" ||
  bad "tokenizer.json differs or is missing"

expect_ok "init diff2" "$BIN" init --arch diff2 --dim 64 --layers 1 --heads 2 --out "$T/d2.safetensors"
expect_error "diff2 refused" "arch diff2" "$BIN" export --format hf --model "$T/d2.safetensors" --out "$T/x"
expect_ok "init a window" "$BIN" init --dim 64 --layers 1 --heads 2 --window 8 --out "$T/w.safetensors"
expect_error "a window refused" "window 8" "$BIN" export --format hf --model "$T/w.safetensors" --out "$T/x"
expect_error "another format refused" '--format "onnx" is not supported (supported: hf, gguf)' \
  "$BIN" export --format onnx --model "$T/w.safetensors" --out "$T/x"
[ -e "$T/x" ] && bad "a refused export left $T/x" || ok "a refused export writes nothing"

if ((failed == 0)) && ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
  echo "$passed passed; python3-torch is missing: the PyTorch comparison skipped"
  exit 77
fi
for m in diff soft; do
  if r=$("$PY" tools/make_hf_fixtures.py --check "$T/hf_$m" "$T/ids.txt" "$T/$m.npy" 1e-4); then ok "PyTorch port: $r"
  else bad "PyTorch port: $r"; fi
done
echo "$passed passed, $failed failed"
((failed == 0))
