#!/usr/bin/env bash
# diffattn serve's continuous batching: total decoding tokens/s with 1, 2, 4
# and 8 slots busy, for the idle machine. Each round starts the server with
# --parallel P and sends P greedy requests at once (a one-token prompt,
# GEN tokens each, ignore_eos); tokens/s = P * GEN / the wall time of the
# round, and the ratio to one slot. The target (issue 34): 4 slots >= 2.5x
# one slot on the 220 M q8_0 model.
#
#   bench/serve_throughput.sh [BINARY]         (default build/diffattn)
#
# Environment: MODEL (a model file; default: the 220 M Llama-shaped softmax
# model of bench/decode_speed.sh, dim 1024, 12 layers, vocab 32,000, random
# weights, made with `diffattn init` and `quantize --type q8_0`), SLOTS
# ("1 2 4 8"), GEN (128), ROUNDS (2: the best is kept), KEEP (a folder to keep
# the model in), SHAPE=tiny (a small model that checks the script in seconds).
# Check /proc/loadavg is near zero first.
set -euo pipefail
BIN=$(realpath "${1:-build/diffattn}")
SLOTS=${SLOTS:-1 2 4 8}
GEN=${GEN:-128}
ROUNDS=${ROUNDS:-2}
T=${KEEP:-$(mktemp -d)}
mkdir -p "$T"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$T"' EXIT
unset OMP_WAIT_POLICY OMP_NUM_THREADS
case ${SHAPE:-220m} in
220m) ARGS=(--arch softmax --dim 1024 --layers 12 --heads 8 --vocab 32000 --ffn 2816) ;;
tiny) ARGS=(--arch softmax --dim 256 --layers 2 --heads 4 --vocab 1000 --ffn 768) ;;
*) echo "SHAPE must be 220m or tiny" >&2; exit 2 ;;
esac
MODEL=${MODEL:-}
if [[ -z $MODEL ]]; then
  MODEL=$T/serve_${SHAPE:-220m}.q8_0.gguf
  [[ -f $MODEL ]] || {
    "$BIN" init "${ARGS[@]}" --seq 1024 --rope-freq llama --out "$T/m.safetensors" >/dev/null
    "$BIN" quantize --model "$T/m.safetensors" --type q8_0 --out "$MODEL" >/dev/null
  }
fi
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc); model $MODEL; $GEN tokens a request"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=""
printf '%6s %12s %10s\n' slots "tokens/s" "x 1 slot"
for P in $SLOTS; do
  "$BIN" serve --model "$MODEL" --port "$port" --parallel "$P" --ctx $((GEN + 16)) 2>"$T/serve.log" &
  spid=$!
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.2; kill -0 $spid || exit 1; done
  best=0
  for _ in $(seq "$ROUNDS"); do
    t0=$(date +%s.%N)
    pids=()
    for i in $(seq "$P"); do
      curl -s "http://127.0.0.1:$port/v1/completions" -o /dev/null \
        -d "{\"prompt\":[$((i + 10))],\"max_tokens\":$GEN,\"temperature\":0,\"ignore_eos\":true}" &
      pids+=($!)
    done
    wait "${pids[@]}"
    t1=$(date +%s.%N)
    tps=$(python3 -c "print('%.1f' % ($P * $GEN / ($t1 - $t0)))")
    best=$(python3 -c "print(max($best, $tps))")
  done
  kill -TERM $spid; wait $spid || true
  [[ -n $base ]] || base=$best
  printf '%6s %12s %10s\n' "$P" "$best" "$(python3 -c "print('%.2f' % ($best / $base))")"
done
