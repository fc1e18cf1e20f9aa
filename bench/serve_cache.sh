#!/usr/bin/env bash
# diffattn serve's prompt cache (docs/serving.md, "Prompt cache"; issue 46), with the client
# bench/serve_cache.py:
#   1. time to first token of a 1,500-token prompt on the 220 M q8_0 model (bench/serve_throughput.sh's
#      shape, --seq 2048), cold, cached (the same 1,500-token start, another end) and with cache_prompt
#      false; ROUNDS rounds, medians and the ratio cached / cold (the target: at most 1/4);
#   2. CONVS (8) conversations of TURNS (6) turns at once on 4 slots, with the cache and without
#      (cache_prompt false, a fresh server each): time to first token p50 / p90 and the total time. This
#      one runs on the 220 M shape with a byte vocabulary (no tokenizer: the answers' bytes are their ids, so
#      each goes back into the history exactly as generated).
#
#   bench/serve_cache.sh [BINARY]              (default build/diffattn)
#
# Environment: KEEP (a folder to keep the models in), ROUNDS (3), PREFIX (1500), CONVS (8), TURNS (6),
# PARTS ("ttft turns"), SHAPE=small (dim 512, 4 layers: for a loaded machine) or tiny (checks the script in
# seconds).
set -euo pipefail
BIN=$(realpath "${1:-build/diffattn}")
ROUNDS=${ROUNDS:-3}
PREFIX=${PREFIX:-1500}
CONVS=${CONVS:-8}
TURNS=${TURNS:-6}
PARTS=${PARTS:-ttft turns}
T=${KEEP:-$(mktemp -d)}
mkdir -p "$T"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$T"' EXIT
unset OMP_WAIT_POLICY OMP_NUM_THREADS
case ${SHAPE:-220m} in
220m) ARGS=(--arch softmax --dim 1024 --layers 12 --heads 8 --ffn 2816) ;;
small) ARGS=(--arch softmax --dim 512 --layers 4 --heads 8 --ffn 1408) ;;
tiny) ARGS=(--arch softmax --dim 128 --layers 2 --heads 4 --ffn 384) ;;
*) echo "SHAPE must be 220m, small or tiny" >&2; exit 2 ;;
esac
model() { # VOCAB: the q8_0 model of that vocabulary, made once in $T
  local m=$T/serve_${SHAPE:-220m}_v$1_s2048.q8_0.gguf
  [[ -f $m ]] || {
    "$BIN" init "${ARGS[@]}" --vocab "$1" --seq 2048 --rope-freq llama --out "$T/m.safetensors" >/dev/null
    "$BIN" quantize --model "$T/m.safetensors" --type q8_0 --out "$m" >/dev/null
    rm -f "$T/m.safetensors"
  }
  echo "$m"
}
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
spid=
start() { # MODEL: a server with 4 slots
  "$BIN" serve --model "$1" --port "$port" --parallel 4 --ctx 2048 2>"$T/serve.log" &
  spid=$!
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.2; kill -0 $spid || { cat "$T/serve.log"; exit 1; }; done
}
stop() { kill -TERM $spid; wait $spid || true; spid=; }
trap 'rc=$?; [[ -z $spid ]] || kill $spid 2>/dev/null || true; [[ -n ${KEEP:-} ]] || rm -rf "$T"; exit $rc' EXIT
PY=$(dirname "$0")/serve_cache.py
echo "# $(nproc) cores, $(date -u +%FT%TZ); $("$BIN" info --system 2>&1 | grep -E '^best level|OpenBLAS core' | tr -s ' ' | paste -sd';')"
if [[ " $PARTS " == *" ttft "* ]]; then
  m=$(model 32000)
  start "$m"
  echo "ttft: loadavg before $(cut -d' ' -f1-3 /proc/loadavg); $m, $PREFIX-token start + 16, max_tokens 1"
  python3 "$PY" ttft "$port" "$PREFIX" "$ROUNDS" 32000
  echo "ttft: loadavg after $(cut -d' ' -f1-3 /proc/loadavg)"
  stop
fi
if [[ " $PARTS " == *" turns "* ]]; then
  m=$(model 256)
  for cache in 1 0; do
    start "$m"
    echo "turns (cache_prompt $cache): loadavg before $(cut -d' ' -f1-3 /proc/loadavg); $m"
    python3 "$PY" turns "$port" "$CONVS" "$TURNS" "$cache"
    echo "turns (cache_prompt $cache): loadavg after $(cut -d' ' -f1-3 /proc/loadavg)"
    stop
  done
fi
