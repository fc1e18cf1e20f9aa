#!/usr/bin/env python3
"""diffattn against llama.cpp on the same GGUF files: the logits of both
engines over W windows of T positions of a text's ids, and per file the KL
divergence KL(llama.cpp || diffattn) of the next-token distributions (mean
over positions, and the largest), top-1 agreement, and the largest logit
error relative to the largest |logit| (the f32/f16 criterion).

    llamacpp_parity.py --driver llama_driver --diffattn build/diffattn --ids IDS.txt
                       [--windows 4 --len 128] F1.gguf F2.gguf ...

IDS.txt: whitespace-separated ids (diffattn encode's output, or bytes for a
byte-level model: tools/... writes them). One line per file, then a JSON list."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def logsoftmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--diffattn", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--len", type=int, default=128)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    ids = open(a.ids).read().split()
    need = a.windows * a.len
    if len(ids) < need:
        sys.exit(f"{a.ids}: {len(ids)} ids, need {need}")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in a.files:
            L, D = [], []
            for w in range(a.windows):
                p = os.path.join(tmp, "ids.txt")
                open(p, "w").write(" ".join(ids[w * a.len:(w + 1) * a.len]) + "\n")
                subprocess.run([a.driver, "logits", f, p, os.path.join(tmp, "l.npy")], check=True,
                               stdout=subprocess.DEVNULL)
                subprocess.run([a.diffattn, "logits", "--model", f, "--ids", p, "--out", os.path.join(tmp, "d.npy")],
                               check=True, stdout=subprocess.DEVNULL)
                L.append(np.load(os.path.join(tmp, "l.npy")).astype(np.float64))
                D.append(np.load(os.path.join(tmp, "d.npy")).astype(np.float64))
            L, D = np.concatenate(L), np.concatenate(D)
            pl, pd = logsoftmax(L), logsoftmax(D)
            kl = (np.exp(pl) * (pl - pd)).sum(axis=-1)
            r = {"file": os.path.basename(f), "positions": int(L.shape[0]),
                 "kl_mean": float(kl.mean()), "kl_max": float(kl.max()),
                 "top1_agree": float((L.argmax(-1) == D.argmax(-1)).mean()),
                 "max_rel_logit_err": float(np.abs(L - D).max() / np.abs(L).max())}
            print(f"{r['file']:>16}: KL mean {r['kl_mean']:.2e} max {r['kl_max']:.2e}, top-1 {100 * r['top1_agree']:.2f}%, "
                  f"max |dlogit| / max |logit| {r['max_rel_logit_err']:.2e} over {r['positions']} positions",
                  flush=True)
            out.append(r)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
