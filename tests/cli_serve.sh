#!/usr/bin/env bash
# diffattn serve over HTTP (curl): health and models; greedy completions equal
# `sample --temperature 0`; prompt log-probabilities equal the log-softmax of
# `diffattn logits`; /tokenize, /detokenize, /metrics; every error status (400
# malformed and wrong types, 404 unknown model, 413 over --max-body, 400 a
# prompt over the context naming both numbers, 401 without the key); a client
# that hangs up frees its slot; SIGTERM during a stream finishes it and exits 0.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

"$BIN" init --dim 64 --layers 2 --heads 2 --seq 1024 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"
AUTH=(-H "Authorization: Bearer sekrit")
start_server main --model "$TMP/m.safetensors" --parallel 2 --ctx 200 --api-key sekrit --max-body 65536 \
  || { fail "the server starts"; finish; }
U=http://127.0.0.1:$PORT

# ---------------------------------------------------------------- basics
check "/health answers 200 once loaded" [ "$(curl -s -o /dev/null -w '%{http_code}' $U/health)" = 200 ]
s=$(curl -s -o "$TMP/resp" -w '%{http_code}' "${AUTH[@]}" $U/v1/models)
check "/v1/models lists the model" grep -q '"data":\[{"id":"m.safetensors"' "$TMP/resp"

# ---------------------------------------------------------------- greedy = sample
s=$(post /v1/completions '{"model":"m.safetensors","prompt":"Hello there","max_tokens":40,"temperature":0}')
py "r['choices'][0]['text']" > "$TMP/served.txt"
"$BIN" sample --model "$TMP/m.safetensors" --prompt "Hello there" --max-new 40 --temperature 0 2>/dev/null \
  | head -c -1 | tail -c +12 > "$TMP/sampled.txt"
check "greedy /v1/completions gives the bytes of sample --temperature 0 ($(wc -c < "$TMP/served.txt") bytes)" \
  cmp -s "$TMP/served.txt" "$TMP/sampled.txt"

