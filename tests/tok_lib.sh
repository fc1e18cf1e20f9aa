# Sourced after lib.sh by the tests that need a small tokenizer made on the spot.
#   write_byte_tokenizer PATH   # a byte-level tokenizer.json of 258 tokens: the 256 bytes (GPT-2's
#                               # alphabet), <|endoftext|> (256, special) and one merge, "h e" (257)
write_byte_tokenizer() {
  python3 - "$1" <<'PY'
import json, sys
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
vocab["<|endoftext|>"] = 256
vocab["he"] = 257
eot = {"id": 256, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
       "normalized": False, "special": True}
j = {"version": "1.0", "added_tokens": [eot], "normalizer": None,
     "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
     "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": vocab, "merges": ["h e"]}}
json.dump(j, open(sys.argv[1], "w"))
PY
}
