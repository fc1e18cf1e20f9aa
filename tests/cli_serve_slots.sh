#!/usr/bin/env bash
# diffattn serve's saved slots (docs/serving.md "Saved slots"): after a greedy
# request, slot 0 is saved, erased, restored into slot 1 (and into slot 1 of a
# restarted server), and the conversation continues from the restored cache
# with the same greedy text as without it; GET /slots shows what each slot
# holds; names that leave the folder, a symlink out of it, a file of another
# model (the same shape, another seed), a truncated, damaged or newer-version
# file are refused; a slot running a request answers 409; a save that hits
# the file size limit leaves no file; and
# without --slot-save-path the actions answer 501.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
AUTH=()
"$BIN" init --dim 64 --layers 2 --heads 2 --seq 512 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"
"$BIN" quantize --model "$TMP/m.safetensors" --type q8_0 --out "$TMP/m.gguf" >/dev/null 2>&1 || fail "quantize"
"$BIN" init --dim 64 --layers 2 --heads 2 --seq 512 --seed 7 --out "$TMP/o.safetensors" >/dev/null 2>&1 || fail "init (other)"
"$BIN" quantize --model "$TMP/o.safetensors" --type q8_0 --out "$TMP/o.gguf" >/dev/null 2>&1 || fail "quantize (other)"
DIR=$TMP/slots
P="The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs."
cached() { curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^diffattn_prompt_tokens_cached_total //p'; }
complete() { # prompt, cache_prompt -> the text
  post /v1/completions "$(python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 24,
    "temperature": 0, "cache_prompt": sys.argv[2] == "true"}, ensure_ascii=False))' "$1" "$2")" >/dev/null
  py "r['choices'][0]['text']"
}
slot() { # id, action, filename -> the status; the body in $TMP/resp
  post "/slots/$1?action=$2" "$(python3 -c 'import json,sys; print(json.dumps({"filename": sys.argv[1]}))' "$3")"
}
slots_field() { # slot id, field of GET /slots
  curl -s -o "$TMP/resp" "http://127.0.0.1:$PORT/slots"; py "r[$1]['$2']"
}

# without --slot-save-path
start_server plain --model "$TMP/m.gguf" --parallel 2 --ctx 512 || fail "the server starts"
check "without --slot-save-path: save answers 501" [ "$(slot 0 save a.bin)" = 501 ]
check "without --slot-save-path: restore answers 501" [ "$(slot 0 restore a.bin)" = 501 ]
check "GET /slots lists both slots, idle, with n_ctx" \
  [ "$(curl -s -o "$TMP/resp" -w '%{http_code}' "http://127.0.0.1:$PORT/slots")" = 200 -a \
    "$(py "[(s['id'], s['n_ctx'], s['is_processing']) for s in r]")" = '[[0, 512, false], [1, 512, false]]' ]
# the reference: the same turns on a server that never restores (the cache off)
first=$(complete "$P" false)
next_prompt="$P$first And then"
reference=$(complete "$next_prompt" false)
stop_server

start_server a --model "$TMP/m.gguf" --parallel 2 --ctx 512 --slot-save-path "$DIR" || fail "the server starts"
got_first=$(complete "$P" true)
check "the first answer is the reference's" [ -n "$got_first" -a "$got_first" = "$first" ]
n0=$(slots_field 0 n_cached)
check "slot 0 keeps the prompt and the answer ($n0 tokens)" [ "$n0" -ge "${#P}" ]
st=$(slot 0 save a.bin)
check "save slot 0: 200, n_saved $n0, n_written the file's size" \
  [ "$st" = 200 -a "$(py "r['n_saved']")" = "$n0" -a "$(py "r['n_written']")" = "$(stat -c %s "$DIR/a.bin")" \
    -a "$(py "r['id_slot']")" = 0 -a "$(py "r['filename']")" = a.bin ]
st=$(post "/slots/0?action=erase" '{}')
check "erase slot 0: n_erased $n0, then it holds nothing" \
  [ "$st" = 200 -a "$(py "r['n_erased']")" = "$n0" -a "$(slots_field 0 n_cached)" = 0 ]
st=$(slot 1 restore a.bin)
check "restore into slot 1: n_restored $n0, n_read the file's size" \
  [ "$st" = 200 -a "$(py "r['n_restored']")" = "$n0" -a "$(py "r['n_read']")" = "$(stat -c %s "$DIR/a.bin")" \
    -a "$(slots_field 1 n_cached)" = "$n0" ]
c0=$(cached)
cont=$(complete "$next_prompt" true)
c1=$(cached)
check "the next turn starts from the restored slot ($((c1 - c0)) tokens cached) with the reference's text" \
  [ "$((c1 - c0))" = "$n0" -a -n "$cont" -a "$cont" = "$reference" ]
# names that are not plain file names inside the folder, and nothing written outside it
for name in "../escape.bin" "/tmp/abs.bin" "sub/x.bin" "" ".." "." 'back\slash'; do
  check "save \"$name\": 400" [ "$(slot 0 save "$name")" = 400 ]
  check "restore \"$name\": 400" [ "$(slot 1 restore "$name")" = 400 ]
