#!/usr/bin/env bash
# Resume equals the uninterrupted run, bit for bit at a fixed thread count:
# after --stop-at, after SIGINT (Ctrl-C), and after SIGKILL at a random moment.
set -u
BIN=${1:-build/diffattn}
export OMP_NUM_THREADS=2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0; passed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

# A small corpus from the repository's own docs and sources (always present).
cat include/*.h include/diffattn/*.h src/*/*.c src/*/*.c > "$T/corpus.txt"
MODEL=(--dim 64 --layers 2 --heads 2 --seq 64 --batch 4)
RUN=(--data "$T/corpus.txt" --steps 40 --warmup 2 --lr 3e-3 --log-every 1 --eval-every 4 --eval-batches 1 --save-every 4)
losses() { grep -o '"step":[0-9]*,"train_loss":[^,]*' "$1" | sort -t: -k2 -n; }

for arch in diff softmax nsa; do
  # NSA with blocks small enough for 64 tokens: compressed blocks, a choice among 4, a window under T
  [[ $arch == nsa ]] && ARCH=(--arch nsa --nsa-block 8 --nsa-stride 4 --nsa-select 16 --nsa-topn 3 --nsa-window 16) ||
    ARCH=(--arch $arch)
  "$BIN" train "${ARCH[@]}" "${MODEL[@]}" "${RUN[@]}" --out "$T/full_$arch" 2>/dev/null || { bad "full run $arch"; continue; }

  # 1. --stop-at then --resume
  "$BIN" train "${ARCH[@]}" "${MODEL[@]}" "${RUN[@]}" --out "$T/stop_$arch" --stop-at 8 2>/dev/null
  "$BIN" train "${RUN[@]}" --out "$T/stop_$arch" --resume 2>/dev/null
  if cmp -s "$T/full_$arch/model.safetensors" "$T/stop_$arch/model.safetensors" &&
     diff <(losses "$T/full_$arch/metrics.jsonl") <(losses "$T/stop_$arch/metrics.jsonl") >/dev/null; then
    ok "resume after --stop-at 8 is bit-identical ($arch)"
  else bad "resume after --stop-at 8 is bit-identical ($arch)"; fi

  # 2. SIGINT mid-run: exit 130, a checkpoint, and an identical finish
  "$BIN" train "${ARCH[@]}" "${MODEL[@]}" "${RUN[@]}" --save-every 0 --out "$T/int_$arch" 2>/dev/null &
  pid=$!
  for _ in $(seq 1000); do grep -q '"step":3,' "$T/int_$arch/metrics.jsonl" 2>/dev/null && break; sleep 0.01; done
  kill -INT $pid; wait $pid; rc=$?
  if [[ $rc == 130 && -f "$T/int_$arch/train_state.safetensors" ]]; then
    "$BIN" train "${RUN[@]}" --save-every 0 --out "$T/int_$arch" --resume 2>/dev/null || true
    if cmp -s "$T/full_$arch/model.safetensors" "$T/int_$arch/model.safetensors"; then
      ok "Ctrl-C saves a checkpoint and resume finishes identically ($arch, rc $rc)"
    else bad "Ctrl-C then resume is bit-identical ($arch)"; fi
  else bad "Ctrl-C exits 130 with a checkpoint ($arch, rc $rc)"; fi

  # 3. SIGKILL after the first checkpoint: the last checkpoint is intact and resumes exactly
  "$BIN" train "${ARCH[@]}" "${MODEL[@]}" "${RUN[@]}" --out "$T/kill_$arch" 2>/dev/null &
  pid=$!
  for _ in $(seq 1000); do grep -q '"step":6,' "$T/kill_$arch/metrics.jsonl" 2>/dev/null && break; sleep 0.01; done
  kill -KILL $pid; wait $pid 2>/dev/null
  last=$(grep -o '"step":[0-9]*' "$T/kill_$arch/metrics.jsonl" | tail -1)
  echo "     killed after step ${last#*:} of 40; resuming from its last checkpoint"
  "$BIN" train "${RUN[@]}" --out "$T/kill_$arch" --resume 2>/dev/null
  if cmp -s "$T/full_$arch/model.safetensors" "$T/kill_$arch/model.safetensors" &&
     diff <(losses "$T/full_$arch/metrics.jsonl") <(losses "$T/kill_$arch/metrics.jsonl") >/dev/null; then
    ok "SIGKILL then resume reproduces the loss curve and final model ($arch)"
  else bad "SIGKILL then resume reproduces the loss curve and final model ($arch)"; fi
done

# The model file written by train loads, and info reports it.
if "$BIN" info --model "$T/full_diff/model.safetensors" | grep -q "lambda"; then ok "info on a trained model"; else bad "info on a trained model"; fi
echo "$passed passed, $fail failed"
[[ $fail == 0 ]]
