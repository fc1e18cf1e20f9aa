#!/usr/bin/env python3
"""Markdown tables from tools/quant_report.sh's OUT folder: ΔPPL and KLD per
format for DIFF and the baseline side by side, the calibration-count study and
the decoding benchmark. usage: tools/quant_table.py OUT"""
import json
import sys

out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]
by = {(r["arch"], r["label"].split(" ", 1)[1]): r for r in rows}
labels = []
for r in rows:
    lab = r["label"].split(" ", 1)[1]
    if lab not in labels:
        labels.append(lab)
base = {a: next((r["base_ppl"] for r in rows if r["arch"] == a), None) for a in ("diff", "softmax")}
print(f"Base perplexity: DIFF {base['diff']:.4f}, softmax {base['softmax']:.4f} "
      f"({rows[0]['chunks']} chunks of {rows[0]['n_ctx']}, {rows[0]['scored']} tokens scored).\n")
print("| format | DIFF ΔPPL % | DIFF KLD | DIFF same top-1 | softmax ΔPPL % | softmax KLD | softmax same top-1 |")
print("|---|---|---|---|---|---|---|")
for lab in labels:
    cells = []
    for a in ("diff", "softmax"):
        r = by.get((a, lab))
        cells += [f"{r['delta_ppl_pct']:+.3f}", f"{r['kld']:.6f}", f"{100 * r['same_top1']:.2f}%"] if r else ["-"] * 3
    print(f"| {lab} | " + " | ".join(cells) + " |")
try:
    cal = [json.loads(l) for l in open(f"{out}/calib_study.jsonl") if l.strip()]
    print("\nw8a8 static against the number of calibration sequences (256 tokens each):\n")
    print("| sequences | DIFF ΔPPL % | DIFF KLD | softmax ΔPPL % | softmax KLD |")
    print("|---|---|---|---|---|")
    for n in sorted({c["calib_samples"] for c in cal}):
        d = next(c for c in cal if c["calib_samples"] == n and c["arch"] == "diff")
        s = next(c for c in cal if c["calib_samples"] == n and c["arch"] == "softmax")
        print(f"| {n} | {d['delta_ppl_pct']:+.3f} | {d['kld']:.6f} | {s['delta_ppl_pct']:+.3f} | {s['kld']:.6f} |")
except (FileNotFoundError, StopIteration):
    pass
try:
    b = [json.loads(l) for l in open(f"{out}/bench.jsonl") if l.strip()]
    print(f"\nDecoding, batch 1 ({b[0]['prompt_tokens']}-token prompt, {b[0]['decode_tokens']} tokens generated, "
          f"{b[0]['threads']} threads, {b[0]['isa']} dots, best of 3, loadavg {b[0]['loadavg']}):\n")
    print("| model | file MB | prompt tok/s | decode tok/s | decode speed-up |")
    print("|---|---|---|---|---|")
    for r in b:
        print(f"| {r['weights']} | {r['file_bytes'] / 1e6:.1f} | {r['prompt_tok_per_s']:.0f} | "
              f"{r['decode_tok_per_s']:.0f} | {r['decode_speedup_vs_first']:.2f}x |")
except FileNotFoundError:
    pass
