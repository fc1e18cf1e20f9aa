#!/usr/bin/python3
"""Writes the reference fixtures of diffattn into tests/fixtures/ and checks
the reference (tools/reference.py) on the way.

    /usr/bin/python3 tools/make_fixtures.py            # write fixtures + run checks
    /usr/bin/python3 tools/make_fixtures.py --check    # checks only, against the files already there
    /usr/bin/python3 tools/make_fixtures.py --no-check # write only

Per config NAME it writes NAME.model.safetensors, NAME.ids.txt (64 ids),
NAME.logits.npy (float32 [64, V], forward on all 64 ids) and
NAME.grads.safetensors (grad of the mean CE of ids[1:] given ids[:-1], per
parameter name, plus a scalar F32 `loss`). Any failed check raises.
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
T = 64

_BASE = dict(dim=32, n_layers=2, vocab_size=48, ffn_hidden=64, norm_eps=1e-5,
             rope_theta=10000.0, max_seq_len=128, tie_embeddings=False)
CONFIGS = {
    "diff_mha": dict(_BASE, arch="diff", n_heads=2, n_kv_heads=2),
    "diff_gqa": dict(_BASE, arch="diff", n_heads=2, n_kv_heads=1),
    "softmax_untied": dict(_BASE, arch="softmax", n_heads=4, n_kv_heads=4),
    "softmax_tied": dict(_BASE, arch="softmax", n_heads=4, n_kv_heads=4, tie_embeddings=True),
    # Extras: with n_kv_heads = 1 (diff_gqa) every head is in group 0, so the
    # group rule i // n_rep cannot be told from e.g. i % n_kv_heads. These two
    # have 2 groups of 2 heads each.
    "diff_gqa_h4kv2": dict(_BASE, arch="diff", n_heads=4, n_kv_heads=2),
    "softmax_gqa_h4kv2": dict(_BASE, arch="softmax", n_heads=4, n_kv_heads=2),
    # DIFF V2: 4 output heads of d = 8 (8 query heads), MHA, n_rep 2, n_rep 4, tied.
    "diff2_mha": dict(_BASE, arch="diff2", n_heads=4, n_kv_heads=4),
    "diff2_gqa_rep2": dict(_BASE, arch="diff2", n_heads=4, n_kv_heads=2),
    "diff2_gqa_rep4": dict(_BASE, arch="diff2", n_heads=4, n_kv_heads=1),
    "diff2_tied": dict(_BASE, arch="diff2", n_heads=4, n_kv_heads=2, tie_embeddings=True),
    # Sliding window W = 37 over T = 200 ids (SEQ_LEN), every arch.
    "diff_window": dict(_BASE, arch="diff", n_heads=2, n_kv_heads=1, max_seq_len=256, window=37),
    "diff2_window": dict(_BASE, arch="diff2", n_heads=4, n_kv_heads=2, max_seq_len=256, window=37),
    "softmax_window": dict(_BASE, arch="softmax", n_heads=4, n_kv_heads=2, max_seq_len=256, window=37),
    # The paper's Table 6 ablations (model options head_norm, lambda_init): DIFF without its head norm
    # (and without the (1 - lambda_init) factor), lambda_init fixed in every layer (with and without
    # the norm), and softmax with a per-head norm (one d-wide gain shared by the heads).
    "diff_head_norm_off": dict(_BASE, arch="diff", n_heads=2, n_kv_heads=1, head_norm="off"),
    "diff_lambda_init_08": dict(_BASE, arch="diff", n_heads=2, n_kv_heads=2, lambda_init=0.8),
    "diff_lambda_init_05": dict(_BASE, arch="diff", n_heads=4, n_kv_heads=2, lambda_init=0.5),
    "diff_off_lambda_05": dict(_BASE, arch="diff", n_heads=2, n_kv_heads=2, head_norm="off", lambda_init=0.5),
    "softmax_head_norm_on": dict(_BASE, arch="softmax", n_heads=4, n_kv_heads=2, head_norm="on"),
    # Mid-ramp (--lambda-ramp: the second map weighs (1 - lambda_hold) lambda), and convert's preserve
    # shape: an explicit head_dim (12, not dim / 2H = 8), the head norm off, half the second map held back.
    "diff_hold_06": dict(_BASE, arch="diff", n_heads=2, n_kv_heads=1, lambda_hold=0.6),
    "diff2_hold_03": dict(_BASE, arch="diff2", n_heads=4, n_kv_heads=2, lambda_hold=0.3),
    "diff_head_dim_hold": dict(_BASE, arch="diff", n_heads=2, n_kv_heads=1, head_dim=12, head_norm="off",
                               lambda_hold=0.5),
    "softmax_head_dim": dict(_BASE, arch="softmax", n_heads=4, n_kv_heads=2, head_dim=12),
    # NSA (tools/nsa_reference.py): MHA, n_rep 2 and 4, T not a multiple of s, l' or the tile, T < l.
    "nsa_mha": dict(_BASE, arch="nsa", n_heads=4, n_kv_heads=4, nsa_block=8, nsa_stride=4, nsa_select=12,
                    nsa_topn=4, nsa_window=20),
    "nsa_gqa_rep2": dict(_BASE, arch="nsa", n_heads=4, n_kv_heads=2, nsa_block=7, nsa_stride=3, nsa_select=14,
                         nsa_topn=4, nsa_window=13),
    "nsa_gqa_rep4": dict(_BASE, arch="nsa", n_heads=4, n_kv_heads=1, nsa_block=8, nsa_stride=4, nsa_select=8,
                         nsa_topn=5, nsa_window=9),
    "nsa_short": dict(_BASE, arch="nsa", n_heads=4, n_kv_heads=2, nsa_block=8, nsa_stride=4, nsa_select=16,
                      nsa_topn=3, nsa_window=4),
    # NSA with one K/V projection for its three branches (compression pools the RoPE'd keys), n_rep 2.
    "nsa_shared_kv": dict(_BASE, arch="nsa", n_heads=4, n_kv_heads=2, nsa_block=7, nsa_stride=3, nsa_select=14,
                          nsa_topn=4, nsa_window=13, nsa_shared_kv=True),
    # MoBA (reference.moba_mask): n_rep 1 and 2 with T not a multiple of B and a choice among more blocks
    # than k; and T < B k (every block chosen: softmax's logits).
    "moba_mha": dict(_BASE, arch="moba", n_heads=4, n_kv_heads=4, moba_block=8, moba_topk=3),
    "moba_gqa_rep2": dict(_BASE, arch="moba", n_heads=4, n_kv_heads=2, moba_block=7, moba_topk=4),
    "moba_short": dict(_BASE, arch="moba", n_heads=4, n_kv_heads=2, moba_block=16, moba_topk=3),
}
SEQ_LEN = {"diff_window": 200, "diff2_window": 200, "softmax_window": 200,
           "nsa_mha": 75, "nsa_gqa_rep2": 83, "nsa_gqa_rep4": 70, "nsa_short": 6, "nsa_shared_kv": 83,
           "moba_mha": 75, "moba_gqa_rep2": 83, "moba_short": 40}  # others: T
SEEDS = {"diff_mha": 1001, "diff_gqa": 1002, "softmax_untied": 1003, "softmax_tied": 1004,
         "diff_gqa_h4kv2": 1008, "softmax_gqa_h4kv2": 1006,
         "diff2_mha": 1011, "diff2_gqa_rep2": 1012, "diff2_gqa_rep4": 1013, "diff2_tied": 1014,
         "diff_window": 1021, "diff2_window": 1022, "softmax_window": 1023,
         "diff_head_norm_off": 1041, "diff_lambda_init_08": 1042, "diff_lambda_init_05": 1043,
         "diff_off_lambda_05": 1046, "softmax_head_norm_on": 1045,
         "nsa_mha": 2731, "nsa_gqa_rep2": 1032, "nsa_gqa_rep4": 1033, "nsa_short": 1034, "nsa_shared_kv": 1035,
         "diff_hold_06": 1061, "diff2_hold_03": 1062, "diff_head_dim_hold": 1073, "softmax_head_dim": 1064,
         "moba_mha": 1051, "moba_gqa_rep2": 1052, "moba_short": 1053}


def random_params(cfg, seed):
    """Non-trivial random weights: matrices N(0, 0.3^2), norm/subln gains
    1 + 0.3 N(0,1), lambda vectors N(0, 0.3^2), lambda_proj N(0, 1/dim) (its
    logits of std ~1 keep the sigmoid off its flat tails). float32 values."""
    rng = np.random.default_rng(seed)
    P = {}
    for name, shape in ref.param_shapes(cfg).items():
        if ".lambda_proj" in name or ".cmp_k." in name or ".cmp_v." in name or ".gate.weight" in name:
            a = rng.standard_normal(shape) / math.sqrt(shape[1])
        elif ".gate.bias" in name:
            a = 0.5 * rng.standard_normal(shape)
        elif len(shape) == 2:
            a = 0.3 * rng.standard_normal(shape)
        elif ".lambda_" in name:
            a = 0.3 * rng.standard_normal(shape)
        else:  # attention_norm, ffn_norm, norm, subln
            a = 1.0 + 0.3 * rng.standard_normal(shape)
        P[name] = torch.from_numpy(a.astype(np.float32))
    return P


def seq_len(name):
    return SEQ_LEN.get(name, T)


def random_ids(cfg, seed, n=T):
    return np.random.default_rng(seed + 7777).integers(0, cfg["vocab_size"], size=n).astype(np.int64)


def paths(name):
    b = os.path.join(OUT_DIR, name)
    return {"model": b + ".model.safetensors", "ids": b + ".ids.txt",
            "logits": b + ".logits.npy", "grads": b + ".grads.safetensors"}

# ----------------------------------------------------------------- naive, independent forward


def naive_forward(cfg, params, ids):
    """A loop-by-loop float64 numpy forward written straight from the spec,
    sharing no code with reference.forward."""
    P = {k: v.detach().double().numpy() for k, v in params.items()}
    C, H, Hkv = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    n_rep = H // Hkv
    diff = cfg["arch"] == "diff"
    diff2 = cfg["arch"] == "diff2"
    d = cfg.get("head_dim") or (C // H // 2 if diff else C // H)
    keep = 1.0 - cfg.get("lambda_hold", 0.0)  # the second map's share not held back (mid-ramp)
    eps, theta = cfg["norm_eps"], cfg["rope_theta"]
    Tn = len(ids)
    W = cfg.get("window", 0)

    def keys(t):  # the keys query t sees: causal, and the last W with a sliding window
        return range(max(0, t - W + 1) if W else 0, t + 1)

    def rms(vec, w, e):
        return vec / math.sqrt(sum(float(z) * float(z) for z in vec) / len(vec) + e) * w

    def rope(vec, pos):  # one (sub-)head of size d
        out = vec.copy()
        half = d // 2
        for j in range(half):
            inv = theta ** (-(j / (half - 1))) if half > 1 else 1.0
            ang = pos * inv
            c, s = math.cos(ang), math.sin(ang)
            x0, x1 = vec[2 * j], vec[2 * j + 1]
            out[2 * j] = x0 * c - x1 * s
            out[2 * j + 1] = x0 * s + x1 * c
        return out

    def softmax_row(scores):
        m = max(scores)
        e = [math.exp(z - m) for z in scores]
        tot = sum(e)
        return [z / tot for z in e]

    x = np.stack([P["tok_embeddings.weight"][t] for t in ids])
    for l in range(cfg["n_layers"]):
        p = "layers.%d." % l
        xn = np.stack([rms(x[t], P[p + "attention_norm.weight"], eps) for t in range(Tn)])
        q = xn @ P[p + "attn.q_proj.weight"].T
        if cfg["arch"] != "nsa":
            k = xn @ P[p + "attn.k_proj.weight"].T
            v = xn @ P[p + "attn.v_proj.weight"].T
        heads_out = np.zeros((Tn, H * d * (2 if diff else 1)))
        if cfg["arch"] == "nsa":
            G = Hkv
            tq = lambda a, n: torch.from_numpy(np.stack([np.stack([rope(a[t, j * d:(j + 1) * d], t) for j in range(n)])
                                                         for t in range(Tn)]))
            raw = lambda a, n: torch.from_numpy(a.reshape(Tn, n, d).copy())
            if cfg.get("nsa_shared_kv"):  # one k (RoPE'd for every branch, compression too) and one v
                pr = {b: xn @ P[p + "attn.%s_proj.weight" % b[0]].T
                      for b in ("k_cmp", "v_cmp", "k_slc", "v_slc", "k_win", "v_win")}
            else:
                pr = {b: xn @ P[p + "attn.%s.weight" % b].T
                      for b in ("k_cmp", "v_cmp", "k_slc", "v_slc", "k_win", "v_win")}
            gate = 1.0 / (1.0 + np.exp(-(xn @ P[p + "attn.gate.weight"].T + P[p + "attn.gate.bias"])))
            kc = tq(pr["k_cmp"], G) if cfg.get("nsa_shared_kv") else raw(pr["k_cmp"], G)
            o = nsa.naive_nsa(tq(q, H), kc, raw(pr["v_cmp"], G), tq(pr["k_slc"], G), raw(pr["v_slc"], G),
                              tq(pr["k_win"], G), raw(pr["v_win"], G), torch.from_numpy(gate.reshape(Tn, H, 3)),
                              *(torch.from_numpy(P[p + "attn." + k]) for k in ("cmp_k.weight", "cmp_v.weight", "cmp_pe_k",
                                                                                "cmp_pe_v")), cfg)
            heads_out = o.reshape(Tn, C)
        elif diff2:
            # spec: head i = query heads 2i, 2i+1 against KV group i // n_rep;
            # lambda_t = sigmoid(xn_t . lambda_proj[i]); no head norm
            for i in range(H):
                g = i // n_rep
                Q1 = [rope(q[t, (2 * i) * d:(2 * i + 1) * d], t) for t in range(Tn)]
                Q2 = [rope(q[t, (2 * i + 1) * d:(2 * i + 2) * d], t) for t in range(Tn)]
                Kg = [rope(k[t, g * d:(g + 1) * d], t) for t in range(Tn)]
                Vg = [v[t, g * d:(g + 1) * d] for t in range(Tn)]
                for t in range(Tn):
                    lam = 1.0 / (1.0 + math.exp(-float(np.dot(xn[t], P[p + "attn.lambda_proj.weight"][i]))))
                    a1 = softmax_row([float(np.dot(Q1[t], Kg[s])) / math.sqrt(d) for s in keys(t)])
                    a2 = softmax_row([float(np.dot(Q2[t], Kg[s])) / math.sqrt(d) for s in keys(t)])
                    o = np.zeros(d)
                    for n_, s in enumerate(keys(t)):
                        o += (a1[n_] - keep * lam * a2[n_]) * Vg[s]
                    heads_out[t, d * i:d * (i + 1)] = o
        elif diff:
            lam_init = float(cfg["lambda_init"]) if "lambda_init" in cfg else 0.8 - 0.6 * math.exp(-0.3 * l)
            norm_on = cfg.get("head_norm", "on") == "on"
            lam = (math.exp(float(np.dot(P[p + "attn.lambda_q1"], P[p + "attn.lambda_k1"])))
                   - math.exp(float(np.dot(P[p + "attn.lambda_q2"], P[p + "attn.lambda_k2"]))) + lam_init)
            for i in range(H):
                g = i // n_rep
                Q1 = [rope(q[t, (2 * i) * d:(2 * i + 1) * d], t) for t in range(Tn)]
                Q2 = [rope(q[t, (2 * i + 1) * d:(2 * i + 2) * d], t) for t in range(Tn)]
                K1 = [rope(k[t, (2 * g) * d:(2 * g + 1) * d], t) for t in range(Tn)]
                K2 = [rope(k[t, (2 * g + 1) * d:(2 * g + 2) * d], t) for t in range(Tn)]
                Vg = [v[t, g * 2 * d:(g + 1) * 2 * d] for t in range(Tn)]
                for t in range(Tn):
                    a1 = softmax_row([float(np.dot(Q1[t], K1[s])) / math.sqrt(d) for s in keys(t)])
                    a2 = softmax_row([float(np.dot(Q2[t], K2[s])) / math.sqrt(d) for s in keys(t)])
                    o = np.zeros(2 * d)
                    for n_, s in enumerate(keys(t)):
                        o += (a1[n_] - keep * lam * a2[n_]) * Vg[s]
                    if norm_on:
                        o = rms(o, P[p + "attn.subln.weight"], 1e-5) * (1.0 - lam_init)
                    heads_out[t, 2 * d * i:2 * d * (i + 1)] = o
        else:
            for i in range(H):
                g = i // n_rep
                Qh = [rope(q[t, i * d:(i + 1) * d], t) for t in range(Tn)]
                Kh = [rope(k[t, g * d:(g + 1) * d], t) for t in range(Tn)]
                Vh = [v[t, g * d:(g + 1) * d] for t in range(Tn)]
                for t in range(Tn):
                    ks = keys(t)
                    if cfg["arch"] == "moba":  # own block c, and the k - 1 best earlier by the mean key
                        Bk, c = cfg["moba_block"], t // cfg["moba_block"]
                        sc = [(-float(np.dot(Qh[t], sum(Kh[j * Bk:(j + 1) * Bk]) / Bk)), j) for j in range(c)]
                        blocks = [j for _, j in sorted(sc)[:cfg["moba_topk"] - 1]] + [c]
                        ks = [s for s in ks if s // Bk in blocks]
                    a = softmax_row([float(np.dot(Qh[t], Kh[s])) / math.sqrt(d) for s in ks])
                    o = sum(a[n_] * Vh[s] for n_, s in enumerate(ks))
                    if cfg.get("head_norm", "off") == "on":
                        o = rms(o, P[p + "attn.subln.weight"], 1e-5)
                    heads_out[t, d * i:d * (i + 1)] = o
        x = x + heads_out @ P[p + "attn.out_proj.weight"].T
        hn = np.stack([rms(x[t], P[p + "ffn_norm.weight"], eps) for t in range(Tn)])
        a1 = hn @ P[p + "feed_forward.w1.weight"].T
        a3 = hn @ P[p + "feed_forward.w3.weight"].T
        silu = a1 / (1.0 + np.exp(-a1))
        x = x + (silu * a3) @ P[p + "feed_forward.w2.weight"].T
    xn = np.stack([rms(x[t], P["norm.weight"], eps) for t in range(Tn)])
    W = P["tok_embeddings.weight"] if cfg["tie_embeddings"] else P["output.weight"]
    return xn @ W.T

# ----------------------------------------------------------------- checks


class Report:
    def __init__(self):
        self.n = 0

    def ok(self, cond, msg):
        self.n += 1
        print(("  ok    " if cond else "  FAIL  ") + msg)
        if not cond:
            raise AssertionError(msg)


def expand_gqa_to_mha(cfg, params, group=None):
    """The MHA model equal to a GQA one by spec: head i's K1/K2/V rows are
    those of KV group i // n_rep (or group(i) when given)."""
    H, Hkv = cfg["n_heads"], cfg["n_kv_heads"]
    n_rep = H // Hkv
    group = group or (lambda i: i // n_rep)
    d = ref.head_dim(cfg)
    diff = cfg["arch"] == "diff"
    kw = 2 * d if diff else d  # rows per k head (two sub-heads for diff) and per v head
    mcfg = dict(cfg, n_kv_heads=H)
    P = dict(params)
    for l in range(cfg["n_layers"]):
        for nm in ("k_proj", "v_proj"):
            key = "layers.%d.attn.%s.weight" % (l, nm)
            W = params[key]
            P[key] = torch.cat([W[group(i) * kw:(group(i) + 1) * kw] for i in range(H)], 0)
    return mcfg, P


def official_repeat_kv_order(cfg, params):
    """An MHA model with the sub-head assignment of unilm's repeat_kv on
    2*n_kv sub-heads (diff head i, map m -> k sub-head (2i+m)//n_rep). Differs
    from the spec when n_rep > 1; used to show the GQA check is sensitive."""
    H, Hkv = cfg["n_heads"], cfg["n_kv_heads"]
    n_rep = H // Hkv
    d = ref.head_dim(cfg)
    mcfg = dict(cfg, n_kv_heads=H)
    P = dict(params)
    for l in range(cfg["n_layers"]):
        key = "layers.%d.attn.k_proj.weight" % l
        W = params[key]
        P[key] = torch.cat([W[((j // n_rep)) * d:((j // n_rep) + 1) * d] for j in range(2 * H)], 0)
        key = "layers.%d.attn.v_proj.weight" % l
        W = params[key]
        P[key] = torch.cat([W[(i // n_rep) * 2 * d:(i // n_rep + 1) * 2 * d] for i in range(H)], 0)
    return mcfg, P


def check_config(name, cfg, params, ids, R, fd_entries=3):
    rng = np.random.default_rng(12345)
    print("[%s] arch %s, d %d, n_rep %d" % (name, cfg["arch"], ref.head_dim(cfg), cfg["n_heads"] // cfg["n_kv_heads"]))
    logits = ref.forward(cfg, params, ids)

    # sanity of the values
    trace = []
    ref.forward(cfg, params, ids, trace=trace)
    spread = float(logits.std())
    R.ok(0.3 < spread < 30 and float(logits.abs().max()) < 100,
         "logits spread: std %.3f, max |logit| %.3f" % (spread, float(logits.abs().max())))
    for tr in trace:
        if cfg["arch"] == "nsa":
            gt = tr["gate"]
            R.ok(0.005 < float(gt.min()) and float(gt.max()) < 0.995 and float(gt.std()) > 0.1,
                 "layer %d: gates in [%.3f, %.3f], std %.3f" % (tr["layer"], float(gt.min()), float(gt.max()),
                                                               float(gt.std())))
            R.ok(tr["margin"] > 1e-4, "layer %d: importance margin at the selection cut %.2e (float32 picks alike)"
                 % (tr["layer"], tr["margin"]))
            if len(ids) > 16:
                m = float(tr["p_win"][:, 8:].max(-1).values.mean())
                R.ok(m > 0.2, "layer %d: window attention far from uniform: mean max weight %.3f" % (tr["layer"], m))
            continue
        if cfg["arch"] == "diff2":
            lam, A1, A2, Vv = tr["lam"], tr["A1"], tr["A2"], tr["V"]
            m1 = float(A1[:, 8:].max(-1).values.mean())
            m2 = float(A2[:, 8:].max(-1).values.mean())
            o1 = torch.einsum("hts,shd->thd", A1, Vv)
            o2 = lam.unsqueeze(-1) * torch.einsum("hts,shd->thd", A2, Vv)
            ratio = float(o2.norm() / o1.norm())
            R.ok(0.01 < float(lam.min()) and float(lam.max()) < 0.99 and float(lam.std()) > 0.1 and 0.1 < ratio < 10,
                 "layer %d: sigmoid(lambda) per token in [%.3f, %.3f], std %.3f; |lam A2 V|/|A1 V| = %.3f"
                 % (tr["layer"], float(lam.min()), float(lam.max()), float(lam.std()), ratio))
            R.ok(m1 > 0.3 and m2 > 0.3,
                 "layer %d: attention far from uniform: mean max weight A1 %.3f, A2 %.3f (uniform at t>=8 <= 0.111)"
                 % (tr["layer"], m1, m2))
        elif cfg["arch"] == "diff":
            lam, li = tr["lambda"], tr["lambda_init"]
            A1, A2, Vv = tr["A1"], tr["A2"], tr["V"]
            m1 = float(A1[:, 8:].max(-1).values.mean())
            m2 = float(A2[:, 8:].max(-1).values.mean())
            o1 = torch.einsum("hts,she->the", A1, Vv)
            o2 = torch.einsum("hts,she->the", lam * A2, Vv)
            ratio = float(o2.norm() / o1.norm())
            R.ok(-1.0 < lam < 2.0 and abs(lam) > 0.05 and 0.1 < ratio < 10,
                 "layer %d: lambda %.4f (lambda_init %.4f); |lambda A2 V|/|A1 V| = %.3f" % (tr["layer"], lam, li, ratio))
            R.ok(m1 > 0.3 and m2 > 0.3,
                 "layer %d: attention far from uniform: mean max weight A1 %.3f, A2 %.3f (uniform at t>=8 <= 0.111)"
                 % (tr["layer"], m1, m2))
        else:
            m = float(tr["A"][:, 8:].max(-1).values.mean())
            R.ok(m > 0.3, "layer %d: attention far from uniform: mean max weight %.3f" % (tr["layer"], m))

    # (b) independent naive implementation
    nv = naive_forward(cfg, params, ids)
    err = float(np.abs(nv - logits.numpy()).max() / np.abs(nv).max())
    R.ok(err < 1e-12, "naive loop forward == reference forward: rel err %.2e" % err)

    # causality: changing ids[t] leaves logits[<t] unchanged, and changes logits[t:]
    Tn = len(ids)
    for t in (t for t in (0, 17, Tn - 1) if t < Tn):
        ids2 = ids.copy()
        ids2[t] = (ids2[t] + 1 + rng.integers(0, cfg["vocab_size"] - 1)) % cfg["vocab_size"]
        l2 = ref.forward(cfg, params, ids2)
        before = float((l2[:t] - logits[:t]).abs().max()) if t > 0 else 0.0
        at = float((l2[t:] - logits[t:]).abs().max())
        R.ok(before < 1e-12 and at > 1e-3,
             "causality at t=%d: max change before t %.1e, at/after t %.2e" % (t, before, at))
        W = cfg.get("window", 0)
        reach = t + cfg["n_layers"] * (W - 1)  # the last position a change at t can reach through L windows
        if W and reach + 1 < Tn:
            beyond = float((l2[reach + 1:] - logits[reach + 1:]).abs().max())
            edge = float((l2[reach] - logits[reach]).abs().max())
            R.ok(beyond < 1e-12 and edge > 1e-6,
                 "window %d: a change at t=%d reaches position %d (change %.1e) and none after (%.1e)"
                 % (W, t, reach, edge, beyond))

    if cfg["arch"] == "moba":  # softmax's logits exactly when every block is chosen (T <= B k), else not
        scfg = {k: v for k, v in cfg.items() if k not in ref.MOBA_KEYS}
        scfg["arch"] = "softmax"
        e = float((ref.forward(scfg, params, ids) - logits).abs().max())
        every = len(ids) <= cfg["moba_block"] * cfg["moba_topk"]
        R.ok(e < 1e-12 if every else e > 1e-3, "MoBA vs softmax on the same weights (%s): max abs diff %.1e"
             % ("every block chosen" if every else "a choice among more than k blocks", e))

    # GQA grouping (i // n_rep for K1, K2 and V) via the equivalent MHA model
    n_rep = cfg["n_heads"] // cfg["n_kv_heads"]
    if n_rep > 1 and cfg["arch"] != "nsa":  # NSA's group shares one block choice: no MHA equivalent
        mcfg, mP = expand_gqa_to_mha(cfg, params)
        e = float((ref.forward(mcfg, mP, ids) - logits).abs().max())
        R.ok(e < 1e-12, "GQA == MHA with KV group i//n_rep copied into head i: max abs diff %.1e" % e)
        if cfg["n_kv_heads"] > 1:
            acfg, aP = expand_gqa_to_mha(cfg, params, group=lambda i: i % cfg["n_kv_heads"])
            e = float((ref.forward(acfg, aP, ids) - logits).abs().max())
            R.ok(e > 1e-2, "grouping i %% n_kv_heads instead would give different logits: %.3f" % e)
        if cfg["arch"] == "diff":
            ocfg, oP = official_repeat_kv_order(cfg, params)
            e = float((ref.forward(ocfg, oP, ids) - logits).abs().max())
            R.ok(e > 1e-2, "unilm repeat_kv sub-head pairing ((2i+m)//n_rep) gives different logits: %.3f" % e)

    # lambda_proj zero -> lambda = 1/2 everywhere: o = (A1 - A2/2) V, by hand
    if cfg["arch"] == "diff2":
        P0 = dict(params)
        for l in range(cfg["n_layers"]):
            P0["layers.%d.attn.lambda_proj.weight" % l] = torch.zeros_like(params["layers.%d.attn.lambda_proj.weight" % l])
        tr0 = []
        ref.forward(cfg, P0, ids, trace=tr0)
        R.ok(all(float((t["lam"] - 0.5).abs().max()) == 0.0 for t in tr0), "zero lambda_proj: sigmoid(lambda) = 0.5")
        e = float(np.abs(naive_forward(cfg, P0, ids) - ref.forward(cfg, P0, ids).numpy()).max())
        R.ok(e < 1e-11, "zero lambda_proj: naive == reference (max abs diff %.1e)" % e)
        # the two query heads of a head are adjacent (2i, 2i+1), not split in halves (i, H+i)
        Ps = dict(params)
        H, d = cfg["n_heads"], ref.head_dim(cfg)
        for l in range(cfg["n_layers"]):
            key = "layers.%d.attn.q_proj.weight" % l
            W = params[key].view(2 * H, d, -1)
            Ps[key] = torch.cat([W[0::2], W[1::2]], 0).reshape(params[key].shape)
        e = float((ref.forward(cfg, Ps, ids) - logits).abs().max())
        R.ok(e > 1e-2, "query heads paired as (i, H+i) instead of (2i, 2i+1) give different logits: %.3f" % e)

    # lambda vectors zero -> lambda == lambda_init
    if cfg["arch"] == "diff":
        P0 = dict(params)
        for l in range(cfg["n_layers"]):
            for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                P0["layers.%d.attn.%s" % (l, n)] = torch.zeros_like(params["layers.%d.attn.%s" % (l, n)])
        lams = [float(ref.layer_lambda(cfg, P0, l)) for l in range(cfg["n_layers"])]
        want = [float(cfg.get("lambda_init", 0.8 - 0.6 * math.exp(-0.3 * l))) for l in range(cfg["n_layers"])]
        R.ok(all(abs(a - b) < 1e-15 for a, b in zip(lams, want)),
             "zero lambda vectors: lambda = lambda_init = %s" % ", ".join("%.6f" % v for v in want))
        e = float(np.abs(naive_forward(cfg, P0, ids) - ref.forward(cfg, P0, ids).numpy()).max())
        R.ok(e < 1e-11, "zero lambda vectors: naive == reference (max abs diff %.1e)" % e)

    # (a) autograd vs central finite differences (float64)
    loss, grads = ref.loss_and_grads(cfg, params, ids)
    P64 = {k: v.double() for k, v in params.items()}
    worst = zero_fd = 0.0
    nchecked = 0
    for pname in P64:
        flat_n = P64[pname].numel()
        for idx in rng.choice(flat_n, size=min(fd_entries, flat_n), replace=False):
            h = 1e-5
            Pp = dict(P64)
            Pm = dict(P64)
            Pp[pname] = P64[pname].clone().view(-1)
            Pp[pname][idx] += h
            Pp[pname] = Pp[pname].view(P64[pname].shape)
            Pm[pname] = P64[pname].clone().view(-1)
            Pm[pname][idx] -= h
            Pm[pname] = Pm[pname].view(P64[pname].shape)
            fd = (float(ref.loss_of(cfg, Pp, ids)) - float(ref.loss_of(cfg, Pm, ids))) / (2 * h)
            ag = float(grads[pname].view(-1)[idx])
            if pname.endswith(".cmp_pe_k"):  # zero gradient (nsa_reference.py): checked below
                zero_fd = max(zero_fd, abs(fd))
                continue
            scale = max(float(grads[pname].abs().max()), 1e-8)
            worst = max(worst, abs(fd - ag) / scale)
            nchecked += 1
    R.ok(worst < 1e-6, "finite differences vs autograd: %d entries over %d tensors, worst err/max|grad| %.2e"
         % (nchecked, len(P64), worst))
    if cfg["arch"] == "nsa":
        # pe_k shifts every compressed logit of a query alike: the softmax cannot see it
        pe = max(float(g.abs().max()) for k, g in grads.items() if k.endswith(".cmp_pe_k"))
        R.ok(pe < 1e-12 and zero_fd < 1e-8, "cmp_pe_k has zero gradient: autograd %.1e, finite differences %.1e"
             % (pe, zero_fd))
    unused = (".cmp_pe_k",)
    if cfg["arch"] == "nsa" and len(ids) - 1 < cfg["nsa_block"]:  # no compressed block is complete: branch unused
        unused += ("k_cmp.weight", "v_cmp.weight", "cmp_k.weight", "cmp_v.weight", "cmp_pe_v")
    nonzero = [k for k, g in grads.items() if float(g.abs().max()) == 0.0 and not k.endswith(unused)]
    R.ok(not nonzero, "every parameter has a non-zero gradient%s" % (" (zero: %s)" % nonzero if nonzero else ""))

    # how far a float32 computation lands from the float64 reference (the C side's tolerance budget)
    l32 = ref.forward(cfg, params, ids, dtype=torch.float32).double()
    e32 = ref.logits_error(logits.numpy(), l32.numpy())
    _, g32 = ref.loss_and_grads(cfg, params, ids, dtype=torch.float32)
    ge = ref.grads_errors({k: v.numpy() for k, v in grads.items()}, {k: v.double().numpy() for k, v in g32.items()})
    ge = {k: e for k, e in ge.items() if not k.endswith(".cmp_pe_k")}  # NSA: zero gradient, noise only
    wk = max(ge, key=ge.get)
    R.ok(e32 < 1e-5 and ge[wk] < 1e-4,
         "torch float32 vs float64: logits %.1e (tol 1e-4), worst grad %.1e in %s (tol 1e-3)" % (e32, ge[wk], wk))
    return logits, loss, grads


def check_files(name, R):
    """The files on disk reproduce: reload the model, recompute, compare."""
    pa = paths(name)
    cfg, params = ref.load_model(pa["model"])
    R.ok(cfg == CONFIGS[name], "%s: model metadata round-trips to the config" % name)
    ids = ref.read_ids(pa["ids"])
    R.ok(ids.shape == (seq_len(name),), "%s: %d ids" % (name, ids.shape[0]))
    logits = np.load(pa["logits"])
    R.ok(logits.dtype == np.dtype("<f4") and logits.shape == (seq_len(name), cfg["vocab_size"]),
         "%s: logits.npy float32 %s" % (name, list(logits.shape)))
    e = ref.logits_error(ref.forward(cfg, params, ids).numpy().astype(np.float32), logits)
    R.ok(e == 0.0, "%s: logits.npy reproduces exactly (rel err %.1e)" % (name, e))
    md, g = ref.read_safetensors(pa["grads"])
    loss, grads = ref.loss_and_grads(cfg, params, ids)
    want = {k: v.numpy().astype(np.float32) for k, v in grads.items()}
    want["loss"] = np.array(loss, dtype=np.float32)
    R.ok(set(g) == set(want) and g["loss"].shape == (), "%s: grads file names = params + scalar loss" % name)
    e = max(ref.grads_errors(want, g).values())
    R.ok(e == 0.0, "%s: grads reproduce exactly (worst %.1e); loss %.6f" % (name, e, float(g["loss"])))

# ----------------------------------------------------------------- main


def write_fixtures(name, cfg, R):
    os.makedirs(OUT_DIR, exist_ok=True)
    pa = paths(name)
    params = random_params(cfg, SEEDS[name])
    ids = random_ids(cfg, SEEDS[name], seq_len(name))
    ref.save_model(pa["model"], cfg, params)
    cfg2, params2 = ref.load_model(pa["model"])
    R.ok(cfg2 == cfg and all(torch.equal(params[k], params2[k]) for k in params) and set(params) == set(params2),
         "%s: save_model/load_model round trip is exact" % name)
    with open(pa["ids"], "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    logits = ref.forward(cfg, params, ids)
    np.save(pa["logits"], logits.numpy().astype("<f4"))
    loss, grads = ref.loss_and_grads(cfg, params, ids)
    out = dict(grads)
    out["loss"] = np.array(loss)
    ref.write_safetensors(pa["grads"], out)
    print("[%s] wrote %s (loss %.6f, ln V = %.3f)" % (name, ", ".join(os.path.basename(p) for p in pa.values()),
                                                      loss, math.log(cfg["vocab_size"])))
    return params, ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only check the fixtures already written")
    ap.add_argument("--no-check", action="store_true", help="write without the (slower) checks")
    ap.add_argument("--only", nargs="*", default=None, help="config names (default all)")
    a = ap.parse_args()
    names = a.only or list(CONFIGS)
    torch.set_num_threads(min(4, torch.get_num_threads()))
    R = Report()
    for name in names:
        cfg = CONFIGS[name]
        if a.check:
            cfg_f, params = ref.load_model(paths(name)["model"])
            ids = ref.read_ids(paths(name)["ids"])
        else:
            params, ids = write_fixtures(name, cfg, R)
        if not a.no_check:
            check_config(name, cfg, params, ids, R)
            check_files(name, R)
    total = sum(os.path.getsize(os.path.join(OUT_DIR, f)) for f in os.listdir(OUT_DIR))
    print("%d checks passed; tests/fixtures holds %d bytes" % (R.n, total))


if __name__ == "__main__":
    main()
