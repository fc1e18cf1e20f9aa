#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into tests/fuzz/corpus/<target>/:
small valid files (kilobytes) of each format, and a few near-misses. The GGUF
seeds are made with the CLI's own `quantize` (pass the binary as the first
argument; without it they are left as they are).

    python3 tests/fuzz/make_corpus.py build/diffattn
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import random

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


class Arr:
    """A tensor as safetensors stores it: dtype name, shape, little-endian bytes."""

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, list(shape), data

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def f32(shape, values):
    return Arr("F32", shape, struct.pack("<%df" % len(values), *values))


def randn(rng, shape, scale=0.1):
    return f32(shape, [rng.gauss(0, scale) for _ in range(numel(shape))])


def bf16_of(a):
    vals = struct.unpack("<%dI" % (len(a.data) // 4), a.data)
    return Arr("BF16", a.shape, struct.pack("<%dH" % len(vals), *[v >> 16 for v in vals]))


def safetensors(tensors, meta=None):
    """tensors: list of (name, Arr)."""
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name, arr in tensors:
        b = arr.data
        header[name] = {"dtype": arr.dtype, "shape": arr.shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def model_tensors(arch, dim, n_layers, n_heads, n_kv_heads, vocab, ffn, tie, rng):
    """The tensor table of src/model/model.c, in its order."""
    ckv = dim // (n_heads // n_kv_heads)
    d = dim // (2 * n_heads) if arch == "diff" else dim // n_heads
    out = [("tok_embeddings.weight", (vocab, dim))]
    for l in range(n_layers):
        p = "layers.%d." % l
        out += [(p + "attention_norm.weight", (dim,)), (p + "attn.q_proj.weight", (dim, dim)),
                (p + "attn.k_proj.weight", (ckv, dim)), (p + "attn.v_proj.weight", (ckv, dim)),
                (p + "attn.out_proj.weight", (dim, dim))]
        if arch == "diff":
            out += [(p + "attn.lambda_q1", (d,)), (p + "attn.lambda_k1", (d,)), (p + "attn.lambda_q2", (d,)),
                    (p + "attn.lambda_k2", (d,)), (p + "attn.subln.weight", (2 * d,))]
        out += [(p + "ffn_norm.weight", (dim,)), (p + "feed_forward.w1.weight", (ffn, dim)),
                (p + "feed_forward.w2.weight", (dim, ffn)), (p + "feed_forward.w3.weight", (ffn, dim))]
    out.append(("norm.weight", (dim,)))
    if not tie:
        out.append(("output.weight", (vocab, dim)))
    return [(n, randn(rng, s)) for n, s in out]


def model_meta(arch, dim, n_layers, n_heads, n_kv_heads, vocab, ffn, tie):
    return {"format": "diffattn", "version": "1", "arch": arch, "dim": str(dim), "n_layers": str(n_layers),
            "n_heads": str(n_heads), "n_kv_heads": str(n_kv_heads), "vocab_size": str(vocab),
            "ffn_hidden": str(ffn), "max_seq_len": "16", "norm_eps": "1e-05", "rope_theta": "10000",
            "tie_embeddings": "true" if tie else "false"}


TRAIN_META = {"train.batch": "2", "train.seq": "8", "train.grad_accum": "1", "train.steps": "10",
              "train.warmup": "2", "train.lr": "0.00100000005", "train.min_lr": "0.000100000005",
              "train.weight_decay": "0.100000001", "train.clip": "1", "train.beta1": "0.899999976",
              "train.beta2": "0.949999988", "train.adam_eps": "9.99999994e-09", "train.eval_every": "5",
              "train.eval_batches": "1", "train.save_every": "5", "train.log_every": "1", "train.seed": "1337",
              "train.val_fraction": "0.100000001", "train.bf16": "0", "step": "5",
              "rng": "0123456789abcdef" * 4}

CONFIGS = {
    "softmax_tied": ("softmax", 8, 1, 2, 1, 16, 16, True),
    "diff_untied": ("diff", 16, 1, 2, 2, 12, 8, False),
}


def gpt2_alphabet():
    cps, n = {}, 0
    for b in range(256):
        printable = ord("!") <= b <= ord("~") or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF
        cps[b] = chr(b) if printable else chr(256 + n)
        n += 0 if printable else 1
    return cps


def tok_string(raw, cps):
    return "".join(cps[b] for b in raw)


def hf_folder_seeds():
    """hf_config: each committed Hugging Face fixture folder with a single
    weights file under 100 KB, as config.json + NUL + model.safetensors."""
    fixtures = os.path.join(HERE, "..", "fixtures")
    for name in sorted(os.listdir(fixtures)):
        folder = os.path.join(fixtures, name)
        weights = os.path.join(folder, "model.safetensors")
        if not name.startswith("hf_") or not os.path.exists(weights) or os.path.getsize(weights) > 100000:
            continue
        with open(os.path.join(folder, "config.json"), "rb") as f:
            cfg = f.read()
        with open(weights, "rb") as f:
            put("hf_config", name + ".bin", cfg + b"\0" + f.read())
        put("hf_config", name + "_config_only.json", cfg)


def read_safetensors(path):
    """(name, Arr) of a safetensors file, in file order, and its metadata."""
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", None)
    items = sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0])
    return [(k, Arr(v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]))
            for k, v in items], meta


