#!/usr/bin/env bash
# The llama.cpp reference itself (tools/llamacpp/llama_driver.c, built against
# the release node-llama-cpp ships): its libraries and CPU backends load, and
# it reports llama.cpp's own refusal of a file it cannot run.
# Usage: llamacpp_driver.sh DIFFATTN LLAMA_DRIVER|none. Exits 77 (ctest: skipped) without the driver.
set -u
BIN=${1:-build/diffattn}
DRV=${2:-none}
[[ $DRV != none && -x $DRV ]] || {
  echo "SKIP: llama.cpp is not installed (tools/install-deps.sh installs node-llama-cpp into tools/llamacpp; cmake then builds llama_driver)"
  exit 77
}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
check() { if [[ $2 == *"$3"* ]]; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1: expected $3 in: $2"; fi; }

out=$("$DRV" 2>&1); rc=$?
check "no subcommand: usage, exit 1" "$rc $out" "1 llama_driver: usage: llama_driver logits|tokenize|quantize|bench|info|compare"
out=$("$DRV" quantize "$T/in.gguf" "$T/out.gguf" Q3_X 2>&1)
check "quantize: an unknown type is named" "$out" 'type "Q3_X" is not one of'
out=$("$DRV" info "$T/missing.gguf" 2>&1); rc=$?
check "info: a missing file fails" "$rc" "1"
# a GGUF of an architecture llama.cpp does not know: its loader's own message
"$BIN" init --out "$T/m.safetensors" --arch diff --dim 64 --layers 1 --heads 2 --seq 64 >/dev/null || exit 1
"$BIN" quantize --model "$T/m.safetensors" --type q8_0 --out "$T/m.gguf" >/dev/null || exit 1
out=$("$DRV" info "$T/m.gguf" 2>&1); rc=$?
check "info: llama.cpp parses the GGUF and refuses the architecture by name" "$rc $out" "unknown model architecture"
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
