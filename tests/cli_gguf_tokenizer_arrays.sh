#!/usr/bin/env bash
# A GGUF's tokenizer.ggml.* arrays are counted against the model's vocabulary
# (and each other) from their headers, before anything is allocated for
# them: a file with 400,000 tokens for a 512-id model is refused naming both
# counts, holding no more memory than the file's size over that of loading
# the same model without them (the strings were copied first: 19 MB of tokens
# peaked at 239 MB, then the file was refused for something else).
# Exits 77 without python3-numpy or node-llama-cpp's gguf-py.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gguf_py_lib.sh"
find_gguf_py || skip "$GGUF_PY_MISSING"
"$PY" tools/llama_gguf_write.py --gguf-py "$GP" --out "$TMP/m.gguf" --dim 64 --layers 1 --heads 2 --vocab 512 \
  --type f16 --untied >/dev/null || exit 1
# the same model with a tokenizer of n tokens (t0000000 ...), n token types and one merge
tokens() {
  "$PY" - "$GP" "$TMP/m.gguf" "$1" "$2" "$3" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import gguf
r = gguf.GGUFReader(sys.argv[2])
n, n_types = int(sys.argv[4]), int(sys.argv[5])
w = gguf.GGUFWriter(sys.argv[3], "llama")
for f in r.fields.values():
    if f.name == "general.architecture" or f.name.startswith("GGUF.") or f.name.startswith("tokenizer."):
        continue
    vt = f.types[0]
    w.add_key_value(f.name, f.contents(), vt, sub_type=f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None)
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("gpt-2")
w.add_token_list(["t%07d" % i for i in range(n)])
w.add_token_types([1] * n_types)
w.add_token_merges(["t a"])
for t in r.tensors:
    w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
}
tokens "$TMP/big.gguf" 400000 400000 || exit 1
tokens "$TMP/types.gguf" 512 513 || exit 1
expect_error "400,000 tokens for a vocabulary of 512" \
  "tokenizer.ggml.tokens has 400000 entries but the model's vocabulary is 512" "$BIN" info --model "$TMP/big.gguf"
expect_error "513 token types for 512 tokens" "token_type has 513 entries, tokenizer.ggml.tokens 512" \
  "$BIN" info --model "$TMP/types.gguf"
if [[ -x /usr/bin/time ]]; then
  rss() { /usr/bin/time -f %M "$BIN" info --model "$1" 2>&1 >/dev/null | tail -1; }
  base=$(rss "$TMP/m.gguf") big=$(rss "$TMP/big.gguf") size=$(($(stat -c %s "$TMP/big.gguf") / 1024))
  echo "     peak RSS: $base KB for the model, $big KB with 400,000 tokens (a $size KB file)"
  check "refusing the tokens costs no more than the file's size in memory" test $((big - base)) -le "$size"
else
  echo "NOTE: no /usr/bin/time: the peak RSS is not checked"
fi
finish
