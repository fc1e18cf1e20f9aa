#!/usr/bin/env bash
# Issue 35's item 10: messages that said something else than what was wrong.
#   - tokenizer.ggml.bos_token_id 4294967295 was shown as -1;
#   - an empty added token was "invalid" rather than empty;
#   - a relative path was printed twice ("X.gguf: impossible configuration: X.gguf: ...");
#   - --grid batch=1000000000 said "expected positive integers";
#   - a NaN F16 weight was "a block's scale is not finite";
#   - a normalizer whose type is a number showed as "(none)";
# and a native NSA checkpoint without nsa_select is refused naming the field
# (docs/formats.md: NSA files store their fields at every value).
# The GGUF cases exit 77 without python3-numpy or node-llama-cpp's gguf-py.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tok_lib.sh"

# --grid batch=1000000000: out of range, not "positive integers"
expect_error "--grid batch=1000000000 is out of range" "batch=1000000000 is out of range (1..1048576)" \
  "$BIN" compare --task mqar --out "$TMP/grid" --grid batch=1000000000 --steps 2 --quiet

# NSA without nsa_select (safetensors): refused naming the field
"$BIN" init --arch nsa --dim 32 --layers 1 --heads 1 --vocab 64 --ffn 32 --seq 32 --nsa-block 8 --nsa-stride 4 \
  --nsa-select 8 --nsa-topn 3 --nsa-window 8 --out "$TMP/nsa.safetensors" >/dev/null || exit 1
python3 - "$TMP/nsa.safetensors" "$TMP/nsa_nosel.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
del h["__metadata__"]["nsa_select"]
hb = json.dumps(h).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PY
expect_error "an NSA checkpoint without nsa_select is refused" 'lacks "nsa_select"' \
  "$BIN" info --model "$TMP/nsa_nosel.safetensors"

# a normalizer type that is a number; an empty added token (variants of tok_lib.sh's tokenizer)
write_byte_tokenizer "$TMP/tok.json"
python3 - "$TMP" <<'PY'
import json, sys
j = json.load(open(sys.argv[1] + "/tok.json"))
eot = j["added_tokens"][0]
a = dict(j); a["normalizer"] = {"type": 5}
json.dump(a, open(sys.argv[1] + "/norm.json", "w"))
b = dict(j); b["added_tokens"] = [eot, {"id": 100, "content": "", "special": False}]
json.dump(b, open(sys.argv[1] + "/empty.json", "w"))
PY
echo hello >"$TMP/t.txt"
ok "the tokenizer.json made here loads" "$BIN" encode --tokenizer "$TMP/tok.json" --in "$TMP/t.txt"
expect_error "a numeric normalizer type is named as such" 'normalizer.type "(not a string)"' \
  "$BIN" encode --tokenizer "$TMP/norm.json" --in "$TMP/t.txt"
expect_error "an empty added token is empty" "added_tokens id 100 has an empty content" \
  "$BIN" encode --tokenizer "$TMP/empty.json" --in "$TMP/t.txt"

source "$(dirname "$0")/gguf_py_lib.sh"
if ! find_gguf_py; then
  echo "NOTE: $GGUF_PY_MISSING: the GGUF cases are skipped"
  finish
fi
R() { "$PY" tools/gguf_retype.py --gguf-py "$GP" "$@"; }
"$PY" tools/llama_gguf_write.py --gguf-py "$GP" --out "$TMP/m.gguf" --dim 64 --layers 1 --heads 2 --vocab 300 \
  --type f16 --untied >/dev/null || exit 1

# a relative path, named once: rope_freqs holding factors below 1
R "$TMP/m.gguf" "$TMP/rope.gguf" --add-tensor rope_freqs.weight=16 || exit 1
B=$(realpath "$BIN"); (cd "$TMP" && "$B" info --model rope.gguf) 2>"$TMP/rope.err" >/dev/null
named_once() { grep -q "rope.gguf: rope_freqs\[0\]" "$TMP/rope.err" && ! grep -q "rope.gguf: .*rope.gguf" "$TMP/rope.err"; }
check "a relative path is named once" named_once

# a NaN F16 weight: no block scale in F16
"$PY" - "$GP" "$TMP/m.gguf" "$TMP/nan.gguf" <<'PY'
import shutil, struct, sys
sys.path.insert(0, sys.argv[1])
import gguf
r = gguf.GGUFReader(sys.argv[2])
t = next(t for t in r.tensors if t.name == "blk.0.attn_q.weight")
shutil.copy(sys.argv[2], sys.argv[3])
with open(sys.argv[3], "r+b") as f:
    f.seek(t.data_offset)
    f.write(struct.pack("<H", 0x7e00))
PY
expect_error "a NaN F16 weight is named as such" "holds nan at row 0, column 0;" "$BIN" info --model "$TMP/nan.gguf"
check "... with no block scale in it" eval '! grep -q "block" "$TMP/last.err"'

# tokenizer.ggml.bos_token_id 4294967295 with add_bos_token: shown as it is
"$PY" tools/llama_gguf_write.py --gguf-py "$GP" --out "$TMP/tok.gguf" --dim 8 --layers 1 --heads 1 \
  --tokenizer "$TMP/tok.json" --pre gpt-2 --bos '<|endoftext|>' --add-bos 1 >/dev/null || exit 1
ok "the GGUF with that tokenizer loads" "$BIN" info --model "$TMP/tok.gguf"
R "$TMP/tok.gguf" "$TMP/bos.gguf" --u32-key tokenizer.ggml.bos_token_id=4294967295 || exit 1
expect_error "bos_token_id 4294967295 is shown as it is" "tokenizer.ggml.bos_token_id 4294967295 is not a token" \
  "$BIN" info --model "$TMP/bos.gguf"
finish
