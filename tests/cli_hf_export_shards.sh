#!/usr/bin/env bash
# export --format hf --type bf16|f16|f32 --shard-size (docs/formats.md, "Export to Hugging Face"): on a tiny
# Motif-2.6B-like folder (tests/fixtures/hf_motif_v1, from tools/motif_reference.py) the shards are named as
# Hugging Face names them, the index's weight_map names every tensor once and where it is, total_size is the
# tensors' bytes, the tensors keep the single file's order, packed greedily (one larger than the shard size
# alone), each value is the F32 export's rounded to nearest even (computed here, in Python); the folder loads
# back with the logits of that rounded model bit for bit, and the float64 PyTorch reference
# (tools/motif_reference.py --logits) reads it and agrees within 1e-5. A later export into the folder removes
# the weight files of the earlier one the reader could mix up, and keeps other files. Flag errors name the flag.
# The PyTorch comparison skips (exit 77, after every other check) where python3-torch is missing.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
V1=tests/fixtures/hf_motif_v1
TORCH_PY=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import torch, numpy' 2>/dev/null; then TORCH_PY=$p; break; fi
done

# check_shards DIR REF DTYPE SHARD_BYTES N: DIR's weights against REF, the single-file F32 export of the same model
check_shards() {
  python3 - "$@" <<'PY'
import json, os, re, struct, sys
d, ref, dtype, limit, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def read(path):  # [(name, dtype, shape, raw bytes)] in data order
    b = open(path, "rb").read()
    k = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + k])
    h.pop("__metadata__", None)
    items = sorted(h.items(), key=lambda e: e[1]["data_offsets"][0])
    at = lambda t: b[8 + k + t["data_offsets"][0]:8 + k + t["data_offsets"][1]]
    return [(nm, t["dtype"], t["shape"], at(t)) for nm, t in items]
def rne_bf16(u):  # float32 bits -> bf16 bits, to nearest even
    return u >> 16 if (u & 0x7fffffff) > 0x7f800000 else ((u + 0x7fff + ((u >> 16) & 1)) >> 16) & 0xffff
want = read(os.path.join(ref, "model.safetensors"))
names = ["model-%05d-of-%05d.safetensors" % (i + 1, n) for i in range(n)]
have = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
errs = []
if have != names: errs.append("files %s, want %s" % (have, names))
idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
wm = idx["weight_map"]
shards = [read(os.path.join(d, f)) for f in names if f in have]
got = [t for s in shards for t in s]
seen = [t[0] for t in got]
if seen != [t[0] for t in want]: errs.append("tensor order differs from the single file's")
if sorted(wm) != sorted(seen) or len(set(seen)) != len(seen): errs.append("weight_map does not name each tensor once")
for f, s in zip(names, shards):
    errs += ["%s: in %s, weight_map says %s" % (t[0], f, wm.get(t[0])) for t in s if wm.get(t[0]) != f]
sizes = [sum(len(t[3]) for t in s) for s in shards]
total = idx["metadata"]["total_size"]
if total != sum(sizes): errs.append("total_size %s != %d" % (total, sum(sizes)))
for i, s in enumerate(shards):
    if sizes[i] > limit and len(s) > 1: errs.append("shard %d: %d bytes in %d tensors" % (i + 1, sizes[i], len(s)))
    if i + 1 < len(shards) and sizes[i] + len(shards[i + 1][0][3]) <= limit: errs.append("shard %d not full" % (i + 1))
