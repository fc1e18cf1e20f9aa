#!/usr/bin/env bash
# compare --task with a length curriculum (--train-seq) and evaluation lengths
# past it (--seq), at equal parameters (--match-params): the report's accuracy
# per length and effective lengths, and its columns' parameter counts; the
# text compare's --match-params too.
source "$(dirname "$0")/lib.sh"
T=$TMP
outcome() { if [[ $? == 0 ]]; then pass "$1"; else fail "$1"; fi; }

OMP_NUM_THREADS=1 "$BIN" compare --task mqar --archs diff,softmax,nsa:nsa-shared-kv=1 --match-params \
  --train-seq 64,128 --seq 64,128,256 --out "$T/len" --pairs 4 --vocab 32 --steps 8 --eval-every 4 --eval-seqs 8 \
  --dim 32 --layers 1 --batch 4 --quiet >"$T/out.txt" 2>&1
outcome "a tiny curriculum study runs"
grep -q '## Accuracy per length' "$T/len/report.md" && grep -q '| cell | arch | 64 | 128 | 256 | effective length' \
  "$T/len/report.md"
outcome "report.md has the accuracy per length table, 64, 128 and 256"
drawn=0
for a in diff softmax nsa:nsa-shared-kv=1; do
  [[ -s "$T/len/length_$a.png" ]] && grep -qF "](length_$a.png)" "$T/len/report.md" && drawn=$((drawn + 1))
done
((drawn == 3))
outcome "report.md shows a length heatmap per column, and each is drawn"
# the runs trained 4 steps at 64, then resumed at 128: the run's task file is the last stage's
grep -q '^seq 128$' "$T/len/runs/cell0_softmax_seed1337/task.txt"
outcome "the curriculum's last stage trains at 128"
python3 - "$T/len/report.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
L = j["lengths"]
assert L["train_seq"] == [64, 128] and L["eval_seq"] == [64, 128, 256], L
assert [c["arch"] for c in L["columns"]] == ["diff", "softmax", "nsa:nsa-shared-kv=1"]
for c in L["columns"]:
    acc = c["accuracy"]
    assert len(acc) == 3 and all(0 <= a <= 1 for a in acc), c
    for level, key in ((0.9, "effective_length_90"), (0.5, "effective_length_50")):
        want = max([n for n, a in zip(L["eval_seq"], acc) if a >= level], default=0)
        assert c[key] == want, (c, key, want)
cols = j["columns"]
most = max(c["n_params"] for c in cols)
assert j["match_params"] and len(cols) == 3 and all(abs(c["n_params"] - most) <= 0.01 * most for c in cols), cols
assert all(c["train_flops_per_token"] > 0 for c in cols)
PY
outcome "report.json: accuracy per evaluation length, effective lengths as defined, parameters within 1%"
OMP_NUM_THREADS=1 "$BIN" compare --archs softmax,nsa --match-params --steps 2 --dim 32 --layers 1 --heads 1 \
  --seq 256 --batch 2 --out "$T/text" --quiet >/dev/null 2>&1 &&
python3 - "$T/text/report.json" "$T/text/report.md" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
p = [runs[0]["n_params"] for runs in j["cells"][0]["archs"].values()]
assert len(p) == 2 and max(p) - min(p) <= 0.01 * max(p), p
PY
outcome "compare --match-params (text): softmax and NSA within 1%"
expect_error "a curriculum needs a task with a length" "--train-seq: a length curriculum applies to mqar" \
  "$BIN" compare --task icl --train-seq 32,64 --out "$T/x"
expect_error "a length the task does not fit" "length 16" \
  "$BIN" compare --task mqar --pairs 8 --train-seq 16,64 --out "$T/y"
finish
