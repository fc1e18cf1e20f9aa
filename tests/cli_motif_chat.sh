#!/usr/bin/env bash
# Motif's chat format (tools/serveref/motif_chat_template.jinja, reconstructed: docs/motif.md) on a tiny Motif
# folder (MotifForCausalLM, from init --arch gda and export --format hf) whose tokenizer_config.json carries it,
# over a byte-level tokenizer.json with Motif's turn and role tokens. Six conversations (system + user, several
# turns, a tool's answer, non-ASCII text and newlines, empty contents, contents ending in white space) rendered
# by diffattn serve (/tokenize with "messages", then /detokenize) equal Python's jinja2 rendering of the
# template, byte for byte, with each turn token one id; one chat completion (its prompt the same ids); tools are
# refused; sample --chat writes the same prompt, of the same number of tokens. The weights make <|endofturn|> every
# next token, so the completion and sample --chat must stop there, at once.
# Skips (77) without Python's jinja2 (Debian: python3-jinja2).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
source "$(dirname "$0")/tok_lib.sh"
JINJA=$(python3 -c 'import jinja2; print(jinja2.__version__, "from", jinja2.__file__)' 2>/dev/null) ||
  skip "python3-jinja2 is missing"
TEMPLATE=tools/serveref/motif_chat_template.jinja
D=$TMP/motif

ok "init a tiny GDA model with PolyNorm MLPs (vocabulary: 256 bytes + 7 special tokens)" "$BIN" init --arch gda \
  --mlp polynorm --dim 32 --layers 2 --heads 4 --vocab 263 --seq 512 --out "$TMP/m.safetensors"
ok "export it as a Hugging Face folder" "$BIN" export --format hf --model "$TMP/m.safetensors" --out "$D"
has "the folder is Motif's" "$(cat "$D/config.json")" '"MotifForCausalLM"'
# GPT-2's byte alphabet for ids 0-255, then Motif's special tokens; chat_template: the template file as it is
write_byte_tokenizer "$D/tokenizer.json" \
  "<|endoftext|> <|startofturn|> <|endofturn|> <|system|> <|user|> <|assistant|> <|tool|>" ""