for (nm, dt, shape, raw), (_, _, wshape, wraw) in zip(got, want):
    if dt != dtype or shape != wshape: errs.append("%s: %s %s" % (nm, dt, shape)); continue
    u = struct.unpack("<%dI" % (len(wraw) // 4), wraw)
    if dtype == "BF16": exp = struct.pack("<%dH" % len(u), *[rne_bf16(x) for x in u])
    elif dtype == "F16": exp = b"".join(struct.pack("<e", x) for x in struct.unpack("<%df" % len(u), wraw))
    else: exp = wraw
    if raw != exp: errs.append("%s: not the F32 values rounded to %s" % (nm, dtype))
cfg = json.load(open(os.path.join(d, "config.json")))
torch_dtype = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[dtype]
if cfg["torch_dtype"] != torch_dtype: errs.append("torch_dtype %s" % cfg["torch_dtype"])
print("%d tensors in %d shards of %s bytes; %s" % (len(got), len(shards), sizes, errs[:4] or "all as expected"))
sys.exit(1 if errs else 0)
PY
}

# rounded_folder REF OUT: REF's single F32 file with every value rounded to BF16 (kept as F32), config.json alike
rounded_folder() {
  python3 - "$1" "$2" <<'PY'
import json, os, shutil, struct, sys
ref, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
shutil.copy(os.path.join(ref, "config.json"), out)
b = bytearray(open(os.path.join(ref, "model.safetensors"), "rb").read())
k = struct.unpack("<Q", b[:8])[0]
for i in range(8 + k, len(b), 4):
    u = struct.unpack_from("<I", b, i)[0]
    if (u & 0x7fffffff) <= 0x7f800000: u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000
    struct.pack_into("<I", b, i, u)
open(os.path.join(out, "model.safetensors"), "wb").write(b)
PY
}

# 1. F32, one file: the default, and --type f32 gives the same bytes
ok "f32: export --format hf" "$BIN" export --model $V1 --format hf --out "$TMP/f32"
ok "f32: --type f32 without --shard-size" "$BIN" export --model $V1 --format hf --type f32 --out "$TMP/f32b"
check "f32: --type f32 writes the default's bytes" cmp -s "$TMP/f32/model.safetensors" "$TMP/f32b/model.safetensors"
check "f32: one model.safetensors, no index" test ! -e "$TMP/f32/model.safetensors.index.json"
has "f32: torch_dtype float32" "$(cat "$TMP/f32/config.json")" '"torch_dtype":' '"float32"'

# 2. BF16 in 3 shards, as Motif-2.6B is published
ok "bf16: --type bf16 --shard-size 30000" "$BIN" export --model $V1 --format hf --type bf16 --shard-size 30000 \
  --out "$TMP/bf16"
check "bf16: 3 shards named as Hugging Face names them, the index exact, each value rounded to nearest even" \
  check_shards "$TMP/bf16" "$TMP/f32" BF16 30000 3
ok "bf16: logits of the sharded folder" "$BIN" logits --model "$TMP/bf16" --ids $V1.ids.txt --out "$TMP/bf16.npy"
rounded_folder "$TMP/f32" "$TMP/rounded"
ok "bf16: logits of the F32 export rounded to BF16 here" "$BIN" logits --model "$TMP/rounded" --ids $V1.ids.txt \
  --out "$TMP/rounded.npy"
check "bf16: the sharded folder gives the rounded model's logits, bit for bit" cmp -s "$TMP/bf16.npy" "$TMP/rounded.npy"

# 3. a shard size below single tensors: each larger one alone, in order; F16 rounded as Python's struct 'e' does
ok "f16: --shard-size 1kB" "$BIN" export --model $V1 --format hf --type f16 --shard-size 1kB --out "$TMP/f16"
nf16=$(ls "$TMP/f16" | grep -c '^model-.*\.safetensors$')
check "f16: $nf16 shards, each tensor over 1000 bytes alone, values rounded to nearest even" \
  check_shards "$TMP/f16" "$TMP/f32" F16 1000 "$nf16"
ok "f16: the folder loads" "$BIN" logits --model "$TMP/f16" --ids $V1.ids.txt --out "$TMP/f16.npy"

# 4. a later export into the folder: the earlier weight files go (the reader takes model.safetensors before an
#    index), other files stay
mkdir "$TMP/out" && echo keep >"$TMP/out/README.md"
ok "into a folder: $nf16 shards" "$BIN" export --model $V1 --format hf --type bf16 --shard-size 1000 --out "$TMP/out"
cp "$TMP/f32/model.safetensors" "$TMP/out/model.safetensors.keep"
ok "into a folder: then 3 shards" "$BIN" export --model $V1 --format hf --type bf16 --shard-size 30000 --out "$TMP/out"
check "3 shards replace $nf16: only the new shards and index, the other files kept" \
  check_shards "$TMP/out" "$TMP/f32" BF16 30000 3
check "README.md kept" test -e "$TMP/out/README.md"
ok "into a folder: then one F32 file" "$BIN" export --model $V1 --format hf --out "$TMP/out"
check "one file replaces the shards: no shard, no index left" \
  test "$(ls "$TMP/out" | tr '\n' ' ')" = "README.md config.json model.safetensors model.safetensors.keep "
ok "into a folder: then 3 shards again" "$BIN" export --model $V1 --format hf --type bf16 --shard-size 30000 \
  --out "$TMP/out"
check "3 shards replace model.safetensors (which the reader would take first)" test ! -e "$TMP/out/model.safetensors"
ok "logits of the folder" "$BIN" logits --model "$TMP/out" --ids $V1.ids.txt --out "$TMP/out.npy"
check "its logits are the 3-shard export's" cmp -s "$TMP/out.npy" "$TMP/bf16.npy"

# 5. errors name the flag
expect_one_line_error "--type q8_0 for hf" '--type "q8_0" is not one of f32 (default), bf16, f16 for --format hf' \
  "$BIN" export --model $V1 --format hf --type q8_0 --out "$TMP/e"
expect_one_line_error "--shard-size 5XB" '--shard-size "5XB" is not a size: bytes, or a number with KB, MB, GB' \
  "$BIN" export --model $V1 --format hf --shard-size 5XB --out "$TMP/e"
expect_one_line_error "--shard-size for gguf" "--shard-size is for --format hf" \
  "$BIN" export --model $V1 --format gguf --shard-size 5GB --out "$TMP/e.gguf"
"$BIN" init --arch diff --dim 32 --layers 30 --heads 2 --vocab 64 --out "$TMP/deep.safetensors" >/dev/null 2>&1 ||
  fail "init of a 30-layer model failed"
expect_one_line_error "more shards than a folder loads" "more than the 256 a folder may hold to load back" \
  "$BIN" export --model "$TMP/deep.safetensors" --format hf --shard-size 1 --out "$TMP/e"
check "no folder written" test ! -e "$TMP/e"

# 6. the float64 PyTorch reference reads the sharded BF16 folder and gives diffattn's logits on it
if [[ -z $TORCH_PY ]]; then
  ((TESTS_FAILED)) && finish
  skip "$TESTS_PASSED passed; python3-torch is missing: the PyTorch comparison skipped"
fi
ok "motif_reference.py --logits on the sharded folder" "$TORCH_PY" tools/motif_reference.py --logits "$TMP/bf16" \
  --ids $V1.ids.txt --out "$TMP/ref.npy"
check "reference and diffattn agree within 1e-5 (relative to the largest logit)" "$TORCH_PY" -c '
import sys, numpy as np
a, b = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
e = np.abs(a - b).max() / np.abs(a).max()
print("max |diff| / max |logit| = %.2e" % e); sys.exit(0 if e <= 1e-5 else 1)' \
  "$TMP/ref.npy" "$TMP/bf16.npy"
finish
