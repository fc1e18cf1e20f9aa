#!/usr/bin/python3
"""Float64 PyTorch reference of NSA (Native Sparse Attention, DeepSeek 2025,
arXiv 2502.11089) as diffattn specifies it (issue 20, "--arch nsa, exactly
this computation"). Written from that text; the official code
(fla-org/native-sparse-attention, XunhaoLai/native-sparse-attention-triton)
was read to check the reading, and where they differ the text wins:
  - a selection block's importance sums the compressed-attention
    probabilities of the compressed blocks lying *wholly* inside it (the
    Triton repo spreads overlapping blocks with weights);
  - the forced blocks are block 0 and the two blocks ending at the query
    (both repos: init_blocks 1, local_blocks 2), counted within the n.

Shapes (one sequence; T tokens, H query heads, G KV heads, d head size):
    q                 [T, H, d]   RoPE'd
    k_cmp, v_cmp      [T, G, d]   k_cmp not RoPE'd
    k_slc, v_slc      [T, G, d]   k_slc RoPE'd
    k_win, v_win      [T, G, d]   k_win RoPE'd
    gate              [T, H, 3]   sigmoid already applied; order cmp, slc, win
    cmp_k, cmp_v      [d, l*d]    Wck, Wcv: shared by all KV heads
    cmp_pe_k, cmp_pe_v [l, d]
Query head h uses group h // (H // G).

    o = nsa_attention(q, ..., hp)          # [T, H, d]
    o, tr = nsa_attention(..., trace=True) # tr: the maps and the selection
"""

import math

import torch

NSA_KEYS = ("nsa_block", "nsa_stride", "nsa_select", "nsa_topn", "nsa_window")
NSA_DEFAULTS = dict(nsa_block=32, nsa_stride=16, nsa_select=64, nsa_topn=16, nsa_window=512)


def check_hparams(hp):
    """1 <= s <= l <= l' and n >= 3; w >= 1. Raises naming the field."""
    l, s, lp, n, w = (hp[k] for k in NSA_KEYS)
    for k in NSA_KEYS:
        if not isinstance(hp[k], int):
            raise ValueError("%s must be an int, got %r" % (k, hp[k]))
    if not 1 <= s:
        raise ValueError("nsa_stride: %d must be >= 1" % s)
    if not s <= l:
        raise ValueError("nsa_block: %d must be >= nsa_stride (%d)" % (l, s))
    if not l <= lp:
        raise ValueError("nsa_select: %d must be >= nsa_block (%d)" % (lp, l))
    if n < 3:
        raise ValueError("nsa_topn: %d must be >= 3 (block 0 and the two local blocks are forced)" % n)
    if w < 1:
        raise ValueError("nsa_window: %d must be >= 1" % w)


def n_compressed(T, l, s):
    """Blocks i with i*s + l - 1 <= T - 1."""
    return (T - l) // s + 1 if T >= l else 0


def compress(kv, W, pe, l, s):
    """kv [T, G, d] -> [Nc, G, d]: block i = W . flatten(kv[i*s .. i*s+l-1] + pe),
    flatten row-major over (position, channel)."""
    T, G, d = kv.shape
    Nc = n_compressed(T, l, s)
    if Nc == 0:
        return kv.new_zeros((0, G, d))
    blocks = torch.stack([kv[i * s:i * s + l] for i in range(Nc)])   # [Nc, l, G, d]
    blocks = blocks + pe[None, :, None, :]
    flat = blocks.permute(0, 2, 1, 3).reshape(Nc, G, l * d)            # (position, channel)
    return flat @ W.T                                                    # [Nc, G, d]


def masked_softmax(scores, mask):
    """Softmax over the last axis where mask is True; rows with no True are 0."""
    s = scores.masked_fill(~mask, float("-inf"))
    any_ = mask.any(-1, keepdim=True)
    s = torch.where(any_, s, torch.zeros_like(s))
    p = torch.softmax(s, dim=-1)
    return torch.where(mask, p, torch.zeros_like(p))


