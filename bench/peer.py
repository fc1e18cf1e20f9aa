#!/usr/bin/env python3
"""PyTorch peer of `diffattn bench train`: the same model (DIFF V1 or the
softmax baseline, LLaMA-style blocks, RoPE, SwiGLU, untied head), the same
batch, AdamW, eager float32 on the CPU with the same thread count. Prints one
JSON object with the same keys as `diffattn bench train --json`.

    /usr/bin/python3 bench/peer.py --arch diff --dim 768 --layers 6 --heads 6 --seq 512 --batch 4

Needs Debian's python3-torch (1.13: no scaled_dot_product_attention, so the
attention is the explicit softmax(QK^T)V the official naive module uses)."""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F


def rope_tables(T, d, theta):
    inv = 1.0 / theta ** torch.linspace(0, 1, d // 2)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    return ang.cos(), ang.sin()


def rope(x, cos, sin):  # x: (B, T, n, d), interleaved pairs
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class Model(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        C, F_, V = a.dim, a.ffn, a.vocab
        self.H = a.heads * (2 if a.arch == "softmax" else 1)
        self.n_kv = a.kv_heads * (2 if a.arch == "softmax" else 1)
        self.d = C // a.heads // 2  # sub-head (diff) = head (softmax) size
        Ckv = C // (self.H // self.n_kv)
        P = lambda *s: torch.nn.Parameter(torch.randn(*s) * 0.02)
        self.emb = P(V, C)
        self.layers = torch.nn.ModuleList()
        for l in range(a.layers):
            m = torch.nn.Module()
            m.an, m.fn = torch.nn.Parameter(torch.ones(C)), torch.nn.Parameter(torch.ones(C))
            m.wq, m.wk, m.wv, m.wo = P(C, C), P(Ckv, C), P(Ckv, C), P(C, C)
            m.w1, m.w2, m.w3 = P(F_, C), P(C, F_), P(F_, C)
            if a.arch == "diff":
                m.lq1, m.lk1, m.lq2, m.lk2 = (torch.nn.Parameter(torch.randn(self.d) * 0.1) for _ in range(4))
                m.subln = torch.nn.Parameter(torch.ones(2 * self.d))
                m.linit = 0.8 - 0.6 * math.exp(-0.3 * l)
            self.layers.append(m)
        self.norm = torch.nn.Parameter(torch.ones(C))
        self.out = P(V, C)
        cos, sin = rope_tables(a.seq, self.d, 10000.0)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("mask", torch.full((a.seq, a.seq), float("-inf")).triu(1))

    def attn(self, m, x):
        B, T, C = x.shape
        d, H, nkv = self.d, self.H, self.n_kv
        rep = H // nkv
        q, k, v = x @ m.wq.t(), x @ m.wk.t(), x @ m.wv.t()
        scale = d ** -0.5
        if self.a.arch == "diff":
            q = rope(q.view(B, T, 2 * H, d), self.cos, self.sin)
            k = rope(k.view(B, T, 2 * nkv, d), self.cos, self.sin)
            q = q.view(B, T, H, 2, d).permute(0, 2, 3, 1, 4)            # B H 2 T d
            k = k.view(B, T, nkv, 2, d).permute(0, 2, 3, 1, 4)          # B G 2 T d
            k = k.repeat_interleave(rep, dim=1)                         # group g = i // rep
            v = v.view(B, T, nkv, 2 * d).transpose(1, 2).repeat_interleave(rep, dim=1)  # B H T 2d
            s = (q @ k.transpose(-1, -2)) * scale + self.mask[:T, :T]
            p = torch.softmax(s, dim=-1)
            lam = torch.exp((m.lq1 * m.lk1).sum()) - torch.exp((m.lq2 * m.lk2).sum()) + m.linit
            o = (p[:, :, 0] - lam * p[:, :, 1]) @ v                     # B H T 2d
            o = rmsnorm(o, m.subln, 1e-5) * (1 - m.linit)
        else:
            q = rope(q.view(B, T, H, d), self.cos, self.sin).transpose(1, 2)
            k = rope(k.view(B, T, nkv, d), self.cos, self.sin).transpose(1, 2).repeat_interleave(rep, dim=1)
            v = v.view(B, T, nkv, d).transpose(1, 2).repeat_interleave(rep, dim=1)
            p = torch.softmax((q @ k.transpose(-1, -2)) * scale + self.mask[:T, :T], dim=-1)
            o = p @ v
        return o.transpose(1, 2).reshape(B, T, C) @ m.wo.t()

    def forward(self, idx, tgt):
        x = self.emb[idx]
        for m in self.layers:
            x = x + self.attn(m, rmsnorm(x, m.an, 1e-5))
            h = rmsnorm(x, m.fn, 1e-5)
            x = x + (F.silu(h @ m.w1.t()) * (h @ m.w3.t())) @ m.w2.t()
        logits = rmsnorm(x, self.norm, 1e-5) @ self.out.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="diff", choices=["diff", "softmax"])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4, help="DIFF heads; softmax gets twice as many")
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--ffn", type=int, default=0)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup-steps", type=int, default=1)
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    a = p.parse_args()
    a.kv_heads = a.kv_heads or a.heads
    a.ffn = a.ffn or ((8 * a.dim + 2) // 3 + 63) // 64 * 64
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Model(a)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq))
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq))
    times = []
    for s in range(a.warmup_steps + a.steps):
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        model(idx, tgt).backward()
        opt.step()
        if s >= a.warmup_steps:
            times.append(time.perf_counter() - t)
    best, med = min(times), statistics.median(times)
    n_params = sum(x.numel() for x in model.parameters())
    print(json.dumps({"bench": "train", "impl": "pytorch", "torch": torch.__version__, "arch": a.arch,
                      "dim": a.dim, "layers": a.layers, "seq": a.seq, "batch": a.batch, "threads": a.threads,
                      "n_params": n_params, "steps": a.steps, "tok_per_s": round(a.batch * a.seq / best, 1),
                      "ms_per_step": round(best * 1e3, 3), "ms_per_step_median": round(med * 1e3, 3)}))


if __name__ == "__main__":
    main()
