#!/usr/bin/env bash
# Every command has --help; bad flags, values and files get a clear one-line
# message and exit code 1, never a crash (signals give codes >= 128).
source "$(dirname "$0")/lib.sh"

for cmd in init info logits grads train sample encode decode prepare export; do
  ok "$cmd --help" "$BIN" $cmd --help
  expect_error "$cmd: unknown flag" "unknown flag --bogus" "$BIN" $cmd --bogus 1
done
ok "--help" "$BIN" --help
expect_error "unknown command" "unknown command" "$BIN" frobnicate
expect_error "no command" "usage" "$BIN"

M="$TMP/m.safetensors"
ok "init" "$BIN" init --out "$M" --dim 32 --layers 2 --heads 2 --seq 32
expect_error "init: missing --out" "--out is required" "$BIN" init
expect_error "init: bad arch" "expected diff or softmax" "$BIN" init --out "$TMP/x" --arch mamba
expect_error "init: indivisible heads" "not divisible" "$BIN" init --out "$TMP/x" --dim 30 --heads 4
expect_error "init: GQA not dividing" "n_kv_heads" "$BIN" init --out "$TMP/x" --heads 4 --kv-heads 3
expect_error "init: head too small" "must be even and >= 4" "$BIN" init --out "$TMP/x" --dim 32 --heads 8
expect_error "init: not a number" "not a valid integer" "$BIN" init --out "$TMP/x" --dim 3x2
expect_error "init: missing value" "needs a value" "$BIN" init --out
expect_error "init: unwritable" "$TMP/none/m" "$BIN" init --out "$TMP/none/m/x.safetensors"

head -c 1000 "$M" > "$TMP/trunc.safetensors"
expect_error "info: truncated model" "trunc.safetensors" "$BIN" info --model "$TMP/trunc.safetensors"
expect_error "info: missing model" "No such file" "$BIN" info --model "$TMP/nope.safetensors"
printf 'not a model at all' > "$TMP/junk.safetensors"
expect_error "info: junk file" "junk.safetensors" "$BIN" info --model "$TMP/junk.safetensors"
expect_error "info: folder" "$TMP" "$BIN" info --model "$TMP"

echo "1 2 3 4" > "$TMP/ids.txt"
echo "1 2 999" > "$TMP/big.txt"
echo "1 two 3" > "$TMP/word.txt"
echo "-1 2" > "$TMP/neg.txt"
: > "$TMP/empty.txt"
echo "5" > "$TMP/one.txt"
seq 1 40 | tr '\n' ' ' > "$TMP/long.txt"
ok "logits" "$BIN" logits --model "$M" --ids "$TMP/ids.txt" --out "$TMP/l.npy"
ok "grads" "$BIN" grads --model "$M" --ids "$TMP/ids.txt" --out "$TMP/g.safetensors"
expect_error "logits: id out of range" "outside the vocabulary" "$BIN" logits --model "$M" --ids "$TMP/big.txt" --out "$TMP/l.npy"
expect_error "logits: negative id" "outside the vocabulary" "$BIN" logits --model "$M" --ids "$TMP/neg.txt" --out "$TMP/l.npy"
expect_error "logits: non-integer id" "not an integer" "$BIN" logits --model "$M" --ids "$TMP/word.txt" --out "$TMP/l.npy"
expect_error "logits: empty ids" "no token ids" "$BIN" logits --model "$M" --ids "$TMP/empty.txt" --out "$TMP/l.npy"
expect_error "logits: too long" "max_seq_len" "$BIN" logits --model "$M" --ids "$TMP/long.txt" --out "$TMP/l.npy"
expect_error "grads: one id" "at least 2" "$BIN" grads --model "$M" --ids "$TMP/one.txt" --out "$TMP/g.safetensors"

cat include/*.h include/diffattn/*.h src/*/*.c > "$TMP/corpus.txt"
TR=(--dim 32 --layers 1 --heads 2 --seq 32 --batch 2)
expect_error "train: missing data" "No such file" "$BIN" train --data "$TMP/nope" --out "$TMP/r" "${TR[@]}"
expect_error "train: empty data" "empty" "$BIN" train --data "$TMP/empty.txt" --out "$TMP/r" "${TR[@]}"
mkdir "$TMP/emptydir"
expect_error "train: empty folder" "no text" "$BIN" train --data "$TMP/emptydir" --out "$TMP/r" "${TR[@]}"
expect_error "train: too little text" "too little" "$BIN" train --data "$TMP/ids.txt" --out "$TMP/r" "${TR[@]}"
expect_error "train: grad-accum" "must divide" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" "${TR[@]}" --grad-accum 3
expect_error "train: negative steps" "--steps" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" "${TR[@]}" --steps -5
expect_error "train: bad lr" "--lr" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" "${TR[@]}" --lr 0
expect_error "train: min-lr above lr" "--min-lr" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" "${TR[@]}" --min-lr 1
expect_error "train: val fraction" "val-fraction" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" "${TR[@]}" --val-fraction 1.5
expect_error "train: resume nothing" "to start a new run" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/fresh" --resume
expect_error "train: missing --data" "--data is required" "$BIN" train --out "$TMP/r"
expect_error "train: lr NaN" "not a valid number" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" --lr nan
ok "train: tiny run" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" "${TR[@]}" --steps 3 --eval-batches 1
expect_error "train: resume past the end" "resume with more steps" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" --resume
expect_error "train: resume changes the model" "a model field cannot change when resuming" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" --resume --dim 64
ok "train: resume with more steps" "$BIN" train --data "$TMP/corpus.txt" --out "$TMP/r" --resume --steps 5