python3 - "$D" "$TEMPLATE" <<'PY'
import json, sys
cfg = {"chat_template": open(sys.argv[2]).read(), "eos_token": "<|endoftext|>", "add_bos_token": False}
json.dump(cfg, open(sys.argv[1] + "/tokenizer_config.json", "w"), indent=2)
PY
# Weights whose every next token is <|endofturn|> (id 258): no layer adds to the residual stream (o_proj and
# down_proj zero), every embedding and the final norm's gain are ones, and only lm_head's row 258 is not zero
python3 - "$D/model.safetensors" <<'PY' || fail "the weights are set" "no lm_head, or not F32"
import array, json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]; head = json.loads(b[8:8 + n])
def put(name, value_of):  # value_of(row, column); a 1-D tensor is one row
    t = head[name]; assert t["dtype"] == "F32", name
    lo, hi = t["data_offsets"]; cols = t["shape"][-1]
    a = array.array("f", (value_of(i // cols, i % cols) for i in range((hi - lo) // 4)))
    b[8 + n + lo:8 + n + hi] = a.tobytes()
for k in head:
    if k.endswith(("o_proj.weight", "down_proj.weight")): put(k, lambda r, c: 0.0)
put("model.embed_tokens.weight", lambda r, c: 1.0)
put("model.norm.weight", lambda r, c: 1.0)
put("lm_head.weight", lambda r, c: 1.0 if r == 258 else 0.0)
open(sys.argv[1], "wb").write(b)
PY

cat > "$TMP/conv.json" <<'JSON'
[
 [{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is differential attention?"}],
 [{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello! How can I help?"},{"role":"user","content":"Tell me a joke.\n\nA short one."}],
 [{"role":"user","content":"What is 6 times 7?"},{"role":"assistant","content":"{\"tool_call\": {\"name\": \"calc\", \"arguments\": {\"expr\": \"6*7\"}}}"},{"role":"tool","content":"42"}],
 [{"role":"system","content":"Réponds en français.\nBrièvement."},{"role":"user","content":"ünïcödé, 한국어, emoji 🎉\nsecond line\r\n\tthird"}],
 [{"role":"system","content":""},{"role":"user","content":""},{"role":"assistant","content":""},{"role":"user","content":"x"}],
 [{"role":"user","content":"  padded  \n\n"},{"role":"assistant","content":"\n answer \t\n"},{"role":"user","content":"last\n\n\n"}]
]
JSON
n_conv=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$TMP/conv.json")
# Python's jinja2 as transformers' apply_chat_template sets it up; one JSON string a line
python3 - "$TEMPLATE" "$TMP/conv.json" >"$TMP/jinja.txt" 2>"$TMP/jinja.err" <<'PY' || fail "jinja2 ran" "$(tail -c 300 "$TMP/jinja.err")"
import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
t = env.from_string(open(sys.argv[1]).read())
for c in json.load(open(sys.argv[2])):
    print(json.dumps(t.render(messages=c, add_generation_prompt=True, bos_token="<|endoftext|>")))
PY

start_server motif --model "$D" --parallel 1 || fail "serve starts on the Motif folder"
if [[ -n ${SPID:-} ]] && kill -0 "$SPID" 2>/dev/null; then
  has "the template is recognised as Motif's" "$(grep -m1 'ready' "$TMP/motif.log")" "chat template motif"
  # per conversation: its ids (/tokenize with messages), their text (/detokenize) against jinja2's, and the ids of
  # jinja2's text; each turn opened and closed by one special id
  python3 - "$PORT" "$TMP/conv.json" "$TMP/jinja.txt" >"$TMP/compare.txt" 2>&1 <<'PY'
import json, sys, urllib.request
def post(path, body):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (sys.argv[1], path), json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())
sot, eot = (post("/tokenize", {"content": t, "add_special": False})["tokens"] for t in ("<|startofturn|>", "<|endofturn|>"))
print("specials", sot, eot)
for c, line in zip(json.load(open(sys.argv[2])), open(sys.argv[3])):
    want = json.loads(line)
    ids = post("/tokenize", {"messages": c})["tokens"]
    text = post("/detokenize", {"tokens": ids})["content"]
    ids_of_want = post("/tokenize", {"content": want, "add_special": False})["tokens"]
    turns = len(sot) == 1 and len(eot) == 1 and ids.count(sot[0]) == len(c) + 1 and ids.count(eot[0]) == len(c)
    print("same" if text == want and ids == ids_of_want and turns else "DIFFERS", len(ids))
    if text != want:
        print("  diffattn %r\n  jinja2   %r" % (text, want))
PY
  same=$(grep -c '^same' "$TMP/compare.txt")
  [[ $same == "$n_conv" ]] || cat "$TMP/compare.txt"
  check "serve renders $same of $n_conv conversations as jinja2 ($JINJA) renders the template, byte for byte" \
    [ "$same" = "$n_conv" ]
  n_first=$(awk '/^same|^DIFFERS/ {print $2; exit}' "$TMP/compare.txt")

  body=$(python3 -c 'import json,sys; print(json.dumps({"messages": json.load(open(sys.argv[1]))[0], "max_tokens": 4, "temperature": 0}))' "$TMP/conv.json")
  code=$(post /v1/chat/completions "$body")
  [[ $code == 200 ]] && pass "one chat completion" || fail "one chat completion" "status $code: $(head -c 300 "$TMP/resp")"
  check "its prompt is the rendering's $n_first tokens" [ "$(py 'r["usage"]["prompt_tokens"]')" = "$n_first" ]
  check "it stops at <|endofturn|>, which closes the turn" \
    [ "$(py '[r["choices"][0]["finish_reason"], r["choices"][0]["message"]["content"]]')" = '["stop", ""]' ]
  code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"6*7?"}],"tools":[{"type":"function","function":{"name":"calc","parameters":{"type":"object"}}}]}')
  [[ $code == 400 ]] && pass "tools are refused (400)" || fail "tools are refused (400)" "status $code"
  has "the refusal names the template and why" "$(cat "$TMP/resp")" "chat template (motif) has no place for tools"
  stop_server
  check "the server exits 0 on SIGTERM (got $SRC)" [ "$SRC" = 0 ]
fi

ok "sample --chat --system" "$BIN" sample --model "$D" --chat --system "You are a helpful assistant." \
  --prompt "What is differential attention?" --max-new 0
python3 -c 'import json,sys; sys.stdout.write(json.loads(open(sys.argv[1]).readline()) + "\n")' "$TMP/jinja.txt" \
  >"$TMP/want.txt"
check "sample --chat writes the prompt jinja2 renders" cmp -s "$TMP/last.out" "$TMP/want.txt"
has "of the $n_first tokens serve gives it" "$(cat "$TMP/last.err")" "[$n_first tokens in "
ok "sample --chat, 8 new tokens at most" "$BIN" sample --model "$D" --chat --prompt "Hi" --max-new 8 --temperature 0
check "the reply ends at <|endofturn|>, its first token" [ "$(cat "$TMP/last.out")" = \
  "<|startofturn|><|user|>"$'\n\n'"Hi<|endofturn|><|startofturn|><|assistant|>"$'\n\n'"<|endofturn|>" ]
has "of 12 tokens: the prompt's 11 and <|endofturn|>" "$(cat "$TMP/last.err")" "[12 tokens in "
# A template with Motif-3's <think> block is not taken for Motif-2's format: the plain fallback renders it
D3=$TMP/motif3; cp -r "$D" "$D3"
python3 - "$D3/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["chat_template"] += "{% if add_generation_prompt %}<think>{% endif %}"
json.dump(c, open(sys.argv[1], "w"))
PY
ok "sample --chat on a template with <think>" "$BIN" sample --model "$D3" --chat --prompt "Hi" --max-new 0
check "it is not rendered as Motif-2's turns" bash -c "! grep -q '<|startofturn|><|user|>' '$TMP/last.out'"
expect_error "--system without --chat" "--system needs --chat" "$BIN" sample --model "$D" --system "x" --max-new 0
finish
