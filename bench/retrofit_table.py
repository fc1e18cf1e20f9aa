#!/usr/bin/env python3
"""The table of bench/retrofit_study.sh: per arm, validation loss and needle
retrieval, mean and 95% t-interval over the seeds, from OUT/seedS/ARM.eval.json.

    bench/retrofit_table.py OUT SEED [SEED ...]
"""
import json
import math
import sys

ARMS = [
    ("pre", "softmax, N steps (the source of a-d)"),
    ("a_softmax", "(a) softmax, N + M (continued)"),
    ("b_diff_preserve", "(b) DIFF V1 by preserve, N + M"),
    ("c_diff_split", "(c) DIFF V1 by split, N + M"),
    ("d_diff2_preserve", "(d) DIFF V2 by preserve, N + M"),
    ("e_diff_scratch", "(e) DIFF V1 from scratch, N + M"),
    ("f_diff2_scratch", "(f) DIFF V2 from scratch, N + M"),
    ("g_softmax_scratch", "(g) softmax from scratch, N + M"),
]
# Two-sided 95% Student t quantiles by degrees of freedom.
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def interval(xs):
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, float("nan")
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return mean, T95.get(n - 1, 1.96) * sd / math.sqrt(n)


def main():
    out, seeds = sys.argv[1], sys.argv[2:]
    print(f"| arm | parameters | validation loss (nats/byte) | needle retrieval | per seed (loss / retrieval) |")
    print("|---|---|---|---|---|")
    for arm, label in ARMS:
        rows = []
        for s in seeds:
            with open(f"{out}/seed{s}/{arm}.eval.json") as f:
                rows.append(json.load(f))
        loss = interval([r["loss"]["loss"] for r in rows])
        needle = interval([r["needle"]["overall"] for r in rows])
        per = ", ".join(f'{r["loss"]["loss"]:.3f} / {r["needle"]["overall"]:.2f}' for r in rows)
        print(f"| {label} | {rows[0]['parameters']} | {loss[0]:.4f} ± {loss[1]:.4f} | "
              f"{needle[0]:.3f} ± {needle[1]:.3f} | {per} |")
    print(f"\n± is the 95% t-interval over {len(seeds)} seeds ({', '.join(seeds)}).")


if __name__ == "__main__":
    main()
