#!/usr/bin/env bash
# Decoding and prompt speed of quantized models, for the idle machine:
#
#   1. the 220 M Llama-shaped softmax model (dim 1024, 12 layers, 16 heads,
#      vocab 32,000, random weights), quantized to q8_0, q4_0, q4_k and f16,
#      `bench generate` (prompt 512, 128 decoded, --bandwidth) at 2 threads
#      and at 1 thread;
#   2. the busy-machine figure: the same at 2 threads while one competing
#      process (`yes`) spins pinned on core 1, against the idle figure;
#   3. with LLAMA set (build/llama_driver, tools/llamacpp: its `bench`
#      subcommand, llama.cpp's default f16 KV cache), the same files in
#      llama.cpp, the engines alternating ROUNDS times (needs files llama.cpp
#      reads: diffattn's `llama` GGUFs of a softmax model);
#   4. with RATIOS=1, DIFF/softmax and DIFF2/softmax decode ratios at 1.2 B
#      (dim 2048, 16 layers, 32/8 heads, ffn 8192, vocab 128,256, tied; each
#      arch written f32 then quantized, ~5 GB of disk at a time).
#
#   bench/decode_speed.sh [BINARY]            (default build/diffattn)
#
# Environment: SHAPE=220m (default) | 1b | tiny (a small shape that checks the
# script in a minute), TYPES (default "q8_0 q4_0 q4_k f16"), PROMPT (512),
# GEN (128), ROUNDS (2), OLD (a second diffattn binary, e.g. main before the
# decode-speed work: timed alternating with BINARY), LLAMA, RATIOS, KEEP (a
# folder to keep the models in), KV (BINARY's KV cache: f16, the default, as
# llama.cpp's; f32 or int8), OLD_KV (OLD's: f32, as binaries before the f16
# cache take no other). Check /proc/loadavg is near zero first.
set -euo pipefail
BIN=$(realpath "${1:-build/diffattn}")
SHAPE=${SHAPE:-220m}
TYPES=${TYPES:-q8_0 q4_0 q4_k f16}
PROMPT=${PROMPT:-512}
GEN=${GEN:-128}
ROUNDS=${ROUNDS:-2}
KV=${KV:-f16}
OLD_KV=${OLD_KV:-f32}
T=${KEEP:-$(mktemp -d)}
mkdir -p "$T"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$T"' EXIT
# the CLI's default wait policy (passive) for OpenMP, as a user gets it
unset OMP_WAIT_POLICY OMP_NUM_THREADS

case $SHAPE in
220m) ARGS=(--dim 1024 --layers 12 --heads 8 --vocab 32000 --ffn 2816) ;;
1b) ARGS=(--dim 2048 --layers 16 --heads 16 --kv-heads 4 --vocab 128256 --ffn 8192 --tie-embeddings) ;;
tiny) ARGS=(--dim 256 --layers 2 --heads 4 --vocab 1000 --ffn 768); PROMPT=${PROMPT_TINY:-64}; GEN=${GEN_TINY:-16} ;;
*) echo "SHAPE must be 220m, 1b or tiny" >&2; exit 2 ;;
esac
SEQ=$(( (PROMPT + GEN + 255) / 256 * 256 ))
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc); shape $SHAPE; prompt $PROMPT, gen $GEN; models in $T"

# model ARCH: $T/ARCH.safetensors and one GGUF per type, made once
model() {
  local a=$1
  [[ -f $T/$a.safetensors ]] || "$BIN" init --arch "$a" "${ARGS[@]}" --seq "$SEQ" --rope-freq llama \
    --out "$T/$a.safetensors" >/dev/null
  for q in $TYPES; do
    [[ -f $T/$a.$q.gguf ]] || "$BIN" quantize --model "$T/$a.safetensors" --type "$q" --out "$T/$a.$q.gguf" >/dev/null
  done
}
files() { local a=$1 out=(); for q in $TYPES; do out+=("$T/$a.$q.gguf"); done; local IFS=,; echo "${out[*]}"; }

