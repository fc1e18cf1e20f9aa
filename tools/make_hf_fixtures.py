#!/usr/bin/python3
"""Tiny random Hugging Face DiffLlama and Llama folders with their expected
logits, for tests/test_hf.c.

The forward passes are a float64 PyTorch port of transformers' eager
attention (models/diffllama/modeling_diffllama.py: DiffLlamaAttention;
models/llama/modeling_llama.py: LlamaAttention, eager_attention_forward),
their RMSNorm, MLP, rotary embedding (rotate_half, cat(freqs, freqs)) and the
rope_scaling rules of modeling_rope_utils.py (linear, llama3), written from
that code; transformers itself is not needed.

Usage: tools/make_hf_fixtures.py [OUT_DIR]   (default tests/fixtures)
Writes OUT_DIR/hf_NAME/{config.json, model.safetensors or shards +
model.safetensors.index.json, expected.json}. Deterministic (fixed seeds).

       tools/make_hf_fixtures.py --check DIR IDS.txt LOGITS.npy [DIR IDS.txt LOGITS.npy]... [TOL]
Runs the port on the Hugging Face folder DIR (for instance one that
`diffattn export --format hf` wrote) over the token ids in IDS.txt and
compares its logits with LOGITS.npy (`diffattn logits`, float32 [T, V]):
prints max error / max |logit|, one line per folder, and exits 1 when one
exceeds TOL (1e-4). Several folders in one run pay for importing torch once."""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


# ---------------------------------------------------------------- the port

def rms_norm(x, weight, eps):
    # DiffLlamaRMSNorm / LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else weight * y


