#!/usr/bin/env python3
"""Copies a GGUF with some tensors stored in another type, some string keys
set or removed, and extra tensors added: the mixed-type files llama.cpp's
quantizer makes (--output-tensor-type, --tensor-type), written with gguf-py
(llama.cpp's own reader and writer) for diffattn's reader tests.

    gguf_retype.py --gguf-py DIR IN.gguf OUT.gguf [NAME=TYPE ...]
                   [--key NAME=VALUE] [--u32-key NAME=N] [--drop-key NAME] [--add-tensor NAME=N] [--add-tensor-like NAME=SRC]

TYPE is F32, F16, BF16, Q8_0 or Q4_0 (gguf-py's quantizers); the tensor is
dequantized from its own type first (any type gguf-py reads, Q4_K too).
--add-tensor NAME=N appends an f32 vector of N small values (an unused tensor:
blk.0.attn_q.bias); --add-tensor-like NAME=SRC a copy of tensor SRC (a block
beyond block_count). An empty array key is dropped (gguf-py cannot write one)."""
import argparse
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("retype", nargs="*", help="NAME=TYPE")
    ap.add_argument("--key", action="append", default=[], help="NAME=VALUE: a string key set")
    ap.add_argument("--u32-key", action="append", default=[], help="NAME=N: a u32 key set")
    ap.add_argument("--drop-key", action="append", default=[])
    ap.add_argument("--add-tensor", action="append", default=[], help="NAME=N: an f32 vector of N values")
    ap.add_argument("--add-tensor-like", action="append", default=[], help="NAME=SRC: a copy of tensor SRC")
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf
    from gguf import quants

    r = gguf.GGUFReader(a.inp)
    arch = r.get_field("general.architecture").contents()
    w = gguf.GGUFWriter(a.out, arch)
    keys = dict(kv.split("=", 1) for kv in a.key)
    u32 = {k: int(v) for k, v in (kv.split("=", 1) for kv in a.u32_key)}
    for field in r.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF.") or field.name in a.drop_key:
            continue
        if field.name in keys or field.name in u32:
            continue
        vt = field.types[0]
        sub = field.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
        v = field.contents()
        if vt == gguf.GGUFValueType.ARRAY and not v:
            continue  # gguf-py writes no empty array (a byte-level model's merges)
        w.add_key_value(field.name, v, vt, sub_type=sub)
    for k, v in keys.items():
        w.add_string(k, v)
    for k, v in u32.items():
        w.add_uint32(k, v)

    want = {}
    for x in a.retype:
        name, t = x.split("=", 1)
        want[name] = gguf.GGMLQuantizationType[t.upper()]
    names = {t.name for t in r.tensors}
    missing = set(want) - names
    assert not missing, f"no tensor {sorted(missing)} in {a.inp}"
    out = []
    for t in r.tensors:
        ne = [int(x) for x in t.shape]  # ggml order: ne[0] first
        shape = list(reversed(ne))
        if t.name in want:
            f = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
            qt = want[t.name]
            if qt == gguf.GGMLQuantizationType.F32:
                out.append((t.name, f, None))
            elif qt == gguf.GGMLQuantizationType.F16:
                out.append((t.name, f.astype(np.float16), None))
            else:
                out.append((t.name, quants.quantize(f, qt), qt))
        else:
            out.append((t.name, t.data, t.tensor_type))
    for x in a.add_tensor:
        name, n = x.split("=", 1)
        out.append((name, (np.arange(int(n), dtype=np.float32) % 7 - 3) * 0.01, None))
    for x in a.add_tensor_like:
        name, src = x.split("=", 1)
        t = next(t for t in r.tensors if t.name == src)
        out.append((name, t.data, t.tensor_type))
    for name, data, qt in out:
        if qt in (None, gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            w.add_tensor(name, np.ascontiguousarray(data))
        else:
            w.add_tensor(name, np.ascontiguousarray(data), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
