#!/usr/bin/env bash
# diffattn serve's continuous batching, on a q8_0 model with 8 slots: 8
# concurrent greedy streams each equal their answer when run alone (the
# batched decoding pass gives every slot the numbers it gets by itself); and
# OpenAI's own client (the pinned npm `openai`, tools/serveref) through
# models, a completion, a streamed chat and an unknown model's 404; --kv f16 and int8 caches as sample's.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

"$BIN" init --dim 64 --layers 2 --heads 2 --seq 256 --seed 7 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"
"$BIN" quantize --model "$TMP/m.safetensors" --type q8_0 --out "$TMP/m.gguf" >/dev/null 2>&1 || fail "quantize"
start_server batch --model "$TMP/m.gguf" --parallel 8 --prefill-chunk 16 || { fail "the server starts"; finish; }
U=http://127.0.0.1:$PORT
AUTH=()

prompts=("The cat" "Once upon a time" "x" "0123456789" "Hello, world" "A much longer prompt than the others, fed in chunks" "zz" "Q:")
# (the prompts need no JSON escapes)
body() { printf '{"prompt":"%s","max_tokens":48,"temperature":0,"ignore_eos":true,"stream":%s}' "$1" "$2"; }
for i in "${!prompts[@]}"; do
  post /v1/completions "$(body "${prompts[$i]}" false)" >/dev/null
  cp "$TMP/resp" "$TMP/serial.$i.json"
done
pids=()
for i in "${!prompts[@]}"; do
  curl -sN $U/v1/completions -d "$(body "${prompts[$i]}" true)" > "$TMP/sse.$i" &
  pids+=($!)
done
wait "${pids[@]}"
steps=$(curl -s $U/metrics | sed -n 's/^diffattn_decode_steps_total //p')
# one request with the 8 prompts: queued at once, so decoded together
printf -v list '"%s",' "${prompts[@]}"
post /v1/completions "{\"prompt\":[${list%,}],\"max_tokens\":48,\"temperature\":0,\"ignore_eos\":true}" >/dev/null
cp "$TMP/resp" "$TMP/list.json"
steps2=$(curl -s $U/metrics | sed -n 's/^diffattn_decode_steps_total //p')
# the texts as bytes (a byte model's output need not be UTF-8): serial, streamed, from the list
python3 - "$TMP" "${#prompts[@]}" > "$TMP/same" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
load = lambda f: json.loads(open(f, 'rb').read().decode('utf-8', 'surrogateescape'))
serial = [load(f'{d}/serial.{i}.json')['choices'][0]['text'] for i in range(n)]
def sse(i):
    out = ''
    for line in open(f'{d}/sse.{i}', 'rb').read().decode('utf-8', 'surrogateescape').split('\n'):
        if line.startswith('data: {'): out += json.loads(line[6:])['choices'][0]['text']
    return out
lst = load(f'{d}/list.json')['choices']
print(sum(len(serial[i]) > 0 and sse(i) == serial[i] for i in range(n)),
      sum(lst[i]['text'] == serial[i] for i in range(n)))
PY
read -r same_stream same_list < "$TMP/same"
check "8 concurrent greedy streams each equal their serial answer (${same_stream:-?} of 8)" [ "${same_stream:-0}" = 8 ]
check "a list of 8 prompts decodes in shared steps ($((steps2 - steps)) steps for 8 x 47 tokens), each equal to its serial answer (${same_list:-?} of 8)" \
  [ "${same_list:-0}" = 8 -a $((steps2 - steps)) -lt 100 ]

if [[ -d tools/serveref/node_modules/openai ]] && command -v node >/dev/null; then
  node tools/serveref/client.mjs "$U/v1" none > "$TMP/client.json" 2>"$TMP/client.err"
  cp "$TMP/client.json" "$TMP/resp"
  read -r models tokens chunks chat_same notfound < <(py "' '.join(map(str, [r['models'] == ['m.gguf'],
      r['completion']['usage']['completion_tokens'], r['chat']['chunks'], r['chat']['text'] == r['chat_whole'],
      r['unknown_model']['isNotFound']]))")
  check "openai client: models.list" [ "$models" = True ]
  check "openai client: a greedy completion of 8 tokens" [ "$tokens" = 8 ]
  check "openai client: a streamed chat ($chunks chunks) equals the whole answer" [ "$chat_same" = True -a "${chunks:-0}" -ge 3 ]
  check "openai client: an unknown model is its NotFoundError (404)" [ "$notfound" = True ]
else
  fail "openai client" "tools/serveref/node_modules is missing (tools/install-deps.sh installs it)"
fi
lp_body='{"prompt":"Once upon a time","max_tokens":40,"temperature":0,"logprobs":1}'
post /v1/completions "$lp_body" >/dev/null
cp "$TMP/resp" "$TMP/kv.f32.json"
stop_server
check "the server exits 0 on SIGTERM" [ "$SRC" = 0 ]

# --kv: every slot's cache in f16 or int8: greedy text equals `sample --kv` of the same file, and the tokens'
# log-probabilities move off the f32 cache's (the cache type is in use, not ignored)
for kv in f16 int8; do
  start_server kv_$kv --model "$TMP/m.gguf" --parallel 2 --kv $kv || { fail "the server starts with --kv $kv"; continue; }
  post /v1/completions "$lp_body" >/dev/null
  cp "$TMP/resp" "$TMP/kv.$kv.json"
  stop_server
  "$BIN" sample --model "$TMP/m.gguf" --kv $kv --prompt "Once upon a time" --max-new 40 --temperature 0 2>/dev/null \
    | head -c -1 | tail -c +17 > "$TMP/kv.$kv.sampled"
  read -r same moved < <(python3 - "$TMP/kv.$kv.json" "$TMP/kv.f32.json" "$TMP/kv.$kv.sampled" <<'PY'
import json, sys
load = lambda f: json.loads(open(f, 'rb').read().decode('utf-8', 'surrogateescape'))['choices'][0]
a, b = load(sys.argv[1]), load(sys.argv[2])
sampled = open(sys.argv[3], 'rb').read().decode('utf-8', 'surrogateescape')
moved = sum(abs(x - y) for x, y in zip(a['logprobs']['token_logprobs'], b['logprobs']['token_logprobs']))
print(a['text'] == sampled, f"{moved:.2e}")
PY
)
  check "serve --kv $kv: greedy text equals sample --kv $kv; log-probabilities off f32's by $moved in all" \
    [ "$same" = True -a "$moved" != "0.00e+00" ]
done
finish
