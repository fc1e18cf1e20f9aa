#!/usr/bin/env bash
# diffattn against llama.cpp on the same GGUF files (issue 21's speed table):
# prompt and batch-1 decoding tok/s of diffattn's engine (`bench generate`)
# and of llama.cpp (tools/llamacpp/llama_driver.c `bench`, the release
# node-llama-cpp 3.21.1 ships), alternating engine by engine, file by file, at
# each thread count; then decoding as a fraction of the measured copy
# bandwidth (bytes a decoding step reads, as diffattn counts them for that
# file, times tok/s, over `bench generate --bandwidth`'s memcpy rate).
#
# Shapes (random weights from `diffattn init`, softmax, so llama.cpp runs them as llama):
#   220m  dim 1024, 12 layers, 16 heads, vocab 32,000, untied (issue 21's 220 M model)
#   1.2b  dim 2048, 16 layers, 32 heads / 8 KV heads, ffn 8192, vocab 128,256, tied
#         (the DiffLlama-0.3B-handcut shape as a Llama)
#   tiny  dim 256, 2 layers, vocab 512: checks the script, not a measurement
# Files per shape: f16 (diffattn export), q8_0 and q4_0 (diffattn quantize), and
# Q4_K_M from llama.cpp's own quantizer run on the f16 file (when diffattn cannot
# read it, diffattn's q4_k file, its Q4_K_M, is timed in both engines instead,
# and the table says so).
#
# Every diffattn run also measures the copy bandwidth (--bandwidth: two 1 GiB buffers).
# Run on an idle machine (takes ~40 min for both shapes; ~12 GB of disk for 1.2b):
#   bash bench/llamacpp_speed.sh                     # SHAPES="220m 1.2b" THREADS="2 1"
#   SHAPES=tiny PROMPT=32 GEN=16 bash bench/llamacpp_speed.sh   # a quick check
# Environment: BIN (build/diffattn), DRV (build/llama_driver), OUT (runs/llamacpp_speed),
# SHAPES, THREADS, FILES (the labels to time, e.g. "Q4_K_M"; all when empty), PROMPT (512), GEN (128), REPS (3: best of, per measurement),
# ROUNDS (1: alternating rounds), LLAMA_KV (f16, llama.cpp's default KV cache), KV (diffattn's KV cache:
# LLAMA_KV unless set, so that both engines read the same cache bytes; f32, f16 or int8).
# Results: $OUT/results.jsonl (one line per measurement) and $OUT/table.md.
set -euo pipefail
BIN=${BIN:-build/diffattn}
DRV=${DRV:-build/llama_driver}
OUT=${OUT:-runs/llamacpp_speed}
SHAPES=${SHAPES:-"220m 1.2b"}
THREADS=${THREADS:-"2 1"}
FILES=${FILES:-}
PROMPT=${PROMPT:-512}
GEN=${GEN:-128}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-1}
LLAMA_KV=${LLAMA_KV:-f16}
KV=${KV:-$LLAMA_KV}
[[ -x $BIN ]] || { echo "llamacpp_speed: $BIN not found (make)" >&2; exit 1; }
[[ -x $DRV ]] || { echo "llamacpp_speed: $DRV not found (tools/install-deps.sh, then make: cmake builds it when node-llama-cpp is installed)" >&2; exit 1; }
mkdir -p "$OUT"
RES=$OUT/results.jsonl
: >"$RES"
SEQ=$((PROMPT + GEN))
SEQ=$(((SEQ + 127) / 128 * 128))

shape_flags() {
  case $1 in
    220m) echo "--arch softmax --dim 1024 --layers 12 --heads 8 --vocab 32000 --seq $SEQ" ;;
    1.2b) echo "--arch softmax --dim 2048 --layers 16 --heads 16 --kv-heads 4 --ffn 8192 --vocab 128256 --tie-embeddings --rope-theta 500000 --seq $SEQ" ;;
    tiny) echo "--arch softmax --dim 256 --layers 2 --heads 2 --ffn 768 --vocab 512 --seq $SEQ" ;;
    *) echo "llamacpp_speed: unknown shape $1 (220m, 1.2b, tiny)" >&2; exit 1 ;;
  esac
}

