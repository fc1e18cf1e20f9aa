#!/usr/bin/env bash
# diffattn serve's request bodies from hostile clients: a near-zero
# temperature is greedy and fails no other slot; NULs (\u0000) are bytes of
# the text from JSON to tokens and back (prompt, chat, /tokenize,
# /detokenize, stop strings, generated, echoed and streamed text); "n" gives
# n choices; the fields it does not implement (and "logprobs" with "stream")
# are refused naming the field; a key twice in one object, or a key holding a
# NUL, is a 400 naming the key.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

"$BIN" init --dim 64 --layers 2 --heads 2 --seq 2048 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"
AUTH=()
start_server req --model "$TMP/m.safetensors" --parallel 2 || { fail "the server starts"; finish; }
U=http://127.0.0.1:$PORT
# the error's message, from $TMP/resp
message() { py "r['error']['message']"; }
refused() { # WHAT FIELD PATH BODY: a 400 whose message begins with the field
  local s; s=$(post "$3" "$4")
  local m; m=$(message 2>/dev/null)
  if [[ $s == 400 && $m == "$2"* ]]; then pass "$1 (400: $m)"; else fail "$1" "status $s, body $(head -c 300 "$TMP/resp")"; fi
}

# ---------------------------------------------------------------- a near-zero temperature
post /v1/completions '{"prompt":"Tiny","max_tokens":40,"temperature":0,"ignore_eos":true}' >/dev/null
py "r['choices'][0]['text']" > "$TMP/greedy"
post /v1/completions '{"prompt":"Other","max_tokens":40,"temperature":0.8,"seed":5,"ignore_eos":true}' >/dev/null
py "r['choices'][0]['text']" > "$TMP/other_alone"
# both at once, so that they share the batched steps
curl -s -o "$TMP/tiny.json" -w '%{http_code}' $U/v1/completions \
  -d '{"prompt":"Tiny","max_tokens":40,"temperature":1e-40,"logprobs":5,"ignore_eos":true}' > "$TMP/tiny.status" &
c1=$!
curl -s -o "$TMP/other.json" -w '%{http_code}' $U/v1/completions \
  -d '{"prompt":"Other","max_tokens":40,"temperature":0.8,"seed":5,"ignore_eos":true}' > "$TMP/other.status" &
c2=$!
wait $c1 $c2
cp "$TMP/tiny.json" "$TMP/resp"; py "r['choices'][0]['text']" > "$TMP/tiny" 2>/dev/null
cp "$TMP/other.json" "$TMP/resp"; py "r['choices'][0]['text']" > "$TMP/other" 2>/dev/null
check "temperature 1e-40 with logprobs is greedy ($(cat "$TMP/tiny.status"): the text of temperature 0)" \
  bash -c "[ \"\$(cat '$TMP/tiny.status')\" = 200 ] && cmp -s '$TMP/tiny' '$TMP/greedy'"
check "the request beside it in the batch is unharmed ($(cat "$TMP/other.status"): the text it gets alone)" \
  bash -c "[ \"\$(cat '$TMP/other.status')\" = 200 ] && cmp -s '$TMP/other' '$TMP/other_alone'"

# ---------------------------------------------------------------- NULs
s=$(post /tokenize '{"content":"ab\u0000cd"}')
check "/tokenize: a NUL is a byte of the text ($s $(cat "$TMP/resp"))" [ "$s $(cat "$TMP/resp")" = '200 {"tokens":[97,98,0,99,100]}' ]
s=$(post /detokenize '{"tokens":[97,0,98]}')
check "/detokenize: a 0 byte is escaped, not the end ($s $(cat "$TMP/resp"))" [ "$s $(cat "$TMP/resp")" = '200 {"content":"a\u0000b"}' ]
s=$(post /tokenize '{"messages":[{"role":"user","content":"a\u0000b"}]}')
check "/tokenize of a chat: the content keeps its NUL" bash -c "[ $s = 200 ] && grep -q '97,0,98' '$TMP/resp'"
s=$(post /v1/completions '{"prompt":"ab\u0000cd","max_tokens":0,"echo":true}')
check "a prompt with a NUL is 5 tokens and is echoed whole" \
  [ "$s $(py "[r['usage']['prompt_tokens'], r['choices'][0]['text'] == 'ab\x00cd']")" = '200 [5, true]' ]
