#!/usr/bin/env bash
# Resume equals the uninterrupted run, bit for bit at a fixed thread count:
# after --stop-at, after SIGINT (Ctrl-C), after SIGKILL at a random moment, and
# after a final checkpoint whose model file could not be written.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=2

# A small corpus from the repository's own docs and sources (always present).
cat include/*.h include/diffattn/*.h src/*/*.c src/*/*.c > "$TMP/corpus.txt"
MODEL=(--dim 64 --layers 2 --heads 2 --seq 64 --batch 4)
RUN=(--data "$TMP/corpus.txt" --steps 40 --warmup 2 --lr 3e-3 --log-every 1 --eval-every 4 --eval-batches 1 --save-every 4)
losses() { grep -o '"step":[0-9]*,"train_loss":[^,]*' "$1" | sort -t: -k2 -n; }

for arch in diff softmax nsa moba; do
  # NSA with blocks small enough for 64 tokens: compressed blocks, a choice among 4, a window under T;
  # MoBA choosing 3 of up to 8 blocks (its fields come back from the checkpoint)
  case $arch in
    nsa) ARCH=(--arch nsa --nsa-block 8 --nsa-stride 4 --nsa-select 16 --nsa-topn 3 --nsa-window 16) ;;
    moba) ARCH=(--arch moba --moba-block 8 --moba-topk 3) ;;
    *) ARCH=(--arch $arch) ;;
  esac
  "$BIN" train "${ARCH[@]}" "${MODEL[@]}" "${RUN[@]}" --out "$TMP/full_$arch" 2>/dev/null || { fail "full run $arch"; continue; }

  # 1. --stop-at then --resume
  "$BIN" train "${ARCH[@]}" "${MODEL[@]}" "${RUN[@]}" --out "$TMP/stop_$arch" --stop-at 8 2>/dev/null
  "$BIN" train "${RUN[@]}" --out "$TMP/stop_$arch" --resume 2>/dev/null
  if cmp -s "$TMP/full_$arch/model.safetensors" "$TMP/stop_$arch/model.safetensors" &&
     diff <(losses "$TMP/full_$arch/metrics.jsonl") <(losses "$TMP/stop_$arch/metrics.jsonl") >/dev/null; then
    pass "resume after --stop-at 8 is bit-identical ($arch)"
  else fail "resume after --stop-at 8 is bit-identical ($arch)"; fi

  # 2. SIGINT mid-run: exit 130, a checkpoint, and an identical finish
  "$BIN" train "${ARCH[@]}" "${MODEL[@]}" "${RUN[@]}" --save-every 0 --out "$TMP/int_$arch" 2>/dev/null &
  pid=$!
  for _ in $(seq 1000); do grep -q '"step":3,' "$TMP/int_$arch/metrics.jsonl" 2>/dev/null && break; sleep 0.01; done
  kill -INT $pid; wait $pid; rc=$?
  if [[ $rc == 130 && -f "$TMP/int_$arch/train_state.safetensors" ]]; then
    "$BIN" train "${RUN[@]}" --save-every 0 --out "$TMP/int_$arch" --resume 2>/dev/null || true
    if cmp -s "$TMP/full_$arch/model.safetensors" "$TMP/int_$arch/model.safetensors"; then
      pass "Ctrl-C saves a checkpoint and resume finishes identically ($arch, rc $rc)"
    else fail "Ctrl-C then resume is bit-identical ($arch)"; fi
  else fail "Ctrl-C exits 130 with a checkpoint ($arch, rc $rc)"; fi

  # 3. SIGKILL after the first checkpoint: the last checkpoint is intact and resumes exactly
  "$BIN" train "${ARCH[@]}" "${MODEL[@]}" "${RUN[@]}" --out "$TMP/kill_$arch" 2>/dev/null &
  pid=$!
  for _ in $(seq 1000); do grep -q '"step":6,' "$TMP/kill_$arch/metrics.jsonl" 2>/dev/null && break; sleep 0.01; done
  kill -KILL $pid; wait $pid 2>/dev/null
  last=$(grep -o '"step":[0-9]*' "$TMP/kill_$arch/metrics.jsonl" | tail -1)
  echo "     killed after step ${last#*:} of 40; resuming from its last checkpoint"
  "$BIN" train "${RUN[@]}" --out "$TMP/kill_$arch" --resume 2>/dev/null
  if cmp -s "$TMP/full_$arch/model.safetensors" "$TMP/kill_$arch/model.safetensors" &&
     diff <(losses "$TMP/full_$arch/metrics.jsonl") <(losses "$TMP/kill_$arch/metrics.jsonl") >/dev/null; then
    pass "SIGKILL then resume reproduces the loss curve and final model ($arch)"
  else fail "SIGKILL then resume reproduces the loss curve and final model ($arch)"; fi
done

# 4. The final checkpoint's model file cannot be written (a directory stands
# in its place): the error names it, the resume point stays the step before,
# and once the way is clear --resume finishes identically.
D=$TMP/blocked
"$BIN" train "${MODEL[@]}" "${RUN[@]}" --out "$D" --stop-at 8 2>/dev/null
rm -f "$D/model.safetensors" && mkdir "$D/model.safetensors"
expect_error "a model file that cannot be written is an error naming it" "model.safetensors" \
  "$BIN" train "${RUN[@]}" --save-every 0 --out "$D" --resume
rmdir "$D/model.safetensors"
"$BIN" train "${RUN[@]}" --out "$D" --resume 2>/dev/null
check "  and --resume retrains from the last committed checkpoint to the same model" \
  cmp -s "$TMP/full_diff/model.safetensors" "$D/model.safetensors"

# The model file written by train loads, and info reports it.
if "$BIN" info --model "$TMP/full_diff/model.safetensors" | grep -q "lambda"; then pass "info on a trained model"; else fail "info on a trained model"; fi
finish
