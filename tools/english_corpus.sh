#!/usr/bin/env bash
# Writes at least 5 MB (stopping past 6 MB) of valid UTF-8 English that Debian
# packages ship: the fortunes, the common licenses, the packages' copyright
# files, then, if that is not enough, gzipped docs and man pages. The
# tokenizer tests and benchmarks compare against their references on it.
#   tools/english_corpus.sh OUT
set -u
OUT=${1:?usage: tools/english_corpus.sh OUT}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
: > "$OUT"
{ find -L /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' 2>/dev/null | sort
  ls /usr/share/common-licenses/* 2>/dev/null; find /usr/share/doc -name copyright 2>/dev/null | sort; } > "$T/files.txt"
while read -r f; do
  iconv -f utf-8 -t utf-8 "$f" >/dev/null 2>&1 && cat "$f" >> "$OUT"
  (( $(stat -c %s "$OUT") > 6000000 )) && break
done < "$T/files.txt"
if (( $(stat -c %s "$OUT") < 5000000 )); then
  for f in $(find /usr/share/doc /usr/share/man/man1 -name '*.gz' 2>/dev/null | sort); do
    zcat "$f" > "$T/one.txt" 2>/dev/null && iconv -f utf-8 -t utf-8 "$T/one.txt" >/dev/null 2>&1 && cat "$T/one.txt" >> "$OUT"
    (( $(stat -c %s "$OUT") > 6000000 )) && break
  done
fi
size=$(stat -c %s "$OUT")
(( size >= 5000000 )) || { echo "english_corpus.sh: could not gather 5 MB of UTF-8 text from Debian packages (got $size bytes)" >&2; exit 1; }
