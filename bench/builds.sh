#!/usr/bin/env bash
# Two builds of diffattn side by side: training steps (E256 and E768, both
# archs) and generation (f32, q8_0, q4_0), the builds alternating ROUNDS
# times so that a slow spell of the shared machine hits both. Prints each
# measurement and the new/old ratio of the best runs.
#
#   bench/builds.sh OLD_BINARY NEW_BINARY
#
# Check that /proc/loadavg is near zero first; OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE are left as the environment has them.
set -euo pipefail
OLD=${1:?usage: bench/builds.sh OLD_BINARY NEW_BINARY}
NEW=${2:?usage: bench/builds.sh OLD_BINARY NEW_BINARY}
ROUNDS=${ROUNDS:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg), threads: $OMP_NUM_THREADS, rounds: $ROUNDS"
E256=(--dim 256 --layers 4 --heads 4 --seq 256 --batch 8 --steps 3)
E768=(--dim 768 --layers 6 --heads 6 --seq 512 --batch 4 --steps 2)
# the generation models: one f32 model (dim 256, 4 layers) quantized by the old build
"$OLD" init --out "$T/m.safetensors" --dim 256 --layers 4 --heads 4 --seq 512 >/dev/null
for q in q8_0 q4_0; do "$OLD" quantize --model "$T/m.safetensors" --type $q --out "$T/$q.gguf" >/dev/null; done
best() { # best KEY FILE...: the largest value of "KEY": in the JSON lines of the files
  grep -ho "\"$1\":[0-9.]*" "${@:2}" | cut -d: -f2 | sort -g | tail -1
}
for r in $(seq 1 "$ROUNDS"); do
  for b in old new; do
    bin=$OLD; [[ $b == new ]] && bin=$NEW
    for arch in diff softmax; do
      "$bin" bench train --arch $arch "${E256[@]}" --json >>"$T/$b.e256.$arch" 2>/dev/null
      "$bin" bench train --arch $arch "${E768[@]}" --json >>"$T/$b.e768.$arch" 2>/dev/null
    done
    "$bin" bench generate --model "$T/m.safetensors" --also "$T/q8_0.gguf,$T/q4_0.gguf" --prompt 128 --gen 64 \
      --reps 2 --json >>"$T/$b.gen" 2>/dev/null
  done
done
printf '%-28s %12s %12s %8s\n' measurement old new new/old
row() { printf '%-28s %12.1f %12.1f %8.3f\n' "$1" "$2" "$3" "$(echo "$3 / $2" | bc -l)"; }
for cfg in e256 e768; do
  for arch in diff softmax; do
    row "train $cfg $arch tok/s" "$(best tok_per_s "$T/old.$cfg.$arch")" "$(best tok_per_s "$T/new.$cfg.$arch")"
  done
done
for w in f32 q8_0 q4_0; do
  for k in prompt_tok_per_s decode_tok_per_s; do
    o=$(grep "\"weights\":\"$w\"" "$T/old.gen" | grep -o "\"$k\":[0-9.]*" | cut -d: -f2 | sort -g | tail -1)
    n=$(grep "\"weights\":\"$w\"" "$T/new.gen" | grep -o "\"$k\":[0-9.]*" | cut -d: -f2 | sort -g | tail -1)
    row "generate $w ${k%_tok_per_s} tok/s" "$o" "$n"
  done
done
