#!/usr/bin/env bash
# diffattn serve's chat page in headless Chromium (Debian's chromium), driven
# over the DevTools protocol: a message sent in the page (/?q= submits it on
# load) gets a reply streamed into it, event by event, and finished
# (tools/serveref/page_check.mjs); then a conversation of three turns, typed as
# a user would, each request carrying the history, which a reload restores, and
# a fourth reply stopped with the Stop button mid-stream
# (tools/serveref/page_chat.mjs). The screenshots are kept beside the binary
# under test: build/serve_chat.png, serve_chat_turns.png, serve_chat_stopped.png.
# Skips (77) without chromium or node.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
CHROMIUM=$(command -v chromium || command -v chromium-browser) || skip "chromium is missing (apt-get install chromium)"
command -v node >/dev/null || skip "node is missing"
AUTH=()
"$BIN" init --dim 64 --layers 2 --heads 2 --seq 2048 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"
start_server page --model "$TMP/m.safetensors" --parallel 1 --ctx 2048 || { fail "the server starts"; finish; }
shot=$(cd "$(dirname "$BIN")" && pwd)/serve_chat.png
rm -f "$shot"
timeout 120 node tools/serveref/page_check.mjs "$CHROMIUM" "http://127.0.0.1:$PORT/?q=Hello%20there" "$shot" \
  "$TMP/profile" > "$TMP/resp" 2>"$TMP/page.err" || fail "the page check ran" "$(tail -c 300 "$TMP/page.err")"
read -r user done chunks length < <(py "' '.join(map(str, [
  any(m['cls'] == 'user' and m['text'] == 'Hello there' for m in r),
  any(m['cls'] == 'assistant' and m['done'] == '1' for m in r),
  max([m['chunks'] for m in r if m['cls'] == 'assistant'] or [0]),
  max([len(m['text']) for m in r if m['cls'] == 'assistant'] or [0])]))")
check "the page sends the message and shows it" [ "$user" = True ]
check "the reply is streamed into the page ($chunks events, $length characters) and finished" \
  [ "$done" = True -a "${chunks:-0}" -ge 4 -a "${length:-0}" -gt 0 ]
check "a screenshot of the chat is kept ($shot)" [ -s "$shot" ]

shots=$(dirname "$shot")
rm -f "$shots/serve_chat_turns.png" "$shots/serve_chat_stopped.png"
timeout 180 node tools/serveref/page_chat.mjs "$CHROMIUM" "http://127.0.0.1:$PORT/" "$shots/serve_chat_turns.png" \
  "$shots/serve_chat_stopped.png" "$TMP/profile2" > "$TMP/resp" 2>"$TMP/chat.err" || fail "the conversation ran" "$(tail -c 300 "$TMP/chat.err")"
check "three turns: three questions and three finished replies" [ "$(py "(sum(1 for m in r['turns'] if m['cls'] == 'user')
  == 3 and sum(1 for m in r['turns'] if m['cls'] == 'assistant' and m['done'] == '1') == 3 and len(r['turns']) == 6)")" = true ]
check "each request carries the conversation so far (1, 3, 5 messages)" [ "$(py "r['bodies']")" = "[1, 3, 5]" ]
check "a reply's code is rendered: a fence with its language, a span, markup kept as text" [ "$(py "r['rendered']")" = \
  '<p>Try <code>f(x)</code>:
</p><pre><code data-lang="c">int x = a &lt; b;
</code></pre><p>
&lt;b&gt;done&lt;/b&gt;</p>' ]
check "a reload brings the conversation back from the browser's storage" [ "$(py "([m['text'] for m in r['reloaded']]
  == [m['text'] for m in r['turns']])")" = true ]
check "the Stop button stops a reply mid-stream and keeps what came" [ "$(py "(r['stopped'] and r['after_stop'][-1]['stopped']
  == '1' and r['after_stop'][-1]['chunks'] >= 3 and len(r['after_stop'][-1]['text']) > 0 and len(r['after_stop']) == 8)")" = true ]
check "screenshots of the conversation and of the stopped reply are kept" \
  [ -s "$shots/serve_chat_turns.png" -a -s "$shots/serve_chat_stopped.png" ]
cp "$TMP/resp" "$shots/serve_chat.json"
code=$(curl -s -m 20 -o "$TMP/resp" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" \
  -H 'Content-Type: application/json' -d '{"prompt": "a", "max_tokens": 1}')
check "the stopped reply's slot is free again: a new request is answered" [ "$code" = 200 ]
stop_server
check "the server exits 0 on SIGTERM" [ "$SRC" = 0 ]
finish