# ---------------------------------------------------------------- stop strings and seeds
# a stop string: a printable character of the greedy text; the answer ends before its first occurrence
stop=$(python3 -c 'import re,sys
m = re.search(rb"[A-Za-z0-9 .,:;!?()+*=_-]", open(sys.argv[1], "rb").read())
print(m.group(0).decode() if m else "")' "$TMP/served.txt")
if [[ -n $stop ]]; then
  s=$(post /v1/completions "{\"prompt\":\"Hello there\",\"max_tokens\":40,\"temperature\":0,\"stop\":[\"zzzz\",\"$stop\"]}")
  py "r['choices'][0]['text']" > "$TMP/stopped.txt"
  want=$(python3 -c 'import sys; t = open(sys.argv[1], "rb").read(); sys.stdout.write(str(t.index(sys.argv[2].encode())))' "$TMP/served.txt" "$stop")
  check "a stop string ends the text before it (\"$stop\": $(wc -c < "$TMP/stopped.txt") of 40 bytes), finish_reason stop" \
    bash -c "cmp -s '$TMP/stopped.txt' <(head -c $want '$TMP/served.txt') && grep -q '\"finish_reason\":\"stop\"' '$TMP/resp'"
else
  fail "a stop string" "the greedy text has no printable character"
fi
# the answer without its id and time
bare() { sed 's/"id":"[^"]*",//; s/"created":[0-9]*,//' "$1"; }
for k in 1 2 3; do
  post /v1/completions "{\"prompt\":\"Hi\",\"max_tokens\":24,\"temperature\":1.0,\"top_p\":0.9,\"seed\":$((40 + k / 3))}" >/dev/null
  bare "$TMP/resp" > "$TMP/seed$k"
done
check "the same seed gives the same sampled text, another seed another" \
  bash -c "cmp -s '$TMP/seed1' '$TMP/seed2' && ! cmp -s '$TMP/seed1' '$TMP/seed3'"

# ---------------------------------------------------------------- prompt log-probabilities
echo "72 101 108 108 111 32 119 111 114 108 100 33 10 84 104 101" > "$TMP/ids.txt"
s=$(post /v1/completions '{"prompt":[72,101,108,108,111,32,119,111,114,108,100,33,10,84,104,101],"max_tokens":0,"echo":true,"logprobs":3}')
"$BIN" logits --model "$TMP/m.safetensors" --ids "$TMP/ids.txt" --out "$TMP/logits.npy" >/dev/null 2>&1
worst=$(python3 - "$TMP/resp" "$TMP/logits.npy" "$TMP/ids.txt" <<'PY'
import json, math, struct, sys
r = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8', 'surrogateescape'))
raw = open(sys.argv[2], 'rb').read()
hl = struct.unpack('<H', raw[8:10])[0]
T, V = eval(raw[10:10 + hl].decode().split("'shape':")[1].split(')')[0] + ')')
x = struct.unpack('<%df' % (T * V), raw[10 + hl:10 + hl + 4 * T * V])
ids = [int(t) for t in open(sys.argv[3]).read().split()]
lp = r['choices'][0]['logprobs']
assert lp['token_logprobs'][0] is None and len(lp['token_logprobs']) == len(ids)
assert r['usage']['completion_tokens'] == 0
worst = 0.0
for t in range(1, len(ids)):
    row = x[(t - 1) * V:t * V]; m = max(row)
    lse = m + math.log(sum(math.exp(v - m) for v in row))
    worst = max(worst, abs(lp['token_logprobs'][t] - (row[ids[t]] - lse)))
    top = max(lp['top_logprobs'][t].values())
    worst = max(worst, abs(top - (m - lse)))
print('%.3g' % worst)
PY
)
check "prompt log-probabilities (echo, max_tokens 0) match the log-softmax of diffattn logits (worst |diff| ${worst:-?})" \
  python3 -c "import sys; sys.exit(0 if float('${worst:-1}') <= 1e-4 else 1)"

# ---------------------------------------------------------------- tokenize, detokenize, metrics
s=$(post /tokenize '{"content":"Hi!"}')
check "/tokenize: bytes are tokens" [ "$s $(cat "$TMP/resp")" = '200 {"tokens":[72,105,33]}' ]
s=$(post /detokenize '{"tokens":[72,105,33]}')
check "/detokenize gives the text back" [ "$s $(cat "$TMP/resp")" = '200 {"content":"Hi!"}' ]
s=$(post /detokenize '{"tokens":[72,999]}')
check "/detokenize: an id past the vocabulary is a 400" [ "$s" = 400 ]
curl -s "${AUTH[@]}" $U/metrics > "$TMP/metrics"
metric() { sed -n "s/^$1 //p" "$TMP/metrics"; }
check "/metrics: Prometheus text with requests, tokens in and out, tokens/s, busy slots and queue" \
  [ "$(metric diffattn_generated_tokens_total)" -ge 40 -a "$(metric diffattn_prompt_tokens_total)" -ge 27 \
    -a "$(metric 'diffattn_requests_total{status="2xx"}')" -ge 4 -a "$(metric diffattn_slots_busy)" = 0 \
    -a "$(metric diffattn_queue_length)" = 0 -a -n "$(metric diffattn_decode_tokens_per_second)" ]

# ---------------------------------------------------------------- errors
status_is() { # WHAT STATUS TYPE_OR_TEXT CURL-RESULT
  local what=$1 want=$2 text=$3 got=$4
  local msg; msg=$(sed -n 's/.*"message":"\(.*\)","type".*/\1/p' "$TMP/resp")
  if [[ $got == "$want" && $msg == *"$text"* ]] && grep -q '"error":{' "$TMP/resp"; then pass "$what ($want: $msg)"
  else fail "$what" "status $got, body $(head -c 300 "$TMP/resp")"; fi
}
status_is "malformed JSON" 400 "not valid JSON" "$(post /v1/completions '{"prompt": "x", ')"
status_is "a wrong type names the field" 400 "max_tokens" "$(post /v1/completions '{"prompt":"x","max_tokens":"ten"}')"
status_is "messages of the wrong type" 400 "messages" "$(post /v1/chat/completions '{"messages":"hi"}')"
status_is "an unknown model" 404 "no-such" "$(post /v1/completions '{"model":"no-such","prompt":"x"}')"
python3 -c 'print("{\"prompt\": \"" + "a" * 70000 + "\"}")' > "$TMP/big.json"
status_is "a body over --max-body" 413 "65536" "$(post /v1/completions @"$TMP/big.json")"
status_is "a prompt over the context names both numbers" 400 "250 tokens; the context holds 200" \
  "$(post /v1/completions "{\"prompt\":\"$(printf 'b%.0s' $(seq 250))\"}")"
AUTH=()
status_is "no API key" 401 "API key" "$(post /v1/completions '{"prompt":"x"}')"
AUTH=(-H "Authorization: Bearer wrong")
status_is "a wrong API key" 401 "API key" "$(post /v1/completions '{"prompt":"x"}')"
AUTH=(-H "Authorization: Bearer sekrit")
check "the server still answers after the errors" [ "$(post /v1/completions '{"prompt":"x","max_tokens":2}')" = 200 ]
stop_server
check "SIGTERM when idle: exit 0" [ "$SRC" = 0 ]

# ---------------------------------------------------------------- a client that hangs up
AUTH=()
start_server long --model "$TMP/m.safetensors" --parallel 1 || fail "the second server starts"
U=http://127.0.0.1:$PORT
gen() { curl -s $U/metrics | sed -n 's/^diffattn_generated_tokens_total //p'; }
busy() { curl -s $U/metrics | sed -n 's/^diffattn_slots_busy //p'; }
curl -sN $U/v1/completions -d '{"prompt":"A","max_tokens":1000,"ignore_eos":true,"stream":true}' > "$TMP/cut.out" &
CPID=$!
for _ in $(seq 100); do [[ -s $TMP/cut.out ]] && break; sleep 0.02; done
kill "$CPID"; wait "$CPID" 2>/dev/null
for _ in $(seq 200); do [[ $(busy) == 0 ]] && break; sleep 0.02; done
g=$(gen)
check "a client that hangs up mid-stream frees its slot ($g of 1000 tokens made)" [ "$(busy)" = 0 -a "${g:-1000}" -lt 1000 ]

# ---------------------------------------------------------------- SIGTERM during a stream
curl -sN $U/v1/completions -d '{"prompt":"B","max_tokens":1000,"ignore_eos":true,"stream":true}' > "$TMP/term.out" &
CPID=$!
for _ in $(seq 100); do [[ -s $TMP/term.out ]] && break; sleep 0.02; done
stop_server
wait "$CPID"
n=$(grep -c '^data: {' "$TMP/term.out")
check "SIGTERM during a stream: the stream finishes ($n events, finish_reason length, [DONE]) and the server exits 0 (got $SRC)" \
  bash -c "[ '$SRC' = 0 ] && tail -1 '$TMP/term.out' | grep -q . ; grep -q '\"finish_reason\":\"length\"' '$TMP/term.out' && grep -q '^data: \[DONE\]' '$TMP/term.out'"
finish
