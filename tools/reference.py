#!/usr/bin/python3
"""PyTorch reference for diffattn: the Differential Transformer (DIFF V1), DIFF
V2 (arch "diff2", written from microsoft/unilm
Diff-Transformer/Diff-Transformer-V2/multihead_flashdiffv2.py) and the
softmax baseline, computed in float64.

Module use:
    cfg, params = load_model("m.safetensors")
    logits = forward(cfg, params, ids)                 # [T, V] float64
    loss, grads = loss_and_grads(cfg, params, ids)     # mean CE of ids[1:] given ids[:-1]
    save_model("copy.safetensors", cfg, params)

CLI (mirrors the C tool so outputs can be compared):
    reference.py logits  --model M --ids IDS.txt --out OUT.npy
    reference.py grads   --model M --ids IDS.txt --out G.safetensors
    reference.py compare --ref A --test B      (.npy logits or .safetensors grads)

Needs torch and numpy only (run it with /usr/bin/python3 on Debian). The
safetensors reader/writer uses json + numpy; no safetensors package.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

import nsa_reference as nsa

# ----------------------------------------------------------------- config

CONFIG_INT_KEYS = ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                   "ffn_hidden", "max_seq_len")
CONFIG_KEYS = ("arch",) + CONFIG_INT_KEYS + ("norm_eps", "rope_theta", "tie_embeddings")
# Optional: "window" (sliding-window attention, the last `window` keys; absent or 0 = all);
# "head_norm" ("on" or "off"; absent = the arch's default: on for diff, off for softmax; diff2 and nsa
# have none); "lambda_init" (diff: a float used in every layer; absent = the depth schedule);
# "head_dim" (d, the explicit (sub-)head size; absent = dim / (2 H) for diff, dim / H otherwise: the
# attention is then H d (diff: 2 H d) wide rather than dim); "lambda_hold" (diff, diff2: h in [0, 1],
# the second map weighs (1 - h) lambda, a --lambda-ramp's state; absent = 0).
# arch "nsa" also has nsa.NSA_KEYS (nsa_block, nsa_stride, nsa_select, nsa_topn, nsa_window), and
# optionally "nsa_shared_kv" (True: one k_proj, v_proj read by the three branches; absent = False).
# arch "moba" has softmax's parameters and MOBA_KEYS (moba_block, moba_topk): moba_mask below.
MOBA_KEYS = ("moba_block", "moba_topk")
SUBLN_EPS = 1e-5  # fixed eps of the DIFF per-head RMSNorm (subln)


def lambda_init(depth, cfg=None):
    """lambda_init of layer `depth` (0-based): cfg's fixed "lambda_init", else
    the depth schedule 0.8 - 0.6 exp(-0.3 depth)."""
    if cfg is not None and "lambda_init" in cfg:
        return float(cfg["lambda_init"])
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


def head_norm(cfg):
    """Whether the per-head RMSNorm (attn.subln.weight) is on: cfg's
    "head_norm", else on for diff and off for the others."""
    if "head_norm" in cfg:
        return cfg["head_norm"] == "on"
    return cfg["arch"] == "diff"


def head_dim(cfg):
    """d: the size of one RoPE'd sub-head: cfg's "head_dim", else diff: dim/H/2; softmax, diff2, nsa: dim/H."""
    if cfg.get("head_dim"):
        return cfg["head_dim"]
    if cfg["arch"] == "diff":
        return cfg["dim"] // cfg["n_heads"] // 2
    return cfg["dim"] // cfg["n_heads"]


def validate_config(cfg):
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    if missing:
        raise ValueError("config lacks %s" % ", ".join(missing))
    if cfg["arch"] not in ("diff", "diff2", "softmax", "nsa", "moba"):
        raise ValueError("arch must be 'diff', 'diff2', 'softmax', 'nsa' or 'moba', got %r" % (cfg["arch"],))
    if cfg["arch"] == "moba" and not all(isinstance(cfg.get(k), int) and cfg[k] >= 1 for k in MOBA_KEYS):
        raise ValueError("moba needs moba_block and moba_topk, ints >= 1")
    if cfg["arch"] == "nsa":
        missing = [k for k in nsa.NSA_KEYS if k not in cfg]
        if missing:
            raise ValueError("config lacks %s" % ", ".join(missing))
        nsa.check_hparams(cfg)
    for k in CONFIG_INT_KEYS:
        if not isinstance(cfg[k], int) or cfg[k] <= 0:
            raise ValueError("%s must be a positive int, got %r" % (k, cfg[k]))
    C, H, Hkv = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    if H % Hkv:
        raise ValueError("n_heads (%d) must be a multiple of n_kv_heads (%d)" % (H, Hkv))
    div = 2 * H if cfg["arch"] == "diff" else H
    if C % div and not cfg.get("head_dim"):
        raise ValueError("dim (%d) must be a multiple of %d" % (C, div))
    d = head_dim(cfg)
    if d % 2:
        raise ValueError("head dim %d must be even for RoPE" % d)
    if not (cfg["norm_eps"] > 0 and cfg["rope_theta"] > 0):
        raise ValueError("norm_eps and rope_theta must be > 0")
    if not isinstance(cfg["tie_embeddings"], bool):
        raise ValueError("tie_embeddings must be a bool")
    if not isinstance(cfg.get("window", 0), int) or cfg.get("window", 0) < 0:
        raise ValueError("window must be an int >= 0, got %r" % (cfg.get("window"),))
    if "head_norm" in cfg and (cfg["head_norm"] not in ("on", "off") or cfg["arch"] not in ("diff", "softmax")):
        raise ValueError("head_norm %r: 'on' or 'off', for diff and softmax only" % (cfg["head_norm"],))
    if "lambda_init" in cfg and (cfg["arch"] != "diff" or not 0.0 <= float(cfg["lambda_init"]) < 1.0):
        raise ValueError("lambda_init %r: a number in [0, 1), for diff only" % (cfg["lambda_init"],))
    if "lambda_hold" in cfg and (cfg["arch"] not in ("diff", "diff2") or not 0.0 <= float(cfg["lambda_hold"]) <= 1.0):
        raise ValueError("lambda_hold %r: a number in [0, 1], for diff and diff2 only" % (cfg["lambda_hold"],))
    if "head_dim" in cfg and (cfg["arch"] == "nsa" or not isinstance(cfg["head_dim"], int) or cfg["head_dim"] < 2):
        raise ValueError("head_dim %r: an even int >= 2, not for nsa" % (cfg["head_dim"],))


def param_shapes(cfg):
    """Ordered {name: shape} of every parameter tensor of cfg."""
    validate_config(cfg)
    C, V, F = cfg["dim"], cfg["vocab_size"], cfg["ffn_hidden"]
    H, Hkv = cfg["n_heads"], cfg["n_kv_heads"]
    d = head_dim(cfg)
    sub = 2 if cfg["arch"] == "diff" else 1  # DIFF: two d-wide sub-heads per head, a 2d-wide value
    A = H * d * sub                          # the attention's width: dim unless head_dim is set
    Ckv = Hkv * d * sub
    s = {"tok_embeddings.weight": (V, C)}
    for i in range(cfg["n_layers"]):
        p = "layers.%d." % i
        s[p + "attention_norm.weight"] = (C,)
        if cfg["arch"] == "nsa":
            s.update(nsa_param_shapes(cfg, p + "attn."))
            s[p + "ffn_norm.weight"] = (C,)
            s[p + "feed_forward.w1.weight"] = (F, C)
            s[p + "feed_forward.w2.weight"] = (C, F)
            s[p + "feed_forward.w3.weight"] = (F, C)
            continue
        s[p + "attn.q_proj.weight"] = (2 * A if cfg["arch"] == "diff2" else A, C)
        s[p + "attn.k_proj.weight"] = (Ckv, C)
        s[p + "attn.v_proj.weight"] = (Ckv, C)
        s[p + "attn.out_proj.weight"] = (C, A)
        if cfg["arch"] == "diff2":
            s[p + "attn.lambda_proj.weight"] = (cfg["n_heads"], C)
        if cfg["arch"] == "diff":
            for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                s[p + "attn." + n] = (d,)
        if head_norm(cfg):  # diff: one gain per 2d-wide head row; softmax: per d-wide head row
            s[p + "attn.subln.weight"] = (2 * d if cfg["arch"] == "diff" else d,)
        s[p + "ffn_norm.weight"] = (C,)
        s[p + "feed_forward.w1.weight"] = (F, C)
        s[p + "feed_forward.w2.weight"] = (C, F)
        s[p + "feed_forward.w3.weight"] = (F, C)
    s["norm.weight"] = (C,)
    if not cfg["tie_embeddings"]:
        s["output.weight"] = (V, C)
    return s


def nsa_param_shapes(cfg, p):
    """The NSA attention tensors of one layer, prefix p = "layers.{i}.attn."."""
    C, H, G = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    d, l = head_dim(cfg), cfg["nsa_block"]
    s = {p + "q_proj.weight": (H * d, C)}
    for b in ("proj",) if cfg.get("nsa_shared_kv") else ("cmp", "slc", "win"):
        s[p + "k_%s.weight" % b] = (G * d, C)
        s[p + "v_%s.weight" % b] = (G * d, C)
    s[p + "cmp_k.weight"] = (d, l * d)
    s[p + "cmp_v.weight"] = (d, l * d)
    s[p + "cmp_pe_k"] = (l, d)
    s[p + "cmp_pe_v"] = (l, d)
    s[p + "gate.weight"] = (3 * H, C)
    s[p + "gate.bias"] = (3 * H,)
    s[p + "out_proj.weight"] = (C, H * d)
    return s


def _fmt_float(x):
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))  # 10000.0 -> "10000"
    return repr(x)          # 1e-05 -> "1e-05"


def _fmt_f32(x):
    """The shortest %g that reads back as the same float32 (diffattn's format of a float field)."""
    f = np.float32(x)
    for prec in range(6, 10):
        t = "%.*g" % (prec, float(f))
        if np.float32(float(t)) == f:
            return t
    return repr(float(f))


def config_to_metadata(cfg):
    validate_config(cfg)
    md = {"format": "diffattn", "version": "1", "arch": cfg["arch"]}
    for k in CONFIG_INT_KEYS:
        md[k] = str(cfg[k])
    md["norm_eps"] = _fmt_float(cfg["norm_eps"])
    md["rope_theta"] = _fmt_float(cfg["rope_theta"])
    md["tie_embeddings"] = "true" if cfg["tie_embeddings"] else "false"
    if cfg.get("window", 0):
        md["window"] = str(cfg["window"])
    if "head_norm" in cfg and head_norm(cfg) != (cfg["arch"] == "diff"):
        md["head_norm"] = cfg["head_norm"]
    if "lambda_init" in cfg:
        md["lambda_init"] = _fmt_f32(cfg["lambda_init"])
    if cfg.get("head_dim"):
        md["head_dim"] = str(cfg["head_dim"])
    if cfg.get("lambda_hold"):
        md["lambda_hold"] = _fmt_f32(cfg["lambda_hold"])
    if cfg["arch"] == "nsa":
        for k in nsa.NSA_KEYS:
            md[k] = str(cfg[k])
        if cfg.get("nsa_shared_kv"):
            md["nsa_shared_kv"] = "true"
    if cfg["arch"] == "moba":
        for k in MOBA_KEYS:
            md[k] = str(cfg[k])
    return md


def metadata_to_config(md):
    if md.get("format") != "diffattn":
        raise ValueError("metadata format is %r, expected 'diffattn'" % (md.get("format"),))
    if md.get("version") != "1":
        raise ValueError("metadata version is %r, expected '1'" % (md.get("version"),))
    cfg = {"arch": md.get("arch")}
    for k in CONFIG_INT_KEYS:
        if k not in md:
            raise ValueError("metadata lacks %s" % k)
        cfg[k] = int(md[k])
    for k in ("norm_eps", "rope_theta"):
        if k not in md:
            raise ValueError("metadata lacks %s" % k)
        cfg[k] = float(md[k])
    tie = md.get("tie_embeddings")
    if tie not in ("true", "false"):
        raise ValueError("metadata tie_embeddings is %r, expected 'true' or 'false'" % (tie,))
    cfg["tie_embeddings"] = tie == "true"
    if "window" in md:
        cfg["window"] = int(md["window"])
    if "head_norm" in md:
        cfg["head_norm"] = md["head_norm"]
    if "lambda_init" in md:
        cfg["lambda_init"] = float(md["lambda_init"])
    if "head_dim" in md:
        cfg["head_dim"] = int(md["head_dim"])
    if "lambda_hold" in md:
        cfg["lambda_hold"] = float(md["lambda_hold"])
    if cfg["arch"] == "nsa":
        for k in nsa.NSA_KEYS:
            if k not in md:
                raise ValueError("metadata lacks %s" % k)
            cfg[k] = int(md[k])
        if "nsa_shared_kv" in md:
            if md["nsa_shared_kv"] not in ("true", "false"):
                raise ValueError("metadata nsa_shared_kv is %r, expected 'true' or 'false'" % (md["nsa_shared_kv"],))
            cfg["nsa_shared_kv"] = md["nsa_shared_kv"] == "true"
    if cfg["arch"] == "moba":
        for k in MOBA_KEYS:
            if k not in md:
                raise ValueError("metadata lacks %s" % k)
            cfg[k] = int(md[k])
    validate_config(cfg)
    return cfg

# ----------------------------------------------------------------- safetensors (json + numpy)

_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2"),
           "I32": np.dtype("<i4"), "I64": np.dtype("<i8")}


