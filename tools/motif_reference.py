#!/usr/bin/python3
"""A float64 PyTorch reference of the Motif models, and the parity fixtures of
diffattn's --arch gda and --mlp polynorm (tests/test_motif.c).

Written from the public ports (read, not copied): vLLM v0.10's
model_executor/models/motif.py and attention/backends/differential_flash_attn.py,
layers/layernorm.py's PolyNorm, and junhoyeo/mlx-motif's model.py and
kernels/gda.py. The model here takes the Hugging Face tensors and config keys
as published (MotifForCausalLM), so it states the semantics in the file's own
layout:

  - q_proj holds num_attention_heads d-wide heads. DIFF V1 (Motif-2.6B, no
    num_noise_heads): even heads are map 1, odd heads map 2 ("(H two) D").
    GDA (Motif-2-12.7B): G = num_noise_heads groups striped [s_1 .. s_gr, n],
    gr = H/G - 1. V1 is GDA with G = H/2.
  - k_proj/v_proj: num_key_value_heads d-wide heads, interleaved pairs: K
    head 2p is the signal maps' key of pair p, 2p+1 the noise maps'; the
    value of pair p is V heads 2p, 2p+1 side by side (2d wide). GQA maps
    heads onto pairs by repeat_interleave.
  - RoPE: rotate-half (NeoX) on every d-wide head, before the split,
    inv_freq_j = theta^(-2j/d).
  - lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init, lambda_init =
    0.8 - 0.6 exp(-0.3 (l - 1)) with l the 0-based layer index.
  - each signal head: subln(A_s V - lambda A_n V) * (1 - lambda_init), subln
    an RMSNorm over 2d with a learned weight and eps attn_rms_norm_eps;
    o_proj reads the signal heads' 2d rows in order.
  - MLP: down(act(gate x) * up x); act = PolyNorm(u) = w0 n(u^3) + w1 n(u^2)
    + w2 n(u) + b, n(z) = z / sqrt(mean(z^2) + 1e-6) over the row
    (mlp.act_fn.weight [3], mlp.act_fn.bias [1]), or silu.

to_diffattn() maps such a model onto diffattn's tensors (--arch gda,
rope_freq llama): the q and k rows of each head permuted from rotate-half to
diffattn's interleaved RoPE pairs (dot products unchanged), and v_proj scaled
by sqrt(1e-5 / attn_rms_norm_eps) when that eps is not diffattn's fixed 1e-5
(an RMSNorm of c x with eps e is one of x with eps e / c^2).

    /usr/bin/python3 tools/motif_reference.py          # write tests/fixtures/motif_* and hf_motif_*, checking on the way
    /usr/bin/python3 tools/motif_reference.py --check  # the checks only
    /usr/bin/python3 tools/motif_reference.py --logits FOLDER --ids IDS.txt --out L.npy  # a folder's logits
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as ref  # noqa: E402  (safetensors writing only)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures")
DA_SUBLN_EPS = 1e-5
POLYNORM_EPS = 1e-6

# Hugging Face configs, tiny. GDA: H = 10 query heads in G = 2 groups of 4 signal + 1 noise over
# 2 K/V pairs (4 K heads); GDA over one shared pair (GQA); V1 (no num_noise_heads) with GQA;
# the SwiGLU MLP beside PolyNorm; an attn_rms_norm_eps that is not 1e-5; tied embeddings.
_BASE = dict(hidden_size=32, num_hidden_layers=2, vocab_size=48, intermediate_size=48, head_dim=4,
             rms_norm_eps=1e-6, attn_rms_norm_eps=1e-5, rope_theta=10000.0, max_position_embeddings=64,
             tie_word_embeddings=False, hidden_act="poly_norm")
CONFIGS = {
    "motif_gda": dict(_BASE, num_attention_heads=10, num_noise_heads=2, num_key_value_heads=4),
    "motif_gda_gqa": dict(_BASE, num_attention_heads=10, num_noise_heads=2, num_key_value_heads=2,
                          attn_rms_norm_eps=1e-6, tie_word_embeddings=True),
    "motif_v1": dict(_BASE, num_attention_heads=8, num_key_value_heads=4, num_hidden_layers=3),
    "motif_gda_silu": dict(_BASE, num_attention_heads=6, num_noise_heads=2, num_key_value_heads=2,
                           hidden_act="silu"),
}
SEEDS = {"motif_gda": 4501, "motif_gda_gqa": 4502, "motif_v1": 4503, "motif_gda_silu": 4504}
T = 40


def shape_of(cfg):
    """(H query heads, G groups, gr signal heads per group, kv heads, d)."""
    H, KV, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    G = cfg.get("num_noise_heads") or H // 2
    return H, G, H // G - 1, KV, d


def hf_param_shapes(cfg):
    H, G, gr, KV, d = shape_of(cfg)
    C, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    out = {"model.embed_tokens.weight": (V, C)}
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        out[p + "input_layernorm.weight"] = (C,)
        out[p + "self_attn.q_proj.weight"] = (H * d, C)
        out[p + "self_attn.k_proj.weight"] = (KV * d, C)
        out[p + "self_attn.v_proj.weight"] = (KV * d, C)
        out[p + "self_attn.o_proj.weight"] = (C, 2 * (H - G) * d)
        for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            out[p + "self_attn." + n] = (d,)
        out[p + "self_attn.subln.weight"] = (2 * d,)
        out[p + "post_attention_layernorm.weight"] = (C,)
        out[p + "mlp.gate_proj.weight"] = (F, C)
        out[p + "mlp.up_proj.weight"] = (F, C)
        out[p + "mlp.down_proj.weight"] = (C, F)
        if cfg["hidden_act"] == "poly_norm":
            out[p + "mlp.act_fn.weight"] = (3,)
            out[p + "mlp.act_fn.bias"] = (1,)
    out["model.norm.weight"] = (C,)
    if not cfg["tie_word_embeddings"]:
        out["lm_head.weight"] = (V, C)
    return out


def random_hf_params(cfg, seed):
    """float32-representable weights: matrices N(0, 0.3^2), gains 1 + 0.3 N, lambdas N(0, 0.3^2), PolyNorm's
    weights 1/3 + 0.2 N and bias 0.2 N (off their init, so every term's gradient shows)."""
    rng = np.random.default_rng(seed)
    P = {}
    for name, shape in hf_param_shapes(cfg).items():
        if len(shape) == 2:
            a = 0.3 * rng.standard_normal(shape)
        elif ".lambda_" in name:
            a = 0.3 * rng.standard_normal(shape)
        elif name.endswith("act_fn.weight"):
            a = 1.0 / 3.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith("act_fn.bias"):
            a = 0.2 * rng.standard_normal(shape)
        else:
            a = 1.0 + 0.3 * rng.standard_normal(shape)
        P[name] = torch.from_numpy(a.astype(np.float32)).double()
    return P

# ----------------------------------------------------------------- the model, in the file's layout


def rms(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def polynorm(u, w, b):
    n = lambda z: z * torch.rsqrt((z * z).mean(-1, keepdim=True) + POLYNORM_EPS)  # noqa: E731
    return w[0] * n(u ** 3) + w[1] * n(u ** 2) + w[2] * n(u) + b


def rope_rotate_half(x, theta):
    """x: (T, heads, d); NeoX RoPE at positions 0..T-1."""
    Tn, _, d = x.shape
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(Tn, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    rot = torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * cos + rot * sin


def lambda_init(layer):
    return 0.8 - 0.6 * math.exp(-0.3 * (layer - 1))


def causal_attention(q, k, v, scale):
    """q: (Tq, n, d), k: (Tk, n, d), v: (Tk, n, w) -> (Tq, n, w)."""
    s = torch.einsum("tnd,snd->nts", q, k) * scale
    Tn = q.shape[0]
    s = s.masked_fill(torch.ones(Tn, Tn, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("nts,snw->tnw", torch.softmax(s, -1), v)


def gda_attention(cfg, P, p, l, q, k, v):
    """The grouped form (mlx-motif's _forward_grouped, k_ratio 1)."""
    H, G, gr, KV, d = shape_of(cfg)
    Tn, pairs = q.shape[0], KV // 2
    qg = q.view(Tn, G, gr + 1, d)
    q_sig, q_noise = qg[:, :, :gr].reshape(Tn, G * gr, d), qg[:, :, gr]
    kp, vp = k.view(Tn, pairs, 2, d), v.view(Tn, pairs, 2, d)
    k1, k2 = kp[:, :, 0], kp[:, :, 1]
    vv = torch.cat([vp[:, :, 0], vp[:, :, 1]], -1)  # (T, pairs, 2d)
    rep = lambda x, n: x.repeat_interleave(n, dim=1)  # noqa: E731
    scale = d ** -0.5
    o_sig = causal_attention(q_sig, rep(k1, G * gr // pairs), rep(vv, G * gr // pairs), scale)
    o_noise = causal_attention(q_noise, rep(k2, G // pairs), rep(vv, G // pairs), scale)
    lam = layer_lambda(P, p, l)
    diff = o_sig - lam * rep(o_noise, gr)
    out = rms(diff, P[p + "self_attn.subln.weight"], cfg["attn_rms_norm_eps"]) * (1 - lambda_init(l))
    return out.reshape(Tn, G * gr * 2 * d)


def v1_attention(cfg, P, p, l, q, k, v):
    """DIFF V1 as vLLM's differential_flash_attn computes it: stripes split, four attentions."""
    H, _, _, KV, d = shape_of(cfg)
    Tn = q.shape[0]
    q1, q2 = q.view(Tn, H // 2, 2, d).unbind(2)
    k1, k2 = k.view(Tn, KV // 2, 2, d).unbind(2)
    v1, v2 = v.view(Tn, KV // 2, 2, d).unbind(2)
    rep = lambda x: x.repeat_interleave(H // KV, dim=1)  # noqa: E731
    k1, k2, v1, v2 = rep(k1), rep(k2), rep(v1), rep(v2)
    scale = d ** -0.5
    a1 = torch.cat([causal_attention(q1, k1, v1, scale), causal_attention(q1, k1, v2, scale)], -1)
    a2 = torch.cat([causal_attention(q2, k2, v1, scale), causal_attention(q2, k2, v2, scale)], -1)
    out = rms(a1 - layer_lambda(P, p, l) * a2, P[p + "self_attn.subln.weight"], cfg["attn_rms_norm_eps"])
    return (out * (1 - lambda_init(l))).reshape(Tn, H * d)


def layer_lambda(P, p, l):
    a = (P[p + "self_attn.lambda_q1"] * P[p + "self_attn.lambda_k1"]).sum()
    b = (P[p + "self_attn.lambda_q2"] * P[p + "self_attn.lambda_k2"]).sum()
    return torch.exp(a) - torch.exp(b) + lambda_init(l)


def forward(cfg, P, ids, attention=None):
    """Logits (T, V), float64."""
    H, G, gr, KV, d = shape_of(cfg)
    if attention is None:
        attention = gda_attention if cfg.get("num_noise_heads") else v1_attention
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    x = P["model.embed_tokens.weight"][torch.as_tensor(ids)]
    Tn = x.shape[0]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        xn = rms(x, P[p + "input_layernorm.weight"], eps)
        q = rope_rotate_half((xn @ P[p + "self_attn.q_proj.weight"].T).view(Tn, H, d), theta)
        k = rope_rotate_half((xn @ P[p + "self_attn.k_proj.weight"].T).view(Tn, KV, d), theta)
        v = xn @ P[p + "self_attn.v_proj.weight"].T
        x = x + attention(cfg, P, p, l, q, k, v) @ P[p + "self_attn.o_proj.weight"].T
        xn = rms(x, P[p + "post_attention_layernorm.weight"], eps)
        u = xn @ P[p + "mlp.gate_proj.weight"].T
        act = (polynorm(u, P[p + "mlp.act_fn.weight"], P[p + "mlp.act_fn.bias"])
               if cfg["hidden_act"] == "poly_norm" else torch.nn.functional.silu(u))
        x = x + (act * (xn @ P[p + "mlp.up_proj.weight"].T)) @ P[p + "mlp.down_proj.weight"].T
    x = rms(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    return x @ head.T

# ----------------------------------------------------------------- diffattn's layout


def diffattn_config(cfg):
    H, G, gr, KV, d = shape_of(cfg)
    return {"format": "diffattn", "version": "1", "arch": "gda", "dim": str(cfg["hidden_size"]),
            "n_layers": str(cfg["num_hidden_layers"]), "n_heads": str(H - G), "n_kv_heads": str(KV // 2),
            "vocab_size": str(cfg["vocab_size"]), "ffn_hidden": str(cfg["intermediate_size"]),
            "max_seq_len": str(cfg["max_position_embeddings"]), "norm_eps": ref._fmt_float(cfg["rms_norm_eps"]),
            "rope_theta": ref._fmt_float(cfg["rope_theta"]),
            "tie_embeddings": "true" if cfg["tie_word_embeddings"] else "false", "rope_freq": "llama",
            "head_dim": str(d), "gda_noise_heads": str(G),
            **({"mlp": "polynorm"} if cfg["hidden_act"] == "poly_norm" else {})}


def rope_rows(d):
    """Row order of a head that turns rotate-half pairs (j, j + d/2) into interleaved pairs (2j, 2j+1)."""
    return [j // 2 + (j % 2) * (d // 2) for j in range(d)]


NAME_MAP = [("input_layernorm.weight", "attention_norm.weight"), ("self_attn.q_proj.weight", "attn.q_proj.weight"),
            ("self_attn.k_proj.weight", "attn.k_proj.weight"), ("self_attn.v_proj.weight", "attn.v_proj.weight"),
            ("self_attn.o_proj.weight", "attn.out_proj.weight"), ("self_attn.lambda_q1", "attn.lambda_q1"),
            ("self_attn.lambda_k1", "attn.lambda_k1"), ("self_attn.lambda_q2", "attn.lambda_q2"),
            ("self_attn.lambda_k2", "attn.lambda_k2"), ("self_attn.subln.weight", "attn.subln.weight"),
            ("post_attention_layernorm.weight", "ffn_norm.weight"), ("mlp.gate_proj.weight", "feed_forward.w1.weight"),
            ("mlp.down_proj.weight", "feed_forward.w2.weight"), ("mlp.up_proj.weight", "feed_forward.w3.weight"),
            ("mlp.act_fn.weight", "feed_forward.poly.weight"), ("mlp.act_fn.bias", "feed_forward.poly.bias")]


def hf_from_diffattn(cfg, D):
    """The Hugging Face tensors of diffattn's D (differentiable: autograd carries gradients back to D)."""
    H, G, gr, KV, d = shape_of(cfg)
    inv = [0] * d
    for new, old in enumerate(rope_rows(d)):
        inv[old] = new
    P = {"model.embed_tokens.weight": D["tok_embeddings.weight"], "model.norm.weight": D["norm.weight"]}
    if not cfg["tie_word_embeddings"]:
        P["lm_head.weight"] = D["output.weight"]
    vscale = math.sqrt(DA_SUBLN_EPS / cfg["attn_rms_norm_eps"])
    for l in range(cfg["num_hidden_layers"]):
        for hf, da in NAME_MAP:
            name = "layers.%d.%s" % (l, da)
            if name not in D:
                continue
            t = D[name]
            if hf in ("self_attn.q_proj.weight", "self_attn.k_proj.weight"):
                heads = t.shape[0] // d
                t = t.view(heads, d, -1)[:, inv].reshape(heads * d, -1)
            if hf == "self_attn.v_proj.weight":
                t = t / vscale
            P["model.layers.%d.%s" % (l, hf)] = t
    return P


def diffattn_from_hf(cfg, P):
    H, G, gr, KV, d = shape_of(cfg)
    rows = rope_rows(d)
    vscale = math.sqrt(DA_SUBLN_EPS / cfg["attn_rms_norm_eps"])
    D = {"tok_embeddings.weight": P["model.embed_tokens.weight"]}
    for l in range(cfg["num_hidden_layers"]):
        for hf, da in NAME_MAP:
            key = "model.layers.%d.%s" % (l, hf)
            if key not in P:
                continue
            t = P[key]
            if hf in ("self_attn.q_proj.weight", "self_attn.k_proj.weight"):
                heads = t.shape[0] // d
                t = t.view(heads, d, -1)[:, rows].reshape(heads * d, -1)
            if hf == "self_attn.v_proj.weight":
                t = t * vscale
            D["layers.%d.%s" % (l, da)] = t
    D["norm.weight"] = P["model.norm.weight"]
    if not cfg["tie_word_embeddings"]:
        D["output.weight"] = P["lm_head.weight"]
    return D


def loss_and_grads(cfg, D, ids):
    """Mean cross-entropy of ids[1:] given ids[:-1], and its gradient in diffattn's tensors."""
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in D.items()}
    logits = forward(cfg, hf_from_diffattn(cfg, leaves), ids[:-1])
    loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(ids[1:]))
    loss.backward()
    return float(loss), {k: v.grad.detach() for k, v in leaves.items()}

# ----------------------------------------------------------------- checks and fixtures


def check(ok, what):
    if not ok:
        raise SystemExit("motif_reference: FAILED: " + what)
    print("ok   " + what)


def self_checks():
    # V1 is GDA with G = H/2: the two forms agree
    cfg = dict(CONFIGS["motif_v1"])
    P = random_hf_params(cfg, 1)
    ids = np.random.default_rng(2).integers(0, cfg["vocab_size"], size=12)
    a, b = forward(cfg, P, ids, v1_attention), forward(cfg, P, ids, gda_attention)
    check(float((a - b).abs().max()) < 1e-12 * float(b.abs().max()), "V1 (four attentions) = GDA with G = H/2")
    # diffattn's layout computes the same logits (RoPE pairs permuted, v scaled against the eps)
    for name in ("motif_gda", "motif_gda_gqa"):
        cfg = CONFIGS[name]
        P = random_hf_params(cfg, 3)
        back = hf_from_diffattn(cfg, diffattn_from_hf(cfg, P))
        check(all(torch.allclose(back[k], P[k], rtol=0, atol=1e-15) for k in P) and set(back) == set(P),
              "%s: diffattn layout round trip" % name)
    # PolyNorm against a loop over the formula
    u = torch.from_numpy(np.random.default_rng(4).standard_normal((3, 7)))
    w, bb = torch.tensor([0.2, -0.5, 0.9], dtype=torch.float64), torch.tensor([0.1], dtype=torch.float64)
    got, worst = polynorm(u, w, bb), 0.0
    for r in range(3):
        for j in range(7):
            want = bb.item()
            for i, pw in enumerate((3, 2, 1)):
                z = [float(u[r, c]) ** pw for c in range(7)]
                want += float(w[i]) * z[j] / math.sqrt(sum(t * t for t in z) / 7 + POLYNORM_EPS)
            worst = max(worst, abs(float(got[r, j]) - want))
    check(worst < 1e-12, "polynorm against the formula entry by entry (worst %.1e)" % worst)


def write(name, do_write):
    cfg = CONFIGS[name]
    P = random_hf_params(cfg, SEEDS[name])
    D = diffattn_from_hf(cfg, P)
    D = {k: v.float().double() for k, v in D.items()}  # what the float32 file holds
    ids = np.random.default_rng(SEEDS[name] + 1).integers(0, cfg["vocab_size"], size=T)
    logits = forward(cfg, hf_from_diffattn(cfg, D), ids)
    loss, grads = loss_and_grads(cfg, D, ids)
    # the gradient against central differences on a few entries
    for key in [k for k in D if k.endswith(("lambda_q1", "poly.weight", "q_proj.weight", "subln.weight"))][:4]:
        e = D[key].view(-1)
        i, h = 1 % e.numel(), 1e-6
        old = float(e[i])
        e[i] = old + h
        lp = float(torch.nn.functional.cross_entropy(forward(cfg, hf_from_diffattn(cfg, D), ids[:-1]),
                                                     torch.as_tensor(ids[1:])))
        e[i] = old - h
        lm = float(torch.nn.functional.cross_entropy(forward(cfg, hf_from_diffattn(cfg, D), ids[:-1]),
                                                     torch.as_tensor(ids[1:])))
        e[i] = old
        fd, an = (lp - lm) / (2 * h), float(grads[key].view(-1)[i])
        check(abs(fd - an) <= 1e-6 * max(1.0, abs(an)), "%s: d loss / d %s[%d] %.9f vs differences %.9f"
              % (name, key, i, an, fd))
    if not do_write:
        return
    base = os.path.join(OUT_DIR, name)
    ref.write_safetensors(base + ".model.safetensors", D, diffattn_config(cfg))
    with open(base + ".ids.txt", "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    np.save(base + ".logits.npy", logits.detach().numpy().astype("<f4"))
    out = dict(grads)
    out["loss"] = np.array(loss)
    ref.write_safetensors(base + ".grads.safetensors", out)
    print("[%s] wrote %s.* (loss %.6f, ln V = %.3f)" % (name, name, loss, math.log(cfg["vocab_size"])))


# ----------------------------------------------------------------- Hugging Face folders as published

# Motif folders as Motif Technologies publish them (config.json with the published keys, the features the
# models do not use written as off, safetensors shards with an index), byte-sized vocabularies so that the
# CLI can sample and fine-tune them on byte-level text (tests/cli_motif_hf.sh). name: (config, dtype, shards).
_FOLDER_BASE = dict(_BASE, vocab_size=256, max_position_embeddings=512)
FOLDERS = {
    # Motif-2-12.7B's form: 10 heads in 2 groups over 2 K/V pairs, untied, BF16
    "hf_motif_gda": (dict(_FOLDER_BASE, num_attention_heads=10, num_noise_heads=2, num_key_value_heads=4), "BF16", 2),
    # GDA over one K/V pair (GQA), tied, F32, attn_rms_norm_eps 1e-6 (v_proj rescaled on the way in)
    "hf_motif_gda_gqa": (dict(_FOLDER_BASE, num_attention_heads=10, num_noise_heads=2, num_key_value_heads=2,
                              attn_rms_norm_eps=1e-6, tie_word_embeddings=True), "F32", 3),
    # Motif-2.6B's DIFF V1 (no num_noise_heads), 4 maps pairs over 2 K/V pairs (GQA), untied, F32, 3 layers
    "hf_motif_v1": (dict(_FOLDER_BASE, num_attention_heads=8, num_key_value_heads=4, num_hidden_layers=3), "F32", 2),
    # DIFF V1 with one K/V pair per head pair, tied, BF16
    "hf_motif_v1_tied": (dict(_FOLDER_BASE, num_attention_heads=4, num_key_value_heads=4, head_dim=8,
                              tie_word_embeddings=True), "BF16", 2),
}
FOLDER_SEEDS = {"hf_motif_gda": 4511, "hf_motif_gda_gqa": 4512, "hf_motif_v1": 4513, "hf_motif_v1_tied": 4514}


def published_config(cfg, dtype):
    """config.json as the published folders write it (Motif-2.6B has no num_noise_heads)."""
    out = {"architectures": ["MotifForCausalLM"], "model_type": "motif",
           "auto_map": {"AutoConfig": "configuration_motif.MotifConfig",
                        "AutoModelForCausalLM": "modeling_motif.MotifForCausalLM"}}
    out.update({k: v for k, v in cfg.items() if k != "num_noise_heads"})
    if cfg.get("num_noise_heads"):
        out["num_noise_heads"] = cfg["num_noise_heads"]
        out["k_ratio"] = 1
    out.update({"rope_scaling": None, "use_bias": False, "use_sliding_window": False, "sliding_window": None,
                "max_window_layers": cfg["num_hidden_layers"], "attention_dropout": 0.0, "bos_token_id": 1,
                "eos_token_id": 2, "initializer_range": 0.02,
                "torch_dtype": "bfloat16" if dtype == "BF16" else "float32"})
    return out


def write_folder(name, do_write):
    """OUT_DIR/NAME/ (the folder) and OUT_DIR/NAME.{ids.txt, logits.npy, grads.safetensors}: the reference's
    logits of the folder's weights as stored, and the gradient of the mean loss in diffattn's tensors."""
    import make_hf_fixtures as hfx
    cfg, dtype, shards = FOLDERS[name]
    P, stored = {}, []
    for key, t in random_hf_params(cfg, FOLDER_SEEDS[name]).items():
        b, back = hfx.to_dtype(t.numpy(), dtype)
        P[key] = torch.from_numpy(back)
        stored.append((key, dtype, tuple(t.shape), b))
    ids = np.random.default_rng(FOLDER_SEEDS[name] + 1).integers(0, cfg["vocab_size"], size=T)
    logits = forward(cfg, P, ids)
    loss, grads = loss_and_grads(cfg, diffattn_from_hf(cfg, P), ids)
    # the diffattn mapping of the stored weights gives the folder's logits
    back = forward(cfg, hf_from_diffattn(cfg, diffattn_from_hf(cfg, P)), ids)
    check(float((back - logits).abs().max()) <= 1e-12 * float(logits.abs().max()),
          "%s: diffattn's tensors give the folder's logits" % name)
    if not do_write:
        return
    folder = os.path.join(OUT_DIR, name)
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(published_config(cfg, dtype), f, indent=2)
    per, weight_map = math.ceil(len(stored) / shards), {}
    for s in range(shards):
        fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = stored[s * per:(s + 1) * per]
        hfx.write_safetensors(os.path.join(folder, fn), part)
        weight_map.update({n: fn for n, *_ in part})
    total = sum(len(b) for *_, b in stored)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    base = os.path.join(OUT_DIR, name)
    with open(base + ".ids.txt", "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    np.save(base + ".logits.npy", logits.detach().numpy().astype("<f4"))
    out = dict(grads)
    out["loss"] = np.array(loss)
    ref.write_safetensors(base + ".grads.safetensors", out)
    print("[%s] wrote %s/ (%s, %d shards) and %s.* (loss %.6f)" % (name, name, dtype, shards, name, loss))


def folder_logits(folder, ids_path, out_path):
    """The reference's logits (float64 .npy) of a Motif folder as stored: its config.json, and its weights
    from model.safetensors or the shards its index names (F32, BF16 or F16, widened exactly)."""
    import make_hf_fixtures as hfx
    cfg, W = hfx.load_folder(folder)
    P = {k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in W.items()}
    with open(ids_path) as f:
        ids = np.array([int(t) for t in f.read().split()])
    np.save(out_path, forward(cfg, P, ids).detach().numpy().astype("<f8"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="run the checks, write nothing")
    ap.add_argument("--logits", metavar="FOLDER", help="write the logits of a Motif folder (with --ids, --out)")
    ap.add_argument("--ids", help="token ids, whitespace-separated")
    ap.add_argument("--out", help="the .npy of --logits")
    a = ap.parse_args(argv)
    torch.set_default_dtype(torch.float64)
    if a.logits:
        if not a.ids or not a.out:
            ap.error("--logits needs --ids and --out")
        return folder_logits(a.logits, a.ids, a.out)
    self_checks()
    for name in CONFIGS:
        write(name, not a.check)
    for name in FOLDERS:
        write_folder(name, not a.check)


if __name__ == "__main__":
    main()
