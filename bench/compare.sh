#!/usr/bin/env bash
# Side-by-side training throughput, diffattn against eager PyTorch (bench/peer.py)
# on the same machine, same model, same batch and thread count, in one run:
# both archs at the issue's two configurations. Best of STEPS timed steps each.
#
#   bench/compare.sh                 # OpenBLAS kernels as the environment sets them
#   bench/compare.sh --native-blas   # unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
#                                    # for both programs (this command only)
#
# Needs Debian's python3-torch for the peer. Check that /proc/loadavg is near
# zero first: one stray process halves a 2-core figure.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/diffattn}
PY=${PY:-/usr/bin/python3}
STEPS=${STEPS:-3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
if [[ ${1:-} == --native-blas ]]; then
  unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
  echo "note: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for this comparison"
fi
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg), threads: $OMP_NUM_THREADS, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
configs=("--dim 256 --layers 4 --heads 4 --seq 256 --batch 8" "--dim 768 --layers 6 --heads 6 --seq 512 --batch 4")
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p"; }
printf '\n| config | arch | diffattn fp32 tok/s | diffattn bf16 tok/s | PyTorch fp32 tok/s | speed-up fp32 | speed-up bf16 | diffattn fp32 ms/step (best, median) | PyTorch ms/step (best, median) | MFU fp32 | MFU bf16 |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
for cfg in "${configs[@]}"; do
  for arch in diff softmax; do
    c=$("$BIN" bench train --arch $arch $cfg --steps "$STEPS" --json)
    if "$BIN" bench train --help | grep -q -- --bf16 && grep -qw avx512_bf16 /proc/cpuinfo; then
      b=$("$BIN" bench train --arch $arch $cfg --steps "$STEPS" --json --bf16 2>/dev/null || echo '{}')
    else b='{}'; fi
    p=$("$PY" bench/peer.py --arch $arch $cfg --steps "$STEPS")
    ct=$(field tok_per_s <<<"$c"); bt=$(field tok_per_s <<<"$b"); pt=$(field tok_per_s <<<"$p")
    printf '| %s | %s | %s | %s | %s | %.2fx | %s | %s, %s | %s, %s | %s | %s |\n' "$(sed 's/--//g' <<<"$cfg")" $arch \
      "$ct" "${bt:--}" "$pt" "$(awk "BEGIN { print $ct / $pt }")" \
      "$([[ -n $bt ]] && awk "BEGIN { printf \"%.2fx\", $bt / $pt }" || echo -)" \
      "$(field ms_per_step <<<"$c")" "$(field ms_per_step_median <<<"$c")" \
      "$(field ms_per_step <<<"$p")" "$(field ms_per_step_median <<<"$p")" "$(field mfu <<<"$c")" "$(field mfu <<<"$b")"
  done
done
