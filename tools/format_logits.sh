#!/usr/bin/env bash
# The logits of every model format the tests read or write, to prove a change
# of the formats code keeps them byte for byte:
#   tools/format_logits.sh make BIN DIR     writes DIR/models: the models the format
#                                           tests make (init, quantize, export, convert, train)
#   tools/format_logits.sh logits BIN DIR NAME MODELS
#                                           writes DIR/NAME/<model>.npy (logits of 12 ids),
#                                           <model>.info (`info`) and, for a model
#                                           carrying a tokenizer, <model>.sample (greedy text),
#                                           for every fixture of tests/fixtures and every model of MODELS
#   tools/format_logits.sh compare DIR A B  cmp of every file of DIR/A against DIR/B; exit 1 on a difference
# Typical use: make and logits with the old binary, logits with the new one on the
# same MODELS, then compare; `make` again with the new binary and `diff -r` the two
# models folders shows the writers unchanged.
# Models written by llama.cpp's gguf-py (tests/cli_llama_gguf.sh) need python3 with
# numpy; without it they are left out, and `make` says so.
set -u
cd "$(dirname "$0")/.."
mode=${1:-}
run() { "$@" >/dev/null 2>"$DIR/last.err" || { echo "format_logits: failed: $*" >&2; sed 's/^/  /' "$DIR/last.err" >&2; }; }

make_models() {
  local M=$DIR/models T=$DIR/tmp
  rm -rf "$M" "$T" && mkdir -p "$M" "$T"
  for i in $(seq 1 400); do echo "line $i: the quick brown fox jumps over the lazy dog, and then some $((i * 7 % 13))."; done >"$T/text.txt"
  # native safetensors, one per attention variant, and the shapes the format code branches on
  run "$BIN" init --out "$M/softmax.safetensors" --arch softmax --dim 256 --layers 2 --heads 2 --ffn 256 --seq 64
  run "$BIN" init --out "$M/softmax_gqa.safetensors" --arch softmax --dim 64 --layers 2 --heads 4 --kv-heads 2 --seq 32
  run "$BIN" init --out "$M/softmax_window.safetensors" --arch softmax --dim 64 --layers 1 --heads 2 --window 8 --seq 32
  run "$BIN" init --out "$M/softmax_tied.safetensors" --arch softmax --dim 64 --layers 1 --heads 2 --tie-embeddings --seq 32
  run "$BIN" init --out "$M/diff.safetensors" --arch diff --dim 256 --layers 2 --heads 2 --ffn 256 --seq 64
  run "$BIN" init --out "$M/diff_gqa.safetensors" --arch diff --dim 64 --layers 2 --heads 4 --kv-heads 2 --seq 32
  run "$BIN" init --out "$M/diff2.safetensors" --arch diff2 --dim 64 --layers 2 --heads 2 --seq 32
  run "$BIN" init --out "$M/nsa.safetensors" --arch nsa --dim 64 --layers 1 --heads 2 --seq 64
  run "$BIN" init --out "$M/moba.safetensors" --arch moba --dim 64 --layers 1 --heads 2 --seq 64
  # GGUF: diffattn-<arch> and llama (a softmax model without window), every weight type
  for m in softmax diff; do
    for t in q8_0 q4_0 q4_k f16 bf16 f32; do run "$BIN" quantize --model "$M/$m.safetensors" --type $t --out "$M/$m.$t.gguf"; done
  done
  for m in softmax_gqa softmax_window softmax_tied diff_gqa diff2 nsa moba; do
    run "$BIN" quantize --model "$M/$m.safetensors" --type q8_0 --out "$M/$m.q8_0.gguf"
  done
  run "$BIN" quantize --model "$M/softmax.safetensors" --type q4_0 --out "$M/softmax.awq.gguf" --calib "$T/text.txt" \
    --calib-samples 4 --act int8-static
  run "$BIN" export --model "$M/softmax_gqa.safetensors" --format gguf --type f16 --out "$M/softmax_gqa.export.gguf"
  # Hugging Face folders: written, read back, quantized, converted
  for m in softmax softmax_gqa softmax_tied diff diff_gqa; do run "$BIN" export --format hf --model "$M/$m.safetensors" --out "$M/hf_$m"; done
  for f in tests/fixtures/hf_*; do
    run "$BIN" quantize --model "$f" --type f16 --out "$M/$(basename "$f").f16.gguf"
    run "$BIN" export --format hf --model "$f" --out "$M/$(basename "$f").again"
  done
  run "$BIN" convert --model "$M/softmax_gqa.safetensors" --to diff --recipe preserve --out "$M/conv_diff.safetensors"
  run "$BIN" convert --model "$M/softmax_gqa.safetensors" --to diff2 --recipe preserve --out "$M/conv_diff2.safetensors"
  run "$BIN" convert --model "$M/softmax_gqa.export.gguf" --to diff --recipe preserve --out "$M/conv_gguf.safetensors"
  run "$BIN" convert --model tests/fixtures/hf_llama_gqa --to diff --recipe preserve --out "$M/conv_hf.safetensors"
  run "$BIN" convert --model tests/fixtures/hf_llama_gqa --to diff --recipe split --out "$M/conv_split.safetensors"
  run "$BIN" export --format hf --model "$M/conv_split.safetensors" --out "$M/hf_conv_split"
  run "$BIN" quantize --model "$M/conv_diff.safetensors" --type q8_0 --out "$M/conv_diff.q8_0.gguf"
  # a model carrying a BPE tokenizer: in its safetensors, its GGUF, its Hugging Face folder
  run "$BIN" tokenizer train --vocab-size 300 --in "$T/text.txt" --out "$T/tok.json" --quiet
  run "$BIN" prepare --tokenizer "$T/tok.json" --in "$T/text.txt" --out "$T/shards"
  run "$BIN" train --data "$T/shards" --out "$T/run" --dim 32 --layers 1 --heads 2 --seq 32 --steps 2 --batch 2 --eval-every 0
  cp "$T/run/model.safetensors" "$M/bpe.safetensors" 2>/dev/null
  run "$BIN" quantize --model "$M/bpe.safetensors" --type q8_0 --out "$M/bpe.q8_0.gguf"
  run "$BIN" export --format hf --model "$M/bpe.safetensors" --out "$M/hf_bpe"
  # llama.cpp's own writer
  local PY= GP=
  for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && { PY=$p; break; }; done
  GP=$(dirname "$BIN")/llamacpp-include/gguf-py
  if [[ -n $PY && -d $GP/gguf ]]; then
    local W=("$PY" tools/llama_gguf_write.py --gguf-py "$GP")
    run "${W[@]}" --out "$M/llama_tied.gguf" --dim 256 --layers 2 --heads 4 --std 0.5 --type f16
    run "${W[@]}" --out "$M/llama_untied.gguf" --dim 256 --layers 2 --heads 4 --std 0.05 --emb-std 0.5 --type f32 --untied
    run "${W[@]}" --out "$M/llama_l3.gguf" --dim 256 --layers 1 --heads 4 --std 0.05 --emb-std 0.5 --type f32 --untied \
      --theta 500000 --llama3-rope 8,1,4,8192 --ctx 1024
  else
    echo "format_logits: no python3 with numpy, or no $GP: llama.cpp-written GGUF files left out" >&2
  fi
  rm -rf "$T" "$DIR/last.err"
}

