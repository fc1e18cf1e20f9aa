# The reference tokenizers' ids (node, the same whichever build is tested),
# computed once for the suites of both builds of `make test` (sourced after lib.sh):
#   ref_cached OUT CMD...   # CMD's stdout into OUT
# With DA_REF_CACHE set (the Makefile sets it to build/ref-cache), OUT is kept
# there under the sha256 of node's version, tools/tokref/package-lock.json and
# CMD's words, a word naming a file by the file's contents (the script, the
# tokenizer.json, the text); a later call with the same key copies it. Only a
# run that exits 0 is kept. Without DA_REF_CACHE, CMD simply runs.
ref_cached() {
  local out=$1 key a
  shift
  [[ -n ${DA_REF_CACHE:-} ]] || { "$@" >"$out"; return; }
  key=$({ node --version; sha256sum <tools/tokref/package-lock.json
          for a in "$@"; do if [[ -f $a ]]; then sha256sum <"$a"; else printf '%s\n' "$a"; fi; done; } | sha256sum)
  key=${key%% *}
  if [[ -s $DA_REF_CACHE/$key ]]; then cp "$DA_REF_CACHE/$key" "$out"; return; fi
  "$@" >"$out" || return
  mkdir -p "$DA_REF_CACHE" && cp "$out" "$DA_REF_CACHE/$key.$$" && mv "$DA_REF_CACHE/$key.$$" "$DA_REF_CACHE/$key"
}