# past the context (the model holds 32 positions), generation slides and goes on
out=$("$BIN" sample --model "$M" --prompt "ab" --max-new 100 --temperature 0 2>/dev/null)
if [[ ${#out} -ge 90 ]]; then pass "sample: past the context"
else fail "sample: past the context: ${#out} bytes"; fi
expect_error "sample: prompt longer than the context" "shorten it" "$BIN" sample --model "$M" --prompt "$(printf 'x%.0s' {1..40})"
# a sliding-window model's ring cache holds any length: a prompt past max_seq_len is fine
"$BIN" init --out "$TMP/win.safetensors" --dim 32 --layers 1 --heads 2 --seq 32 --window 8 --ffn 64 >/dev/null
out=$("$BIN" sample --model "$TMP/win.safetensors" --prompt "$(printf 'x%.0s' {1..100})" --max-new 20 --temperature 0 2>/dev/null)
if [[ ${#out} -ge 115 ]]; then pass "sample: a windowed model takes a prompt past max_seq_len"
else fail "sample: a windowed model takes a prompt past max_seq_len: ${#out} bytes"; fi
expect_error "sample: bad top-p" "--top-p" "$BIN" sample --model "$M" --top-p 0
expect_error "sample: negative temperature" "--temperature" "$BIN" sample --model "$M" --temperature -1
ok "sample" "$BIN" sample --model "$TMP/r/model.safetensors" --prompt "int " --max-new 8

ok "compare --help" "$BIN" compare --help
expect_error "compare: bad seeds" "--seeds" "$BIN" compare --out "$TMP/cmp" --seeds 0
expect_error "compare: context too short" "--seq" "$BIN" compare --out "$TMP/cmp" --seq 64
expect_error "compare: budget and steps" "--budget-minutes" "$BIN" compare --out "$TMP/cmp" --budget-minutes 5 --steps 10
expect_error "compare: negative budget" "--budget-minutes" "$BIN" compare --out "$TMP/cmp" --budget-minutes -1
expect_error "compare: bad needle context" "--needle-context" "$BIN" compare --out "$TMP/cmp" --needle-context 100x
expect_error "compare: needle context beyond seq" "--needle-context" "$BIN" compare --out "$TMP/cmp" --needle-context 4000
expect_error "compare: queries above needles" "--queries" "$BIN" compare --out "$TMP/cmp" --needles 2 --queries 3
ok "eval --help" "$BIN" eval --help
ok "eval loss --help" "$BIN" eval loss --help
expect_error "eval: no subcommand" "expected 'loss'" "$BIN" eval
expect_error "eval loss: missing data" "No such file" "$BIN" eval loss --model "$M" --data "$TMP/nope"
expect_error "eval loss: window too long" "max_seq_len" "$BIN" eval loss --model "$M" --data "$TMP/corpus.txt" --seq 4096
out=$("$BIN" eval loss --model "$TMP/r/model.safetensors" --data "$TMP/corpus.txt" --seq 32 --windows 4 --json 2>/dev/null)
if [[ $out == *'"loss":'* && $out == *'"ppl":'* ]]; then pass "eval loss --json"
else fail "eval loss --json: $out"; fi
ok "eval outliers --help" "$BIN" eval outliers --help
ok "eval quant-logits --help" "$BIN" eval quant-logits --help
ok "eval needle --help" "$BIN" eval needle --help
expect_error "eval needle: bad context" "--context" "$BIN" eval needle --model "$M" --context 12
expect_error "eval needle: bad depth" "--depths" "$BIN" eval needle --model "$M" --depths 0,150
expect_error "eval needle: too long for the model" "max_seq_len" "$BIN" eval needle --model "$M" --context 1024 --samples 1
expect_error "eval quant-logits: bad --bits" "--bits" "$BIN" eval quant-logits --model "$M" --data "$TMP/corpus.txt" --bits 16,x
expect_error "eval quant-logits: 1 bit" "--bits" "$BIN" eval quant-logits --model "$M" --data "$TMP/corpus.txt" --bits 1
expect_error "eval quant-logits: model too short for needles" "too short for needle prompts" "$BIN" eval quant-logits --model "$M" --data "$TMP/corpus.txt"
"$BIN" init --out "$TMP/m256.safetensors" --dim 32 --layers 1 --heads 2 --seq 256 >/dev/null
# on a terminal, the evaluation shows which step it is in
out=$(script -qc "'$BIN' eval quant-logits --model '$TMP/m256.safetensors' --data '$TMP/corpus.txt' --seq 64 --windows 2 --bits 8 --samples 1" /dev/null 2>&1)
if [[ $out == *'[1/4] loss, exact logits'*'[4/4] needles, 8-bit logits'* ]]; then pass "eval quant-logits: progress on a terminal"
else fail "eval quant-logits: progress on a terminal: $out"; fi
out=$("$BIN" eval quant-logits --model "$TMP/m256.safetensors" --data "$TMP/corpus.txt" --seq 64 --windows 2 --bits 8 --samples 1 2>&1)
if [[ $out == *'needle accuracy'*'(N=3, R=2, 192 bytes'* && $out == *' 8-bit logits: loss'* ]]; then pass "eval quant-logits: a 256-token model gets as many needles as fit"
else fail "eval quant-logits on a 256-token model: $out"; fi
ok "eval attention --help" "$BIN" eval attention --help
expect_error "eval attention: no model" "--model" "$BIN" eval attention
expect_error "eval attention: --vs without --png" "--png" "$BIN" eval attention --model "$M" --vs "$M"
expect_error "eval attention: bad needles" "--needles" "$BIN" eval attention --model "$M" --needles 0
out=$("$BIN" eval attention --model "$TMP/m256.safetensors" --context 128 --needles 1 --queries 1 --samples 1 --depths 0,100 --json 2>/dev/null)
if [[ $out == *'"answer":'* && $out == *'"noise":'* && $out == *'"by_layer":[{"layer":0'* ]]; then pass "eval attention --json"
else fail "eval attention --json: $out"; fi
expect_error "eval attention: too long for the model" "max_seq_len" "$BIN" eval attention --model "$M" --context 1024 --samples 1
expect_error "eval attention: png in a missing folder" "cannot write PNG" "$BIN" eval attention --model "$TMP/m256.safetensors" --context 128 --needles 1 --queries 1 --samples 1 --depths 50 --png "$TMP/no/such/dir/a.png"
out=$("$BIN" eval outliers --model "$TMP/r/model.safetensors" --data "$TMP/corpus.txt" --seq 16 --windows 2 --json 2>/dev/null)
if [[ $out == *'"attention_logits":{"top1":'* && $out == *'"hidden_states":'*'"median":'* ]]; then pass "eval outliers --json"
else fail "eval outliers --json: $out"; fi
ok "tokenizer --help" "$BIN" tokenizer --help
ok "tokenizer train --help" "$BIN" tokenizer train --help
expect_error "tokenizer: no subcommand" "expected 'train'" "$BIN" tokenizer
ok "bench --help" "$BIN" bench --help
ok "bench train --help" "$BIN" bench train --help
expect_error "bench: no target" "expected 'train' or 'attn'" "$BIN" bench
expect_error "bench: bad kernel" "--kernel" "$BIN" bench attn --kernel fast
expect_error "bench: unknown flag" "unknown flag --bogus" "$BIN" bench train --bogus 1
out=$("$BIN" bench train --dim 32 --layers 1 --heads 2 --seq 16 --batch 2 --steps 2 --json 2>/dev/null)
if [[ $out == *'"tok_per_s":'* && $out == *'"ms_per_step":'* && $out == *'"gflops":'* && $out == *'"peak_gflops":'* && $out == *'"mfu":'* ]]; then pass "bench train --json has the documented keys"
else fail "bench train --json: $out"; fi
out=$("$BIN" bench train --dim 32 --layers 1 --heads 2 --seq 16 --batch 2 --steps 2 --profile --json 2>/dev/null)
if [[ $out == *'"profile_ms_per_step":{"embedding":'*'"matmul_forward":'*'"attention_backward":'*'"adamw":'*'}}' ]]; then pass "bench train --profile --json"
else fail "bench train --profile --json: $out"; fi
out=$("$BIN" bench train --arch diff --dim 32 --layers 1 --heads 2 --seq 16 --batch 2 --steps 2 --profile 2>/dev/null)
if [[ $out == *'time per step by phase'*'head_norm'*'(not covered)'* ]]; then pass "bench train --profile"
else fail "bench train --profile: $out"; fi
expect_error "bench attn: --profile refused" "--profile" "$BIN" bench attn --profile
out=$("$BIN" bench attn --arch softmax --dim 32 --heads 2 --seq 70 --batch 1 --steps 1 --json 2>/dev/null)
if [[ $out == *'"bench":"attn"'* && $out == *'"mfu":'* ]]; then pass "bench attn --json"
else fail "bench attn --json: $out"; fi

finish
