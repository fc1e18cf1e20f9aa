#!/usr/bin/env bash
# A full disk during a write, simulated with a file size limit (prlimit
# --fsize: writes past it fail with EFBIG, as on a full disk, once SIGXFSZ is
# ignored): every writer -- a training checkpoint, quantize, prepare, the npy
# export of logits, the ids export of encode, the text of decode, export --format hf -- must
# exit with a clear error
# (not be killed by SIGXFSZ, exit 153), leave the previous file byte for byte
# and leave no temporary behind. And a temporary left by a process killed
# mid-write is removed by the next write of that file.
set -u
BIN=${1:-build/diffattn}
export OMP_NUM_THREADS=1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0; passed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
command -v prlimit >/dev/null || { echo "prlimit (util-linux) is missing"; exit 1; }

cat include/*.h include/diffattn/*.h src/io/*.c > "$T/corpus.txt"
TOK=tests/fuzz/corpus/tokenizer_json/strings.json

# limited NAME LIMIT FILE CMD...: runs CMD under a file size limit of LIMIT
# bytes, expecting it to fail with a message and to leave FILE as it was.
limited() {
  local name=$1 limit=$2 file=$3
  shift 3
  cp "$file" "$T/before"
  local err rc
  err=$(prlimit --fsize="$limit" "$@" 2>&1 >/dev/null)
  rc=$?
  local tmps
  tmps=$(find "$(dirname "$file")" -name '*.tmp*' | wc -l)
  if [ "$rc" -eq 153 ] || [ "$rc" -gt 128 ]; then
    bad "$name: killed by a signal (exit $rc) instead of reporting the error"
  elif [ "$rc" -eq 0 ]; then
    bad "$name: succeeded under a $limit-byte file size limit"
  elif ! echo "$err" | grep -q "File too large"; then
    bad "$name: the message does not say what happened: $err"
  elif ! cmp -s "$file" "$T/before"; then
    bad "$name: the previous $(basename "$file") was changed"
  elif [ "$tmps" -ne 0 ]; then
    bad "$name: $tmps temporary file(s) left in $(dirname "$file")"
  else
    ok "$name: exit $rc, \"$(echo "$err" | tail -1 | cut -c1-150)\", previous file intact"
  fi
}

# 1. a training checkpoint: a finished run, resumed for more steps under a
#    limit smaller than its training state
"$BIN" train --arch softmax --dim 32 --layers 1 --heads 2 --seq 16 --batch 2 --steps 4 --warmup 1 \
  --eval-every 0 --save-every 2 --log-every 1 --data "$T/corpus.txt" --out "$T/run" 2>/dev/null ||
  { bad "train: the first run failed"; }
limited "train checkpoint" 100000 "$T/run/train_state.safetensors" \
  "$BIN" train --steps 8 --save-every 2 --eval-every 0 --log-every 1 --data "$T/corpus.txt" --out "$T/run" --resume

# 2. quantize over an existing GGUF
"$BIN" quantize --model "$T/run/model.safetensors" --type q8_0 --out "$T/q/model.gguf" >/dev/null 2>&1 ||
  { mkdir -p "$T/q" && "$BIN" quantize --model "$T/run/model.safetensors" --type q8_0 --out "$T/q/model.gguf" >/dev/null 2>&1; } ||
  bad "quantize: the first run failed"
limited "quantize" 10000 "$T/q/model.gguf" \
  "$BIN" quantize --model "$T/run/model.safetensors" --type q8_0 --out "$T/q/model.gguf"

# 3. the npy export of logits, over an existing one
mkdir -p "$T/npy"
printf '1 2 3 4 5 6 7 8\n' > "$T/ids_in.txt"
"$BIN" logits --model "$T/run/model.safetensors" --ids "$T/ids_in.txt" --out "$T/npy/logits.npy" 2>/dev/null ||
  bad "logits: the first run failed"
limited "logits --out .npy" 2000 "$T/npy/logits.npy" \
  "$BIN" logits --model "$T/run/model.safetensors" --ids "$T/ids_in.txt" --out "$T/npy/logits.npy"

# 4. the ids export of encode, over an existing one
mkdir -p "$T/ids"
echo "1 2 3" > "$T/ids/ids.txt"
limited "encode --out ids" 4000 "$T/ids/ids.txt" \
  "$BIN" encode --tokenizer "$TOK" --in "$T/corpus.txt" --out "$T/ids/ids.txt"

# 4b. the text export of decode, over an existing one
echo "previous text" > "$T/ids/text.txt"
"$BIN" encode --tokenizer "$TOK" --in "$T/corpus.txt" --out "$T/ids/all.txt" 2>/dev/null || bad "encode for decode failed"
limited "decode --out text" 4000 "$T/ids/text.txt" \
  "$BIN" decode --tokenizer "$TOK" --ids "$T/ids/all.txt" --out "$T/ids/text.txt"

# 5. prepare: no shard may be published, nor any temporary left
err=$(prlimit --fsize=20000 "$BIN" prepare --tokenizer "$TOK" --in "$T/corpus.txt" --out "$T/shards" --quiet 2>&1 >/dev/null)
rc=$?
left=$(find "$T/shards" -name '*.bin*' 2>/dev/null | wc -l)
if [ "$rc" -gt 128 ]; then bad "prepare: killed by a signal (exit $rc)"
elif [ "$rc" -eq 0 ]; then bad "prepare: succeeded under a 20000-byte limit"
elif ! echo "$err" | grep -q "File too large"; then bad "prepare: unclear message: $err"
elif [ "$left" -ne 0 ]; then bad "prepare: $left shard file(s) left behind"
else ok "prepare: exit $rc, \"$(echo "$err" | tail -1 | cut -c1-150)\", no shard left"; fi

# 6. export --format hf over an earlier export, of another model: neither
#    the weights nor config.json (staged first, published last) may change
"$BIN" export --format hf --model "$T/run/model.safetensors" --out "$T/hf" >/dev/null 2>&1 ||
  bad "export: the first run failed"
"$BIN" init --arch diff --dim 64 --layers 1 --heads 2 --out "$T/other.safetensors" >/dev/null 2>&1 ||
  bad "init of a second model failed"
cp "$T/hf/config.json" "$T/config.before"
limited "export --format hf" 10000 "$T/hf/model.safetensors" \
  "$BIN" export --format hf --model "$T/other.safetensors" --out "$T/hf"
if cmp -s "$T/hf/config.json" "$T/config.before"; then ok "export: config.json unchanged"
else bad "export: config.json changed while the weights were not written"; fi

# 7. a kill -9 mid-checkpoint leaves train_state.safetensors.tmp.<pid>; the
#    next checkpoint of the run removes those of processes that are gone
dead=$(bash -c 'echo $$')
echo partial > "$T/run/train_state.safetensors.tmp.$dead"
echo partial > "$T/run/model.safetensors.tmp.$dead"
"$BIN" train --steps 6 --save-every 2 --eval-every 0 --log-every 1 --data "$T/corpus.txt" --out "$T/run" --resume \
  >/dev/null 2>&1 || bad "train --resume after the size limit failed"
left=$(find "$T/run" -name '*.tmp.*' | wc -l)
if [ "$left" -eq 0 ]; then ok "stale temporaries of a dead process removed by the next checkpoint"
else bad "$left stale temporaries left in the run folder"; fi

# 8. a prepare killed mid-shard leaves .train_NNNNNN.bin.tmp.<pid>; the next
#    prepare into that folder removes those of processes that are gone and
#    publishes only its own shards
mkdir -p "$T/shards2"
echo partial > "$T/shards2/.train_000007.bin.tmp.$dead"
echo partial > "$T/shards2/.val_000000.bin.tmp.$dead"
echo keep > "$T/shards2/notes.tmp.txt"
"$BIN" prepare --tokenizer "$TOK" --in "$T/corpus.txt" --out "$T/shards2" --quiet >/dev/null 2>&1 || bad "prepare into a folder with stale temporaries failed"
left=$(find "$T/shards2" -name '.*.tmp.*' | wc -l)
if [ "$left" -eq 0 ] && [ -e "$T/shards2/notes.tmp.txt" ] && [ -e "$T/shards2/train_000000.bin" ]; then
  ok "prepare removes the shard temporaries of a dead prepare, and nothing else"
else bad "prepare left $left stale shard temporaries (or removed another file): $(ls -A "$T/shards2")"; fi

echo "$passed passed, $fail failed"
[ "$fail" -eq 0 ]
