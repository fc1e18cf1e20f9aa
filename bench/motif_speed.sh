#!/usr/bin/env bash
# Motif's per-token cost against a Llama of the same shape on diffattn's engine
# (issue 45's speed item): prompt and batch-1 decoding of random models at a
# Motif shape, scaled down in layers, and of a Llama (softmax, SwiGLU) with the
# same width, FFN, layers, vocabulary and KV-cache bytes, quantized q8_0 and
# q4_k. The two models of a pair are timed in one `bench generate --also` run,
# interleaved, best of REPS; the run is repeated ROUNDS times and the table
# keeps each model's best, with every round's overhead listed beside it.
#
# Shapes (SHAPES, any of):
#   2.6b   Motif-2.6B's width (DIFF V1): dim 2048, 16 query heads of 128 as 8
#          signal/noise pairs over 8 K/V pairs, FFN 8192, PolyNorm; the Llama:
#          16 heads of 128, 16 KV heads (the same K/V bytes per token)
#   12.7b  Motif-2-12.7B's width (grouped, GDA): dim 4096, 40 query heads of 128
#          as 8 groups of 4 signal heads and 1 noise head over 8 K/V pairs
#          (16 KV heads), FFN 16384, PolyNorm, untied (junhoyeo/mlx-motif's
#          config of the 12.7B, which has 40 layers); the Llama: 32 heads of
#          128, 16 KV heads
#   tiny   checks the script, not a measurement
# Vocabulary VOCAB (32768; the models' own are larger), LAYERS layers (2.6b: 8,
# 12.7b: 2); 2.6b tied.
# Run on an idle machine (check /proc/loadavg); ~25 min for both shapes,
# ~15 GB of disk:
#   bash bench/motif_speed.sh
#   SHAPES=tiny PROMPT=32 GEN=16 bash bench/motif_speed.sh     # a quick check
# Environment: BIN (build/diffattn), OUT (runs/motif_speed), SHAPES ("2.6b
# 12.7b"), TYPES ("q8_0 q4_k"), LAYERS (per shape unless set), VOCAB, PROMPT
# (512), GEN (128), REPS (3), ROUNDS (2), THREADS (2), KV (f16).
# Results: $OUT/results.jsonl (one line per model and round) and $OUT/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/diffattn}
OUT=${OUT:-runs/motif_speed}
SHAPES=${SHAPES:-"2.6b 12.7b"}
TYPES=${TYPES:-"q8_0 q4_k"}
VOCAB=${VOCAB:-32768}
PROMPT=${PROMPT:-512}
GEN=${GEN:-128}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-2}
KV=${KV:-f16}
case ${1:-} in --help|-h) sed -n 2,27p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[[ -x $BIN ]] || { echo "motif_speed: $BIN not found (make)" >&2; exit 1; }
mkdir -p "$OUT"
RES=$OUT/results.jsonl
: >"$RES"
SEQ=$(((PROMPT + GEN + 127) / 128 * 128))

# shape_flags SHAPE motif|llama: `init` flags of one model of the pair
shape_flags() {
  local common="--vocab $VOCAB --rope-freq llama --rope-theta 500000 --seq $SEQ"
  [[ $1 == 12.7b ]] || common+=" --tie-embeddings"
  case $1:$2 in
    2.6b:motif)  echo "--arch gda --dim 2048 --heads 8 --noise-heads 0 --kv-heads 8 --head-dim 128 --ffn 8192 --mlp polynorm --layers ${LAYERS:-8} $common" ;;
    2.6b:llama)  echo "--arch softmax --dim 2048 --heads 8 --kv-heads 8 --ffn 8192 --layers ${LAYERS:-8} $common" ;;
    12.7b:motif) echo "--arch gda --dim 4096 --heads 32 --noise-heads 8 --kv-heads 8 --head-dim 128 --ffn 16384 --mlp polynorm --layers ${LAYERS:-2} $common" ;;
    12.7b:llama) echo "--arch softmax --dim 4096 --heads 16 --kv-heads 8 --ffn 16384 --layers ${LAYERS:-2} $common" ;;
    tiny:motif)  echo "--arch gda --dim 256 --heads 4 --noise-heads 1 --kv-heads 1 --head-dim 32 --ffn 512 --mlp polynorm --layers 2 $common" ;;
    tiny:llama)  echo "--arch softmax --dim 256 --heads 2 --kv-heads 1 --ffn 512 --layers 2 $common" ;;
    *) echo "motif_speed: unknown shape $1 (2.6b, 12.7b, tiny)" >&2; exit 1 ;;
  esac
}