# one model: its logits, its info and, when it carries a tokenizer, greedy text
model_outputs() {
  local m=$1 name=$2 out=$DIR/$NAME
  "$BIN" logits --model "$m" --ids "$DIR/ids.txt" --out "$out/$name.npy" >/dev/null 2>"$out/$name.err"
  "$BIN" info --model "$m" >"$out/$name.info" 2>&1
  # the text without its timing line
  "$BIN" sample --model "$m" --prompt "the quick brown" --max-new 12 --temperature 0 2>&1 |
    sed -E 's/\[[0-9]+ tokens in [^]]*\]//' >"$out/$name.sample"
  [[ -s $out/$name.err ]] || rm -f "$out/$name.err"
}

case $mode in
make)
  BIN=$(realpath "$2") DIR=$3
  mkdir -p "$DIR" && make_models
  ;;
logits)
  BIN=$(realpath "$2") DIR=$3 NAME=$4 MODELS=$5
  rm -rf "${DIR:?}/$NAME" && mkdir -p "$DIR/$NAME"
  echo "1 2 3 4 5 6 7 8 9 10 11 12" >"$DIR/ids.txt"
  for m in tests/fixtures/*.model.safetensors tests/fixtures/hf_* tests/fixtures/legacy/*.gguf; do
    model_outputs "$m" "fixture.$(basename "$m")"
  done
  for m in "$MODELS"/*; do model_outputs "$m" "$(basename "$m")"; done
  ls "$DIR/$NAME" | grep -c '\.npy$' | sed 's/$/ logits files/'
  ;;
compare)
  DIR=$2 A=$3 B=$4 bad=0 n=0
  for f in "$DIR/$A"/*; do
    n=$((n + 1))
    cmp -s "$f" "$DIR/$B/$(basename "$f")" || { echo "differs: $(basename "$f")"; bad=1; }
  done
  for f in "$DIR/$B"/*; do [[ -e $DIR/$A/$(basename "$f") ]] || { echo "only in $B: $(basename "$f")"; bad=1; }; done
  echo "$n files compared, $([[ $bad == 0 ]] && echo all identical || echo some differ)"
  exit $bad
  ;;
*)
  sed -n '2,16p' "$0"
  exit 2
  ;;
esac
