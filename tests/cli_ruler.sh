#!/usr/bin/env bash
# compare --task niah|niah-multikey|niah-multivalue|niah-multiquery|vt|cwe:
# a short study end to end (its report, run folders, task file and partial
# credit), --dump-episodes as JSON lines whose answers sit where they say
# (niah-multiquery --interleave: each key followed by its answer), and
# bad values refused with the flag named.
source "$(dirname "$0")/lib.sh"
small=(--steps 20 --eval-every 10 --eval-seqs 8 --dim 16 --layers 1 --batch 4 --quiet)

out=$(OMP_NUM_THREADS=1 "$BIN" compare --task niah --archs softmax,diff --out "$TMP/niah" --seq 100 --noise 0,0.3 \
      --value-len 2 "${small[@]}" 2>&1)
has "niah: the report has a row per noise and architecture" "$out" "| noise 0.00, seq 100 | softmax |" \
  "| noise 0.30, seq 100 | DIFF |"
check "niah: each run is a run folder with its model and task file" test -s "$TMP/niah/runs/cell1_diff_seed1337/model.safetensors"
check "  whose task file names the task and its flags" grep -q "^value_len 2$" "$TMP/niah/runs/cell1_diff_seed1337/task.txt"
check "  and report.json gives the partial credit beside the exact score" grep -q '"final_accuracy":[0-9.]*,"partial_accuracy":' \
  "$TMP/niah/report.json"
ok "a run folder's task file trains on" "$BIN" train --data "$TMP/niah/runs/cell1_diff_seed1337/task.txt" \
  --out "$TMP/again" --arch softmax --dim 16 --layers 1 --heads 1 --seq 100 --vocab 256 --batch 2 --steps 2 \
  --eval-every 2

for task in niah-multikey niah-multivalue niah-multiquery vt cwe; do
  ok "$task --dump-episodes" "$BIN" compare --task "$task" --seq 123 --noise 0.2 --eval-seqs 5 \
    --dump-episodes "$TMP/$task.jsonl"
  check "  5 lines, each a whole episode whose answers follow their positions" python3 - "$TMP/$task.jsonl" "$task" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 5, len(lines)
for line in lines:
    e = json.loads(line)
    assert e["task"] == sys.argv[2] and len(e["input"]) == 123 and len(e["answer"]) == len(e["answer_positions"]) > 0
    assert all(e["input"][p + 1] == a for p, a in zip(e["answer_positions"], e["answer"]))
    assert e["answer_positions"][-1] == 121 and e["input"].count(1) == 1  # the answer ends it; one query marker
PY
done
"$BIN" compare --task vt --seq 123 --eval-seqs 5 --dump-episodes "$TMP/vt2.jsonl" 2>/dev/null
check "another noise gives other episodes" bash -c "! cmp -s $TMP/vt.jsonl $TMP/vt2.jsonl"
"$BIN" compare --task vt --seq 123 --noise 0.2 --eval-seqs 5 --dump-episodes "$TMP/vt3.jsonl" 2>/dev/null
check "  the same ones for the same flags" cmp -s "$TMP/vt.jsonl" "$TMP/vt3.jsonl"

ok "niah-multiquery --interleave --dump-episodes" "$BIN" compare --task niah-multiquery --interleave --seq 123 \
  --noise 0.2 --eval-seqs 5 --dump-episodes "$TMP/mqi.jsonl"
check "  each asked key is followed by its value: Q k1 v1 k2 v2 k3 v3 k4 v4 ends the episode" python3 - "$TMP/mqi.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]).read().splitlines():
    e = json.loads(line)
    x, pos = e["input"], e["answer_positions"]
    assert pos == [115, 117, 119, 121] and x[114] == 1, (pos, x[114:])
    for p, a in zip(pos, e["answer"]):
        assert x[p + 1] == a and x.index(x[p]) < 114 and x[x.index(x[p]) + 1] == a  # the key's needle holds a
PY
expect_error "--interleave with niah-multikey is refused" "--interleave" "$BIN" compare --task niah-multikey \
  --interleave --out "$TMP/x"
expect_error "--noise 1 is refused" "--noise" "$BIN" compare --task niah --noise 1 --out "$TMP/x"
expect_error "--value-len 0 is refused" "--value-len" "$BIN" compare --task niah-multikey --value-len 0 --out "$TMP/x"
expect_error "--hops 0 is refused" "--hops" "$BIN" compare --task vt --hops 0 --out "$TMP/x"
expect_error "a depth above 1 is refused" "--depths" "$BIN" compare --task niah --depths 0.5,1.5 --out "$TMP/x"
expect_error "a length too short for the needles is refused" "--seq" "$BIN" compare --task niah-multivalue --seq 20 \
  --value-len 2 --out "$TMP/x"
expect_error "  also when dumping" "--seq" "$BIN" compare --task vt --seq 10 --dump-episodes "$TMP/x.jsonl"
expect_error "--pairs does not apply" "--pairs applies to mqar only" "$BIN" compare --task cwe --pairs 4 --out "$TMP/x"
out=$("$BIN" compare --task niah --help)
has "compare --task niah --help lists the RULER flags" "$out" "--value-len" "--needles" "--depths" "--hops" "--cw-ratio" \
  "--dump-episodes"
finish