s=$(post /v1/chat/completions '{"messages":[{"role":"user","content":[{"type":"text","text":"a\u0000b"}]}],"max_tokens":0}')
p1=$(py "r['usage']['prompt_tokens']")
post /v1/chat/completions '{"messages":[{"role":"user","content":"a"}],"max_tokens":0}' >/dev/null
p0=$(py "r['usage']['prompt_tokens']")
check "a chat's text part keeps its NUL ($p1 prompt tokens, $p0 without \"\\u0000b\")" [ "$s" = 200 -a "$p1" = $((p0 + 2)) ]
# near-uniform sampling over the bytes: 1,500 tokens hold 0 bytes (a fixed seed: always the same ones)
gen='"prompt":"N","max_tokens":1500,"temperature":100,"seed":11,"ignore_eos":true'
post /v1/completions "{$gen,\"logprobs\":0}" >/dev/null
read -r nuls same < <(py "' '.join(map(str, [r['choices'][0]['text'].count('\x00'),
  b''.join(t.encode('utf-8', 'surrogateescape') for t in r['choices'][0]['logprobs']['tokens'])
  == r['choices'][0]['text'].encode('utf-8', 'surrogateescape')]))")
check "generated text keeps its NULs ($nuls of them): it is the concatenation of its tokens" [ "${nuls:-0}" -gt 0 -a "$same" = True ]
py "r['choices'][0]['text']" > "$TMP/gen"
curl -sN $U/v1/completions -d "{$gen,\"stream\":true}" > "$TMP/gen.sse"
python3 - "$TMP/gen.sse" > "$TMP/gen.streamed" <<'PY'
import json, sys
out = ''
for line in open(sys.argv[1], 'rb').read().decode('utf-8', 'surrogateescape').split('\n'):
    if line.startswith('data: {'): out += json.loads(line[6:])['choices'][0]['text']
sys.stdout.buffer.write(out.encode('utf-8', 'surrogateescape'))
PY
check "the stream of it carries the same bytes, NULs included" cmp -s "$TMP/gen" "$TMP/gen.streamed"
s=$(post /v1/completions "{$gen,\"stop\":[\"\\u0000\"]}")
first=$(python3 -c "import sys; print(open(sys.argv[1], 'rb').read().index(b'\0'))" "$TMP/gen")
check "a stop string \"\\u0000\" ends the text at its first NUL ($s, byte $first)" \
  [ "$s $(py "[len(r['choices'][0]['text'].encode('utf-8', 'surrogateescape')), r['choices'][0]['finish_reason']]")" = "200 [$first, \"stop\"]" ]

# ---------------------------------------------------------------- n, and fields not implemented
s=$(post /v1/completions '{"prompt":"Hi","max_tokens":12,"temperature":1,"seed":9,"n":3}')
py "[c['text'] for c in r['choices']]" > "$TMP/n3"
read -r n_ch n_idx n_tok < <(py "' '.join(map(str, [len(r['choices']), [c['index'] for c in r['choices']] == [0, 1, 2],
  r['usage']['completion_tokens']]))")
post /v1/completions '{"prompt":"Hi","max_tokens":12,"temperature":1,"seed":9}' >/dev/null
one=$(py "[r['choices'][0]['text']]")
check "n: 3 gives 3 choices ($s, $n_ch choices, $n_tok tokens); the first is the answer of n: 1, the others differ" \
  python3 -c "import json,sys; c = json.load(open(sys.argv[1], 'rb')); o = json.loads(sys.argv[2])
