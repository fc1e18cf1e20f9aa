#!/usr/bin/env bash
# diffattn serve's HTTP layer under hostile clients (tests/serve_hostile.py):
# 2,000 connections held while /health answers (no select() ceiling); 1,100
# silent or trickling connections closed after --request-timeout while /health
# answers; smuggling (Content-Length twice, or beside chunked) answered 400 or
# closed, never a second request read from the body; an oversized body's 413
# read by Node's fetch; the API key's scheme in any case, the key exact.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
HOSTILE="python3 $(dirname "$0")/serve_hostile.py"

"$BIN" init --dim 32 --layers 1 --heads 2 --seq 64 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"

# json FILE EXPR: EXPR of the JSON object r in FILE
json() { python3 -c "import json,sys; r = json.load(open(sys.argv[1])); print($2)" "$1"; }

# ---------------------------------------------------------------- 2,000 connections held
start_server held --model "$TMP/m.safetensors" --request-timeout 60 || { fail "the server starts"; finish; }
$HOSTILE flood "$PORT" 2000 0 4 > "$TMP/held.json"
if grep -q '"skip"' "$TMP/held.json"; then
  echo "skip 2,000 connections: $(cat "$TMP/held.json")"
else
  check "/health answers 200 within 5 s while 2,000 idle connections are held ($(json "$TMP/held.json" "r['health_s']") s)" \
    [ "$(json "$TMP/held.json" "r['health_status'] == 200 and r['health_s'] < 5")" = True ]
  check "none of the 2,000 is closed within its --request-timeout of 60 s" \
    [ "$(json "$TMP/held.json" "r['silent']['closed']")" = 0 ]
fi
stop_server

# ---------------------------------------------------------------- 1,100 slow connections
# Half send nothing, half a header byte every 3 s (each byte restarts libmicrohttpd's
# idle timeout): --request-timeout (10 s) bounds the whole request.
start_server slow --model "$TMP/m.safetensors" || { fail "the server starts"; finish; }
$HOSTILE flood "$PORT" 550 550 14 > "$TMP/slow.json"
if grep -q '"skip"' "$TMP/slow.json"; then
  echo "skip 1,100 connections: $(cat "$TMP/slow.json")"
else
  check "/health answers 200 within 12 s of a flood of 1,100 slow connections ($(json "$TMP/slow.json" "r['health_s']") s)" \
    [ "$(json "$TMP/slow.json" "r['health_status'] == 200 and r['health_s'] < 12")" = True ]
  for kind in silent trickle; do
    check "the 550 $kind connections are closed 10 to 13 s after they open ($(json "$TMP/slow.json" "r['$kind']"))" \
      [ "$(json "$TMP/slow.json" "r['$kind']['closed'] == 550 and r['$kind']['first_close_s'] > 9.5 and r['$kind']['last_close_s'] < 13")" = True ]
  done
fi
out=$($HOSTILE raw "$PORT" 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n')
check "a kept-alive connection stays open for its next request (got: $out)" [ "$out" = "200 OPEN" ]
stop_server
start_server short --model "$TMP/m.safetensors" --request-timeout 2 || { fail "the server starts"; finish; }
out=$($HOSTILE raw "$PORT" 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n')
check "a kept-alive connection is closed --request-timeout (2 s) after its answer (got: $out)" [ "$out" = "200 EOF" ]
out=$($HOSTILE raw "$PORT" 'POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"content"')
check "a body that stops short is closed unanswered after --request-timeout (got: $out)" [ "$out" = " EOF" ]
stop_server

# ---------------------------------------------------------------- request smuggling (RFC 9112 section 6.3)
start_server frame --model "$TMP/m.safetensors" || { fail "the server starts"; finish; }
smuggled='GET /health HTTP/1.1\r\nHost: x\r\n\r\n'
out=$($HOSTILE raw "$PORT" "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\nContent-Length: 60\r\n\r\n{\"content\":\"ab\"}\n$smuggled")
check "two Content-Length headers that disagree: 400, closed, the GET after the body unanswered (got: $out)" \
  [ "$out" = "400 EOF" ]
out=$($HOSTILE raw "$PORT" "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\nContent-Length: 17\r\n\r\n{\"content\":\"ab\"}\n")
check "two Content-Length headers that agree: served (got: $out)" [ "$out" = "200 OPEN" ]
out=$($HOSTILE raw "$PORT" "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"content\":\"ab\"}\r\n0\r\n\r\n$smuggled")
check "Content-Length beside chunked: served, then closed, the GET after the body unanswered (got: $out)" \
  [ "$out" = "200 EOF" ]
out=$($HOSTILE raw "$PORT" "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nxxxx$smuggled")
check "a Transfer-Encoding other than chunked: 400, closed (got: $out)" [ "$out" = "400 EOF" ]
out=$($HOSTILE raw "$PORT" "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"content\":\"ab\"}\r\n0\r\n\r\n$smuggled")
check "a chunked body alone: served, and the next request on the connection too (got: $out)" [ "$out" = "200 200 OPEN" ]
stop_server

# ---------------------------------------------------------------- 413 and 401 reach Node's fetch
start_server node --model "$TMP/m.safetensors" --max-body 1000000 --api-key sekrit || { fail "the server starts"; finish; }
if command -v node >/dev/null; then
  FETCH="node $(dirname "$0")/serve_fetch.mjs $PORT"
  out=$($FETCH 3000000 sekrit)
  check "Node's fetch reads the 413 of a 3 MB body over --max-body 1000000 (got: $out)" [ "$out" = "413 invalid_request_error" ]
  # the client still sending when the server answers: a server that answers and closes resets the connection
  out=$(for k in 1 2 3; do $FETCH 3000000 sekrit paced; done | sort | uniq -c | xargs)
  check "Node's fetch reads the 413 of a 3 MB body sent in pieces, 3 times of 3 (got: $out)" \
    [ "$out" = "3 413 invalid_request_error" ]
  out=$($FETCH 3000000 wrong paced)
  check "Node's fetch reads the 401 of a 3 MB body with a wrong key (got: $out)" [ "$out" = "401 authentication_error" ]
else
  fail "413 in Node" "node is missing"
fi
s=$(curl -s -o "$TMP/resp" -w '%{http_code}' -H 'Expect: 100-continue' -H 'Authorization: Bearer sekrit' \
  --data-binary @<(head -c 3000000 /dev/zero | tr '\0' x) "http://127.0.0.1:$PORT/v1/completions")
check "curl waiting for 100 Continue gets the 413 at once (got: $s)" [ "$s" = 413 ]

# ---------------------------------------------------------------- the API key
U=http://127.0.0.1:$PORT
models() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: $1" "$U/v1/models"; }
check "\"bearer KEY\" (the scheme in lower case, RFC 7235) is accepted" [ "$(models 'bearer sekrit')" = 200 ]
check "\"BEARER KEY\" is accepted" [ "$(models 'BEARER sekrit')" = 200 ]
check "a prefix of the key is refused" [ "$(models 'Bearer sekri')" = 401 ]
check "the key and more is refused" [ "$(models 'Bearer sekritt')" = 401 ]
check "another scheme is refused" [ "$(models 'Basic sekrit')" = 401 ]
check "the scheme glued to the key is refused" [ "$(models 'Bearersekrit')" = 401 ]
stop_server
check "the server exits 0 on SIGTERM" [ "$SRC" = 0 ]

finish
