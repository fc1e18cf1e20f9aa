#!/usr/bin/env bash
# Measures quantization cost (eval ppl: ppl, base_ppl, delta_ppl_pct, kld,
# same_top1) for a DIFF model and its baseline, every format of issue 6, and
# decoding speed; writes OUT/results.jsonl and OUT/bench.jsonl.
# usage: tools/quant_report.sh DIFF.safetensors SOFTMAX.safetensors DATA OUT [CHUNKS]
set -euo pipefail
BIN=${BIN:-build/diffattn}
DIFF=$1 SOFT=$2 DATA=$3 OUT=$4 CHUNKS=${5:-100}
CALIB=${CALIB:-64}
mkdir -p "$OUT"
[[ -f $OUT/results.jsonl && ${RESUME:-0} == 1 ]] || : >"$OUT/results.jsonl"
ppl() { # label model base [flags]
  local label=$1 model=$2 base=$3; shift 3
  # RESUME=1: labels already measured are kept
  if [[ ${RESUME:-0} == 1 ]] && grep -q "\"label\":\"$label\"" "$OUT/results.jsonl"; then return; fi
  echo "$label: $($BIN eval ppl --model "$model" --base "$base" --data "$DATA" --chunks "$CHUNKS" --json \
    --base-cache "$OUT/$(basename "$base").logits" "$@" |
    sed "s/^{/{\"label\":\"$label\",/" | tee -a "$OUT/results.jsonl")"
}
for arch in diff softmax; do
  M=$DIFF; [[ $arch == softmax ]] && M=$SOFT
  Q=$OUT/$arch
  # RESUME=1: existing files are kept
  quantize() { local out=$1; shift; [[ ${RESUME:-0} == 1 && -f $out ]] || $BIN quantize --out "$out" "$@"; }
  for t in q8_0 q4_0 q4_k; do quantize "$Q-$t.gguf" --model "$M" --type $t >/dev/null; done
  # AWQ + static int8 ranges from CALIB training sequences; and the ranges alone
  quantize "$Q-q4_0-awq.gguf" --model "$M" --type q4_0 --calib "$DATA" --calib-samples "$CALIB" 2>>"$OUT/quantize.log" >/dev/null
  quantize "$Q-q4_k-awq.gguf" --model "$M" --type q4_k --calib "$DATA" --calib-samples "$CALIB" 2>>"$OUT/quantize.log" >/dev/null
  quantize "$Q-q8_0-ranges.gguf" --model "$M" --type q8_0 --calib "$DATA" --calib-samples "$CALIB" --no-awq --act int8-static 2>>"$OUT/quantize.log" >/dev/null
  ppl "$arch q8_0" "$Q-q8_0.gguf" "$M"
  ppl "$arch q4_0" "$Q-q4_0.gguf" "$M"
  ppl "$arch q4_k" "$Q-q4_k.gguf" "$M"
  ppl "$arch q4_0+awq" "$Q-q4_0-awq.gguf" "$M"
  ppl "$arch q4_k+awq" "$Q-q4_k-awq.gguf" "$M"
  ppl "$arch w8a8 static" "$Q-q8_0-ranges.gguf" "$M" --act int8-static
  ppl "$arch w8a8 dynamic" "$Q-q8_0.gguf" "$M" --act int8-dynamic
  ppl "$arch w8a16 bf16" "$Q-q8_0.gguf" "$M" --act bf16
  ppl "$arch int8 KV (f32 weights)" "$M" "$M" --kv int8
  ppl "$arch q8_0 + int8 KV" "$Q-q8_0.gguf" "$M" --kv int8
done
# how many calibration sequences static ranges need: w8a8 static against N
: >"$OUT/calib_study.jsonl"
for arch in diff softmax; do
  M=$DIFF; [[ $arch == softmax ]] && M=$SOFT
  for n in 1 4 16 64; do
    $BIN quantize --model "$M" --type q8_0 --out "$OUT/cal-$arch-$n.gguf" --calib "$DATA" --calib-samples $n --no-awq --act int8-static 2>/dev/null >/dev/null
    $BIN eval ppl --model "$OUT/cal-$arch-$n.gguf" --base "$M" --data "$DATA" --chunks "$CHUNKS" --json \
      --base-cache "$OUT/$(basename "$M").logits" | sed "s/^{/{\"calib_samples\":$n,/" | tee -a "$OUT/calib_study.jsonl"
  done
  $BIN eval outliers --model "$M" --data "$DATA" --json | tee -a "$OUT/outliers.jsonl"
done
cat /proc/loadavg >"$OUT/loadavg_before_bench.txt"
$BIN bench generate --model "$DIFF" --also "$OUT/diff-q8_0.gguf,$OUT/diff-q4_0.gguf,$OUT/diff-q4_k.gguf" --reps 3 --json | tee "$OUT/bench.jsonl"