def select_blocks(p_cmp, T, G, n_rep, hp):
    """The selection blocks of every (t, g), as a list of lists, from the
    compressed probabilities p_cmp [H, T, Nc] (no gradient: a choice).
    Forced first: block 0, block t//l' and block t//l' - 1 where they exist;
    then by importance, ties to the lower index, up to n blocks."""
    l, s, lp, n = hp["nsa_block"], hp["nsa_stride"], hp["nsa_select"], hp["nsa_topn"]
    p = p_cmp.detach()
    Nc = p.shape[-1]
    H = p.shape[0]
    # inside[i, j]: compressed block i lies wholly inside selection block j
    nsel_max = (T - 1) // lp + 1
    inside = torch.zeros(Nc, nsel_max, dtype=p.dtype)
    for i in range(Nc):
        j = (i * s) // lp
        if i * s + l - 1 <= j * lp + lp - 1:
            inside[i, j] = 1.0
    pg = p.view(G, n_rep, T, Nc).sum(1)                                 # [G, T, Nc]
    imp = pg @ inside                                                    # [G, T, nsel_max]
    choice = [[None] * G for _ in range(T)]
    margin = math.inf   # smallest gap between a chosen and an unchosen importance
    for t in range(T):
        cur = t // lp
        for g in range(G):
            forced = []
            for j in (0, cur, cur - 1):
                if 0 <= j <= cur and j not in forced:
                    forced.append(j)
            rest = sorted((j for j in range(cur + 1) if j not in forced), key=lambda j: (-float(imp[g, t, j]), j))
            take = max(0, n - len(forced))
            chosen = forced + rest[:take]
            if take < len(rest) and take > 0:
                margin = min(margin, float(imp[g, t, rest[take - 1]] - imp[g, t, rest[take]]))
            choice[t][g] = sorted(chosen)
    return choice, imp, margin


def nsa_attention(q, k_cmp, v_cmp, k_slc, v_slc, k_win, v_win, gate, Wck, Wcv, pe_k, pe_v, hp, trace=False):
    check_hparams(hp)
    l, s, lp, w = hp["nsa_block"], hp["nsa_stride"], hp["nsa_select"], hp["nsa_window"]
    T, H, d = q.shape
    G = k_cmp.shape[1]
    n_rep = H // G
    group = torch.arange(H) // n_rep
    scale = 1.0 / math.sqrt(d)
    t_idx = torch.arange(T)

    # compression
    Kc = compress(k_cmp, Wck, pe_k, l, s)                               # [Nc, G, d]
    Vc = compress(v_cmp, Wcv, pe_v, l, s)
    Nc = Kc.shape[0]
    vis = (torch.arange(Nc) * s + l - 1)[None, :] <= t_idx[:, None]    # [T, Nc]
    sc = torch.einsum("thd,chd->htc", q, Kc[:, group]) * scale         # [H, T, Nc]
    p_cmp = masked_softmax(sc, vis[None].expand(H, T, Nc))
    o_cmp = torch.einsum("htc,chd->thd", p_cmp, Vc[:, group])

    # selection
    choice, imp, margin = select_blocks(p_cmp, T, G, n_rep, hp)
    sel = torch.zeros(G, T, T, dtype=torch.bool)
    for t in range(T):
        for g in range(G):
            for j in choice[t][g]:
                sel[g, t, j * lp:min(j * lp + lp, t + 1)] = True
    ss = torch.einsum("thd,shd->hts", q, k_slc[:, group]) * scale
    p_slc = masked_softmax(ss, sel[group])
    o_slc = torch.einsum("hts,shd->thd", p_slc, v_slc[:, group])

    # window
    causal = torch.ones(T, T, dtype=torch.bool).tril() & torch.ones(T, T, dtype=torch.bool).triu(1 - w)
    sw = torch.einsum("thd,shd->hts", q, k_win[:, group]) * scale
    p_win = masked_softmax(sw, causal[None].expand(H, T, T))
    o_win = torch.einsum("hts,shd->thd", p_win, v_win[:, group])

    o = gate[..., 0:1] * o_cmp + gate[..., 1:2] * o_slc + gate[..., 2:3] * o_win
    if not trace:
        return o
    return o, {"p_cmp": p_cmp.detach(), "p_slc": p_slc.detach(), "p_win": p_win.detach(), "choice": choice,
               "importance": imp, "margin": margin, "Nc": Nc,
               "o_cmp": o_cmp.detach(), "o_slc": o_slc.detach(), "o_win": o_win.detach()}


