#!/usr/bin/env bash
# train --init MODEL: a run starts from a diffattn model, a Hugging Face Llama
# folder or a GGUF f16 (diffattn's and llama.cpp's own writer's) or bf16 with its
# weights and tokenizer and a fresh optimizer; a quantized model is refused in
# one line; every model flag but --seq is refused, named; and --init for 2N
# steps equals --init for N steps then --resume, bit for bit.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gguf_py_lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

# English text from Debian's licences (always installed)
: >"$TMP/text.txt"
for f in /usr/share/common-licenses/*; do
  [[ -f $f ]] && cat "$f" >>"$TMP/text.txt"
  (($(stat -c %s "$TMP/text.txt") > 200000)) && break
done
(($(stat -c %s "$TMP/text.txt") > 100000)) || { fail "could not gather 100 kB of text"; finish; }
# the value of KEY on the metrics line of step N
metric() { grep "\"step\":$2," "$1/metrics.jsonl" | grep -o "\"$3\":[^,}]*" | cut -d: -f2; }
losses() { grep -o '"step":[0-9]*,"train_loss":[^,]*' "$1/metrics.jsonl"; }

E=(--batch 4 --eval-batches 2 --eval-every 0 --log-every 1 --data "$TMP/text.txt")
# a softmax source with the Llama RoPE rule, as llama.cpp's writer takes it
ok "a softmax source trains" "$BIN" train --arch softmax --rope-freq llama --dim 64 --heads 2 --layers 2 --seq 64 \
  --steps 6 "${E[@]}" --out "$TMP/src"
S=$TMP/src/model.safetensors

# from a diffattn model: its weights (step 0 has the source's last validation loss), a fresh schedule
ok "--init a diffattn model" "$BIN" train --init "$S" --seq 64 --steps 3 --warmup 10 --lr 1e-3 "${E[@]}" \
  --out "$TMP/ft"
want=$(metric "$TMP/src" 6 val_loss) got=$(metric "$TMP/ft" 0 val_loss)
check "step 0 of the --init run has the source's last validation loss ($want)" [ -n "$want" -a "$want" == "$got" ]
check "a fresh schedule: step 1's lr is the first warmup step's (1e-4)" [ "$(metric "$TMP/ft" 1 lr)" == "0.0001" ]
ok "--init-from is the same flag" "$BIN" train --init-from "$S" --seq 64 --steps 1 "${E[@]}" --out "$TMP/ft2"
expect_one_line_error "--init and --init-from together" "give one" \
  "$BIN" train --init "$S" --init-from "$S" --seq 64 --steps 1 "${E[@]}" --out "$TMP/x"
expect_one_line_error "a window longer than the model's context" "at most 64" \
  "$BIN" train --init "$S" --seq 128 --steps 1 "${E[@]}" --out "$TMP/x"

# every model flag but --seq is refused, named
for flag in "--arch diff" "--dim 32" "--layers 3" "--heads 4" "--kv-heads 1" "--vocab 300" "--ffn 128" \
  "--head-dim 8" "--tie-embeddings" "--head-norm on" "--rope-theta 500000" "--window 16" "--lambda-hold 0.5"; do
  expect_one_line_error "${flag%% *} is refused with --init" "${flag%% *} cannot be set with --init" \
    "$BIN" train --init "$S" $flag --seq 64 --steps 1 "${E[@]}" --out "$TMP/x"
done

# a Hugging Face Llama folder (context 64)
ok "--init a Hugging Face Llama folder" "$BIN" train --init tests/fixtures/hf_llama_tied --seq 32 --steps 2 \
  "${E[@]}" --out "$TMP/hf"
has "its model keeps the folder's RoPE rule" "$("$BIN" info --model "$TMP/hf/model.safetensors")" "rope_freq      llama"

# a GGUF f16, written by diffattn (a llama GGUF) and by llama.cpp's gguf-py
ok "export the source as GGUF f16" "$BIN" export --model "$S" --format gguf --type f16 --out "$TMP/src.gguf"
ok "--init a GGUF f16" "$BIN" train --init "$TMP/src.gguf" --seq 64 --steps 2 "${E[@]}" --out "$TMP/gg"
got=$(metric "$TMP/gg" 0 val_loss)
check "its step-0 validation loss is the source's to f16 rounding ($got against $want)" \
  python3 -c "import sys; sys.exit(0 if abs($got - $want) < 1e-2 else 1)"
ok "export the source as GGUF bf16" "$BIN" export --model "$S" --format gguf --type bf16 --out "$TMP/src_bf16.gguf"
ok "--init a GGUF bf16" "$BIN" train --init "$TMP/src_bf16.gguf" --seq 64 --steps 1 "${E[@]}" --out "$TMP/gb"
if find_gguf_py; then
  if "$PY" tools/llama_gguf_write.py --gguf-py "$GP" --model "$S" --type f16 --out "$TMP/llama.gguf" >/dev/null; then
    ok "--init a GGUF f16 from llama.cpp's writer" "$BIN" train --init "$TMP/llama.gguf" --seq 64 --steps 2 \
      "${E[@]}" --out "$TMP/lg"
    check "its step-0 validation loss equals the diffattn GGUF's" [ "$(metric "$TMP/lg" 0 val_loss)" == "$got" ]
  else fail "llama_gguf_write.py"; fi
else echo "     (skipped, llama.cpp's writer: $GGUF_PY_MISSING)"; fi

# a quantized GGUF: one line, exit 1
ok "quantize the source" "$BIN" quantize --model "$S" --type q8_0 --out "$TMP/q8.gguf"
expect_one_line_error "a quantized model is refused" "is quantized" \
  "$BIN" train --init "$TMP/q8.gguf" --seq 64 --steps 1 "${E[@]}" --out "$TMP/x"

# the tokenizer: a model trained on BPE shards, as a Hugging Face folder and a GGUF; the run keeps it
ok "train a 512-token tokenizer" "$BIN" tokenizer train --vocab-size 512 --in "$TMP/text.txt" --out "$TMP/tok.json" \
  --quiet
ok "prepare shards" "$BIN" prepare --tokenizer "$TMP/tok.json" --in "$TMP/text.txt" --out "$TMP/shards" \
  --val-fraction 0.1 --quiet
T=(--batch 4 --eval-batches 2 --eval-every 0 --log-every 1 --data "$TMP/shards")
ok "a BPE model on the shards" "$BIN" train --arch softmax --dim 32 --heads 1 --layers 1 --seq 32 --steps 2 "${T[@]}" \
  --out "$TMP/bpe"
ok "export it as a Hugging Face folder" "$BIN" export --model "$TMP/bpe/model.safetensors" --format hf \
  --out "$TMP/bpe_hf"
ok "and as a GGUF f16" "$BIN" export --model "$TMP/bpe/model.safetensors" --format gguf --type f16 \
  --out "$TMP/bpe.gguf"
echo "The licensee may copy and distribute the Program." >"$TMP/line.txt"
want_ids=$("$BIN" encode --tokenizer "$TMP/tok.json" --in "$TMP/line.txt" 2>/dev/null)
for src in bpe_hf bpe.gguf; do
  ok "--init $src on its shards" "$BIN" train --init "$TMP/$src" --seq 32 --steps 2 "${T[@]}" --out "$TMP/r_$src"
  rm -f "$TMP/r_$src"/*.json "$TMP/r_$src"/vocab.bpe # the model file alone
  got_ids=$("$BIN" encode --model "$TMP/r_$src/model.safetensors" --in "$TMP/line.txt" 2>/dev/null)
  check "the run's model alone encodes with the tokenizer ($src)" [ -n "$want_ids" -a "$got_ids" == "$want_ids" ]
done
expect_one_line_error "byte text for a BPE model: prepare it with the model's tokenizer" "with the model's tokenizer" \
  "$BIN" train --init "$TMP/bpe_hf" --seq 32 --steps 1 "${E[@]}" --out "$TMP/x"
ok "another 512-token tokenizer" "$BIN" tokenizer train --vocab-size 512 --in tests/cli_resume.sh src/train/train.c \
  --out "$TMP/tok2.json" --quiet
ok "shards of it" "$BIN" prepare --tokenizer "$TMP/tok2.json" --in "$TMP/text.txt" --out "$TMP/shards2" \
  --val-fraction 0.1 --quiet
# the model's own tokenizer is the one the shards must match, whatever the format carried it
for src in bpe/model.safetensors bpe_hf bpe.gguf; do
  expect_one_line_error "shards of another tokenizer of the same size are refused ($src)" \
    "differs from the tokenizer of $TMP/$src" \
    "$BIN" train --init "$TMP/$src" --seq 32 --steps 1 "${T[@]:0:8}" --data "$TMP/shards2" --out "$TMP/x"
done

# --init for 8 steps equals --init for 4, then --resume (the same command) for 4 more
R=(--init "$S" --seq 64 --steps 8 --warmup 2 --lr 3e-3 --save-every 4 --eval-every 4 "${E[@]}")
ok "--init, 8 steps" "$BIN" train "${R[@]}" --out "$TMP/full"
"$BIN" train "${R[@]}" --out "$TMP/part" --stop-at 4 >/dev/null 2>&1
check "--stop-at 4 leaves a checkpoint at step 4" grep -q '"step":4,' "$TMP/part/metrics.jsonl"
ok "--resume to 8" "$BIN" train "${R[@]}" --out "$TMP/part" --resume
check "--init then --resume equals the uninterrupted run, bit for bit" \
  cmp -s "$TMP/full/model.safetensors" "$TMP/part/model.safetensors"
check "... and its loss curve" diff <(losses "$TMP/full") <(losses "$TMP/part")
differ() { ! cmp -s "$1" "$2"; }
check "the two runs moved away from the source" differ "$S" "$TMP/full/model.safetensors"
# the same from the Hugging Face folder with a tokenizer, on its shards
R=(--init "$TMP/bpe_hf" --seq 32 --steps 6 --warmup 2 --save-every 3 "${T[@]}")
ok "--init a folder with a tokenizer, 6 steps" "$BIN" train "${R[@]}" --out "$TMP/full2"
"$BIN" train "${R[@]}" --out "$TMP/part2" --stop-at 3 >/dev/null 2>&1
ok "--resume to 6" "$BIN" train "${R[@]}" --out "$TMP/part2" --resume
check "bit for bit, tokenizer included" cmp -s "$TMP/full2/model.safetensors" "$TMP/part2/model.safetensors"
finish
