#!/usr/bin/python3
"""A random-weight Hugging Face DiffLlama folder at kajuma/DiffLlama-0.3B-handcut's
configuration (hidden 2048, 16 layers, 32 heads, 8 KV heads, vocabulary
128,256, llama3 RoPE scaling, tied embeddings: about 1.24 B parameters), in
BF16 (about 2.5 GB), for measuring load time and memory. Streams one tensor
at a time, so it needs little memory. --motif: a Motif-2.6B-shaped folder
instead (MotifForCausalLM, DIFF V1: hidden 2048, 16 query heads of 128 of
which 8 noise heads, 16 KV heads, intermediate 8192, vocabulary 219,520,
tied, PolyNorm; 10 layers by default: about 2.24 GB).

Usage: tools/make_hf_big.py OUT_DIR [--layers N] [--motif]"""
import json
import os
import struct
import sys

import numpy as np


def motif_shapes(layers):
    C, H, G, Hkv, d, F, V = 2048, 16, 8, 16, 128, 8192, 219520
    cfg = {"model_type": "motif", "architectures": ["MotifForCausalLM"], "hidden_size": C,
           "intermediate_size": F, "num_hidden_layers": layers, "num_attention_heads": H,
           "num_key_value_heads": Hkv, "num_noise_heads": G, "head_dim": d, "vocab_size": V,
           "max_position_embeddings": 16384, "rms_norm_eps": 1e-6, "attn_rms_norm_eps": 1e-5,
           "rope_theta": 500000.0, "rope_scaling": None, "tie_word_embeddings": True, "hidden_act": "poly_norm",
           "use_bias": False, "use_sliding_window": False, "sliding_window": None, "attention_dropout": 0.0,
           "torch_dtype": "bfloat16"}
    shapes = [("model.embed_tokens.weight", (V, C))]
    for l in range(layers):
        p = f"model.layers.{l}."
        shapes += [(p + "input_layernorm.weight", (C,)), (p + "self_attn.q_proj.weight", (H * d, C)),
                   (p + "self_attn.k_proj.weight", (Hkv * d, C)), (p + "self_attn.v_proj.weight", (Hkv * d, C)),
                   (p + "self_attn.o_proj.weight", (C, 2 * (H - G) * d))]
        shapes += [(p + "self_attn." + k, (d,)) for k in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")]
        shapes += [(p + "self_attn.subln.weight", (2 * d,)), (p + "post_attention_layernorm.weight", (C,)),
                   (p + "mlp.gate_proj.weight", (F, C)), (p + "mlp.up_proj.weight", (F, C)),
                   (p + "mlp.down_proj.weight", (C, F)), (p + "mlp.act_fn.weight", (3,)),
                   (p + "mlp.act_fn.bias", (1,))]
    return cfg, shapes


def main():
    out = sys.argv[1]
    layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 16
    C, H, Hkv, d, F, V = 2048, 32, 8, 64, 8192, 128256
    cfg = {"model_type": "diffllama", "architectures": ["DiffLlamaForCausalLM"], "hidden_size": C,
           "intermediate_size": F, "num_hidden_layers": layers, "num_attention_heads": H,
           "num_key_value_heads": Hkv, "head_dim": d, "vocab_size": V, "max_position_embeddings": 2048,
           "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": True, "hidden_act": "silu",
           "attention_bias": False, "torch_dtype": "bfloat16",
           "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    shapes = [("model.embed_tokens.weight", (V, C))]
    for l in range(layers):
        p = f"model.layers.{l}."
        shapes += [(p + "input_layernorm.weight", (C,)), (p + "self_attn.q_proj.weight", (H * d, C)),
                   (p + "self_attn.k_proj.weight", (Hkv * d, C)), (p + "self_attn.v_proj.weight", (Hkv * d, C)),
                   (p + "self_attn.o_proj.weight", (C, H * d))]
        shapes += [(p + "self_attn." + k, (d,)) for k in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")]
        shapes += [(p + "post_attention_layernorm.weight", (C,)), (p + "mlp.gate_proj.weight", (F, C)),
                   (p + "mlp.up_proj.weight", (F, C)), (p + "mlp.down_proj.weight", (C, F))]
    if "--motif" in sys.argv:
        cfg, shapes = motif_shapes(int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 10)
    shapes.append(("model.norm.weight", (C,)))
    header, off = {}, 0
    for n, s in shapes:
        nb = 2 * int(np.prod(s))
        header[n] = {"dtype": "BF16", "shape": list(s), "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    rng = np.random.default_rng(0)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for n, s in shapes:
            rows = s[0]
            step = max(1, (1 << 24) // (s[1] if len(s) > 1 else 1))
            for r in range(0, rows, step):
                sub = (min(step, rows - r),) + tuple(s[1:])
                if n.endswith("norm.weight"):
                    a = np.ones(sub, np.float32)
                elif "lambda_" in n:
                    a = (0.1 * rng.standard_normal(sub)).astype(np.float32)
                else:
                    a = (0.02 * rng.standard_normal(sub, dtype=np.float32))
                f.write((a.view(np.uint32) >> 16).astype(np.uint16).tobytes())
    print(f"{out}: {off / 1e9:.2f} GB of BF16, {off // 2 / 1e9:.3f} B parameters")


if __name__ == "__main__":
    main()
