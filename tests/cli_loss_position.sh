#!/usr/bin/env bash
# eval loss --by-position and --distract: the loss at every position equals
# -log softmax of `diffattn logits` (diffattn safetensors, a GGUF, a Hugging
# Face folder); the bins' mean equals the plain loss on the same windows;
# distractors leave the rate-0 loss alone, score only target tokens, repeat
# with the seed; training with --distract resumes bit for bit; bad flags are
# named.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "python3 (reading .npy logits and JSON)"

# max |loss_by_position[t] - (-log softmax(logits[t])[ids[t+1]])| over t
position_error() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, math, struct, sys
j = json.loads(open(sys.argv[1]).read())
ids = [int(x) for x in open(sys.argv[2]).read().split()]
b = open(sys.argv[3], 'rb').read()
n = struct.unpack('<H', b[8:10])[0]
d = b[10 + n:]
z = struct.unpack('<%df' % (len(d) // 4), d)
V = len(z) // len(ids)
worst = 0.0
got = j['loss_by_position']
assert len(got) == len(ids) - 1, (len(got), len(ids))
for t in range(len(ids) - 1):
    row = z[t * V:(t + 1) * V]
    m = max(row)
    want = math.log(sum(math.exp(x - m) for x in row)) + m - row[ids[t + 1]]
    worst = max(worst, abs(got[t] - want))
print('%.3g' % worst)
PY
}
per_position() { # WHAT MODEL IDS
  local e
  "$BIN" eval loss --model "$2" --ids "$3" --by-position --json >"$TMP/pos.json" 2>"$TMP/pos.err" &&
    "$BIN" logits --model "$2" --ids "$3" --out "$TMP/pos.npy" >/dev/null 2>&1 &&
    e=$(position_error "$TMP/pos.json" "$3" "$TMP/pos.npy") || { fail "$1" "$(head -c 300 "$TMP/pos.err")"; return; }
  if python3 -c "import sys; sys.exit(0 if float('$e') <= 1e-4 else 1)"; then pass "$1 (max error $e)"
  else fail "$1" "max error $e > 1e-4"; fi
}

F=tests/fixtures
per_position "per position = -log softmax of logits (DIFF safetensors)" $F/diff_mha.model.safetensors $F/diff_mha.ids.txt
per_position "per position = -log softmax of logits (DIFF V2 GQA)" $F/diff2_gqa_rep2.model.safetensors $F/diff2_gqa_rep2.ids.txt
python3 -c "print(' '.join(str((7 * i + 3) % 61) for i in range(64)))" >"$TMP/ids_hf.txt"
per_position "per position = -log softmax of logits (Hugging Face Llama folder)" $F/hf_llama_gqa "$TMP/ids_hf.txt"
ok "a GGUF of the fixture" "$BIN" export --format gguf --model $F/diff_mha.model.safetensors --out "$TMP/diff.gguf"
per_position "per position = -log softmax of logits (GGUF)" "$TMP/diff.gguf" $F/diff_mha.ids.txt

# a small byte-level model on the repository's own text; distractors from other files
cat docs/*.md > "$TMP/text.txt"
cat src/*/*.c > "$TMP/noise.txt"
M=(--dim 32 --layers 2 --heads 2 --seq 64 --batch 4 --log-every 100 --eval-every 0 --warmup 2 --lr 3e-3)
ok "a byte model trains" "$BIN" train "${M[@]}" --steps 10 --data "$TMP/text.txt" --out "$TMP/run"
W=(--model "$TMP/run/model.safetensors" --data "$TMP/text.txt" --windows 12 --batch 4)
"$BIN" eval loss "${W[@]}" --json >"$TMP/plain.json"
"$BIN" eval loss "${W[@]}" --by-position --json >"$TMP/bins.json"
check "the bins' mean over all positions equals the plain loss" python3 - "$TMP/plain.json" "$TMP/bins.json" <<'PY'
import json, sys
p, b = (json.loads(open(f).read()) for f in sys.argv[1:3])
bins = b['bins']
mean = sum(x['loss'] * x['tokens'] for x in bins) / sum(x['tokens'] for x in bins)
assert [(x['first'], x['last']) for x in bins] == [(1, 1), (2, 3), (4, 7), (8, 15), (16, 31), (32, 63), (64, 64)], bins
assert sum(x['tokens'] for x in bins) == b['target_tokens'] == 12 * 64
assert abs(mean - p['loss']) < 2e-6 and abs(b['loss'] - p['loss']) < 2e-6, (mean, b['loss'], p['loss'])
assert all(x['lo'] <= x['loss'] <= x['hi'] for x in bins[1:])
PY

D=(--distract "$TMP/noise.txt" --distract-span 8)
"$BIN" eval loss "${W[@]}" "${D[@]}" --distract-rate 0 --json >"$TMP/r0.json"
"$BIN" eval loss "${W[@]}" "${D[@]}" --distract-rate 0.5 --json >"$TMP/r5.json"
"$BIN" eval loss "${W[@]}" "${D[@]}" --distract-rate 0.5 --json >"$TMP/r5b.json"
"$BIN" eval loss "${W[@]}" "${D[@]}" --distract-rate 0.5 --seed 2 --json >"$TMP/r5c.json"
check "rate 0 scores the plain windows" python3 - "$TMP/plain.json" "$TMP/r0.json" <<'PY'
import json, sys
p, r = (json.loads(open(f).read()) for f in sys.argv[1:3])
assert abs(p['loss'] - r['loss']) < 2e-6 and r['target_tokens'] == 12 * 64, (p, r)
PY
check "rate 0.5 scores only the target tokens: half the positions" python3 - "$TMP/r5.json" <<'PY'
import json, math, sys
r = json.loads(open(sys.argv[1]).read())
n_t = 65 - math.floor(0.5 * 65 + 0.5)  # lround, as the library rounds
assert 12 * (n_t - 1) <= r['target_tokens'] <= 12 * n_t, r
PY
check "the same seed gives the same windows" cmp -s "$TMP/r5.json" "$TMP/r5b.json"
check "another seed other windows" bash -c "! cmp -s '$TMP/r5.json' '$TMP/r5c.json'"

# training with distractors, P drawn per window, resumes exactly
R=("${M[@]}" --data "$TMP/text.txt" "${D[@]}" --distract-rate 0,0.3,0.6 --steps 12 --save-every 4)
ok "training with --distract" "$BIN" train "${R[@]}" --out "$TMP/dfull"
"$BIN" train "${R[@]}" --out "$TMP/dstop" --stop-at 5 >/dev/null 2>&1
"$BIN" train "${R[@]}" --out "$TMP/dstop" --resume >/dev/null 2>&1
check "training with --distract resumes bit for bit" cmp -s "$TMP/dfull/model.safetensors" "$TMP/dstop/model.safetensors"
"$BIN" train "${M[@]}" --data "$TMP/text.txt" --steps 12 --out "$TMP/nodis" >/dev/null 2>&1
check "--distract changes what is trained on" bash -c "! cmp -s '$TMP/dfull/model.safetensors' '$TMP/nodis/model.safetensors'"

expect_error "--distract-rate alone" "--distract-rate needs --distract" "$BIN" eval loss "${W[@]}" --distract-rate 0.3
expect_error "a rate above 0.9" "expected shares in [0, 0.9]" "$BIN" eval loss "${W[@]}" "${D[@]}" --distract-rate 1.5
expect_error "--distract without a rate" "needs --distract-rate" "$BIN" eval loss "${W[@]}" "${D[@]}"
expect_error "--distract-span 0" "--distract-span must be positive" "$BIN" eval loss "${W[@]}" "${D[@]}" --distract-rate 0.3 --distract-span 0
expect_error "--distract into --ids" "not into --ids" "$BIN" eval loss --model $F/diff_mha.model.safetensors --ids $F/diff_mha.ids.txt "${D[@]}" --distract-rate 0.3
expect_error "neither --data nor --ids" "give one of --data" "$BIN" eval loss --model $F/diff_mha.model.safetensors
expect_error "a missing distractor file" "$TMP/none.txt" "$BIN" eval loss "${W[@]}" --distract "$TMP/none.txt" --distract-rate 0.3
expect_error "train: --distract-rate alone" "need --distract FILE" "$BIN" train "${M[@]}" --data "$TMP/text.txt" --out "$TMP/x" --steps 1 --distract-rate 0.3
expect_error "train: a rate list with a hole" "missing after the last comma" "$BIN" train "${M[@]}" --data "$TMP/text.txt" --out "$TMP/x" --steps 1 "${D[@]}" --distract-rate 0.3,
finish
