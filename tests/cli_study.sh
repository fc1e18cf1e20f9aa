#!/usr/bin/env bash
# compare --task studies: every run is an ordinary train run folder (info,
# eval loss and train --resume work on it); --jobs 2 (single-thread
# processes) writes the same per-run results, bit for bit, as one process; a
# study killed (kill -9) mid-way, in one process or with --jobs 2 (whose
# workers die with it), continues with --resume to the same report; a result
# file with an impossible body is done again; a second study into the folder
# is refused without --resume or --force.
source "$(dirname "$0")/lib.sh"
# a grid of 2 cells x 2 archs x 2 seeds = 8 runs
ARGS=(--task mqar --archs diff,softmax --pairs 2 --seq 16 --vocab 16 --dim 16 --layers 1 --batch 4 --steps 60
      --eval-every 20 --eval-seqs 8 --seeds 2 --grid heads=1,2 --quiet)
study() { # study OUT [extra flags]
  local out=$1; shift
  OMP_NUM_THREADS=1 "$BIN" compare "${ARGS[@]}" --out "$out" "$@"
}
# the report without what depends on the machine: wall and training times
strip_times() { sed -E 's/Wall time [0-9]+ s[^.]*\.//; s/"(wall|train)_seconds":[0-9.]+//g' "$1"; }
results() { ls "$1"/runs/*/result.bin 2>/dev/null | wc -l; }
# kill -9 the study once `want` runs are done; the pid of the study is $1
kill_after() {
  for _ in $(seq 1 1200); do
    (($(results "$2") >= $3)) && break
    sleep 0.05
  done
  kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null
}

ok "a study in one process" study "$TMP/serial" --jobs 1
ok "the same study in 2 processes" study "$TMP/jobs" --jobs 2
check "8 run folders, each with model.safetensors, train_state.safetensors, metrics.jsonl and result.bin" \
  [ "$(ls "$TMP"/serial/runs/*/{model.safetensors,train_state.safetensors,metrics.jsonl,result.bin} | wc -l)" = 32 ]
R=$TMP/serial/runs/cell1_diff_seed1338
check "metrics.jsonl carries the answer accuracy of every evaluation" [ "$(grep -c '"accuracy":' "$R/metrics.jsonl")" = 4 ]
ok "info reads a run's model" "$BIN" info --model "$R/model.safetensors"
ok "eval loss on a run's held-out sequences (held_out/ token shards)" \
  "$BIN" eval loss --model "$R/model.safetensors" --data "$R/held_out" --seq 16
check "  and prints a finite loss" grep -q "validation loss [0-9]" "$TMP/last.out" "$TMP/last.err"
ok "train --resume continues a run on its task.txt" "$BIN" train --resume --out "$R" --data "$R/task.txt" --steps 80
check "  to step 80, scored at the end" grep -q '"step":80,.*"accuracy":' "$R/metrics.jsonl"
ok "a new train run on a run's task.txt (its vocabulary and length)" \
  "$BIN" train --data "$R/task.txt" --out "$TMP/new" --steps 4 --eval-every 2 --dim 16 --layers 1 --heads 1
check "  scored at every evaluation" [ "$(grep -c '"accuracy":' "$TMP/new/metrics.jsonl")" = 3 ]
same=1
for f in "$TMP"/jobs/runs/*/result.bin; do # every byte but the last field (train_s, a time)
  g=$TMP/serial/runs/$(basename "$(dirname "$f")")/result.bin
  [[ $f == */cell1_diff_seed1338/* ]] && continue # resumed above
  cmp -s <(head -c -8 "$f") <(head -c -8 "$g") || same=0
done
check "--jobs 2 gives bit-identical per-run results" [ $same = 1 ]

# killed in one process
OMP_NUM_THREADS=1 "$BIN" compare "${ARGS[@]}" --out "$TMP/killed" --jobs 1 > /dev/null 2>&1 &
kill_after $! "$TMP/killed" 2
left=$(results "$TMP/killed")
check "killed with $left of 8 runs done" [ "$left" -ge 2 -a "$left" -lt 8 -a ! -e "$TMP/killed/report.md" ]
expect_error "a study in a folder holding one is refused, naming --resume" "--resume" study "$TMP/killed" --jobs 1
ok "--resume finishes it" study "$TMP/killed" --jobs 1 --resume
check "the same report.md as uninterrupted" cmp -s <(strip_times "$TMP/jobs/report.md") <(strip_times "$TMP/killed/report.md")
check "the same report.json" cmp -s <(strip_times "$TMP/jobs/report.json") <(strip_times "$TMP/killed/report.json")

# killed with --jobs 2: the workers die with the study
OMP_NUM_THREADS=1 "$BIN" compare "${ARGS[@]}" --out "$TMP/killed2" --jobs 2 > /dev/null 2>&1 &
kill_after $! "$TMP/killed2" 1
sleep 0.5
no_workers() { ! pgrep -f -- "--out $TMP/killed2 .*--run-index" > /dev/null; }
check "no worker outlives the killed study" no_workers
ok "--resume --jobs 2 finishes it" study "$TMP/killed2" --jobs 2 --resume
check "the same report.md as uninterrupted" cmp -s <(strip_times "$TMP/jobs/report.md") <(strip_times "$TMP/killed2/report.md")

# result files whose body is impossible are done again
no_nan() { ! grep -qiw nan "$1"; }
cp -r "$TMP/jobs" "$TMP/bad"
F=$TMP/bad/runs/cell0_diff_seed1337/result.bin
HDR=1040 # magic, sizes, the settings key
poke() { # poke OFFSET HEX-BYTES: overwrite bytes of $F
  printf "$2" | dd of="$F" bs=1 seek="$1" conv=notrunc status=none
}
for case in "1000000:\x40\x42\x0f\x00" "INT_MAX:\xff\xff\xff\x7f" "0:\x00\x00\x00\x00" "-2:\xfe\xff\xff\xff" \
            "acc 1e300:ACC" "all 0xff:FF"; do
  name=${case%%:*}; bytes=${case#*:}
  cp "$TMP/jobs/runs/cell0_diff_seed1337/result.bin" "$F"
  if [[ $bytes == ACC ]]; then poke $((HDR + 8 + 512 * 8)) '\x9c\x75\x00\x88\x3c\xe4\x37\x7e' # acc[0] = 1e300
  elif [[ $bytes == FF ]]; then size=$(stat -c %s "$F"); head -c $HDR "$TMP/jobs/runs/cell0_diff_seed1337/result.bin" > "$F"
    head -c $((size - HDR)) /dev/zero | tr '\0' '\377' >> "$F"
  else poke $HDR "$bytes"; fi
  ok "n_evals/acc $name: the study resumes" study "$TMP/bad" --jobs 1 --resume
  check "  the run is done again, with a line saying so" grep -q "result.bin: its .* the run is done again" "$TMP/last.err"
  check "  no nan in report.md" no_nan "$TMP/bad/report.md"
  check "  the same report.md" cmp -s <(strip_times "$TMP/jobs/report.md") <(strip_times "$TMP/bad/report.md")
done

check "heatmaps written" [ -s "$TMP/serial/success_diff.png" -a -s "$TMP/serial/success_diff_vs_softmax.png" ]
check "the study table names each cell" grep -q "| heads 1 | DIFF |\|pairs 2, seq 16; heads 1 | DIFF |" "$TMP/serial/report.md"
ok "--force replaces a study" study "$TMP/serial" --force
finish
