#!/usr/bin/python3
"""Writes the NSA kernel fixtures, tests/fixtures/nsa_kernel_NAME.safetensors,
and checks tools/nsa_reference.py on the way (naive loops, finite
differences, the selection's margin against float32 rounding).

    /usr/bin/python3 tools/make_nsa_fixtures.py            # write + check
    /usr/bin/python3 tools/make_nsa_fixtures.py --check    # check the files already there

Each file holds one random case of the attention core (tools/nsa_reference.py
shapes), float32 values, computed in float64:
    inputs   q k_cmp v_cmp k_slc v_slc k_win v_win gate cmp_k cmp_v cmp_pe_k cmp_pe_v dout
    outputs  out [T, H, d]; d_<input> = d sum(out * dout) / d input for every
             input but dout (gate: the gradient of the gate after its sigmoid)
    sel      [T, G, n] the chosen selection blocks per (t, g), ascending, -1 padded
metadata: T H G d nsa_block nsa_stride nsa_select nsa_topn nsa_window.
The model-level fixtures of arch nsa are written by tools/make_fixtures.py.
"""

import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nsa_reference as nsa  # noqa: E402
import reference as ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures")

INPUTS = ("q", "k_cmp", "v_cmp", "k_slc", "v_slc", "k_win", "v_win", "gate", "cmp_k", "cmp_v", "cmp_pe_k", "cmp_pe_v")

# T not a multiple of s, l' or the flash tile (64); T < l; s = l = l'.
CASES = {
    "mha": dict(T=77, H=4, G=4, d=8, nsa_block=8, nsa_stride=4, nsa_select=16, nsa_topn=4, nsa_window=20, seed=1),
    "gqa_rep2": dict(T=100, H=4, G=2, d=8, nsa_block=7, nsa_stride=3, nsa_select=14, nsa_topn=4, nsa_window=23,
                     seed=2),
    "gqa_rep4": dict(T=90, H=8, G=2, d=8, nsa_block=8, nsa_stride=4, nsa_select=8, nsa_topn=5, nsa_window=9, seed=3),
    "short": dict(T=5, H=4, G=2, d=8, nsa_block=8, nsa_stride=4, nsa_select=16, nsa_topn=3, nsa_window=4, seed=4),
    "equal": dict(T=70, H=4, G=1, d=8, nsa_block=8, nsa_stride=8, nsa_select=8, nsa_topn=4, nsa_window=12, seed=5),
}


def hparams(c):
    return {k: c[k] for k in nsa.NSA_KEYS}


def random_inputs(c, seed):
    rng = np.random.default_rng(seed)
    T, H, G, d, l = c["T"], c["H"], c["G"], c["d"], c["nsa_block"]

    def r(*shape, std=1.0):
        return torch.from_numpy((std * rng.standard_normal(shape)).astype(np.float32)).double()
    x = {"q": r(T, H, d)}
    for b in ("cmp", "slc", "win"):
        x["k_" + b] = r(T, G, d)
        x["v_" + b] = r(T, G, d)
    x["gate"] = torch.from_numpy(rng.uniform(0.05, 0.95, (T, H, 3)).astype(np.float32)).double()
    x["cmp_k"] = r(d, l * d, std=1.0 / math.sqrt(l * d))
    x["cmp_v"] = r(d, l * d, std=1.0 / math.sqrt(l * d))
    x["cmp_pe_k"] = r(l, d, std=0.5)
    x["cmp_pe_v"] = r(l, d, std=0.5)
    x["dout"] = r(T, H, d)
    return x


def run(x, hp, trace=False):
    return nsa.nsa_attention(*(x[k] for k in INPUTS), hp, trace=trace)


def grads(x, hp):
    leaves = {k: x[k].clone().requires_grad_(True) for k in INPUTS}
    out = run(leaves, hp)
    gs = torch.autograd.grad((out * x["dout"]).sum(), [leaves[k] for k in INPUTS], allow_unused=True)
    return out.detach(), {k: (torch.zeros_like(x[k]) if g is None else g) for k, g in zip(INPUTS, gs)}


def sel_tensor(choice, T, G, n):
    s = np.full((T, G, n), -1.0)
    for t in range(T):
        for g in range(G):
            s[t, g, :len(choice[t][g])] = choice[t][g]
    return s


