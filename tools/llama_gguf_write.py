#!/usr/bin/env python3
"""Writes a llama.cpp `llama` GGUF with gguf-py (llama.cpp's own writer), as a
reference file for diffattn's reader: the weights of a diffattn softmax
model.safetensors (or random ones of a given shape), and the tokenizer of a
Hugging Face tokenizer.json in tokenizer.ggml.* as convert_hf_to_gguf.py
writes it (model gpt2, its pre name, tokens, token types, merges, bos/eos,
add_bos_token).

    llama_gguf_write.py --gguf-py DIR --out F.gguf (--model M.safetensors | --dim D --layers L --heads H)
                        [--tokenizer tokenizer.json --pre NAME --add-bos 0|1] [--type f32|f16]

diffattn's q/k rows already rotate pairs (2i, 2i+1), llama.cpp's
LLAMA_ROPE_TYPE_NORM layout, so they are written as they are."""
import argparse
import json
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", name
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=np.float32).reshape(info["shape"])
    return out, meta


def tokenizer_arrays(path):
    """tokens, token types, merges and the bos id, as convert_hf_to_gguf.py's gpt2 vocabulary."""
    j = json.load(open(path, encoding="utf-8"))
    vocab = j["model"]["vocab"]
    added = {a["id"]: a for a in j.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added.keys())) + 1
    tokens, types = [], []
    rev = {v: k for k, v in vocab.items()}
    for i in range(n):
        if i in added:
            tokens.append(added[i]["content"])
            types.append(3 if added[i].get("special", True) else 4)  # CONTROL / USER_DEFINED
        elif i in rev:
            tokens.append(rev[i])
            types.append(1)  # NORMAL
        else:
            tokens.append(f"[PAD{i}]")
            types.append(5)  # UNUSED
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    return tokens, types, merges, added


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--tokenizer")
    ap.add_argument("--pre", default="gpt-2")
    ap.add_argument("--bos", default=None, help="text of the BOS token")
    ap.add_argument("--add-bos", type=int, default=0)
    ap.add_argument("--type", default="f16", choices=["f32", "f16"])
    ap.add_argument("--vocab", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02, help="random weights: their standard deviation")
    ap.add_argument("--emb-std", type=float, default=None, help="random weights: the embedding's and output's (default --std)")
    ap.add_argument("--theta", type=float, default=10000.0, help="random weights: the RoPE base")
    ap.add_argument("--llama3-rope", default=None, help="F,L,H,O: a rope_freqs tensor of Llama 3's rope scaling "
                    "(factor, low/high freq factors, original context), as convert_hf_to_gguf.py writes it")
    ap.add_argument("--key-length", type=int, default=0, help="random weights: llama.attention.key_length (keys only)")
    ap.add_argument("--value-length", type=int, default=0, help="random weights: llama.attention.value_length (keys only)")
    ap.add_argument("--untied", action="store_true", help="random weights: write an output tensor")
    ap.add_argument("--key", action="append", default=[], help="NAME=VALUE: an extra string key (llama.rope.scaling.type=yarn)")
    ap.add_argument("--raw-type", default=None, help="NAME=GGML_TYPE: write tensor NAME as zero bytes of that type")
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf

    toks = tokenizer_arrays(a.tokenizer) if a.tokenizer else None
    if a.model:
        t, meta = read_safetensors(a.model)
        cfg = {k: meta[k] for k in meta}
        dim = t["tok_embeddings.weight"].shape[1]
        layers = int(cfg["n_layers"])
        heads = int(cfg["n_heads"])
        kv_heads = int(cfg.get("n_kv_heads", heads))
        ffn = t["layers.0.feed_forward.w1.weight"].shape[0]
        vocab = t["tok_embeddings.weight"].shape[0]
        theta, eps, ctx = float(cfg["rope_theta"]), float(cfg["norm_eps"]), int(cfg["max_seq_len"])
        head_dim = int(cfg.get("head_dim", 0))  # diffattn's explicit head size: llama.cpp's key_length
        assert cfg.get("arch", "softmax") == "softmax", "a softmax model"
        assert cfg.get("rope_freq", "llama") == "llama", "the Llama RoPE rule (--rope-freq llama)"
    else:
        vocab = a.vocab or (len(toks[0]) if toks else 256)
        dim, layers, heads, kv_heads, ffn = a.dim, a.layers, a.heads, a.heads, 4 * a.dim
        head_dim = 0
        theta, eps, ctx = a.theta, 1e-5, a.ctx
        rng = np.random.default_rng(0)
        t = {"tok_embeddings.weight": rng.normal(0, a.std if a.emb_std is None else a.emb_std, (vocab, dim)).astype(np.float32),
             "norm.weight": np.ones(dim, np.float32)}
        d = dim // heads
        for l in range(layers):
            p = f"layers.{l}."
            t[p + "attention_norm.weight"] = np.ones(dim, np.float32)
            t[p + "ffn_norm.weight"] = np.ones(dim, np.float32)
            for n, shape in [("attn.q_proj", (dim, dim)), ("attn.k_proj", (kv_heads * d, dim)),
                             ("attn.v_proj", (kv_heads * d, dim)), ("attn.out_proj", (dim, dim)),
                             ("feed_forward.w1", (ffn, dim)), ("feed_forward.w2", (dim, ffn)),
                             ("feed_forward.w3", (ffn, dim))]:
                t[p + n + ".weight"] = rng.normal(0, a.std / np.sqrt(shape[1] / 64), shape).astype(np.float32)
        if a.untied:
            t["output.weight"] = rng.normal(0, a.std if a.emb_std is None else a.emb_std, (vocab, dim)).astype(np.float32)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("diffattn reference")
    w.add_context_length(ctx)
    w.add_embedding_length(dim)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(eps)
    w.add_rope_dimension_count(head_dim or dim // heads)
    if head_dim:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if a.key_length:
        w.add_key_length(a.key_length)
    if a.value_length:
        w.add_value_length(a.value_length)
    w.add_vocab_size(vocab)
    w.add_file_type(1 if a.type == "f16" else 0)
    if toks:
        tokens, types, merges, added = toks
        assert len(tokens) == vocab, f"tokenizer has {len(tokens)} tokens, model {vocab}"
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(a.pre)
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        bos = [i for i, x in enumerate(tokens) if x == a.bos] if a.bos else []
        if bos:
            w.add_bos_token_id(bos[0])
        w.add_add_bos_token(bool(a.add_bos))
    else:
        w.add_tokenizer_model("none")

    for kv in a.key:
        k, v = kv.split("=", 1)
        w.add_string(k, v)
    raw = dict([a.raw_type.split("=", 1)]) if a.raw_type else {}

    def put(name, arr):
        if name in raw:
            qt = gguf.GGMLQuantizationType[raw[name]]
            bs, ts = gguf.GGML_QUANT_SIZES[qt]
            w.add_tensor(name, np.zeros((arr.shape[0], arr.shape[1] // bs * ts), np.uint8), raw_dtype=qt)
        elif arr.ndim == 2 and a.type == "f16":
            w.add_tensor(name, arr.astype(np.float16))
        else:
            w.add_tensor(name, arr.astype(np.float32))

    put("token_embd.weight", t["tok_embeddings.weight"])
    names = {"attention_norm": "attn_norm", "attn.q_proj": "attn_q", "attn.k_proj": "attn_k",
             "attn.v_proj": "attn_v", "attn.out_proj": "attn_output", "ffn_norm": "ffn_norm",
             "feed_forward.w1": "ffn_gate", "feed_forward.w2": "ffn_down", "feed_forward.w3": "ffn_up"}
    for l in range(layers):
        for src, dst in names.items():
            put(f"blk.{l}.{dst}.weight", t[f"layers.{l}.{src}.weight"])
    put("output_norm.weight", t["norm.weight"])
    if a.llama3_rope:  # convert_hf_to_gguf.py's LlamaModel: 1 / (the factor each pair's frequency is divided by)
        F, L, H, O = (float(v) for v in a.llama3_rope.split(","))
        d = dim // heads
        inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        factors = []
        for f in inv:
            wl = 2 * np.pi / f
            if wl < O / H:
                factors.append(1.0)
            elif wl > O / L:
                factors.append(F)
            else:
                sm = (O / wl - L) / (H - L)
                factors.append(1 / ((1 - sm) / F + sm))
        w.add_tensor("rope_freqs.weight", np.array(factors, dtype=np.float32))
    if "output.weight" in t:
        put("output.weight", t["output.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