done
check "nothing written outside the folder" [ ! -e "$TMP/escape.bin" -a ! -e /tmp/abs.bin ]
check "a NUL in the name: 400" [ "$(post '/slots/0?action=save' '{"filename": "a.bin\u0000x"}')" = 400 ]
check "no filename: 400" [ "$(post '/slots/0?action=save' '{}')" = 400 ]
check "an unknown action: 400" [ "$(post '/slots/0?action=load' '{"filename": "a.bin"}')" = 400 ]
check "a slot that is not there: 400" [ "$(slot 2 save a.bin)" = 400 -a "$(slot x save a.bin)" = 400 ]
check "a missing file: 404" [ "$(slot 1 restore nothing.bin)" = 404 ]
echo outside >"$TMP/outside.bin"
ln -s "$TMP/outside.bin" "$DIR/link.bin"
check "restore through a symlink out of the folder: 400, named" \
  [ "$(slot 1 restore link.bin)" = 400 ] && has "the message says why" "$(py "r['error']['message']")" "symbolic link"
check "save over a symlink: 400, its target unchanged" \
  [ "$(slot 0 save link.bin)" = 400 -a "$(cat "$TMP/outside.bin")" = outside ]
# damaged files
size=$(stat -c %s "$DIR/a.bin")
head -c $((size - 100)) "$DIR/a.bin" >"$DIR/cut.bin"
check "a truncated file: 400" [ "$(slot 1 restore cut.bin)" = 400 ]
has "the message names the file and the sizes" "$(py "r['error']['message']")" "cut.bin" "truncated" "$((size - 100)) bytes" "$size"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[8] = 2; open(sys.argv[2], "wb").write(b)' \
  "$DIR/a.bin" "$DIR/v2.bin"
check "a newer version: 400" [ "$(slot 1 restore v2.bin)" = 400 ]
has "the message names the version" "$(py "r['error']['message']")" "v2.bin" "version 2"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-5] ^= 1; open(sys.argv[2], "wb").write(b)' \
  "$DIR/a.bin" "$DIR/flip.bin"
check "one flipped bit in the K/V: 400" [ "$(slot 1 restore flip.bin)" = 400 ]
has "the message says damaged" "$(py "r['error']['message']")" "flip.bin" "checksum"
check "after the refusals slot 1 still holds its cache" [ "$(slots_field 1 n_cached)" -ge "$n0" ]
stop_server

# a restart: the file restores into slot 1 of a new process, and the turn continues alike
start_server b --model "$TMP/m.gguf" --parallel 2 --ctx 512 --slot-save-path "$DIR" || fail "the server restarts"
check "after a restart, restore into slot 1: 200" [ "$(slot 1 restore a.bin)" = 200 ]
c0=$(cached)
cont=$(complete "$next_prompt" true)
c1=$(cached)
check "after a restart the next turn starts from the file ($((c1 - c0)) tokens cached) with the reference's text" \
  [ "$((c1 - c0))" = "$n0" -a "$cont" = "$reference" ]
stop_server

# another model of the same shape
start_server o --model "$TMP/o.gguf" --parallel 2 --ctx 512 --slot-save-path "$DIR" || fail "the other model's server starts"
check "another model's file: 400" [ "$(slot 1 restore a.bin)" = 400 ]
has "the message names the file and the model" "$(py "r['error']['message']")" "a.bin" "another model" "fingerprint"
check "and its slot stays empty" [ "$(slots_field 1 n_cached)" = 0 ]
stop_server

# a slot that is running a request answers 409 (a long greedy stream of a wider model, caught mid-way)
"$BIN" init --dim 256 --layers 4 --heads 4 --seq 2048 --out "$TMP/big.safetensors" >/dev/null 2>&1 || fail "init (big)"
start_server busy --model "$TMP/big.safetensors" --parallel 2 --ctx 2048 --slot-save-path "$DIR" || fail "the server starts"
curl -sN "http://127.0.0.1:$PORT/v1/completions" -d '{"prompt": "Once", "max_tokens": 2000, "temperature": 0, "stream": true}' \
  >"$TMP/stream.out" 2>/dev/null &
CPID=$!
for _ in $(seq 1 300); do grep -q '^data:' "$TMP/stream.out" 2>/dev/null && break; sleep 0.02; done
st=$(slot 0 save busy.bin)
check "save of a slot running a request: 409" [ "$st" = 409 ]
has "the message says why" "$(py "r['error']['message']")" "slot 0 is processing a request"
check "and nothing was written" [ ! -e "$DIR/busy.bin" ]
kill "$CPID" 2>/dev/null
wait "$CPID" 2>/dev/null
stop_server

# a save that runs into the file size limit (a full disk) leaves no file, not even a partial one
if command -v prlimit >/dev/null; then
  PORT=$(free_port)
  prlimit --fsize=4096 "$BIN" serve --port "$PORT" --model "$TMP/m.gguf" --parallel 2 --ctx 512 --slot-save-path "$DIR" \
    >"$TMP/full.log" 2>&1 &
  SPID=$!
  for _ in $(seq 1 300); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health") == 200 ]] && break
    sleep 0.1
  done
  complete "$P" true >/dev/null
  st=$(slot 0 save full.bin)
  check "a save past the size limit: 500, no file and no temporary left" \
    [ "$st" = 500 -a ! -e "$DIR/full.bin" -a -z "$(ls "$DIR" | grep '^full.bin.tmp')" ]
  check "a save past the limit does not touch an older file of the name" \
    [ "$(slot 0 save a.bin)" = 500 -a "$(stat -c %s "$DIR/a.bin")" = "$size" ]
  stop_server
fi
finish
