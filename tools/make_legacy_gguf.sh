#!/usr/bin/env bash
# Writes tests/fixtures/legacy: GGUF files in diffattn's layout before
# llama.cpp's (general.architecture "diffattn", diffattn's tensor names), and
# the logits that version gives on the fixtures' ids, which test_gguf checks a
# newer build still reproduces. OLD_DIFFATTN is a diffattn binary of that
# version (the committed files came from main at d81e269).
# Usage: tools/make_legacy_gguf.sh OLD_DIFFATTN
set -euo pipefail
OLD=$1
cd "$(dirname "$0")/.."
mkdir -p tests/fixtures/legacy
for n in diff_mha softmax_tied diff2_mha; do
  "$OLD" quantize --model tests/fixtures/$n.model.safetensors --type q8_0 --fallback q8_0 \
    --out tests/fixtures/legacy/$n.q8_0.gguf >/dev/null
  "$OLD" logits --model tests/fixtures/legacy/$n.q8_0.gguf --ids tests/fixtures/$n.ids.txt \
    --out tests/fixtures/legacy/$n.q8_0.logits.npy
done
