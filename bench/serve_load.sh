#!/usr/bin/env bash
# A load run of diffattn serve (issue 34): N requests (2,000), C at a time
# (32), a tenth of them malformed, over --max-body, or dropped mid-stream
# (bench/serve_load.py). Reports: no crash, every well-formed request
# answered, RSS after the first 200 requests against its peak after them,
# latency percentiles.
#
#   bench/serve_load.sh [BINARY]              (default build/diffattn)
#
# Environment: MODEL (default: a small q8_0 model made here, dim 256, 2 layers,
# byte vocabulary, so that the run is about the server), N, C, PARALLEL (8);
# ABANDON=1: one request in twenty a whole answer whose client hangs up; TERM_AT=K:
# SIGTERM once K requests are done (serve_load.py); SLOW=1: 1,100 slow
# connections (550 silent, 550 sending a header byte every 3 s) held against the
# server round after round while the load runs (tests/serve_hostile.py flood),
# each round's /health time printed. Sanitizer reports in the server's log are
# printed (a build with -DDA_SANITIZE=ON).
set -euo pipefail
BIN=$(realpath "${1:-build/diffattn}")
N=${N:-2000}
C=${C:-32}
PARALLEL=${PARALLEL:-8}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset OMP_WAIT_POLICY OMP_NUM_THREADS
MODEL=${MODEL:-}
if [[ -z $MODEL ]]; then
  "$BIN" init --dim 256 --layers 2 --heads 4 --seq 256 --out "$T/m.safetensors" >/dev/null
  "$BIN" quantize --model "$T/m.safetensors" --type q8_0 --out "$T/m.gguf" >/dev/null
  MODEL=$T/m.gguf
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --model "$MODEL" --port "$port" --parallel "$PARALLEL" --max-body 65536 2>"$T/serve.log" &
spid=$!
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.2; kill -0 $spid || { cat "$T/serve.log"; exit 1; }; done
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc); model $MODEL; $PARALLEL slots"
rc=0
TERM_AT=${TERM_AT:-0}
if [[ ${SLOW:-0} == 1 ]]; then
  (while kill -0 $spid 2>/dev/null && [[ ! -e $T/load.done ]]; do
     python3 "$(dirname "$0")/../tests/serve_hostile.py" flood "$port" 550 550 12 >> "$T/flood.jsonl" 2>/dev/null || break
   done) &
  fpid=$!
fi
python3 "$(dirname "$0")/serve_load.py" "$port" "$spid" "$N" "$C" 65536 "${ABANDON:-0}" "$TERM_AT" || rc=$?
if [[ ${SLOW:-0} == 1 ]]; then
  touch "$T/load.done"
  wait $fpid || true
  python3 - "$T/flood.jsonl" <<'PY'
import json, sys
rounds = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("slow connections: %d rounds of 1,100 held; /health (status, s): %s; closed by the server %s of 1,100 a round" % (
    len(rounds), [(r.get("health_status"), r.get("health_s")) for r in rounds],
    [r["silent"]["closed"] + r["trickle"]["closed"] for r in rounds if "silent" in r]))
PY
fi
if [[ $TERM_AT == 0 ]]; then
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^diffattn_(requests_total|generated|prompt|decode_steps|slots_busy|queue)'
  kill -TERM $spid
fi
wait $spid && echo "server exited 0 after SIGTERM" || { echo "server exit code $?"; rc=1; }
grep -E '^serve: (stopping|stopped|[0-9]+ answers)' "$T/serve.log" || true
if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/serve.log"; then
  grep -E -A20 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/serve.log" | head -80
  rc=1
else
  echo "no sanitizer report in the server's log"
fi
exit $rc
