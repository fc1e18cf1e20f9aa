#!/usr/bin/env bash
# The llama.cpp reference itself (tools/llamacpp/llama_driver.c, built against
# the release node-llama-cpp ships): its libraries and CPU backends load, and
# it reports llama.cpp's own refusal of a file it cannot run.
# Usage: llamacpp_driver.sh DIFFATTN LLAMA_DRIVER|none. Exits 77 (ctest: skipped) without the driver.
source "$(dirname "$0")/lib.sh"
DRV=${2:-none}
[[ $DRV != none && -x $DRV ]] ||
  skip "llama.cpp is not installed (tools/install-deps.sh installs node-llama-cpp into tools/llamacpp; cmake then builds llama_driver)"

out=$("$DRV" 2>&1); rc=$?
has "no subcommand: usage, exit 1" "$rc $out" "1 llama_driver: usage: llama_driver logits|tokenize|quantize|bench|info|compare"
out=$("$DRV" quantize "$TMP/in.gguf" "$TMP/out.gguf" Q3_X 2>&1)
has "quantize: an unknown type is named" "$out" 'type "Q3_X" is not one of'
out=$("$DRV" info "$TMP/missing.gguf" 2>&1); rc=$?
has "info: a missing file fails" "$rc" "1"
# a GGUF of an architecture llama.cpp does not know: its loader's own message
"$BIN" init --out "$TMP/m.safetensors" --arch diff --dim 64 --layers 1 --heads 2 --seq 64 >/dev/null || exit 1
"$BIN" quantize --model "$TMP/m.safetensors" --type q8_0 --out "$TMP/m.gguf" >/dev/null || exit 1
out=$("$DRV" info "$TMP/m.gguf" 2>&1); rc=$?
has "info: llama.cpp parses the GGUF and refuses the architecture by name" "$rc $out" "unknown model architecture"
finish
