#!/usr/bin/env bash
# A 1.2 B-parameter DiffLlama at kajuma/DiffLlama-0.3B-handcut's configuration
# (random BF16 weights from tools/make_hf_big.py, 2.5 GB): load, quantize to
# q8_0 and q4_k, and decode at batch 1. Each format is timed in its own
# process, so that its peak RSS is its own; --bandwidth sets each one's
# decoding against the copy bandwidth measured in that process.
#
#   bench/hf_scale.sh [DIR]      (default /tmp/dl03; made when missing)
#
# Needs about 8 GB of memory and 7 GB of disk. Check that /proc/loadavg is
# near zero first.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/diffattn}
DIR=${1:-/tmp/dl03}
[[ ${1:-} == --help || ${1:-} == -h ]] && { sed -n 2,11p "$0" | sed 's/^# \{0,1\}//'; exit 0; }
[ -e "$DIR/config.json" ] || /usr/bin/python3 tools/make_hf_big.py "$DIR"
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg), threads: ${OMP_NUM_THREADS:-$(nproc)}"
for t in q8_0 q4_k; do
  [ -e "$DIR.$t.gguf" ] || /usr/bin/time -f "quantize $t: %e s, peak RSS %M KB" \
    "$BIN" quantize --model "$DIR" --type "$t" --out "$DIR.$t.gguf"
done
for m in "$DIR" "$DIR.q8_0.gguf" "$DIR.q4_k.gguf"; do
  /usr/bin/time -f "  peak RSS %M KB, %e s" "$BIN" bench generate --model "$m" --prompt 16 --gen 64 --reps 3 --bandwidth
done