def check_case(name, c, x, R):
    hp = hparams(c)
    out, tr = run(x, hp, trace=True)
    nv = nsa.naive_nsa(*(x[k] for k in INPUTS), hp)
    e = float(np.abs(nv - out.numpy()).max())
    R(e < 1e-12, "%s: loop-by-loop forward == reference: max abs diff %.1e" % (name, e))
    R(tr["margin"] > 1e-4, "%s: importance margin at the selection cut %.2e (> 1e-4: float32 picks the same blocks)"
      % (name, tr["margin"]))
    # each branch contributes
    norms = [float(tr[k].norm()) for k in ("o_cmp", "o_slc", "o_win")]
    R(c["T"] < c["nsa_block"] or min(norms) > 0.1, "%s: branch output norms cmp %.2f slc %.2f win %.2f"
      % (name, *norms))
    if c["T"] < c["nsa_block"]:
        R(norms[0] == 0.0, "%s: T < l: no compressed block is visible, o_cmp = 0" % name)
    # the selection is a real choice somewhere: not the forced blocks plus the lowest others
    lp, n = c["nsa_select"], c["nsa_topn"]

    def lowest(t):
        cur = t // lp
        forced = [j for j in dict.fromkeys((0, cur, cur - 1)) if 0 <= j <= cur]
        rest = [j for j in range(cur + 1) if j not in forced]
        return sorted(forced + rest[:max(0, n - len(forced))])
    nontriv = sum(1 for t in range(c["T"]) for g in range(c["G"]) if tr["choice"][t][g] != lowest(t))
    R(c["T"] // lp + 1 <= n or nontriv > 0, "%s: %d (t, g) rows choose other blocks than the lowest" % (name, nontriv))
    # finite differences on a few entries of every input
    out0, g = grads(x, hp)
    rng = np.random.default_rng(99)
    worst = pe_fd = 0.0
    for k in INPUTS:
        flat = x[k].reshape(-1)
        for idx in rng.choice(flat.numel(), size=min(4, flat.numel()), replace=False):
            h = 1e-6
            xp = dict(x)
            xm = dict(x)
            xp[k] = x[k].clone().reshape(-1)
            xp[k][idx] += h
            xp[k] = xp[k].reshape(x[k].shape)
            xm[k] = x[k].clone().reshape(-1)
            xm[k][idx] -= h
            xm[k] = xm[k].reshape(x[k].shape)
            fd = float(((run(xp, hp) - run(xm, hp)) * x["dout"]).sum()) / (2 * h)
            if k == "cmp_pe_k":  # zero: see below
                pe_fd = max(pe_fd, abs(fd))
                continue
            scale = max(float(g[k].abs().max()), 1e-8)
            worst = max(worst, abs(fd - float(g[k].reshape(-1)[idx])) / scale)
    R(worst < 1e-6, "%s: finite differences vs autograd over every input, worst err/max|grad| %.1e" % (name, worst))
    # pe_k adds the same vector Wck . flatten(pe_k) to every compressed key, which
    # shifts a query's compressed logits by one constant: the softmax (and the
    # selection) cannot see it, so its gradient is zero, exactly.
    R(float(g["cmp_pe_k"].abs().max()) < 1e-12 and pe_fd < 1e-7,
      "%s: cmp_pe_k has zero gradient (a shift of every compressed logit of a row): autograd %.1e, "
      "finite differences %.1e" % (name, float(g["cmp_pe_k"].abs().max()), pe_fd))
    return out0, g, tr


def path_of(name):
    return os.path.join(OUT_DIR, "nsa_kernel_%s.safetensors" % name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    n_ok = [0]

    def R(cond, msg):
        n_ok[0] += 1
        print(("  ok    " if cond else "  FAIL  ") + msg)
        if not cond:
            raise AssertionError(msg)
    for name, c in CASES.items():
        x = random_inputs(c, c["seed"])
        out, g, tr = check_case(name, c, x, R)
        tensors = {k: x[k] for k in INPUTS}
        tensors["dout"] = x["dout"]
        tensors["out"] = out
        for k in INPUTS:
            tensors["d_" + k] = g[k]
        tensors["sel"] = sel_tensor(tr["choice"], c["T"], c["G"], c["nsa_topn"])
        md = {k: str(v) for k, v in c.items() if k != "seed"}
        if a.check:
            md2, arrs = ref.read_safetensors(path_of(name))
            R(md2 == md, "%s: metadata matches" % name)
            e = max(float(np.abs(arrs[k] - np.asarray(tensors[k], dtype=np.float32)).max()) for k in tensors)
            R(e == 0.0, "%s: file reproduces exactly" % name)
        else:
            ref.write_safetensors(path_of(name), tensors, md)
            print("[%s] wrote %s (%d bytes)" % (name, path_of(name), os.path.getsize(path_of(name))))
    print("%d checks passed" % n_ok[0])


if __name__ == "__main__":
    main()
