#!/usr/bin/env python3
"""Writes the hostile files of issue 23 into a folder, for bench/hostile.sh:

  hf_overlap/      an 8.4 MB Hugging Face folder (Llama, hidden 1024, 24 layers,
                   intermediate 4096, vocab 4096, tied, F16) whose tensors all
                   lie at [0, n): a 403 M-parameter model in 8.4 MB
  overlap.gguf     a 4.5 MB diffattn GGUF of that shape (vocab 2048; q8_0
                   matrices, f32 vectors, f16 embedding) whose tensors all
                   start at 0
  hf_index_<N>/    a sharded folder whose index names N one-element tensors
                   of one shard (the index is about 75 bytes an entry)

    python3 bench/hostile_files.py OUT_DIR [N...]
"""
import json
import os
import struct
import sys

HIDDEN, LAYERS, INTER, VOCAB, HEADS = 1024, 24, 4096, 4096, 16
GGUF_VOCAB = 2048  # its f16 embedding (4.2 MB) under the largest q8_0 matrix (4.5 MB)


def safetensors_header(entries):
    h = json.dumps(entries, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h


def hf_overlap(out):
    os.makedirs(out, exist_ok=True)
    cfg = {"model_type": "llama", "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
           "num_key_value_heads": HEADS, "intermediate_size": INTER, "vocab_size": VOCAB,
           "max_position_embeddings": 2048, "tie_word_embeddings": True, "rms_norm_eps": 1e-5}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f)
    shapes = {"model.embed_tokens.weight": [VOCAB, HIDDEN], "model.norm.weight": [HIDDEN]}
    for l in range(LAYERS):
        p = "model.layers.%d." % l
        shapes[p + "input_layernorm.weight"] = [HIDDEN]
        shapes[p + "post_attention_layernorm.weight"] = [HIDDEN]
        for n in ("q", "k", "v", "o"):
            shapes[p + "self_attn.%s_proj.weight" % n] = [HIDDEN, HIDDEN]
        shapes[p + "mlp.gate_proj.weight"] = [INTER, HIDDEN]
        shapes[p + "mlp.up_proj.weight"] = [INTER, HIDDEN]
        shapes[p + "mlp.down_proj.weight"] = [HIDDEN, INTER]
    entries, biggest = {}, 0
    for name, shape in shapes.items():
        n = 2
        for s in shape:
            n *= s
        entries[name] = {"dtype": "F16", "shape": shape, "data_offsets": [0, n]}
        biggest = max(biggest, n)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(safetensors_header(entries))
        f.write(struct.pack("<e", 0.01) * (biggest // 2))


def gguf_kv(key, typ, payload):
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<I", typ) + payload


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_overlap(path):
    kvs = [gguf_kv("general.architecture", 8, gguf_str("diffattn")),
           gguf_kv("diffattn.format_version", 4, struct.pack("<I", 1)),
           gguf_kv("diffattn.variant", 8, gguf_str("softmax"))]
    for key, v in (("context_length", 2048), ("embedding_length", HIDDEN), ("block_count", LAYERS),
                   ("feed_forward_length", INTER), ("attention.head_count", HEADS),
                   ("attention.head_count_kv", HEADS), ("vocab_size", GGUF_VOCAB)):
        kvs.append(gguf_kv("diffattn." + key, 4, struct.pack("<I", v)))
    kvs += [gguf_kv("diffattn.rope.freq_base", 6, struct.pack("<f", 10000.0)),
            gguf_kv("diffattn.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
            gguf_kv("diffattn.tie_embeddings", 7, b"\x01")]
    # (name, ne, ggml type): f32 = 0, q8_0 = 8 (34 bytes per 32 values); half of the
    # KV heads of softmax are its doubled n_kv (diffattn doubles heads for softmax)
    tensors = [("tok_embeddings.weight", [HIDDEN, GGUF_VOCAB], 1)]  # f16
    for l in range(LAYERS):
        p = "layers.%d." % l
        tensors += [(p + "attention_norm.weight", [HIDDEN], 0), (p + "attn.q_proj.weight", [HIDDEN, HIDDEN], 8),
                    (p + "attn.k_proj.weight", [HIDDEN, HIDDEN], 8), (p + "attn.v_proj.weight", [HIDDEN, HIDDEN], 8),
                    (p + "attn.out_proj.weight", [HIDDEN, HIDDEN], 8), (p + "ffn_norm.weight", [HIDDEN], 0),
                    (p + "feed_forward.w1.weight", [HIDDEN, INTER], 8),
                    (p + "feed_forward.w2.weight", [INTER, HIDDEN], 8),
                    (p + "feed_forward.w3.weight", [HIDDEN, INTER], 8)]
    tensors.append(("norm.weight", [HIDDEN], 0))
    infos, biggest = b"", 0
    for name, ne, typ in tensors:
        n = 1
        for s in ne:
            n *= s
        nbytes = n * 4 if typ == 0 else n * 2 if typ == 1 else n // 32 * 34
        biggest = max(biggest, nbytes)
        infos += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", s) for s in ne)
        infos += struct.pack("<IQ", typ, 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * (-len(head) % 32)
    block = struct.pack("<e", 0.01) + bytes(32)  # a q8_0 block: scale 0.01, zeros; read as f32 it is small too
    with open(path, "wb") as f:
        f.write(head + block * (biggest // len(block) + 1))


def hf_index(out, n):
    os.makedirs(out, exist_ok=True)
    cfg = {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
           "num_key_value_heads": 2, "intermediate_size": 16, "vocab_size": 16, "tie_word_embeddings": True}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f)
    entries = {"x.%07d" % i: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i in range(n)}
    with open(os.path.join(out, "a.safetensors"), "wb") as f:
        f.write(safetensors_header(entries) + bytes(4 * n))
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {k: "a.safetensors" for k in entries}}, f)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    hf_overlap(os.path.join(out, "hf_overlap"))
    gguf_overlap(os.path.join(out, "overlap.gguf"))
    for n in [int(a) for a in sys.argv[2:]] or [10000, 40000, 80000]:
        hf_index(os.path.join(out, "hf_index_%d" % n), n)


if __name__ == "__main__":
    main()