def inv_freq_of(cfg):
    """_compute_default_rope_parameters plus the linear and llama3 rules."""
    H = cfg["num_attention_heads"]
    d = cfg.get("head_dim") or cfg["hidden_size"] // H
    base = cfg.get("rope_theta", 10000.0)
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).double() / d))
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv_freq
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return inv_freq / rs["factor"]
    assert kind == "llama3", kind
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs.get("original_max_position_embeddings", cfg.get("max_position_embeddings", 2048))
    low_wl, high_wl = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    inv_llama = torch.where(wavelen > low_wl, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
    medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
    return torch.where(medium, smoothed, inv_llama)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(h, n_rep):
    # (batch, kv, T, d) -> (batch, kv * n_rep, T, d), each KV head n_rep times in a row
    b, kv, t, d = h.shape
    if n_rep == 1:
        return h
    return h[:, :, None].expand(b, kv, n_rep, t, d).reshape(b, kv * n_rep, t, d)


def attention(cfg, W, l, x, cos, sin, diff):
    bsz, T, _ = x.shape
    H, Hkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    d = cfg.get("head_dim") or cfg["hidden_size"] // H
    p = f"model.layers.{l}.self_attn."
    q = (x @ W[p + "q_proj.weight"].T).view(bsz, T, H, d).transpose(1, 2)
    k = (x @ W[p + "k_proj.weight"].T).view(bsz, T, Hkv, d).transpose(1, 2)
    v = (x @ W[p + "v_proj.weight"].T).view(bsz, T, Hkv, d).transpose(1, 2)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    k = repeat_kv(k, H // Hkv)
    v = repeat_kv(v, H // Hkv)
    mask = torch.full((T, T), float("-inf")).triu(1)
    if diff:
        # DiffLlamaAttention.forward
        v = torch.cat(torch.chunk(v, 2, dim=1), dim=-1)
        v = v.repeat(1, 2, 1, 1)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d) + mask
        w = torch.softmax(w, dim=-1)
        lambda_1 = torch.exp(torch.sum(W[p + "lambda_q1"] * W[p + "lambda_k1"], dim=-1))
        lambda_2 = torch.exp(torch.sum(W[p + "lambda_q2"] * W[p + "lambda_k2"], dim=-1))
        lambda_init = 0.8 - 0.6 * math.exp(-0.3 * l)
        lambda_full = lambda_1 - lambda_2 + lambda_init
        o = torch.matmul(w, v)
        o1, o2 = torch.chunk(o, 2, dim=1)
        o = o1 - lambda_full * o2
        # groupnorm: nn.RMSNorm(2 * head_dim, eps=rms_norm_eps, elementwise_affine=False)
        o = (1 - lambda_init) * rms_norm(o, None, cfg["rms_norm_eps"])
        o = o.transpose(1, 2).reshape(bsz, T, -1)
    else:
        # eager_attention_forward (scaling = head_dim ** -0.5)
        w = torch.softmax(torch.matmul(q, k.transpose(2, 3)) * d ** -0.5 + mask, dim=-1)
        o = torch.matmul(w, v).transpose(1, 2).reshape(bsz, T, -1)
    return o @ W[p + "o_proj.weight"].T


def forward(cfg, W, ids):
    diff = cfg["model_type"] == "diffllama"
    eps = cfg["rms_norm_eps"]
    x = W["model.embed_tokens.weight"][ids][None]
    T = len(ids)
    freqs = torch.arange(T).double()[:, None] * inv_freq_of(cfg)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    cos, sin = emb.cos(), emb.sin()
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        x = x + attention(cfg, W, l, h, cos, sin, diff)
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    return (x @ head.T)[0]


# ---------------------------------------------------------------- files

def to_dtype(a, dtype):
    """(bytes, the values as stored) of a float64 array in F32, F16 or BF16."""
    a32 = a.astype(np.float32)
    if dtype == "F32":
        return a32.tobytes(), a32.astype(np.float64)
    if dtype == "F16":
        h = a32.astype(np.float16)
        return h.tobytes(), h.astype(np.float64)
    u = a32.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    back = (u.astype(np.uint32) << 16).view(np.float32)
    return u.tobytes(), back.astype(np.float64)


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, off = {}, 0
    for name, dt, shape, b in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for *_, b in tensors:
            f.write(b)


def make(out_dir, name, cfg, dtype, shards=1, seed=0, T=12):
    rng = np.random.default_rng(seed)
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", H)
    d = cfg.get("head_dim") or C // H
    F, V, L = cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    shapes = [("model.embed_tokens.weight", (V, C))]
    for l in range(L):
        p = f"model.layers.{l}."
        shapes += [(p + "input_layernorm.weight", (C,)), (p + "self_attn.q_proj.weight", (H * d, C)),
                   (p + "self_attn.k_proj.weight", (Hkv * d, C)), (p + "self_attn.v_proj.weight", (Hkv * d, C)),
                   (p + "self_attn.o_proj.weight", (C, H * d))]
        if cfg["model_type"] == "diffllama":
            shapes += [(p + "self_attn." + k, (d,)) for k in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")]
        shapes += [(p + "post_attention_layernorm.weight", (C,)), (p + "mlp.gate_proj.weight", (F, C)),
                   (p + "mlp.up_proj.weight", (F, C)), (p + "mlp.down_proj.weight", (C, F))]
    shapes.append(("model.norm.weight", (C,)))
    if not cfg.get("tie_word_embeddings"):
        shapes.append(("lm_head.weight", (V, C)))
    W, stored = {}, []
    for n, shp in shapes:
        if n.endswith("norm.weight"):
            a = 1.0 + 0.2 * rng.standard_normal(shp)
        elif "lambda_" in n:
            a = 0.3 * rng.standard_normal(shp)
        else:
            a = rng.standard_normal(shp) / math.sqrt(shp[-1]) * (2.0 if "embed" in n else 1.0)
        b, back = to_dtype(a, dtype)
        W[n] = torch.from_numpy(back)
        stored.append((n, dtype, shp, b))
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), stored)
    else:
        per = math.ceil(len(stored) / shards)
        wm = {}
        for s in range(shards):
            fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = stored[s * per:(s + 1) * per]
            write_safetensors(os.path.join(folder, fn), part)
            wm.update({n: fn for n, *_ in part})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wm}, f, indent=2)
    ids = [int(i) for i in rng.integers(0, V, size=T)]
    with torch.no_grad():
        logits = forward(cfg, W, torch.tensor(ids))
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump({"tokens": ids, "logits": [[float("%.9g" % v) for v in row] for row in logits.tolist()]}, f,
                  separators=(",", ":"))
    print(f"{folder}: {dtype}, {shards} file(s), max |logit| {logits.abs().max().item():.3f}")