def hf_index_seeds():
    """hf_index: the small Hugging Face fixtures as two shards and an index:
    config.json, NUL, index, NUL, u32 length of a.safetensors, a, b."""
    fixtures = os.path.join(HERE, "..", "fixtures")
    for name in ("hf_llama_tied", "hf_diffllama_mha"):
        folder = os.path.join(fixtures, name)
        tensors, meta = read_safetensors(os.path.join(folder, "model.safetensors"))
        half = len(tensors) // 2
        a, b = safetensors(tensors[:half], meta), safetensors(tensors[half:], meta)
        index = {"metadata": {"total_size": sum(len(t.data) for _, t in tensors)},
                 "weight_map": {k: ("a" if i < half else "b") + ".safetensors" for i, (k, _) in enumerate(tensors)}}
        with open(os.path.join(folder, "config.json"), "rb") as f:
            cfg = f.read()
        put("hf_index", name + ".bin", cfg + b"\0" + json.dumps(index).encode() + b"\0" + struct.pack("<I", len(a)) + a + b)


def gguf_kv(key, typ, payload):
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<I", typ) + payload


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_tokenizer_seeds(vocab, mstr, eot, hf):
    """gguf_tokenizer: GGUFs without tensors holding llama.cpp's tokenizer
    arrays, alone and beside the tokenizer.json they came from."""
    tokens = [None] * (eot + 1)
    for tok, i in vocab.items():
        tokens[i] = tok
    tokens[eot] = "<|endoftext|>"
    types = [1] * eot + [3]
    arrays = [gguf_kv("tokenizer.ggml.model", 8, gguf_str("gpt2")),
              gguf_kv("tokenizer.ggml.pre", 8, gguf_str("gpt-2")),
              gguf_kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(tokens)) + b"".join(map(gguf_str, tokens))),
              gguf_kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, len(types)) + struct.pack("<%di" % len(types), *types)),
              gguf_kv("tokenizer.ggml.merges", 9, struct.pack("<IQ", 8, len(mstr)) + b"".join(map(gguf_str, mstr))),
              gguf_kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", eot)),
              gguf_kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", eot))]
    with_json = arrays + [gguf_kv("tokenizer.huggingface.json", 8, gguf_str(json.dumps(hf, ensure_ascii=False)))]
    for name, kvs in (("arrays.gguf", arrays), ("arrays_and_json.gguf", with_json)):
        put("gguf_tokenizer", name, b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))