def read_safetensors(path):
    """Returns (metadata dict, {name: np.ndarray}) in file order. Accepts F32,
    F64, F16, BF16 (widened to float32), I32, I64."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError("%s: header length %d runs past the file end" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    md = header.pop("__metadata__", {}) or {}
    out = {}
    for name, e in header.items():
        dt, shape, (b, end) = e["dtype"], [int(x) for x in e["shape"]], e["data_offsets"]
        numel = int(np.prod(shape)) if shape else 1
        if not (0 <= b <= end <= len(data)):
            raise ValueError("%s: %s data_offsets %r outside the data" % (path, name, [b, end]))
        buf = data[b:end]
        if dt == "BF16":
            if len(buf) != 2 * numel:
                raise ValueError("%s: %s has %d bytes, shape needs %d" % (path, name, len(buf), 2 * numel))
            u = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32).reshape(shape)
        elif dt in _DTYPES:
            npdt = _DTYPES[dt]
            if len(buf) != npdt.itemsize * numel:
                raise ValueError("%s: %s has %d bytes, shape needs %d" % (path, name, len(buf), npdt.itemsize * numel))
            arr = np.frombuffer(buf, dtype=npdt).reshape(shape).copy()
        else:
            raise ValueError("%s: %s has unsupported dtype %s" % (path, name, dt))
        out[name] = arr
    return md, out


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: array-like} stored as F32 in the given order; metadata:
    {str: str}. Written atomically (path.tmp then rename)."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, off = [], 0
    for name, t in tensors.items():
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu().to(torch.float64).numpy()
        a = np.asarray(t, dtype=np.float64).astype("<f4", order="C")  # keeps 0-d shape []
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - (8 + len(hj)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load_model(path):
    """Returns (config dict, {name: float32 torch tensor}); checks every name and shape."""
    md, arrs = read_safetensors(path)
    cfg = metadata_to_config(md)
    want = param_shapes(cfg)
    extra = sorted(set(arrs) - set(want))
    missing = [k for k in want if k not in arrs]
    if missing or extra:
        raise ValueError("%s: missing tensors %s; unexpected tensors %s" % (path, missing, extra))
    params = {}
    for k, shape in want.items():
        if tuple(arrs[k].shape) != tuple(shape):
            raise ValueError("%s: %s has shape %s, expected %s" % (path, k, list(arrs[k].shape), list(shape)))
        params[k] = torch.from_numpy(np.asarray(arrs[k], dtype=np.float32).copy())
    return cfg, params


def save_model(path, config, tensors):
    want = param_shapes(config)
    missing = [k for k in want if k not in tensors]
    if missing:
        raise ValueError("save_model: missing tensors %s" % missing)
    ordered = {}
    for k, shape in want.items():
        t = tensors[k]
        if tuple(t.shape) != tuple(shape):
            raise ValueError("save_model: %s has shape %s, expected %s" % (k, list(t.shape), list(shape)))
        ordered[k] = t
    write_safetensors(path, ordered, config_to_metadata(config))

# ----------------------------------------------------------------- model


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope_inv_freq(d, theta, dtype=torch.float64):
    """inv_freq_j = theta^(-j/(d/2-1)), j = 0..d/2-1 (= 1/theta**linspace(0,1,d/2))."""
    h = d // 2
    j = np.arange(h, dtype=np.float64)
    expo = j / (h - 1) if h > 1 else np.zeros(1)
    return torch.tensor(float(theta) ** (-expo), dtype=dtype)


def apply_rope(x, theta):
    """x: [T, n, d]; GPT-J interleaved pairs (0,1),(2,3)..., positions 0..T-1."""
    T, n, d = x.shape
    inv = rope_inv_freq(d, theta, x.dtype)
    ang = torch.arange(T, dtype=x.dtype)[:, None] * inv[None, :]  # [T, d/2]
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).reshape(T, n, d)


def layer_lambda(cfg, params, layer, dtype=torch.float64):
    """lambda_full of a DIFF layer: exp(q1.k1) - exp(q2.k2) + lambda_init."""
    p = "layers.%d.attn." % layer
    g = lambda n: params[p + n].to(dtype)
    return (torch.exp(torch.sum(g("lambda_q1") * g("lambda_k1")))
            - torch.exp(torch.sum(g("lambda_q2") * g("lambda_k2"))) + lambda_init(layer, cfg))


def _nsa_attention(cfg, P, i, x, trace):
    """NSA (tools/nsa_reference.py): q = RoPE(x Wq), per-branch K and V (RoPE on
    k_slc and k_win, not k_cmp), gates sigmoid(x Wg^T + bg) [T, H, 3]. With
    nsa_shared_kv every branch reads k = RoPE(x Wk), v = x Wv (compression too)."""
    T, C = x.shape
    H, G, d, th = cfg["n_heads"], cfg["n_kv_heads"], head_dim(cfg), cfg["rope_theta"]
    p = "layers.%d.attn." % i
    q = apply_rope((x @ P[p + "q_proj.weight"].T).view(T, H, d), th)
    kv = {}
    if cfg.get("nsa_shared_kv"):
        k = apply_rope((x @ P[p + "k_proj.weight"].T).view(T, G, d), th)
        v = (x @ P[p + "v_proj.weight"].T).view(T, G, d)
        for b in ("cmp", "slc", "win"):
            kv["k_" + b], kv["v_" + b] = k, v
    else:
        for b in ("cmp", "slc", "win"):
            kv["k_" + b] = (x @ P[p + "k_%s.weight" % b].T).view(T, G, d)
            kv["v_" + b] = (x @ P[p + "v_%s.weight" % b].T).view(T, G, d)
        kv["k_slc"] = apply_rope(kv["k_slc"], th)
        kv["k_win"] = apply_rope(kv["k_win"], th)
    gate = torch.sigmoid(x @ P[p + "gate.weight"].T + P[p + "gate.bias"]).view(T, H, 3)
    r = nsa.nsa_attention(q, kv["k_cmp"], kv["v_cmp"], kv["k_slc"], kv["v_slc"], kv["k_win"], kv["v_win"], gate,
                          P[p + "cmp_k.weight"], P[p + "cmp_v.weight"], P[p + "cmp_pe_k"], P[p + "cmp_pe_v"], cfg,
                          trace=trace is not None)
    if trace is not None:
        o, tr = r
        tr.update({"layer": i, "gate": gate.detach()})
        trace.append(tr)
    else:
        o = r
    return o.reshape(T, H * d) @ P[p + "out_proj.weight"].T


def moba_mask(q, k, B, topk):
    """MoBA's choice, [H, T, T] bool (no gradient): query t of head h (q [T, H, d],
    its group's keys k [T, H, d], after RoPE) sees key s <= t when s's block is
    t's own, c = t // B, or one of the topk - 1 earlier blocks j < c with the
    highest q_t . mean(k[jB .. jB+B-1]) (ties to the lower j; all when fewer)."""
    T, H, _ = q.shape
    q, k = q.detach(), k.detach()
    nb = T // B  # the complete blocks: every earlier block of any query is complete
    km = k[:nb * B].reshape(nb, B, H, -1).mean(dim=1)  # [nb, H, d]
    mask = torch.zeros(H, T, T, dtype=torch.bool)
    for h in range(H):
        for t in range(T):
            c = t // B
            score = [float(q[t, h] @ km[j, h]) for j in range(c)]
            # sorted() is stable: among equal scores the lower j comes first
            chosen = sorted(range(c), key=lambda j: -score[j])[:topk - 1] + [c]
            for j in chosen:
                mask[h, t, j * B:min(j * B + B, t + 1)] = True
    return mask


def _attention(cfg, P, i, x, trace):
    if cfg["arch"] == "nsa":
        return _nsa_attention(cfg, P, i, x, trace)
    T, C = x.shape
    H, Hkv = cfg["n_heads"], cfg["n_kv_heads"]
    n_rep = H // Hkv
    d = head_dim(cfg)
    th = cfg["rope_theta"]
    p = "layers.%d.attn." % i
    q = x @ P[p + "q_proj.weight"].T
    k = x @ P[p + "k_proj.weight"].T
    v = x @ P[p + "v_proj.weight"].T
    group = torch.arange(H) // n_rep  # head i -> KV group i // n_rep
    hold = float(cfg.get("lambda_hold", 0.0))  # mid-ramp: the share of the second map held back
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    if cfg.get("window", 0):  # query t sees keys t-W+1 .. t
        causal &= torch.ones(T, T, dtype=torch.bool).triu(1 - cfg["window"])
    if cfg["arch"] == "diff":
        q = apply_rope(q.view(T, 2 * H, d), th).view(T, H, 2, d)      # [.., h, (Q1,Q2), d]
        k = apply_rope(k.view(T, 2 * Hkv, d), th).view(T, Hkv, 2, d)  # [.., g, (K1,K2), d]
        v = v.view(T, Hkv, 2 * d)
        kk, vv = k[:, group], v[:, group]                             # [T, H, 2, d], [T, H, 2d]
        s = torch.einsum("thmd,shmd->hmts", q, kk) / math.sqrt(d)
        a = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)  # [H, 2, T, T]
        lam = layer_lambda(cfg, P, i, x.dtype)
        lam_init = lambda_init(i, cfg)
        attn = a[:, 0] - (1.0 - hold) * lam * a[:, 1]
        o = torch.einsum("hts,she->the", attn, vv)                    # [T, H, 2d]
        if head_norm(cfg):  # the paper's GroupNorm and its (1 - lambda_init); "- GroupNorm" drops both
            o = rmsnorm(o, P[p + "subln.weight"], SUBLN_EPS) * (1.0 - lam_init)
        if trace is not None:
            trace.append({"layer": i, "lambda": float(lam), "lambda_init": lam_init,
                          "A1": a[:, 0].detach(), "A2": a[:, 1].detach(), "V": vv.detach()})
    elif cfg["arch"] == "diff2":
        # As MultiheadFlashDiffV2.forward: flash_attn_func over 2H query heads
        # (its GQA maps query head j to KV head j // (2H / Hkv)), then even
        # heads minus sigmoid(x . lambda_proj) times odd heads.
        q = apply_rope(q.view(T, 2 * H, d), th)
        k = apply_rope(k.view(T, Hkv, d), th)
        v = v.view(T, Hkv, d)
        qgroup = torch.arange(2 * H) // (2 * H // Hkv)
        kk, vv = k[:, qgroup], v[:, qgroup]                           # [T, 2H, d]
        s = torch.einsum("tjd,sjd->jts", q, kk) / math.sqrt(d)
        a = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)  # [2H, T, T]
        attn = torch.einsum("jts,sjd->tjd", a, vv)                    # [T, 2H, d]
        lam = x @ P[p + "lambda_proj.weight"].T                       # [T, H]
        o = attn[:, 0::2] - (1.0 - hold) * torch.sigmoid(lam).unsqueeze(-1) * attn[:, 1::2]
        if trace is not None:
            trace.append({"layer": i, "lam": torch.sigmoid(lam).detach(), "A1": a[0::2].detach(),
                          "A2": a[1::2].detach(), "V": vv[:, 0::2].detach()})
    else:
        q = apply_rope(q.view(T, H, d), th)
        k = apply_rope(k.view(T, Hkv, d), th)
        v = v.view(T, Hkv, d)
        kk, vv = k[:, group], v[:, group]
        s = torch.einsum("thd,shd->hts", q, kk) / math.sqrt(d)
        if cfg["arch"] == "moba":  # softmax's heads over the chosen blocks' keys
            causal = causal & moba_mask(q, kk, cfg["moba_block"], cfg["moba_topk"])
        a = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)  # [H, T, T]
        o = torch.einsum("hts,shd->thd", a, vv)
        if head_norm(cfg):  # "Transformer + GroupNorm": RMSNorm per head, one gain shared by the heads, no scale
            o = rmsnorm(o, P[p + "subln.weight"], SUBLN_EPS)
        if trace is not None:
            trace.append({"layer": i, "A": a.detach(), "V": vv.detach()})
    return o.reshape(T, -1) @ P[p + "out_proj.weight"].T


def forward(config, params, ids, dtype=torch.float64, trace=None):
    """logits [T, V] (in `dtype`, default float64) of ids (length T sequence).
    trace: optional list that receives per-layer attention maps and lambdas
    (diff2: "lam" [T, H], sigmoid(lambda) per token and head)."""
    validate_config(config)
    ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    T = ids.shape[0]
    if ids.dim() != 1 or not (1 <= T <= config["max_seq_len"]):
        raise ValueError("ids must be 1-D with 1 <= T <= max_seq_len (%d); got shape %s"
                         % (config["max_seq_len"], list(ids.shape)))
    if int(ids.min()) < 0 or int(ids.max()) >= config["vocab_size"]:
        raise ValueError("ids must lie in [0, %d)" % config["vocab_size"])
    P = {k: v.to(dtype) for k, v in params.items()}
    eps = config["norm_eps"]
    x = P["tok_embeddings.weight"][ids]
    for i in range(config["n_layers"]):
        p = "layers.%d." % i
        x = x + _attention(config, P, i, rmsnorm(x, P[p + "attention_norm.weight"], eps), trace)
        h = rmsnorm(x, P[p + "ffn_norm.weight"], eps)
        f = p + "feed_forward."
        x = x + (torch.nn.functional.silu(h @ P[f + "w1.weight"].T) * (h @ P[f + "w3.weight"].T)) @ P[f + "w2.weight"].T
    x = rmsnorm(x, P["norm.weight"], eps)
    head = P["tok_embeddings.weight"] if config["tie_embeddings"] else P["output.weight"]
    return x @ head.T


def loss_of(config, params, ids, dtype=torch.float64):
    """Mean cross-entropy of predicting ids[1:] from a forward on ids[:-1]."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or ids.shape[0] < 2:
        raise ValueError("need at least 2 ids for a loss")
    logits = forward(config, params, ids[:-1], dtype=dtype)
    return torch.nn.functional.cross_entropy(logits, torch.from_numpy(ids[1:]), reduction="mean")


