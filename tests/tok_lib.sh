# Sourced after lib.sh by the tests that need a small tokenizer made on the spot.
#   write_byte_tokenizer PATH [SPECIALS [MERGES]]
#     a byte-level tokenizer.json: the 256 bytes (GPT-2's alphabet) as ids 0-255, then the special tokens of
#     SPECIALS (space-separated; default "<|endoftext|>") from id 256, then one token per merge of MERGES
#     (";"-separated pairs; default "h e"). The defaults give 258 tokens: <|endoftext|> 256 and "he" 257.
write_byte_tokenizer() {
  python3 - "$1" "${2-<|endoftext|>}" "${3-h e}" <<'PY'
import json, sys
path, specials, merges = sys.argv[1], sys.argv[2].split(), [m for m in sys.argv[3].split(";") if m]
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
added = []
for t in specials:
    added.append({"id": len(vocab), "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True})
    vocab[t] = len(vocab)
for m in merges:
    vocab[m.replace(" ", "")] = len(vocab)
j = {"version": "1.0", "added_tokens": added, "normalizer": None,
     "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
     "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
json.dump(j, open(path, "w"))
PY
}
