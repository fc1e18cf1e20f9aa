#!/usr/bin/env bash
# diffattn serve's prompt cache: a slot keeps its keys and values after a
# request, and the next request with the same start goes to that slot and
# feeds only the rest. Greedy answers are the same with the cache, without it
# (cache_prompt false) and cold, on a q8_0 GGUF and on the float model; a chat
# turn reuses the conversation before it; two interleaved prompts each find
# their own slot; /metrics counts the cached tokens; a sliding-window model
# (whose ring cannot be cut back) still answers alike.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
AUTH=()
"$BIN" init --dim 64 --layers 2 --heads 2 --seq 1024 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"
"$BIN" quantize --model "$TMP/m.safetensors" --type q8_0 --out "$TMP/m.gguf" >/dev/null 2>&1 || fail "quantize"
"$BIN" init --dim 64 --layers 2 --heads 2 --seq 1024 --window 64 --out "$TMP/w.safetensors" >/dev/null 2>&1 || fail "init (window)"
P=$(python3 -c 'print(("The quick brown fox jumps over the lazy dog. " * 12).strip())')
Q=$(python3 -c 'print(("Pack my box with five dozen liquor jugs! " * 12).strip())')
cached() { curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^diffattn_prompt_tokens_cached_total //p'; }
complete() { # prompt, cache_prompt -> the text
  post /v1/completions "$(python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 24,
    "temperature": 0, "cache_prompt": sys.argv[2] == "true"}))' "$1" "$2")" >/dev/null
  py "r['choices'][0]['text']"
}
for m in m.gguf m.safetensors w.safetensors; do
  start_server "${m%.*}" --model "$TMP/$m" --parallel 2 --ctx 1024 || { fail "$m: the server starts"; continue; }
  c0=$(cached)
  cold=$(complete "$P" true)
  c1=$(cached)
  warm=$(complete "$P" true)
  c2=$(cached)
  off=$(complete "$P" false)
  c3=$(cached)
  n=${#P}
  if [[ $m == w.safetensors ]]; then
    check "$m: a ring cache is not cut back: nothing taken from it, and greedy answers alike" \
      [ "$cold" = "$warm" -a "$warm" = "$off" -a "$c2" = "$c1" ]
  else
    check "$m: the same prompt again takes $((c2 - c1)) of its $n tokens from the cache (all but the last)" \
      [ "$c1" = "$c0" -a "$((c2 - c1))" = "$((n - 1))" ]
    check "$m: greedy answers alike cold, cached and with cache_prompt false" [ -n "$cold" -a "$cold" = "$warm" -a "$warm" = "$off" ]
    check "$m: cache_prompt false takes nothing from the cache" [ "$c3" = "$c2" ]
    # two prompts interleaved: each finds the slot that holds it
    complete "$Q" true >/dev/null
    c4=$(cached)
    a=$(complete "$P" true); c5=$(cached)
    b=$(complete "$Q" true); c6=$(cached)
    check "$m: interleaved prompts each find their own slot ($((c5 - c4)), $((c6 - c5)) tokens cached)" \
      [ "$((c5 - c4))" = "$((n - 1))" -a "$((c6 - c5))" = "$((${#Q} - 1))" -a "$a" = "$cold" ]
    # a chat's second turn starts with its first turn and the reply
    post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":12,"temperature":0}' >/dev/null
    # the reply's bytes as they came (a byte model's may not be UTF-8), raw in the next body
    python3 - "$TMP/resp" "$TMP/turn2" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8', 'surrogateescape'))
reply = r['choices'][0]['message']['content']
for name, cache in (('', True), ('.off', False)):
    body = {"messages": [{"role": "user", "content": "Hello there, how are you?"}, {"role": "assistant", "content": reply},
                         {"role": "user", "content": "And then?"}], "max_tokens": 12, "temperature": 0, "cache_prompt": cache}
    open(sys.argv[2] + name, 'wb').write(json.dumps(body, ensure_ascii=False).encode('utf-8', 'surrogateescape'))
PY
    c7=$(cached)
    curl -s -o "$TMP/resp" "http://127.0.0.1:$PORT/v1/chat/completions" --data-binary @"$TMP/turn2"
    t2=$(py "r['choices'][0]['message']['content']"); c8=$(cached)
    curl -s -o "$TMP/resp" "http://127.0.0.1:$PORT/v1/chat/completions" --data-binary @"$TMP/turn2.off"
    t2off=$(py "r['choices'][0]['message']['content']")
    check "$m: a chat's second turn reuses the first ($((c8 - c7)) tokens cached) and answers alike" \
      [ "$((c8 - c7))" -ge 30 -a "$t2" = "$t2off" ]
  fi
  stop_server
done
finish