def loss_and_grads(config, params, ids, dtype=torch.float64):
    """(loss float, {name: grad tensor in `dtype`}) of the mean CE of ids[1:] given ids[:-1]."""
    leaves = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in params.items()}
    loss = loss_of(config, leaves, ids, dtype=dtype)
    names = list(leaves)
    grads = torch.autograd.grad(loss, [leaves[k] for k in names], allow_unused=True)
    out = {}
    for k, g in zip(names, grads):
        out[k] = torch.zeros_like(leaves[k]) if g is None else g.detach()
    return float(loss.detach()), out

# ----------------------------------------------------------------- comparison (the C side's metrics)


def logits_error(ref, test):
    """max abs err / max abs ref logit."""
    ref, test = np.asarray(ref, np.float64), np.asarray(test, np.float64)
    if ref.shape != test.shape:
        raise ValueError("shape %s vs %s" % (ref.shape, test.shape))
    return float(np.max(np.abs(ref - test)) / max(np.max(np.abs(ref)), 1e-30))


def grads_errors(ref, test):
    """{name: max abs err / max abs ref} for every tensor of ref (incl. 'loss')."""
    out = {}
    for k, r in ref.items():
        if k not in test:
            out[k] = float("inf")
            continue
        r, t = np.asarray(r, np.float64), np.asarray(test[k], np.float64)
        if r.shape != t.shape:
            out[k] = float("inf")
            continue
        out[k] = float(np.max(np.abs(r - t)) / max(np.max(np.abs(r)), 1e-30))
    for k in test:
        if k not in ref:
            out[k] = float("inf")
    return out