def naive_nsa(q, k_cmp, v_cmp, k_slc, v_slc, k_win, v_win, gate, Wck, Wcv, pe_k, pe_v, hp):
    """The same computation as loops over (t, h), sharing nothing with
    nsa_attention but the block choice rule's text."""
    l, s, lp, n, w = (hp[k] for k in NSA_KEYS)
    q, k_cmp, v_cmp, k_slc, v_slc, k_win, v_win, gate, Wck, Wcv, pe_k, pe_v = (
        x.detach().double().numpy() for x in (q, k_cmp, v_cmp, k_slc, v_slc, k_win, v_win, gate, Wck, Wcv, pe_k, pe_v))
    import numpy as np
    T, H, d = q.shape
    G = k_cmp.shape[1]
    n_rep = H // G
    nb = (T - l) // s + 1 if T >= l else 0
    Kc = np.zeros((nb, G, d))
    Vc = np.zeros((nb, G, d))
    for i in range(nb):
        for g in range(G):
            fk = np.concatenate([k_cmp[i * s + p, g] + pe_k[p] for p in range(l)])
            fv = np.concatenate([v_cmp[i * s + p, g] + pe_v[p] for p in range(l)])
            Kc[i, g] = Wck @ fk
            Vc[i, g] = Wcv @ fv

    def attend(qv, keys, vals):
        if not keys:
            return np.zeros(d), []
        sc = [float(qv @ kk) / math.sqrt(d) for kk in keys]
        m = max(sc)
        e = [math.exp(x - m) for x in sc]
        z = sum(e)
        pr = [x / z for x in e]
        return sum(pi * vv for pi, vv in zip(pr, vals)), pr

    out = np.zeros((T, H, d))
    for t in range(T):
        vis = [i for i in range(nb) if i * s + l - 1 <= t]
        probs = {}
        oc = {}
        for h in range(H):
            g = h // n_rep
            oc[h], probs[h] = attend(q[t, h], [Kc[i, g] for i in vis], [Vc[i, g] for i in vis])
        for g in range(G):
            cur = t // lp
            imp = {}
            for j in range(cur + 1):
                imp[j] = sum(probs[h][vi] for h in range(g * n_rep, (g + 1) * n_rep)
                             for vi, i in enumerate(vis) if i * s >= j * lp and i * s + l - 1 <= j * lp + lp - 1)
            forced = [j for j in dict.fromkeys((0, cur, cur - 1)) if 0 <= j <= cur]
            rest = sorted([j for j in range(cur + 1) if j not in forced], key=lambda j: (-imp[j], j))
            chosen = set(forced + rest[:max(0, n - len(forced))])
            keys = [u for u in range(t + 1) if u // lp in chosen]
            wkeys = list(range(max(0, t - w + 1), t + 1))
            for h in range(g * n_rep, (g + 1) * n_rep):
                os_, _ = attend(q[t, h], [k_slc[u, g] for u in keys], [v_slc[u, g] for u in keys])
                ow, _ = attend(q[t, h], [k_win[u, g] for u in wkeys], [v_win[u, g] for u in wkeys])
                out[t, h] = gate[t, h, 0] * oc[h] + gate[t, h, 1] * os_ + gate[t, h, 2] * ow
    return out