# make_files SHAPE: the f16, q8_0, q4_0 and Q4_K_M files; prints "label path" lines
make_files() {
  local s=$1 d=$OUT/$1
  mkdir -p "$d"
  if [[ ! -f $d/f16.gguf ]]; then
    # shellcheck disable=SC2046
    "$BIN" init --out "$d/model.safetensors" $(shape_flags "$s") --seed 1 >&2
    "$BIN" export --format gguf --type f16 --model "$d/model.safetensors" --out "$d/f16.gguf" >&2
    "$BIN" quantize --model "$d/model.safetensors" --type q8_0 --out "$d/q8_0.gguf" >&2
    "$BIN" quantize --model "$d/model.safetensors" --type q4_0 --out "$d/q4_0.gguf" >&2
    "$BIN" quantize --model "$d/model.safetensors" --type q4_k --fallback q8_0 --out "$d/q4_k.gguf" >&2
    "$DRV" quantize "$d/f16.gguf" "$d/Q4_K_M.gguf" Q4_K_M --threads "$(nproc)" >&2
    [[ ${KEEP:-0} == 1 ]] || rm -f "$d/model.safetensors"
  fi
  echo "f16 $d/f16.gguf"
  echo "q8_0 $d/q8_0.gguf"
  echo "q4_0 $d/q4_0.gguf"
  if "$BIN" info --model "$d/Q4_K_M.gguf" >/dev/null 2>&1; then
    echo "Q4_K_M $d/Q4_K_M.gguf"
  else
    echo "llamacpp_speed: diffattn cannot read llama.cpp's Q4_K_M file yet; timing diffattn's q4_k (its Q4_K_M) in both engines" >&2
    echo "q4_k(diffattn's_Q4_K_M) $d/q4_k.gguf"
  fi
}

for s in $SHAPES; do
  make_files "$s" >"$OUT/$s.files" # not in a subshell of mapfile: a failure stops the script
  mapfile -t files <"$OUT/$s.files"
  for round in $(seq 1 "$ROUNDS"); do
    for th in $THREADS; do
      for entry in "${files[@]}"; do
        label=${entry%% *} f=${entry#* }
        [[ -z $FILES || " $FILES " == *" $label "* ]] || continue
        echo "== $s $label, $th thread(s), round $round" >&2
        d=$(OMP_NUM_THREADS=$th "$BIN" bench generate --model "$f" --prompt "$PROMPT" --gen "$GEN" --reps "$REPS" \
          --threads "$th" --kv "$KV" --json --bandwidth)
        l=$("$DRV" bench "$f" --prompt "$PROMPT" --gen "$GEN" --threads "$th" --reps "$REPS" --kv "$LLAMA_KV")
        printf '{"shape":"%s","label":"%s","threads":%s,"round":%s,"diffattn":%s,"llamacpp":%s}\n' \
          "$s" "$label" "$th" "$round" "$d" "$l" >>"$RES"
      done
    done
  done
done

python3 - "$RES" "$OUT/table.md" "$PROMPT" "$GEN" "$LLAMA_KV" "$KV" <<'EOF'
import json, sys
res, out, prompt, gen, kv, dkv = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
rows = [json.loads(line) for line in open(res)]
best = {}
for r in rows:  # best over rounds
    k = (r["shape"], r["label"], r["threads"])
    d, l = r["diffattn"], r["llamacpp"]
    cur = best.setdefault(k, {"pd": 0, "pl": 0, "dd": 0, "dl": 0, "mb": d["file_bytes"] / 1e6,
                              "bytes": d["decode_bytes_per_token"], "bw": 0})
    for key, v in (("pd", d["prompt_tok_per_s"]), ("pl", l["prompt_tok_per_s"]), ("dd", d["decode_tok_per_s"]),
                   ("dl", l["decode_tok_per_s"]), ("bw", d["copy_bandwidth_gbs"])):
        cur[key] = max(cur[key], v)
lines = [f"prompt {prompt}, {gen} decoded; diffattn KV {dkv}, llama.cpp KV {kv}; best of each measurement's reps and the rounds",
         "",
         "| shape | file | threads | MB | prompt diffattn | prompt llama.cpp | ratio | decode diffattn | decode llama.cpp | ratio | bandwidth diffattn | bandwidth llama.cpp |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
for (s, label, th), c in best.items():
    bw = max(c2["bw"] for k2, c2 in best.items() if k2[2] == th)
    frac = lambda tok: tok * c["bytes"] / 1e9 / bw if bw else 0
    lines.append(f"| {s} | {label} | {th} | {c['mb']:.0f} | {c['pd']:.1f} | {c['pl']:.1f} | {c['pd'] / c['pl']:.2f} | "
                 f"{c['dd']:.1f} | {c['dl']:.1f} | {c['dd'] / c['dl']:.2f} | {frac(c['dd']):.2f} | {frac(c['dl']):.2f} |")
lines.append("")
lines.append("ratio: diffattn / llama.cpp. bandwidth: decoded tok/s x the bytes a step reads (diffattn's count for the "
             "file, at the middle of decoding) / the memcpy rate `bench generate --bandwidth` measured at that thread "
             "count (the best of its runs: " +
             ", ".join(f"{th} thread(s) {max(c['bw'] for k, c in best.items() if k[2] == th):.1f} GB/s"
                       for th in sorted({k[2] for k in best})) + ").")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "wrote $OUT/results.jsonl and $OUT/table.md"
