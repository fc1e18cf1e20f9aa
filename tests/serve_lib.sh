# Helpers of the serve tests (sourced after lib.sh): a server on a free port.
#   start_server NAME ARGS...   # diffattn serve ARGS on a random free port; waits for /health 200.
#                               # Sets PORT and SPID; its log is $TMP/NAME.log
#   stop_server                 # SIGTERM, then its exit code in SRC
#   post PATH JSON [CURL ARGS]  # the body in $TMP/resp, the status echoed
command -v curl >/dev/null || skip "curl is missing"
command -v python3 >/dev/null || skip "python3 is missing"

free_port() {
  python3 -c 'import socket,random
for _ in range(50):
    p = random.randint(20000, 60000); s = socket.socket()
    try: s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError: pass'
}

start_server() {
  local name=$1; shift
  PORT=$(free_port)
  "$BIN" serve --port "$PORT" "$@" >"$TMP/$name.log" 2>&1 &
  SPID=$!
  for _ in $(seq 1 300); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health") == 200 ]] && return 0
    kill -0 "$SPID" 2>/dev/null || { echo "server $name died: $(tail -5 "$TMP/$name.log")"; return 1; }
    sleep 0.1
  done
  echo "server $name never became healthy"; return 1
}

stop_server() {
  kill -TERM "$SPID" 2>/dev/null
  wait "$SPID"
  SRC=$?
}

post() {
  local path=$1 body=$2; shift 2
  curl -s -o "$TMP/resp" -w '%{http_code}' "http://127.0.0.1:$PORT$path" -H 'Content-Type: application/json' \
    "${AUTH[@]}" -d "$body" "$@"
}

# jq-like: py EXPR reads $TMP/resp as JSON (bytes kept through surrogateescape) into r and prints EXPR
py() {
  python3 -c "import json,sys
r = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8', 'surrogateescape'))
v = $1
sys.stdout.buffer.write((v if isinstance(v, str) else json.dumps(v)).encode('utf-8', 'surrogateescape'))" "$TMP/resp"
}