# gen BIN THREADS FILES...: one bench generate over the files (interleaved), JSON lines on stdout
gen() {
  local bin=$1 th=$2 first=$3 rest kv=$KV
  rest=$(IFS=,; echo "${*:4}")
  [[ $bin == "${OLD:-}" ]] && kv=$OLD_KV
  "$bin" --threads "$th" bench generate --model "$first" ${rest:+--also "$rest"} --prompt "$PROMPT" --gen "$GEN" \
    --kv "$kv" --reps 2 --bandwidth --json 2>/dev/null
}

# table LABEL < JSON lines: weights, prompt and decode tok/s, decode's share of the copy bandwidth
table() {
  python3 -c '
import json, sys
label = sys.argv[1]
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"): continue
    r = json.loads(line)
    frac = r.get("decode_bandwidth_fraction", r.get("bandwidth_fraction"))
    print("%-34s %-6s prompt %8.1f tok/s  decode %7.1f tok/s  %s" % (label, r.get("weights", "?"),
          r.get("prompt_tok_per_s", 0), r.get("decode_tok_per_s", 0),
          "" if frac is None else "decode at %.0f%% of copy bandwidth" % (100 * frac)))
' "$1"
}

model softmax
IFS=, read -ra F <<<"$(files softmax)"

echo "== diffattn, idle machine"
for r in $(seq 1 "$ROUNDS"); do
  for th in 2 1; do
    gen "$BIN" $th "${F[@]}" | table "new, $th thread(s), round $r"
    [[ -n ${OLD:-} ]] && gen "$OLD" $th "${F[@]}" | table "OLD, $th thread(s), round $r"
  done
done

echo "== busy machine: one competing process spinning on core 1 (taskset -c 1 yes)"
taskset -c 1 yes >/dev/null &
YES=$!
trap 'kill $YES 2>/dev/null || true; [[ -n ${KEEP:-} ]] || rm -rf "$T"' EXIT
sleep 1
gen "$BIN" 2 "${F[@]}" | table "new, 2 threads, busy"
[[ -n ${OLD:-} ]] && gen "$OLD" 2 "${F[@]}" | table "OLD, 2 threads, busy"
kill $YES
wait $YES 2>/dev/null || true
echo "(busy / idle: divide the idle 2-thread rows above by these)"

if [[ -n ${LLAMA:-} ]]; then
  echo "== llama.cpp ($LLAMA bench) against diffattn on the same files, alternating"
  for r in $(seq 1 "$ROUNDS"); do
    for th in 2 1; do
      for f in "${F[@]}"; do
        gen "$BIN" $th "$f" | table "diffattn $th thr r$r $(basename "$f")"
        "$LLAMA" bench "$f" --prompt "$PROMPT" --gen "$GEN" --threads $th --reps 2 | sed "s/^/llama.cpp $th thr r$r: /" ||
          echo "llama.cpp: $f not run"
      done
    done
  done
fi

if [[ ${RATIOS:-0} == 1 ]]; then
  echo "== DIFF/softmax and DIFF2/softmax decode at 1.2 B (q8_0 and q4_0), 2 threads"
  SHAPE_SAVE=("${ARGS[@]}")
  ARGS=(--dim 2048 --layers 16 --heads 16 --kv-heads 4 --vocab 128256 --ffn 8192 --tie-embeddings)
  [[ $SHAPE == tiny ]] && ARGS=("${SHAPE_SAVE[@]}")
  TYPES="q8_0 q4_0"
  R=$T/ratios
  mkdir -p "$R"
  for a in softmax diff diff2; do
    # f32 files are ~5 GB at 1.2 B: quantize, then drop the f32
    [[ -f $R/$a.q4_0.gguf ]] || { T=$R model $a; rm -f "$R/$a.safetensors"; }
  done
  for q in q8_0 q4_0; do
    "$BIN" --threads 2 bench generate --kv "$KV" --model "$R/softmax.$q.gguf" --also "$R/diff.$q.gguf,$R/diff2.$q.gguf" \
      --prompt 128 --gen 64 --reps 2 --json 2>/dev/null | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
base = rows[0]["decode_tok_per_s"]
for r, name in zip(rows, ["softmax", "DIFF", "DIFF2"]):
    print("1.2B %-5s %-8s decode %7.1f tok/s  %.3fx softmax   prompt %7.1f tok/s" % (r["weights"], name,
          r["decode_tok_per_s"], r["decode_tok_per_s"] / base, r["prompt_tok_per_s"]))
'
  done
fi
