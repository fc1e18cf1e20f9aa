#!/usr/bin/env bash
# diffattn serve's requests from queue to answer under hostile timing: clients
# that hang up on a whole (non-streamed) answer free their slot and queue
# places within a step or two; SIGTERM delivers every running answer, a large
# slowly read one included, and answers the queued requests 503 at once.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

# big enough that 4,000 tokens take seconds, so that an abandoned request would hold its slot
"$BIN" init --dim 128 --layers 4 --heads 2 --seq 4096 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"
AUTH=()
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | sed -n "s/^$1 //p"; }

# ---------------------------------------------------------------- abandoned whole answers
start_server abandon --model "$TMP/m.safetensors" --parallel 1 --ctx 4096 || { fail "the server starts"; finish; }
# three clients (two completions, one chat) send and hang up: one runs, two wait in the queue
python3 - "$PORT" <<'PY'
import json, socket, sys, time
port = int(sys.argv[1])
bodies = [('/v1/completions', {"prompt": "A", "max_tokens": 4000, "ignore_eos": True}),
          ('/v1/chat/completions', {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000, "ignore_eos": True}),
          ('/v1/completions', {"prompt": "B", "max_tokens": 4000, "ignore_eos": True})]
socks = []
for path, body in bodies:
    b = json.dumps(body).encode()
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' % (path.encode(), len(b), b))
    socks.append(s)
    time.sleep(0.1)
time.sleep(0.4)
for s in socks: s.close()
PY
t0=$(date +%s.%N)
for _ in $(seq 100); do [[ $(metric diffattn_slots_busy) == 0 && $(metric diffattn_queue_length) == 0 ]] && break; sleep 0.02; done
freed=$(python3 -c "print('%.2f' % ($(date +%s.%N) - $t0))")
made=$(metric diffattn_generated_tokens_total)
check "3 clients that hang up on whole answers free the slot and 2 queue places (in ${freed}s; ${made:-?} of 4,000 tokens made)" \
  [ "$(metric diffattn_slots_busy)" = 0 -a "$(metric diffattn_queue_length)" = 0 -a "${made:-4000}" -lt 4000 ]
s=$(post /v1/completions '{"prompt":"C","max_tokens":1}' -m 3)
check "a fresh request is answered at once after the hang-ups (status $s)" [ "$s" = 200 ]
stop_server
check "the server exits 0" [ "$SRC" = 0 ]

# ---------------------------------------------------------------- SIGTERM (clients: tests/serve_clients.py)
start_server running --model "$TMP/m.safetensors" --parallel 3 --ctx 4096 || { fail "the server starts"; finish; }
# answers of about 3 s of decoding (1,500 to 3,000 tokens in the Release build), so that SIGTERM finds them running
t0=$(date +%s.%N)
post /v1/completions '{"prompt":"w","max_tokens":64,"ignore_eos":true}' >/dev/null
N=$(python3 -c "print(int(min(3000, max(200, 3 * 64 / ($(date +%s.%N) - $t0)))))")
python3 "$(dirname "$0")/serve_clients.py" "$PORT" "$SPID" running "$N" > "$TMP/resp"
wait "$SPID"; SRC=$?
read -r big_s big_n big_pos p_s p_n < <(py "' '.join(str(x) for x in [r['big']['status'], r['big']['tokens'],
  r['big'].get('positions'), ','.join(str(r[k]['status']) for k in ('p1', 'p2')),
  ','.join(str(r[k]['tokens']) for k in ('p1', 'p2'))])")
check "SIGTERM: a large answer read slowly ($N tokens, echo, 20 alternatives a position) reaches its client whole (status $big_s, $big_n tokens, $big_pos positions)" \
  [ "$big_s" = 200 -a "$big_n" = "$N" -a "$big_pos" = $((N + 20)) ]
check "SIGTERM: the two other running answers reach their clients whole (status $p_s, $p_n tokens)" \
  [ "$p_s" = 200,200 -a "$p_n" = "$N,$N" ]
check "SIGTERM with every slot running: the server exits 0 once the answers are out (got $SRC)" [ "$SRC" = 0 ]

start_server queued --model "$TMP/m.safetensors" --parallel 1 --ctx 4096 || { fail "the server starts"; finish; }
python3 "$(dirname "$0")/serve_clients.py" "$PORT" "$SPID" queued "$N" > "$TMP/resp"
wait "$SPID"; SRC=$?
read -r run_s run_n q_s q_t < <(py "' '.join([str(r['run']['status']), str(r['run']['tokens']),
  ','.join(str(r[q]['status']) for q in ('q1', 'q2', 'q3')), str(max(r[q]['after_term'] for q in ('q1', 'q2', 'q3')))])")
check "SIGTERM: the 3 queued requests (completion, stream, chat) get 503 at once ($q_s, the last ${q_t}s after the signal)" \
  python3 -c "import sys; sys.exit(0 if '$q_s' == '503,503,503' and float('${q_t:-99}') < 2 else 1)"
check "SIGTERM: the running request finishes (status $run_s, $run_n of $N tokens) and the server exits 0 (got $SRC)" \
  [ "$run_s" = 200 -a "$run_n" = "$N" -a "$SRC" = 0 ]
finish