sys.exit(0 if '$s' == '200' and '$n_idx' == 'True' and len(c) == 3 and c[0] == o[0] and len(set(c)) == 3 else 1)" "$TMP/n3" "$one"
s=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"n":2}')
check "chat: n: 2 gives 2 choices" [ "$s $(py "len(r['choices'])")" = "200 2" ]
s=$(post /v1/completions '{"prompt":["a","b"],"max_tokens":2,"n":2}')
check "2 prompts times n: 2 are 4 choices, the prompts' in order" [ "$s $(py "[c['index'] for c in r['choices']]")" = "200 [0, 1, 2, 3]" ]
refused "n with stream is refused" "n:" /v1/completions '{"prompt":"x","n":2,"stream":true}'
refused "a list of prompts with stream is refused" "stream:" /v1/completions '{"prompt":["a","b"],"stream":true}'
refused "n: 0 is refused" "n:" /v1/completions '{"prompt":"x","n":0}'
refused "logprobs with stream is refused (completions)" "logprobs:" /v1/completions '{"prompt":"x","logprobs":2,"stream":true}'
refused "logprobs with stream is refused (chat)" "logprobs:" /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"logprobs":true,"stream":true}'
refused "response_format of an unknown type is refused naming it" "response_format.type:" /v1/completions '{"prompt":"x","response_format":{"type":"yaml"}}'
refused "chat: top_logprobs without logprobs is refused" "top_logprobs:" /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"top_logprobs":3}'
for f in '"presence_penalty":0.5' '"frequency_penalty":-1' '"logit_bias":{"65":100}' '"best_of":3' '"suffix":"end"' \
         '"top_k":40' '"min_p":0.1' '"repetition_penalty":1.2' '"grammar":"root ::= [a-z]+"'; do
  name=${f%%\":*}; name=${name#\"}
  refused "$name set is refused naming it" "$name:" /v1/completions "{\"prompt\":\"x\",$f}"
done
# the plain template has no place for tools (cli_serve_tools.sh drives the templates that have one)
refused "chat: tools on the plain template are refused naming it" "tools:" /v1/chat/completions \
  '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]}'
refused "chat: tool_choice required without tools is refused naming it" "tool_choice:" /v1/chat/completions \
  '{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}'
refused "chat: an image part is refused" "messages[0].content[1].type:" /v1/chat/completions \
  '{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"http://x"}}]}]}'
refused "chat: an assistant's tool_calls on the plain template are refused" "messages[0].tool_calls:" /v1/chat/completions \
  '{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}'
refused "chat: max_tokens and max_completion_tokens that disagree are refused" "max_completion_tokens:" /v1/chat/completions \
  '{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"max_completion_tokens":5}'
refused "/tokenize: add_special with messages is refused" "add_special:" /tokenize \
  '{"messages":[{"role":"user","content":"x"}],"add_special":true}'
# stream_options.include_usage: every chunk "usage": null, then one chunk with no choices and the usage, as OpenAI
usage_stream() { # PATH BODY: the stream's events checked; prints ok or what is wrong
  curl -sN "$U$1" -d "$2" | python3 -c "import json, sys
ev = [l[6:] for l in sys.stdin.read().split('\n') if l.startswith('data: ')]
js = [json.loads(e) for e in ev[:-1]]
last, body = js[-1], js[:-1]
ok = ev[-1] == '[DONE]' and last['choices'] == [] and all('usage' in j and j['usage'] is None for j in body) \
  and body[-1]['choices'][0]['finish_reason'] == 'length' and last['usage']['completion_tokens'] == 7 \
  and last['usage']['prompt_tokens'] == $3 and last['usage']['total_tokens'] == 7 + $3 and last['object'] == body[0]['object']
print('ok' if ok else 'wrong: %s' % ev[-3:])"
}
v=$(usage_stream /v1/completions '{"prompt":"abcd","max_tokens":7,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}' 4)
check "completions: stream_options.include_usage ends the stream with a chunk holding the usage ($v)" [ "$v" = ok ]
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":7,"ignore_eos":true}' >/dev/null
v=$(usage_stream /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":7,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}' "$(py "r['usage']['prompt_tokens']")")
check "chat: stream_options.include_usage gives the usage of the whole answer ($v)" [ "$v" = ok ]
refused "stream_options.include_usage without stream is refused" "stream_options:" /v1/completions \
  '{"prompt":"x","stream_options":{"include_usage":true}}'
refused "stream_options with another key is refused naming it" "stream_options.continuous_usage_stats:" /v1/completions \
  '{"prompt":"x","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}'
s=$(post /v1/completions '{"prompt":"x","max_tokens":1,"n":1,"best_of":1,"presence_penalty":0,"frequency_penalty":0,"logit_bias":{},"suffix":null,"top_k":-1,"stream_options":null,"response_format":{"type":"text"},"user":"u"}')
check "the same fields at their neutral values are taken ($s)" [ "$s" = 200 ]

# ---------------------------------------------------------------- duplicate keys, NULs in keys and names
refused "a duplicate key is refused naming it" "max_tokens:" /v1/completions '{"prompt":"x","max_tokens":1,"temperature":0,"max_tokens":3}'
refused "a duplicate key inside a message is refused naming it" "content:" /v1/chat/completions \
  '{"messages":[{"role":"user","content":"a","content":"b"}]}'
refused "a key holding a NUL is refused" 'key "max_tokens' /v1/completions '{"prompt":"x","max_tokens\u0000":5}'
refused "a model name holding a NUL is refused" "model:" /v1/completions '{"model":"m.safetensors\u0000x","prompt":"x"}'
refused "a role holding a NUL is refused" "messages[0].role:" /v1/chat/completions '{"messages":[{"role":"user\u0000x","content":"a"}]}'
stop_server
check "the server exits 0" [ "$SRC" = 0 ]
finish