# make_files SHAPE: both models at every type of TYPES, written once
make_files() {
  local s=$1 d=$OUT/$1 m t
  mkdir -p "$d"
  for m in motif llama; do
    local have=1
    for t in $TYPES; do [[ -f $d/$m.$t.gguf ]] || have=0; done
    [[ $have == 1 ]] && continue
    # shellcheck disable=SC2046
    "$BIN" init --out "$d/$m.safetensors" $(shape_flags "$s" "$m") --seed 1 >&2
    for t in $TYPES; do
      "$BIN" quantize --model "$d/$m.safetensors" --type "$t" --out "$d/$m.$t.gguf" >&2
    done
    rm -f "$d/$m.safetensors"
  done
}

for s in $SHAPES; do
  make_files "$s"
  for round in $(seq 1 "$ROUNDS"); do
    for t in $TYPES; do
      echo "== $s $t, round $round, loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >&2
      OMP_NUM_THREADS=$THREADS "$BIN" bench generate --model "$OUT/$s/motif.$t.gguf" --also "$OUT/$s/llama.$t.gguf" \
        --prompt "$PROMPT" --gen "$GEN" --reps "$REPS" --threads "$THREADS" --kv "$KV" --json |
        while read -r line; do
          printf '{"shape":"%s","type":"%s","round":%s,"run":%s}\n' "$s" "$t" "$round" "$line" >>"$RES"
        done
    done
  done
done

python3 - "$RES" "$OUT/table.md" "$PROMPT" "$GEN" "$KV" "$THREADS" <<'EOF'
import json, sys
res, out, prompt, gen, kv, threads = sys.argv[1:7]
rows = [json.loads(line) for line in open(res)]
cells = {}
for r in rows:
    kind = "motif" if "/motif." in r["run"]["model"] else "llama"
    c = cells.setdefault((r["shape"], r["type"]), {})
    c.setdefault(kind, []).append(r["run"])
lines = [f"prompt {prompt}, {gen} decoded, {threads} threads, KV {kv}; best of the reps and rounds; "
         "overhead: Motif's time per token over the Llama's, minus 1",
         "",
         "| shape | weights | file MB, Motif / Llama | prompt tok/s, Motif / Llama | prompt overhead | decode tok/s, Motif / Llama "
         "| decode overhead | decode overhead per round |",
         "|---|---|---|---|---|---|---|---|"]
for (shape, t), c in cells.items():
    m, l = c["motif"], c["llama"]
    best = lambda runs, key: max(x[key] for x in runs)
    pm, pl = best(m, "prompt_tok_per_s"), best(l, "prompt_tok_per_s")
    dm, dl = best(m, "decode_tok_per_s"), best(l, "decode_tok_per_s")
    per_round = ", ".join(f"{(b['decode_tok_per_s'] / a['decode_tok_per_s'] - 1) * 100:+.1f}%" for a, b in zip(m, l))
    lines.append(f"| {shape} | {t} | {m[0]['file_bytes'] / 1e6:.0f} / {l[0]['file_bytes'] / 1e6:.0f} | {pm:.1f} / {pl:.1f} | {(pl / pm - 1) * 100:+.1f}% | "
                 f"{dm:.1f} / {dl:.1f} | {(dl / dm - 1) * 100:+.1f}% | {per_round} |")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "wrote $OUT/results.jsonl and $OUT/table.md"
