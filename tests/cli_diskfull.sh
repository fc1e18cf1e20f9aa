#!/usr/bin/env bash
# A full disk during a write, simulated with a file size limit (prlimit
# --fsize: writes past it fail with EFBIG, as on a full disk, once SIGXFSZ is
# ignored): every writer -- a training checkpoint, quantize, prepare, the npy
# export of logits, the ids export of encode, the text of decode, export --format hf (sharded too) -- must
# exit with a clear error
# (not be killed by SIGXFSZ, exit 153), leave the previous file byte for byte
# and leave no temporary behind. And a temporary left by a process killed
# mid-write is removed by the next write of that file.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
command -v prlimit >/dev/null || { fail "prlimit (util-linux) is missing"; finish; }

cat include/*.h include/diffattn/*.h src/io/*.c > "$TMP/corpus.txt"
TOK=tests/fuzz/corpus/tokenizer_json/strings.json

# limited NAME LIMIT FILE CMD...: runs CMD under a file size limit of LIMIT
# bytes, expecting it to fail with a message and to leave FILE as it was.
limited() {
  local name=$1 limit=$2 file=$3
  shift 3
  cp "$file" "$TMP/before"
  local err rc
  err=$(prlimit --fsize="$limit" "$@" 2>&1 >/dev/null)
  rc=$?
  local tmps
  tmps=$(find "$(dirname "$file")" -name '*.tmp*' | wc -l)
  if [ "$rc" -eq 153 ] || [ "$rc" -gt 128 ]; then
    fail "$name: killed by a signal (exit $rc) instead of reporting the error"
  elif [ "$rc" -eq 0 ]; then
    fail "$name: succeeded under a $limit-byte file size limit"
  elif ! echo "$err" | grep -q "File too large"; then
    fail "$name: the message does not say what happened: $err"
  elif ! cmp -s "$file" "$TMP/before"; then
    fail "$name: the previous $(basename "$file") was changed"
  elif [ "$tmps" -ne 0 ]; then
    fail "$name: $tmps temporary file(s) left in $(dirname "$file")"
  else
    pass "$name: exit $rc, \"$(echo "$err" | tail -1 | cut -c1-150)\", previous file intact"
  fi
}

# 1. a training checkpoint: a finished run, resumed for more steps under a
#    limit smaller than its training state
"$BIN" train --arch softmax --dim 32 --layers 1 --heads 2 --seq 16 --batch 2 --steps 4 --warmup 1 \
  --eval-every 0 --save-every 2 --log-every 1 --data "$TMP/corpus.txt" --out "$TMP/run" 2>/dev/null ||
  { fail "train: the first run failed"; }
limited "train checkpoint" 100000 "$TMP/run/train_state.safetensors" \
  "$BIN" train --steps 8 --save-every 2 --eval-every 0 --log-every 1 --data "$TMP/corpus.txt" --out "$TMP/run" --resume

# 2. quantize over an existing GGUF
"$BIN" quantize --model "$TMP/run/model.safetensors" --type q8_0 --out "$TMP/q/model.gguf" >/dev/null 2>&1 ||
  { mkdir -p "$TMP/q" && "$BIN" quantize --model "$TMP/run/model.safetensors" --type q8_0 --out "$TMP/q/model.gguf" >/dev/null 2>&1; } ||
  fail "quantize: the first run failed"
limited "quantize" 10000 "$TMP/q/model.gguf" \
  "$BIN" quantize --model "$TMP/run/model.safetensors" --type q8_0 --out "$TMP/q/model.gguf"

# 3. the npy export of logits, over an existing one
mkdir -p "$TMP/npy"
printf '1 2 3 4 5 6 7 8\n' > "$TMP/ids_in.txt"
"$BIN" logits --model "$TMP/run/model.safetensors" --ids "$TMP/ids_in.txt" --out "$TMP/npy/logits.npy" 2>/dev/null ||
  fail "logits: the first run failed"
limited "logits --out .npy" 2000 "$TMP/npy/logits.npy" \
  "$BIN" logits --model "$TMP/run/model.safetensors" --ids "$TMP/ids_in.txt" --out "$TMP/npy/logits.npy"

# 4. the ids export of encode, over an existing one
mkdir -p "$TMP/ids"
echo "1 2 3" > "$TMP/ids/ids.txt"
limited "encode --out ids" 4000 "$TMP/ids/ids.txt" \
  "$BIN" encode --tokenizer "$TOK" --in "$TMP/corpus.txt" --out "$TMP/ids/ids.txt"

# 4b. the text export of decode, over an existing one
echo "previous text" > "$TMP/ids/text.txt"
"$BIN" encode --tokenizer "$TOK" --in "$TMP/corpus.txt" --out "$TMP/ids/all.txt" 2>/dev/null || fail "encode for decode failed"
limited "decode --out text" 4000 "$TMP/ids/text.txt" \
  "$BIN" decode --tokenizer "$TOK" --ids "$TMP/ids/all.txt" --out "$TMP/ids/text.txt"

# 5. prepare: no shard may be published, nor any temporary left
err=$(prlimit --fsize=20000 "$BIN" prepare --tokenizer "$TOK" --in "$TMP/corpus.txt" --out "$TMP/shards" --quiet 2>&1 >/dev/null)
rc=$?
left=$(find "$TMP/shards" -name '*.bin*' 2>/dev/null | wc -l)
if [ "$rc" -gt 128 ]; then fail "prepare: killed by a signal (exit $rc)"
elif [ "$rc" -eq 0 ]; then fail "prepare: succeeded under a 20000-byte limit"
elif ! echo "$err" | grep -q "File too large"; then fail "prepare: unclear message: $err"
elif [ "$left" -ne 0 ]; then fail "prepare: $left shard file(s) left behind"
else pass "prepare: exit $rc, \"$(echo "$err" | tail -1 | cut -c1-150)\", no shard left"; fi

# 6. export --format hf over an earlier export, of another model: neither
#    the weights nor config.json (staged first, published last) may change
"$BIN" export --format hf --model "$TMP/run/model.safetensors" --out "$TMP/hf" >/dev/null 2>&1 ||
  fail "export: the first run failed"
"$BIN" init --arch diff --dim 64 --layers 1 --heads 2 --out "$TMP/other.safetensors" >/dev/null 2>&1 ||
  fail "init of a second model failed"
cp "$TMP/hf/config.json" "$TMP/config.before"
limited "export --format hf" 10000 "$TMP/hf/model.safetensors" \
  "$BIN" export --format hf --model "$TMP/other.safetensors" --out "$TMP/hf"
if cmp -s "$TMP/hf/config.json" "$TMP/config.before"; then pass "export: config.json unchanged"
else fail "export: config.json changed while the weights were not written"; fi

# 6b. a sharded export (--type bf16 --shard-size) over an earlier one of another shard count, the disk full
#     while writing shard 2 (shard 1, 4 kB of embeddings, fits under the limit; shard 2, one 8 kB q_proj,
#     does not): every file of the folder as it was, no temporary folder left
"$BIN" init --arch diff --dim 64 --layers 1 --heads 2 --vocab 32 --ffn 512 --out "$TMP/wide.safetensors" \
  >/dev/null 2>&1 || fail "init of a third model failed"
"$BIN" export --format hf --type bf16 --shard-size 20000 --model "$TMP/other.safetensors" --out "$TMP/hfs" \
  >/dev/null 2>&1 || fail "export: the first sharded run failed"
snapshot() { (cd "$1" && for f in *; do echo "$f $(cksum <"$f")"; done); }
snapshot "$TMP/hfs" >"$TMP/hfs.before"
err=$(prlimit --fsize=6000 "$BIN" export --format hf --type bf16 --shard-size 5000 --model "$TMP/wide.safetensors" \
  --out "$TMP/hfs" 2>&1 >/dev/null)
rc=$?
left=$(find "$TMP" -maxdepth 1 -name 'hfs.tmp*' | wc -l)
if [ "$rc" -gt 128 ]; then fail "export --shard-size: killed by a signal (exit $rc)"
elif [ "$rc" -eq 0 ]; then fail "export --shard-size: succeeded under a 6000-byte limit"
elif ! echo "$err" | grep -q "model-00002-of-000.*File too large"; then fail "export --shard-size: not at shard 2: $err"
elif ! snapshot "$TMP/hfs" | cmp -s - "$TMP/hfs.before"; then fail "export --shard-size: the folder changed: $(ls "$TMP/hfs")"
elif [ "$left" -ne 0 ]; then fail "export --shard-size: $left temporary folder(s) left"
else pass "export --shard-size: exit $rc at shard 2, \"$(echo "$err" | tail -1 | cut -c1-150)\", the folder intact"; fi

# 7. a kill -9 mid-checkpoint leaves train_state.safetensors.tmp.<pid>; the
#    next checkpoint of the run removes those of processes that are gone
dead=$(bash -c 'echo $$')
echo partial > "$TMP/run/train_state.safetensors.tmp.$dead"
echo partial > "$TMP/run/model.safetensors.tmp.$dead"
"$BIN" train --steps 6 --save-every 2 --eval-every 0 --log-every 1 --data "$TMP/corpus.txt" --out "$TMP/run" --resume \
  >/dev/null 2>&1 || fail "train --resume after the size limit failed"
left=$(find "$TMP/run" -name '*.tmp.*' | wc -l)
if [ "$left" -eq 0 ]; then pass "stale temporaries of a dead process removed by the next checkpoint"
else fail "$left stale temporaries left in the run folder"; fi

# 8. a prepare killed mid-shard leaves .train_NNNNNN.bin.tmp.<pid>; the next
#    prepare into that folder removes those of processes that are gone and
#    publishes only its own shards
mkdir -p "$TMP/shards2"
echo partial > "$TMP/shards2/.train_000007.bin.tmp.$dead"
echo partial > "$TMP/shards2/.val_000000.bin.tmp.$dead"
echo keep > "$TMP/shards2/notes.tmp.txt"
"$BIN" prepare --tokenizer "$TOK" --in "$TMP/corpus.txt" --out "$TMP/shards2" --quiet >/dev/null 2>&1 || fail "prepare into a folder with stale temporaries failed"
left=$(find "$TMP/shards2" -name '.*.tmp.*' | wc -l)
if [ "$left" -eq 0 ] && [ -e "$TMP/shards2/notes.tmp.txt" ] && [ -e "$TMP/shards2/train_000000.bin" ]; then
  pass "prepare removes the shard temporaries of a dead prepare, and nothing else"
else fail "prepare left $left stale shard temporaries (or removed another file): $(ls -A "$TMP/shards2")"; fi

finish
