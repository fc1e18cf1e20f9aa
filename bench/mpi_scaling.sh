#!/usr/bin/env bash
# Data-parallel training on this machine: throughput at P = 1 and P = 2 ranks
# (same global batch, same cores), time in collectives per step, a bare
# allreduce of the gradient's size, and peak RSS per rank with and without
# --zero 1. Default model (3.35 M parameters, E256 L4 H4, T256, batch 8).
#
#   bench/mpi_scaling.sh            # STEPS=20 by default
#
# Check /proc/loadavg first: one stray process halves a 2-core figure.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/diffattn}
STEPS=${STEPS:-20}
NP=$(nproc)
MPI=(mpirun --allow-run-as-root --oversubscribe)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg), cores: $NP, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $(mpirun --version | head -1)"
find -L /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort | xargs cat > "$W/corpus.txt"
RUN=(--data "$W/corpus.txt" --steps "$STEPS" --warmup 5 --eval-every 0 --eval-batches 1 --save-every 0 --log-every 1)

# median over the steps 2 .. STEPS-1 of a metrics field (the first and the
# last step carry start-up and the final evaluation)
median() { python3 -c '
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
v = [r[sys.argv[2]] for r in rows if sys.argv[2] in r and 2 <= r["step"] < int(sys.argv[3])]
print("%.4g" % statistics.median(v) if v else "-")' "$1" "$2" "$STEPS"; }

printf '\n| run | ranks x threads | tok/s (median step) | s in collectives per step (rank 0) |\n|---|---|---|---|\n'
one() { # label, ranks, threads, extra flags...
  local label=$1 p=$2 t=$3; shift 3
  local out="$W/run_${p}_${t}_$RANDOM"
  if [[ $p == 1 ]]; then OMP_NUM_THREADS=$t "$BIN" train "${RUN[@]}" "$@" --out "$out" 2>/dev/null
  else "${MPI[@]}" -np "$p" -x OMP_NUM_THREADS="$t" "$BIN" train "${RUN[@]}" "$@" --out "$out" 2>/dev/null; fi
  printf '| %s | %d x %d | %s | %s |\n' "$label" "$p" "$t" "$(median "$out/metrics.jsonl" tok_per_s)" \
    "$(median "$out/metrics.jsonl" comm_s)"
}
one "1 process (the plain loop)" 1 "$NP"
one "1 process, 1 thread" 1 1
one "mpirun, float allreduce" 2 $((NP / 2 > 0 ? NP / 2 : 1))
one "mpirun, float allreduce, --zero 1" 2 $((NP / 2 > 0 ? NP / 2 : 1)) --zero 1
one "1 process, --deterministic" 1 "$NP" --deterministic
one "1 process, --deterministic, 1 thread" 1 1 --deterministic
one "mpirun, --deterministic" 2 $((NP / 2 > 0 ? NP / 2 : 1)) --deterministic

# the bare allreduce of one step's gradients (n_params floats)
NPARAM=$("$BIN" init --out "$W/m.safetensors" >/dev/null 2>&1 && "$BIN" info --model "$W/m.safetensors" |
         sed -n "s/^parameters *\([0-9]*\).*/\1/p" | head -1 | tr -d ,)
NPARAM=${NPARAM:-3350000}
mpicc -O2 -o "$W/allreduce" bench/allreduce.c
echo
echo "bare MPI_Allreduce of $NPARAM floats ($((NPARAM * 4)) bytes), 2 ranks, 20 times:"
"${MPI[@]}" -np 2 "$W/allreduce" "$NPARAM" 20
"${MPI[@]}" -np 2 "$W/allreduce" "$NPARAM" 20 nb
echo "the same over TCP (loopback), the transport between machines:"
"${MPI[@]}" -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo "$W/allreduce" "$NPARAM" 20

# peak RSS per rank, 5 steps (the final checkpoint gathers the moments on rank 0)
echo
echo "peak RSS per rank (KB), 5 steps, 2 ranks:"
for z in 0 1; do
  "${MPI[@]}" -np 2 -x OMP_NUM_THREADS=1 sh -c '/usr/bin/time -f "--zero '$z' rank $OMPI_COMM_WORLD_RANK: %M KB" "$@"' \
    sh "$BIN" train "${RUN[@]}" --steps 5 --zero $z --out "$W/rss$z" 2>&1 | grep -E "^--zero|data parallel" |
    sed 's/^data parallel: .*AdamW/  plan: AdamW/' | sort
done
