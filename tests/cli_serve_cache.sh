#!/usr/bin/env bash
# diffattn serve's prompt cache: a slot keeps its keys and values after a
# request, and the next request with the same start goes to that slot and
# feeds only the rest. Greedy answers are the same with the cache, without it
# (cache_prompt false) and cold, on a q8_0 GGUF and on the float model; a chat
# turn reuses the conversation before it; two interleaved prompts each find
# their own slot; /metrics counts the cached tokens; a sliding-window model
# (whose ring cannot be cut back) still answers alike. Three conversations at
# once on two slots keep most of their history cached (a finished slot waits
# --cache-hold for the conversation's next turn instead of going to the queue's
# head), answer alike without the cache, and a request that shares nothing is
# not kept waiting by conversations that keep passing it.
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

# more conversations than slots: each turn's slot is kept for its next turn (held up to --cache-hold, generous
# here for a loaded or sanitized build), so most of the history comes from a cache; the greedy answers are those
# without the cache
TURNS=$(dirname "$0")/serve_turns.py
start_server turns --model "$TMP/m.gguf" --parallel 2 --ctx 1024 --cache-hold 1000 || fail "turns: the server starts"
python3 "$TURNS" "$PORT" 3 6 1 >"$TMP/turns.cache" || fail "turns: the conversations with the cache"
fed=$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^diffattn_prompt_tokens_total //p')
from=$(cached)
python3 "$TURNS" "$PORT" 3 6 0 >"$TMP/turns.off" || fail "turns: the conversations without the cache"
check "3 conversations of 6 turns on 2 slots: $from of $((fed + from)) prompt tokens from a cache (at least half)" \
  [ -n "$from" -a "$((2 * from))" -ge "$((fed + from))" ]
check "3 conversations on 2 slots: greedy answers alike with and without the cache" \
  python3 -c 'import json,sys; a, b = (json.load(open(f))["answers"] for f in sys.argv[1:]); sys.exit(not (a == b and len(a) == 18))' \
  "$TMP/turns.cache" "$TMP/turns.off"
# 3 conversations of 12 turns on 2 slots, each turn's slot kept for the next: a prompt sharing nothing is passed
# over at most 2 x 2 times: the turns that end before its answer are the 2 running when it came, the queued one
# ahead of it, those 4, and those of the other slot while it runs (12 allows for a slow run); without that bound
# it waits for the conversations to end (some 23 turns)
python3 "$TURNS" "$PORT" 3 12 1 stranger >"$TMP/turns.stranger" || fail "turns: the stranger run"
waited=$(python3 -c 'import json,sys; r = json.load(open(sys.argv[1])); print(r["turns_at_answer"] - r["turns_at_send"])' \
  "$TMP/turns.stranger")
check "a request sharing nothing is answered within 12 turns of 3 conversations on 2 slots (took $waited)" \
  [ -n "$waited" -a "${waited:-99}" -le 12 ]
stop_server
finish
