#!/usr/bin/env bash
# Issue 23, as a hostile neighbour and a careless user would try it through
# the CLI: symlinks planted in a shared output folder, an output that is an
# input. Each case failed on the code before the fix.
source "$(dirname "$0")/lib.sh"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# regular FILE, not a symlink
regular() { [[ -f $1 && ! -L $1 ]]; }

M="$TMP/m.safetensors"
ok "init" "$BIN" init --out "$M" --dim 32 --layers 1 --heads 2 --ffn 64 --seq 16
cp "$M" "$TMP/m_copy.safetensors"
echo "1 2 3 4 5" >"$TMP/ids.txt"

# --- case 1: symlinks planted for the next pids and at the destination
echo precious >"$TMP/victim"
# symlinks FILE.tmp.<pid> for the next pids the kernel hands out, and FILE
# itself, to the victim; one process plants them all, so that planting uses
# no pid of the range
plant() {
  python3 - "$1" "$2" "$TMP/victim" <<'EOF'
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
mkdir -p "$TMP/hf" "$TMP/q"
plant "$TMP/hf" model.safetensors
ln -s "$TMP/victim" "$TMP/hf/config.json"
ok "export into a folder with planted symlinks" "$BIN" export --format hf --model "$M" --out "$TMP/hf"
plant "$TMP/q" m.gguf
ok "quantize into a folder with planted symlinks" "$BIN" quantize --model "$M" --type q8_0 --out "$TMP/q/m.gguf"
[[ $(cat "$TMP/victim") == precious ]] && pass "the symlinks' target is untouched" ||
  fail "the symlinks' target is untouched" "the victim was written through"
regular "$TMP/hf/model.safetensors" && regular "$TMP/hf/config.json" && regular "$TMP/q/m.gguf" &&
  pass "the outputs are regular files" ||
  fail "the outputs are regular files" "an output is still a symlink: $(ls -l "$TMP/hf" "$TMP/q" | grep -v tmp)"
ok "the exported folder loads" "$BIN" info --model "$TMP/hf"

# --- case 7: the same file as input and output, directly or through a symlink
ln -s "$M" "$TMP/alias.safetensors"
expect_error "quantize --out is --model" "is the input" "$BIN" quantize --model "$M" --type q8_0 --out "$M"
expect_error "quantize --out links to --model" "is the input" "$BIN" quantize --model "$M" --type q8_0 \
  --out "$TMP/alias.safetensors"
expect_error "logits --out is --model" "is the input" "$BIN" logits --model "$M" --ids "$TMP/ids.txt" --out "$M"
expect_error "logits --out is --ids" "is the input" "$BIN" logits --model "$M" --ids "$TMP/ids.txt" --out "$TMP/ids.txt"
expect_error "grads --out is --model" "is the input" "$BIN" grads --model "$M" --ids "$TMP/ids.txt" --out "$M"
ok "export to a folder" "$BIN" export --format hf --model "$M" --out "$TMP/hf2"
cp -r "$TMP/hf2" "$TMP/hf2_copy"
expect_error "export --out is the --model folder" "is the input" "$BIN" export --format hf --model "$TMP/hf2" \
  --out "$TMP/hf2"
expect_error "export --out holds --model" "is the input" "$BIN" export --format hf \
  --model "$TMP/hf2/model.safetensors" --out "$TMP/hf2"
expect_error "encode --out is --in" "is the input" "$BIN" encode --model "$M" --in "$TMP/ids.txt" --out "$TMP/ids.txt"
cmp -s "$M" "$TMP/m_copy.safetensors" && diff -r "$TMP/hf2" "$TMP/hf2_copy" >/dev/null && [[ $(cat "$TMP/ids.txt") == "1 2 3 4 5" ]] &&
  pass "every input is unchanged" || fail "every input is unchanged" "an input was changed"

# --- case 5: a NaN weight; a q4_K block with a NaN scale (sample, eval loss and eval ppl refuse)
cat include/diffattn/*.h >"$TMP/text.txt"
"$BIN" init --out "$TMP/m256.safetensors" --dim 256 --layers 1 --heads 2 --ffn 256 --seq 32 >/dev/null
python3 - "$TMP/m256.safetensors" "$TMP/nan.safetensors" <<'EOF'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
start = 8 + n + h["norm.weight"]["data_offsets"][0]
b[start + 12:start + 16] = struct.pack("<f", float("nan"))  # element 3
open(sys.argv[2], "wb").write(b)
EOF
expect_error "sample refuses a NaN weight" "tensor norm.weight holds nan" "$BIN" sample --model "$TMP/nan.safetensors" \
  --prompt "a" --max-new 4
expect_error "eval loss refuses a NaN weight" "tensor norm.weight holds nan" "$BIN" eval loss \
  --model "$TMP/nan.safetensors" --data "$TMP/text.txt"
out=$("$BIN" sample --model "$TMP/nan.safetensors" --prompt "a" --max-new 4 --allow-nonfinite 2>&1); rc=$?
[[ $rc == 1 && $out == *"step 0: the logits hold"* ]] && pass "--allow-nonfinite loads it; sampling stops at step 0" ||
  fail "--allow-nonfinite loads it; sampling stops at step 0" "rc=$rc $out"
ok "quantize q4_k" "$BIN" quantize --model "$TMP/m256.safetensors" --type q4_k --out "$TMP/q4k.gguf"
python3 - "$TMP/q4k.gguf" <<'EOF'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
pos = 8
def u32():
    global pos; v = struct.unpack_from("<I", b, pos)[0]; pos += 4; return v
def u64():
    global pos; v = struct.unpack_from("<Q", b, pos)[0]; pos += 8; return v
def skip_value(t):
    global pos
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    if t == 8:
        n = u64()
        pos += n
    elif t == 9:
        et, n = u32(), u64()
        for _ in range(n): skip_value(et)
    else: pos += sizes[t]
nt, nkv = u64(), u64()
align = 32
for _ in range(nkv):
    k = bytes(b[pos + 8:pos + 8 + struct.unpack_from("<Q", b, pos)[0]]).decode(); pos += 8 + len(k)
    t = u32()
    if k == "general.alignment": align = struct.unpack_from("<I", b, pos)[0]
    skip_value(t)
tensors = []
for _ in range(nt):
    n = u64(); name = bytes(b[pos:pos + n]).decode(); pos += n
    nd = u32(); pos += 8 * nd
    typ, off = u32(), u64()
    tensors.append((name, typ, off))
data = (pos + align - 1) // align * align
# a matmul weight: the quantized embedding is dequantized at load and refused by the f32 check
name, typ, off = next(t for t in tensors if t[1] == 12 and not t[0].startswith("token_embd"))  # q4_K
b[data + off:data + off + 2] = struct.pack("<H", 0x7e00)  # the first block's d: fp16 NaN
open(p, "wb").write(b)
EOF
expect_error "eval loss refuses the NaN q4_K scale" "a block's scale is not finite" "$BIN" eval loss \
  --model "$TMP/q4k.gguf" --data "$TMP/text.txt"
expect_error "eval ppl refuses the NaN q4_K scale" "a block's scale is not finite" "$BIN" eval ppl \
  --model "$TMP/q4k.gguf" --base "$TMP/m256.safetensors" --data "$TMP/text.txt"

# --- case 5: an epsilon below the floor
expect_error "init --norm-eps 1e-30 refused" "norm_eps" "$BIN" init --out "$TMP/eps.safetensors" --norm-eps 1e-30

# --- case 6: compare --task takes train's field table; report.json is JSON
for lr in -1 0 1e30; do
  expect_error "compare --task --lr $lr refused" "lr" "$BIN" compare --task mqar --out "$TMP/cmp_$lr" --lr $lr \
    --steps 2 --eval-every 1 --eval-seqs 4 --dim 16 --layers 1 --batch 2 --quiet
done

# --- case 8: two trains on one --out: the second is refused naming the first's pid
"$BIN" train --arch softmax --dim 32 --layers 1 --heads 2 --seq 16 --batch 2 --steps 100000 --eval-every 0 \
  --log-every 1000 --data "$TMP/text.txt" --out "$TMP/run" >/dev/null 2>&1 &
first=$!
for _ in $(seq 100); do [[ -s $TMP/run/.lock ]] && break; sleep 0.1; done
err=$("$BIN" train --arch softmax --dim 32 --layers 1 --heads 2 --seq 16 --batch 2 --steps 4 --eval-every 0 \
  --data "$TMP/text.txt" --out "$TMP/run" --force 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"being written by another process (pid $first"* ]] &&
  pass "a second train in the same --out is refused naming pid $first" ||
  fail "a second train in the same --out is refused naming pid $first" "rc=$rc $err"
kill $first 2>/dev/null; wait $first 2>/dev/null

# --- case 8: a study run with --jobs holds its folder's lock too, from start to report
"$BIN" compare --task mqar --out "$TMP/study" --archs softmax --seeds 4 --steps 100000 --eval-every 1000 \
  --eval-seqs 4 --dim 16 --layers 1 --batch 2 --jobs 2 --quiet >/dev/null 2>&1 &
first=$!
for _ in $(seq 100); do [[ -s $TMP/study/.lock ]] && break; sleep 0.1; done
err=$("$BIN" compare --task mqar --out "$TMP/study" --archs softmax --seeds 1 --steps 2 --eval-every 1 \
  --eval-seqs 4 --dim 16 --layers 1 --batch 2 --force --quiet 2>&1 >/dev/null); rc=$?
[[ $rc == 1 && $err == *"being written by another process (pid $first"* ]] &&
  pass "compare --jobs holds its --out: a second compare is refused naming pid $first" ||
  fail "compare --jobs holds its --out: a second compare is refused naming pid $first" "rc=$rc $err"
pkill -P $first 2>/dev/null; kill $first 2>/dev/null; wait $first 2>/dev/null

# --- quantize --help named a default (q8_0) for the required --type
help=$("$BIN" quantize --help)
line=$(grep -- "--type S" <<<"$help")
[[ $line == *"(required)"* && $line != *default* ]] && pass "quantize --help: --type is required, with no default" ||
  fail "quantize --help: --type is required, with no default" "$line"

finish