def main():
    hf_folder_seeds()
    hf_index_seeds()
    rng = random.Random(7)
    # safetensors models, a BF16 one, and training states
    for name, cfg in CONFIGS.items():
        ts = model_tensors(*cfg, rng)
        put("st_model", name + ".safetensors", safetensors(ts, model_meta(*cfg)))
        n = sum(a.size for _, a in ts)
        meta = dict(model_meta(*cfg), **TRAIN_META)
        put("train_state", name + ".safetensors",
            safetensors([("params", randn(rng, [n])), ("adam.m", randn(rng, [n], 0.01)),
                         ("adam.v", f32([n], [abs(rng.gauss(0, 0.01)) for _ in range(n)]))], meta))
    ts = model_tensors(*CONFIGS["softmax_tied"], rng)
    bf = [(n, bf16_of(a)) for n, a in ts]
    put("st_model", "softmax_tied_bf16.safetensors", safetensors(bf, model_meta(*CONFIGS["softmax_tied"])))

    # generic safetensors: every dtype family, a scalar, an empty tensor, metadata
    grads = [("loss", f32([], [2.5])),
             ("a.weight", randn(rng, [3, 5])),
             ("b", Arr("BF16", [2, 3], struct.pack("<6H", *[0x3F80 + i for i in range(6)]))),
             ("c", Arr("F16", [4], struct.pack("<4e", 0.0, 1.0, -2.5, 65504.0))),
             ("d", Arr("I32", [3], struct.pack("<3i", 0, 1, -2))),
             ("empty", f32([0, 4], []))]
    put("st_grads", "grads.safetensors", safetensors(grads, {"note": "fuzz seed"}))
    put("st_grads", "bare.safetensors", safetensors([("x", f32([2], [1.0, 1.0]))]))

    # npy: 1.0 and 2.0 headers (as numpy writes them: data at a multiple of 64), 0-d and empty arrays
    for name, shape, ver in [("m", (3, 4), 1), ("scalar", (), 1), ("empty", (2, 0), 1), ("v2", (5,), 2)]:
        dims = "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0]
        dims = dims[:-2] if len(shape) > 1 else dims
        d = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % dims
        pre = 10 if ver == 1 else 12
        d += " " * (-(pre + len(d) + 1) % 64) + "\n"
        lenfield = struct.pack("<H", len(d)) if ver == 1 else struct.pack("<I", len(d))
        data = randn(rng, shape).data
        put("npy", name + ".npy", b"\x93NUMPY" + bytes([ver, 0]) + lenfield + d.encode() + data)

    # ids
    put("ids", "simple.txt", "15496 11 995 0\n")
    put("ids", "spaces.txt", "  1\t2\r\n3   50256\n\n")
    put("ids", "one.txt", "7")

    # token shards (the input is train_000000.bin; fuzz_shards supplies the val shard)
    toks = [i * 7 % 300 for i in range(40)]
    put("shards", "train.bin", struct.pack("<IIIIQ", 0x4B544144, 1, 300, 0, len(toks)) + struct.pack("<40I", *toks))
    put("shards", "short.bin", struct.pack("<IIIIQ", 0x4B544144, 1, 300, 0, 6) + struct.pack("<6I", *toks[:6]))

    # tokenizers: byte-level BPE with a few merges and specials
    cps = gpt2_alphabet()
    vocab = {cps[b]: b for b in range(256)}
    merges = [(b"h", b"e"), (b"he", b"l"), (b" ", b"w"), (b"\n", b"\n"), (b" ", b"c"), (b"\xc3", b"\xa9")]
    for a, b in merges:
        vocab[tok_string(a + b, cps)] = len(vocab)
    mstr = [tok_string(a, cps) + " " + tok_string(b, cps) for a, b in merges]
    eot = len(vocab)
    hf = {"version": "1.0", "added_tokens": [{"id": eot, "content": "<|endoftext|>", "special": True}],
          "model": {"type": "BPE", "vocab": vocab, "merges": mstr}}
    put("tokenizer_json", "strings.json", json.dumps(hf, ensure_ascii=False))
    hf2 = dict(hf, model=dict(hf["model"], merges=[m.split(" ") for m in mstr]))
    hf2["added_tokens"] = hf["added_tokens"] + [{"id": eot + 1, "content": "<pad>", "special": False}]
    put("tokenizer_json", "pairs.json", json.dumps(hf2, ensure_ascii=False))
    gguf_tokenizer_seeds(vocab, mstr, eot, hf)
    enc = dict(vocab)
    enc["<|endoftext|>"] = eot
    put("gpt2_vocab", "gpt2.bin", json.dumps(enc, ensure_ascii=False).encode() + b"\0" +
        ("#version: 0.2\n" + "\n".join(mstr) + "\n").encode())

    # text to encode
    for i, text in enumerate([b"Hello, world!\n\nHow are you?  Fine.\n", b"aaaa\n\nbaaaa\n\n\naaaa",
                              b"abcd caf\xc3\xa9 caf\xc3\xa9\t\xc3\xa9t\xc3\xa9", b"x<|endoftext|>y <|endoftext|>\n",
                              b"\xff\xfe\x80 invalid \xc3 utf-8 \xe2\x82", "\u00a0nbsp\u3000ideographic \u2028".encode(),
                              b"it's we'll they've I'M 12345 67\r\n\r\n"]):
        put("encode", "text%d.txt" % i, text)
    with open(os.path.join(HERE, "..", "fixtures", "tok_hard_cases.txt"), "rb") as f:
        put("encode", "hard_cases.txt", f.read())

    # a model that carries its tokenizer (trained on shards of the small
    # tokenizer above), as safetensors and as GGUF, through the CLI
    if len(sys.argv) > 1:
        with tempfile.TemporaryDirectory() as tmp:
            tokp, text = os.path.join(tmp, "tokenizer.json"), os.path.join(tmp, "text.txt")
            with open(tokp, "w") as f:
                f.write(json.dumps(hf, ensure_ascii=False))
            with open(text, "w") as f:
                f.write("hello world, the cat sat on the mat.\n" * 400)
            run = lambda *a: subprocess.run([sys.argv[1], *a], check=True, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
            run("prepare", "--tokenizer", tokp, "--in", text, "--out", os.path.join(tmp, "shards"), "--quiet",
                "--val-fraction", "0.2")
            run("train", "--arch", "softmax", "--dim", "32", "--layers", "1", "--heads", "1", "--seq", "8",
                "--batch", "1", "--steps", "1", "--eval-every", "0", "--tie-embeddings", "--ffn", "32", "--data", os.path.join(tmp, "shards"), "--out",
                os.path.join(tmp, "run"))
            model = os.path.join(tmp, "run", "model.safetensors")
            with open(model, "rb") as f:
                put("st_model", "with_tokenizer.safetensors", f.read())
            run("quantize", "--model", model, "--type", "q8_0", "--out", os.path.join(tmp, "t.gguf"))
            with open(os.path.join(tmp, "t.gguf"), "rb") as f:
                put("gguf", "with_tokenizer.gguf", f.read())

    # GGUF through the CLI, from a model whose widths are multiples of 32
    if len(sys.argv) > 1:
        cfg = ("softmax", 32, 1, 2, 2, 16, 32, True)
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "m.safetensors")
            with open(src, "wb") as f:
                f.write(safetensors(model_tensors(*cfg, rng), model_meta(*cfg)))
            for typ in ["q8_0", "q4_0", "f16"]:
                out = os.path.join(tmp, typ + ".gguf")
                subprocess.run([sys.argv[1], "quantize", "--model", src, "--type", typ, "--out", out], check=True,
                               stdout=subprocess.DEVNULL)
                with open(out, "rb") as f:
                    put("gguf", typ + ".gguf", f.read())

    if len(sys.argv) > 1:
        gguf_engine_seeds(sys.argv[1])


