#!/usr/bin/env bash
# Issue 23, as a hostile neighbour and a careless user would try it through
# the CLI: symlinks planted in a shared output folder, an output that is an
# input. Each case failed on the code before the fix.
set -u
BIN=${1:-build/diffattn}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
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
  if [[ $rc == 1 && $err == *"$pattern"* ]]; then ok "$what"; else bad "$what: rc=$rc, stderr: $err"; fi
}
# regular FILE, not a symlink
regular() { [[ -f $1 && ! -L $1 ]]; }

M="$T/m.safetensors"
expect_ok "init" "$BIN" init --out "$M" --dim 32 --layers 1 --heads 2 --ffn 64 --seq 16
cp "$M" "$T/m_copy.safetensors"
echo "1 2 3 4 5" >"$T/ids.txt"

# --- case 1: symlinks planted for the next pids and at the destination
echo precious >"$T/victim"
# symlinks FILE.tmp.<pid> for the next pids the kernel hands out, and FILE
# itself, to the victim; one process plants them all, so that planting uses
# no pid of the range
plant() {
  python3 - "$1" "$2" "$T/victim" <<'EOF'
import os, sys
d, f, victim = sys.argv[1:4]
try:
    last = int(open("/proc/sys/kernel/ns_last_pid").read())
except OSError:
    last = os.getpid()
for p in range(last + 1, last + 400):
    os.symlink(victim, os.path.join(d, f"{f}.tmp.{p}"))
os.symlink(victim, os.path.join(d, f))
EOF
}
mkdir -p "$T/hf" "$T/q"
plant "$T/hf" model.safetensors
ln -s "$T/victim" "$T/hf/config.json"
expect_ok "export into a folder with planted symlinks" "$BIN" export --format hf --model "$M" --out "$T/hf"
plant "$T/q" m.gguf
expect_ok "quantize into a folder with planted symlinks" "$BIN" quantize --model "$M" --type q8_0 --out "$T/q/m.gguf"
[[ $(cat "$T/victim") == precious ]] && ok "the symlinks' target is untouched" || bad "the victim was written through"
regular "$T/hf/model.safetensors" && regular "$T/hf/config.json" && regular "$T/q/m.gguf" &&
  ok "the outputs are regular files" || bad "an output is still a symlink: $(ls -l "$T/hf" "$T/q" | grep -v tmp)"
expect_ok "the exported folder loads" "$BIN" info --model "$T/hf"

# --- case 7: the same file as input and output, directly or through a symlink
ln -s "$M" "$T/alias.safetensors"
expect_error "quantize --out is --model" "is the input" "$BIN" quantize --model "$M" --type q8_0 --out "$M"
expect_error "quantize --out links to --model" "is the input" "$BIN" quantize --model "$M" --type q8_0 \
  --out "$T/alias.safetensors"
expect_error "logits --out is --model" "is the input" "$BIN" logits --model "$M" --ids "$T/ids.txt" --out "$M"
expect_error "logits --out is --ids" "is the input" "$BIN" logits --model "$M" --ids "$T/ids.txt" --out "$T/ids.txt"
expect_error "grads --out is --model" "is the input" "$BIN" grads --model "$M" --ids "$T/ids.txt" --out "$M"
expect_ok "export to a folder" "$BIN" export --format hf --model "$M" --out "$T/hf2"
cp -r "$T/hf2" "$T/hf2_copy"
expect_error "export --out is the --model folder" "is the input" "$BIN" export --format hf --model "$T/hf2" \
  --out "$T/hf2"
expect_error "export --out holds --model" "is the input" "$BIN" export --format hf \
  --model "$T/hf2/model.safetensors" --out "$T/hf2"
expect_error "encode --out is --in" "is the input" "$BIN" encode --model "$M" --in "$T/ids.txt" --out "$T/ids.txt"
cmp -s "$M" "$T/m_copy.safetensors" && diff -r "$T/hf2" "$T/hf2_copy" >/dev/null && [[ $(cat "$T/ids.txt") == "1 2 3 4 5" ]] &&
  ok "every input is unchanged" || bad "an input was changed"

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
