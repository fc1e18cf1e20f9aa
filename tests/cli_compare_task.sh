#!/usr/bin/env bash
# compare --task: the retrieval tasks run from the CLI and print their report;
# a wrong task, a wrong list or text without --data are refused in one line;
# train's optimizer and schedule flags apply to every run.
source "$(dirname "$0")/lib.sh"
T=$TMP
# outcome WHAT: the exit code of the last command, as a test
outcome() { if [[ $? == 0 ]]; then pass "$1"; else fail "$1"; fi; }

out=$(OMP_NUM_THREADS=1 "$BIN" compare --task noisy-recall --out "$T/nr" --seq 32 --noise 0,0.5 --vocab 32 \
      --noise-vocab 8 --steps 4 --eval-every 2 --eval-seqs 8 --dim 16 --layers 1 --batch 4 --quiet 2>&1)
[[ $out == *"| noise 0.00, seq 32 | DIFF |"* && $out == *"| noise 0.50, seq 32 | softmax |"* ]]; outcome "noisy-recall sweep prints its report"
[[ -s $T/nr/report.json && -s $T/nr/accuracy_1.png && -s $T/nr/lambda.png ]]; outcome "report.json and the figures written"
out=$(OMP_NUM_THREADS=1 "$BIN" compare --task icl --archs softmax,diff --out "$T/icl" --demos 4 --classes 3 --symbols 6 \
      --vocab 12 --perms 3 --perm-episodes 4 --steps 4 --eval-every 2 --eval-seqs 8 --dim 16 --layers 1 --batch 4 --quiet 2>&1)
[[ $out == *"## Order robustness"* && $out == *"| demos 4, classes 3, symbols 6 | softmax |"* && $out != *"DIFF2"* ]]
outcome "icl with --archs softmax,diff prints the order table for those two only"
[[ -s $T/icl/permutation_margin.png ]]; outcome "icl writes permutation_margin.png"
"$BIN" compare --task mqar --help | grep -q -- "--pairs"; outcome "compare --task mqar --help lists the task flags"
"$BIN" compare --task icl --help | grep -q -- "--archs"; outcome "compare --task --help lists --archs"
"$BIN" compare --help | grep -q -- "--task"; outcome "compare --help lists --task"
expect_error "a second comparison into the same folder is refused" "--force" "$BIN" compare --task noisy-recall --out "$T/nr" --steps 2
expect_error "unknown task" "--task: expected mqar" "$BIN" compare --task sorting
expect_error "bad sweep list" "--pairs" "$BIN" compare --task mqar --pairs 4,x
expect_error "text needs --data" "--task text trains on --data" "$BIN" compare --task text --out "$T/x"
expect_error "bad --archs" '"gpt" is not an architecture' "$BIN" compare --task icl --archs diff,gpt --out "$T/z"
expect_error "--seq with icl" "set --demos" "$BIN" compare --task icl --seq 64 --out "$T/z"
expect_error "too many pairs" "pairs 32 must lie" "$BIN" compare --task mqar --pairs 32 --seq 64 --out "$T/y"
out=$(OMP_NUM_THREADS=1 "$BIN" compare --task mqar --archs softmax,swa --swa-window 4 --out "$T/swa" --pairs 2 --seq 16 \
      --vocab 16 --steps 4 --eval-every 2 --eval-seqs 8 --dim 16 --layers 1 --batch 4 --quiet 2>&1)
[[ $out == *"| SWA | 4656 |"* && $out == *"SWA: softmax over the last 4 keys"* && -s $T/swa/runs/cell0_swa_seed1337/result.bin ]]
outcome "--archs swa: the softmax model with --swa-window, its own row, parameters and run file"
expect_error "swa needs its window" "needs --swa-window" "$BIN" compare --task mqar --archs diff,swa --out "$T/z"
OMP_NUM_THREADS=1 "$BIN" compare --task mqar --archs softmax,nsa --out "$T/nsa" --pairs 2 --seq 16 --vocab 16 --steps 4 \
  --eval-every 2 --eval-seqs 8 --dim 16 --layers 1 --batch 4 --quiet >/dev/null 2>&1
grep -q '| accuracy, 8-bit logits | [0-9.]* ± [0-9.]* | n/a | – |' "$T/nsa/report.md" && grep -q '"quant_accuracy":{"8":null,"6":null,"4":null}' \
  "$T/nsa/report.json" && ! grep -qiw nan "$T/nsa/report.json" "$T/nsa/report.md"
outcome "NSA's quantized-logit accuracies (no such engine path): n/a in report.md, null in report.json, never nan"
OMP_NUM_THREADS=1 "$BIN" compare --archs softmax,nsa --steps 2 --dim 32 --layers 1 --heads 1 --seq 256 --batch 2 \
  --out "$T/text-nsa" --quiet >/dev/null 2>&1
grep -q '| Δ loss, 8-bit logits | .* | n/a | – |' "$T/text-nsa/report.md" && grep -q '"quant_needle":{"16":null,' \
  "$T/text-nsa/report.json" && ! grep -qiw nan "$T/text-nsa/report.json" "$T/text-nsa/report.md"
outcome "text compare: NSA's quantized-logit rows n/a (no verdict), null in report.json, never nan"
out=$(OMP_NUM_THREADS=1 "$BIN" compare --task mqar --archs diff --out "$T/opt" --pairs 2 --seq 16 --vocab 16 --steps 4 \
      --eval-every 2 --eval-seqs 8 --dim 16 --layers 1 --batch 4 --warmup 0 --clip 0.5 --weight-decay 0 --min-lr 1e-4 \
      --save-every 2 --quiet 2>&1)
outcome "train's --warmup, --clip, --weight-decay, --min-lr, --save-every are taken"
"$BIN" info --model "$T/opt/runs/cell0_diff_seed1337/model.safetensors" > /dev/null; outcome "  and the run is a run folder"
"$BIN" compare --task mqar --help | grep -q -- "--weight-decay"; outcome "compare --task --help lists train's flags"
expect_error "train's ranges apply" "weight_decay" "$BIN" compare --task mqar --weight-decay 2 --out "$T/wd"
if grep -q avx512_bf16 /proc/cpuinfo; then
  ok "--bf16 on an AVX512-BF16 CPU" "$BIN" compare --task mqar --archs diff --out "$T/bf16" --pairs 2 --seq 16 --vocab 16 \
    --steps 2 --eval-every 2 --eval-seqs 8 --dim 16 --layers 1 --batch 4 --bf16 --quiet
else
  expect_error "--bf16 needs AVX512-BF16" "AVX512-BF16" "$BIN" compare --task mqar --bf16 --out "$T/bf16"
fi
finish
