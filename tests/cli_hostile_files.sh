#!/usr/bin/env bash
# Issue 48, items 10, 11, 12 and 14's messages, through the CLI: FIFOs and
# device nodes where files are read or written, a Hugging Face folder whose
# tokenizer.json is broken or huge, and messages that state the true bounds.
# Device nodes are made here with mknod (root only; skipped otherwise): the
# system's own /dev/null and /dev/full are never written.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
source "$(dirname "$0")/tok_lib.sh"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# a command that hung before the fix gets 20 s, then counts as failed
T=(timeout 20)
# waits up to 5 s for a FIFO's reader to finish, then ends it (it waits forever when the FIFO was replaced)
reap() {
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

# a byte-level tokenizer.json of 258 tokens (tok_lib.sh) and a model of that vocabulary
write_byte_tokenizer "$TMP/tok.json"
M=$TMP/m.safetensors
ok "init a softmax model of 258 tokens" "$BIN" init --arch softmax --vocab 258 --dim 32 --layers 1 --heads 2 --ffn 64 \
  --seq 32 --out "$M"
ok "export it as a Hugging Face folder" "$BIN" export --format hf --model "$M" --out "$TMP/hf"
cp "$TMP/tok.json" "$TMP/hf/tokenizer.json"
echo "hello there" >"$TMP/t.txt"
for _ in $(seq 300); do echo "hello there, general kenobi"; done >"$TMP/text.txt"
echo "1 2 3 4 5" >"$TMP/ids.txt"

# --- item 10: a file read by name that is a FIFO is refused at once, naming it
mkfifo "$TMP/fifo"
expect_error "encode --in a FIFO is refused" "$TMP/fifo: is a FIFO" "${T[@]}" "$BIN" encode --tokenizer "$TMP/tok.json" \
  --in "$TMP/fifo"
expect_error "encode --tokenizer a FIFO is refused" "$TMP/fifo: is a FIFO" "${T[@]}" "$BIN" encode \
  --tokenizer "$TMP/fifo" --in "$TMP/t.txt"
expect_error "logits --ids a FIFO is refused" "$TMP/fifo: is a FIFO" "${T[@]}" "$BIN" logits --model "$M" \
  --ids "$TMP/fifo" --out "$TMP/l.npy"
mkfifo "$TMP/fifo.safetensors" "$TMP/fifo.gguf"
expect_error "info --model a FIFO .safetensors is refused" "is a FIFO" "${T[@]}" "$BIN" info \
  --model "$TMP/fifo.safetensors"
expect_error "info --model a FIFO .gguf is refused" "is a FIFO" "${T[@]}" "$BIN" info --model "$TMP/fifo.gguf"
expect_error "eval loss --data a FIFO is refused" "is a FIFO" "${T[@]}" "$BIN" eval loss --model "$M" \
  --data "$TMP/fifo"
# a Hugging Face folder whose tokenizer_config.json is a FIFO: serve loads it (it used to hang in "loading model")
cp -r "$TMP/hf" "$TMP/hf_fifo"
mkfifo "$TMP/hf_fifo/tokenizer_config.json"
if start_server fifo --model "$TMP/hf_fifo"; then
  pass "serve loads a folder whose tokenizer_config.json is a FIFO"
  stop_server
else
  fail "serve loads a folder whose tokenizer_config.json is a FIFO" "$(tail -3 "$TMP/fifo.log")"
  kill -KILL "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null
fi

# --- item 11: an output path that is a FIFO or a device is written through, never replaced
mkfifo "$TMP/out.fifo"
cat "$TMP/out.fifo" >"$TMP/from_fifo" &
reader=$!
ok "logits --out a FIFO" "${T[@]}" "$BIN" logits --model "$M" --ids "$TMP/ids.txt" --out "$TMP/out.fifo"
reap $reader
check "  the FIFO is still a FIFO" test -p "$TMP/out.fifo"
check "  and its reader got the .npy" grep -q NUMPY "$TMP/from_fifo"
mkfifo "$TMP/ep.fifo"
cat "$TMP/ep.fifo" >"$TMP/from_ep" &
reader=$!
ok "compare --dump-episodes a FIFO" "${T[@]}" "$BIN" compare --task vt --seq 123 --noise 0.2 --eval-seqs 3 \
  --dump-episodes "$TMP/ep.fifo"
reap $reader
check "  the FIFO is still a FIFO" test -p "$TMP/ep.fifo"
check "  and its reader got 3 episodes" test "$(wc -l <"$TMP/from_ep")" = 3
# a link through /proc, as /dev/stdout is: the output goes to what stdout is, the link stays
ln -s /proc/self/fd/1 "$TMP/stdout"
"${T[@]}" "$BIN" logits --model "$M" --ids "$TMP/ids.txt" --out "$TMP/stdout" >"$TMP/redirected" 2>"$TMP/last.err"
rc=$?
[[ $rc == 0 && -L $TMP/stdout ]] && grep -q NUMPY "$TMP/redirected" &&
  pass "logits --out a /proc link (as /dev/stdout) writes to stdout's file; the link stays" ||
  fail "logits --out a /proc link (as /dev/stdout) writes to stdout's file; the link stays" \
    "rc=$rc $(ls -l "$TMP/stdout") $(cat "$TMP/last.err")"
if mknod "$TMP/null" c 1 3 2>/dev/null && mknod "$TMP/full" c 1 7 2>/dev/null; then
  ok "logits --out a copy of /dev/null" "$BIN" logits --model "$M" --ids "$TMP/ids.txt" --out "$TMP/null"
  check "  it is still a character device" test -c "$TMP/null"
  expect_error "logits --out a copy of /dev/full" "No space left on device" "$BIN" logits --model "$M" \
    --ids "$TMP/ids.txt" --out "$TMP/full"
  check "  it is still a character device" test -c "$TMP/full"
  ok "compare --dump-episodes a copy of /dev/null" "$BIN" compare --task vt --seq 123 --noise 0.2 --eval-seqs 3 \
    --dump-episodes "$TMP/null"
  check "  it is still a character device" test -c "$TMP/null"
  ok "encode --out a copy of /dev/null" "$BIN" encode --tokenizer "$TMP/tok.json" --in "$TMP/t.txt" --out "$TMP/null"
  check "  it is still a character device" test -c "$TMP/null"
  check "no temporary is left beside them" test -z "$(ls "$TMP" | grep '\.tmp\.')"
else
  echo "skip device nodes: mknod is not permitted here"
fi
mkdir "$TMP/adir"
expect_error "logits --out a folder is refused naming it" "$TMP/adir: is a directory" "$BIN" logits --model "$M" \
  --ids "$TMP/ids.txt" --out "$TMP/adir"

# --- item 12: a tokenizer.json that is not JSON, or too large, is refused naming it before anything is written
cp -r "$TMP/hf" "$TMP/hf_bad"
echo '{"model": {"type": "BPE", "vocab": {' >"$TMP/hf_bad/tokenizer.json"
expect_error "convert refuses a folder whose tokenizer.json is not JSON" "hf_bad/tokenizer.json" "$BIN" convert \
  --model "$TMP/hf_bad" --to diff --recipe preserve --out "$TMP/bad.safetensors"
check "  and writes nothing" test ! -e "$TMP/bad.safetensors"
# a byte-level model's folder, so that train reads the text as bytes whatever the tokenizer
ok "init a byte-level model" "$BIN" init --arch softmax --dim 32 --layers 1 --heads 2 --ffn 64 --seq 32 \
  --out "$TMP/m256.safetensors"
ok "export it as a Hugging Face folder" "$BIN" export --format hf --model "$TMP/m256.safetensors" --out "$TMP/hf_bad256"
cp "$TMP/hf_bad/tokenizer.json" "$TMP/hf_bad256/tokenizer.json"
expect_error "train --init refuses it too" "hf_bad256/tokenizer.json" "$BIN" train --init "$TMP/hf_bad256" --seq 32 \
  --steps 1 --batch 2 --eval-every 0 --data "$TMP/text.txt" --out "$TMP/run_bad"
check "  and writes no model" test ! -e "$TMP/run_bad/model.safetensors"
cp -r "$TMP/hf" "$TMP/hf_big"
truncate -s 60M "$TMP/hf_big/tokenizer.json"
expect_error "convert refuses a 60 MB tokenizer.json" "hf_big/tokenizer.json" "$BIN" convert --model "$TMP/hf_big" \
  --to diff --recipe preserve --out "$TMP/big.safetensors"
check "  and writes nothing" test ! -e "$TMP/big.safetensors"
ok "convert takes the folder's good tokenizer.json" "$BIN" convert --model "$TMP/hf" --to diff --recipe preserve \
  --out "$TMP/good.safetensors"
out=$("$BIN" info --model "$TMP/good.safetensors" 2>&1)
has "  and the model it writes loads, carrying it" "$out" "tokenizer      embedded"

# --- item 14: info and encode use a folder's tokenizer.json, as sample and serve do
out=$("$BIN" info --model "$TMP/hf" 2>&1)
has "info --model FOLDER names the folder's tokenizer.json" "$out" "tokenizer      $TMP/hf/tokenizer.json"
ok "encode --model FOLDER uses the folder's tokenizer" "$BIN" encode --model "$TMP/hf" --in "$TMP/t.txt" \
  --out "$TMP/folder.ids"
"$BIN" encode --tokenizer "$TMP/tok.json" --in "$TMP/t.txt" --out "$TMP/file.ids" 2>/dev/null
check "  the same ids as with the file" cmp -s "$TMP/folder.ids" "$TMP/file.ids"

# --- item 14: a list flag's message states the bounds its check uses
C=(compare --task mqar --out "$TMP/cmp" --steps 1 --quiet)
expect_error "--seq 70000 names the 65536 cap" "expected up to 8 lengths in 5..65536" "$BIN" "${C[@]}" --seq 70000
expect_error "--train-seq 70000 names the 65536 cap" "expected up to 8 lengths in 5..65536" "$BIN" "${C[@]}" \
  --train-seq 70000
expect_error "--noise 0.995 names the 0.99 cap" "expected up to 8 shares in [0, 0.99]" "$BIN" compare \
  --task noisy-recall --out "$TMP/cmp" --steps 1 --quiet --noise 0.995
expect_error "--depths 1.5 names [0, 1] and the 16 depths" "expected up to 16 shares in [0, 1]" "$BIN" compare \
  --task niah --out "$TMP/cmp" --steps 1 --quiet --depths 1.5
expect_error "--context 100 names the 128 floor" "--context \"100\": expected up to 16 lengths in 128..1048576" \
  "$BIN" eval needle --model "$M" --context 100

finish