def read_safetensors(path):
    """name -> float64 tensor, for F32, F16 and BF16 tensors (little-endian)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        if t["dtype"] == "F32":
            a = np.frombuffer(data[b:e], dtype="<f4")
        elif t["dtype"] == "F16":
            a = np.frombuffer(data[b:e], dtype="<f2")
        elif t["dtype"] == "BF16":
            a = (np.frombuffer(data[b:e], dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name} has dtype {t['dtype']}")
        out[name] = torch.from_numpy(a.astype(np.float64).reshape(t["shape"]))
    return out


def load_folder(folder):
    """(config, weights) of a Hugging Face folder: model.safetensors or the shards of its index."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return cfg, read_safetensors(single)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    W = {}
    for fn in files:
        W.update(read_safetensors(os.path.join(folder, fn)))
    return cfg, W


def check(folder, ids_path, npy_path, tol=1e-4):
    cfg, W = load_folder(folder)
    assert cfg["model_type"] in ("diffllama", "llama"), cfg["model_type"]
    assert not cfg.get("attention_bias") and cfg.get("hidden_act", "silu") == "silu"
    with open(ids_path) as f:
        ids = [int(t) for t in f.read().split()]
    with torch.no_grad():
        ref = forward(cfg, W, torch.tensor(ids)).numpy()
    got = np.load(npy_path).astype(np.float64)
    if got.shape != ref.shape:
        print(f"FAIL {folder}: logits of shape {got.shape}, the port gives {ref.shape}")
        return 1
    err = np.abs(got - ref).max() / np.abs(ref).max()
    verdict = "ok  " if err <= tol else "FAIL"
    print(f"{verdict} {folder} ({cfg['model_type']}, {cfg['num_attention_heads']} heads, "
          f"{cfg.get('num_key_value_heads')} KV heads): max error / max |logit| = {err:.2e} (tolerance {tol:g})")
    return 0 if err <= tol else 1


def base(model_type, **kw):
    cfg = {"model_type": model_type, "architectures": ["DiffLlamaForCausalLM" if model_type == "diffllama"
                                                       else "LlamaForCausalLM"],
           "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 4, "vocab_size": 61, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": False, "hidden_act": "silu",
           "attention_bias": False}
    cfg.update(kw)
    return cfg


LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        args = sys.argv[2:]
        tol = float(args.pop()) if len(args) % 3 == 1 else 1e-4
        if not args or len(args) % 3:
            sys.exit("usage: make_hf_fixtures.py --check DIR IDS.txt LOGITS.npy [DIR IDS.txt LOGITS.npy]... [TOL]")
        sys.exit(max(check(*args[i:i + 3], tol) for i in range(0, len(args), 3)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
    # MHA, default RoPE, untied, F32
    make(out, "hf_diffllama_mha", base("diffllama"), "F32", seed=1)
    # GQA (8 query heads, 4 KV heads: diff head j reads KV heads j//2 and j//2 + 2), llama3 scaling over all
    # three regions (d = 8, theta 10000: wavelengths 6.3, 63, 628, 6283 against 16 and 64), tied,
    # rms_norm_eps 1e-6, BF16, two shards
    make(out, "hf_diffllama_gqa", base("diffllama", hidden_size=64, num_attention_heads=8, num_key_value_heads=4,
                                       rms_norm_eps=1e-6, rope_scaling=LLAMA3, tie_word_embeddings=True),
         "BF16", shards=2, seed=2)
    # 3 KV heads for 6 query heads: every diff head reads its own pair, so KV heads are duplicated; linear
    # scaling, F16; a large rms_norm_eps, so that the head norm's eps shows in the logits
    make(out, "hf_diffllama_kv3", base("diffllama", hidden_size=48, num_attention_heads=6, num_key_value_heads=3,
                                       rms_norm_eps=0.05, rope_scaling={"type": "linear", "factor": 2.0}),
         "F16", seed=3)
    # Llama GQA with llama3 scaling, F32, untied
    make(out, "hf_llama_gqa", base("llama", hidden_size=64, num_attention_heads=8, num_key_value_heads=2,
                                   rms_norm_eps=1e-6, rope_scaling=LLAMA3), "F32", seed=4)
    # Llama MHA, tied, BF16; a byte-sized vocabulary, so that byte-level text fine-tunes it (cli_hf.sh)
    make(out, "hf_llama_tied", base("llama", tie_word_embeddings=True, vocab_size=256), "BF16", seed=5)


if __name__ == "__main__":
    main()
