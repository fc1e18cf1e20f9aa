#!/usr/bin/env bash
# diffattn serve's chat page in headless Chromium (Debian's chromium): a
# message sent in the page (/?q= submits it on load) gets a reply streamed
# into it, event by event. The screenshot is kept as build/serve_chat.png
# (beside the binary under test). Skips (77) without chromium.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
CHROMIUM=$(command -v chromium || command -v chromium-browser) || skip "chromium is missing (apt-get install chromium)"
AUTH=()
"$BIN" init --dim 64 --layers 2 --heads 2 --seq 512 --out "$TMP/m.safetensors" >/dev/null 2>&1 || fail "init"
start_server page --model "$TMP/m.safetensors" --parallel 1 --ctx 300 || { fail "the server starts"; finish; }
shot=$(cd "$(dirname "$BIN")" && pwd)/serve_chat.png
chrome() {
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$TMP/chrome" --window-size=900,700 \
    --virtual-time-budget=60000 "$@" "http://127.0.0.1:$PORT/?q=Hello%20there" 2>/dev/null
}
chrome --dump-dom > "$TMP/dom.html"
user=$(grep -c '<div class="user">Hello there</div>' "$TMP/dom.html")
# <div class="assistant" data-done="1" data-chunks="N">the reply (a byte model's: any bytes, any lines)
chunks=$(grep -o '<div class="assistant" data-done="1" data-chunks="[0-9]*">' "$TMP/dom.html" | sed 's/.*data-chunks="\([0-9]*\)".*/\1/')
nonempty=$(grep -c '<div class="assistant" data-done="1" data-chunks="[0-9]*">[^<]' "$TMP/dom.html")
check "the page sends the message and shows it" [ "$user" = 1 ]
check "the reply is streamed into the page (${chunks:-0} events) and finished" [ "${chunks:-0}" -ge 4 -a "$nonempty" = 1 ]
rm -f "$shot"
chrome --screenshot="$shot" >/dev/null
check "a screenshot of the chat is kept ($shot)" [ -s "$shot" ]
requests=$(curl -s http://127.0.0.1:$PORT/metrics | sed -n 's/^diffattn_requests_total{status="2xx"} //p')
check "the page asked for the chat page, the model list and two streamed chats ($requests requests)" [ "${requests:-0}" -ge 6 ]
stop_server
finish
