#!/usr/bin/env bash
# Parity of the C tool against the PyTorch reference on any model file:
#   tools/check_parity.sh MODEL.safetensors [T]
# Takes T ids (default: the model's max_seq_len, at most 256) of byte-level
# text from README.md, runs `diffattn logits/grads` and `tools/reference.py`
# on them, and prints the comparison (logits: max|err|/max|ref| <= 1e-4; grads:
# per tensor max|err|/max|ref| <= 1e-3). Needs Debian's python3-torch.
set -euo pipefail
MODEL=$1
T=${2:-256}
BIN=${BIN:-build/diffattn}
PY=${PY:-/usr/bin/python3}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
head -c "$T" ${TEXT:-README.md} | od -An -v -tu1 > "$W/ids.txt"
"$BIN" logits --model "$MODEL" --ids "$W/ids.txt" --out "$W/c_logits.npy"
"$BIN" grads --model "$MODEL" --ids "$W/ids.txt" --out "$W/c_grads.safetensors" >/dev/null
"$PY" tools/reference.py logits --model "$MODEL" --ids "$W/ids.txt" --out "$W/r_logits.npy"
"$PY" tools/reference.py grads --model "$MODEL" --ids "$W/ids.txt" --out "$W/r_grads.safetensors"
"$PY" tools/reference.py compare --ref "$W/r_logits.npy" --test "$W/c_logits.npy"
"$PY" tools/reference.py compare --ref "$W/r_grads.safetensors" --test "$W/c_grads.safetensors"
