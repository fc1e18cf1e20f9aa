#!/usr/bin/env bash
# diffattn serve's chat page in headless Chromium (Debian's chromium), driven
# over the DevTools protocol by tools/serveref/page_check.mjs: a message sent in
# the page (/?q= submits it on load) gets a reply streamed into it, event by
# event, and finished. The screenshot is kept as build/serve_chat.png (beside the
# binary under test). Skips (77) without chromium or node.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
CHROMIUM=$(command -v chromium || command -v chromium-browser) || skip "chromium is missing (apt-get install chromium)"
command -v node >/dev/null || skip "node is missing"
AUTH=()
"$BIN" init --dim 64 --layers 2 --heads 2 --seq 512 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"
start_server page --model "$TMP/m.safetensors" --parallel 1 --ctx 300 || { fail "the server starts"; finish; }
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
stop_server
check "the server exits 0 on SIGTERM" [ "$SRC" = 0 ]
finish