def gguf_engine_seeds(binary):
    """gguf and gguf_engine: small GGUFs that mix float and integer-quantized matrices (llama.cpp's
    --output-tensor-type and --tensor-type), NSA files whose 2-D attention parameters are F16 or Q8_0, and
    near-misses (an attention bias, a weight_type key that contradicts the tensors), written with gguf-py
    through tools/gguf_retype.py. Skipped without python3-numpy or gguf-py (the build's llamacpp-include)."""
    gp = os.path.join(os.path.dirname(os.path.abspath(binary)), "llamacpp-include", "gguf-py")
    py = next((p for p in ("/usr/bin/python3", "python3")
               if subprocess.run([p, "-c", "import numpy"], stderr=subprocess.DEVNULL).returncode == 0), None)
    if not py or not os.path.isdir(gp):
        print("gguf_engine seeds skipped: no python3 with numpy, or no", gp)
        return
    root = os.path.join(HERE, "..", "..")
    run = lambda *a: subprocess.run(list(a), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    retype = lambda *a: run(py, os.path.join(root, "tools", "gguf_retype.py"), "--gguf-py", gp, *a)
    with tempfile.TemporaryDirectory() as tmp:
        f16 = os.path.join(tmp, "f16.gguf")
        run(py, os.path.join(root, "tools", "llama_gguf_write.py"), "--gguf-py", gp, "--out", f16, "--dim", "32",
            "--layers", "1", "--heads", "2", "--vocab", "64", "--ctx", "16", "--type", "f16", "--untied")
        nsa_src, nsa = os.path.join(tmp, "nsa.safetensors"), os.path.join(tmp, "nsa.gguf")
        run(binary, "init", "--arch", "nsa", "--dim", "32", "--layers", "1", "--heads", "1", "--vocab", "64",
            "--ffn", "32", "--seq", "32", "--nsa-block", "8", "--nsa-stride", "4", "--nsa-select", "8", "--nsa-topn",
            "3", "--nsa-window", "8", "--out", nsa_src)
        run(binary, "quantize", "--model", nsa_src, "--type", "f16", "--out", nsa)
        p = "blk.0.attn."
        made = {
            "mixed_f16_out_q8_0.gguf": (f16, ["output.weight=Q8_0"]),
            "mixed_f16_attn_q_q4_0.gguf": (f16, ["blk.0.attn_q.weight=Q4_0"]),
            "mixed_q8_0_bf16.gguf": (f16, ["blk.0.attn_q.weight=Q8_0", "blk.0.attn_k.weight=Q8_0",
                                           "blk.0.ffn_down.weight=BF16", "token_embd.weight=Q8_0"]),
            "mixed_weight_type_key.gguf": (f16, ["--key", "diffattn.weight_type=q8_0"]),
            "attn_q_bias.gguf": (f16, ["--add-tensor", "blk.0.attn_q.bias=32"]),
            "nsa_f16.gguf": (nsa, []),
            "nsa_params_f16.gguf": (nsa, [p + "cmp_k.weight=F16", p + "cmp_v.weight=F16", p + "cmp_pe_k=F16",
                                          p + "cmp_pe_v=F16", p + "gate.weight=F16"]),
            "nsa_params_q8_0.gguf": (nsa, [p + "cmp_k.weight=Q8_0", p + "cmp_v.weight=Q8_0"]),
        }
        for name, (src, args) in made.items():
            out = os.path.join(tmp, name)
            if args:
                retype(src, out, *args)
            else:
                out = src
            with open(out, "rb") as f:
                data = f.read()
            put("gguf", name, data)
            put("gguf_engine", name, data)


if __name__ == "__main__":
    main()