# ----------------------------------------------------------------- CLI


def read_ids(path):
    with open(path) as f:
        return np.array([int(t) for t in f.read().split()], dtype=np.int64)


def _cmd_logits(a):
    cfg, params = load_model(a.model)
    logits = forward(cfg, params, read_ids(a.ids))
    np.save(a.out, logits.numpy().astype("<f4"))
    print("logits %s -> %s" % (list(logits.shape), a.out))


def _cmd_grads(a):
    cfg, params = load_model(a.model)
    loss, grads = loss_and_grads(cfg, params, read_ids(a.ids))
    out = dict(grads)
    out["loss"] = np.array(loss, dtype=np.float64)  # scalar, shape []
    write_safetensors(a.out, out)
    print("loss %.9g, %d grads -> %s" % (loss, len(grads), a.out))


def _cmd_compare(a):
    if a.ref.endswith(".npy"):
        err = logits_error(np.load(a.ref), np.load(a.test))
        tol = a.tol if a.tol is not None else 1e-4
        print("logits rel err %.3e (tol %.0e)" % (err, tol))
        return 0 if err <= tol else 1
    tol = a.tol if a.tol is not None else 1e-3
    _, ref = read_safetensors(a.ref)
    _, test = read_safetensors(a.test)
    errs = grads_errors(ref, test)
    bad = 0
    for k, e in errs.items():
        flag = "" if e <= tol else "  FAIL"
        bad += e > tol
        if a.verbose or flag:
            print("%-44s %.3e%s" % (k, e, flag))
    print("%d tensors, worst %.3e (%s), tol %.0e, %d over" % (
        len(errs), max(errs.values()), max(errs, key=errs.get), tol, bad))
    return 1 if bad else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("logits", help="forward on all ids, write float32 [T, V] .npy")
    s.add_argument("--model", required=True)
    s.add_argument("--ids", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=_cmd_logits)
    s = sub.add_parser("grads", help="loss of ids[1:] given ids[:-1]; write grads + scalar 'loss'")
    s.add_argument("--model", required=True)
    s.add_argument("--ids", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=_cmd_grads)
    s = sub.add_parser("compare", help="compare logits (.npy) or grads (.safetensors) with the C tool's metrics")
    s.add_argument("--ref", required=True)
    s.add_argument("--test", required=True)
    s.add_argument("--tol", type=float, default=None, help="default 1e-4 logits, 1e-3 grads")
    s.add_argument("-v", "--verbose", action="store_true")
    s.set_defaults(fn=_cmd_compare)
    a = ap.parse_args(argv)
    return a.fn(a) or 0


if __name__ == "__main__":
    sys.exit(main())
