/* diffattn's fused attention kernels over the caller's tensors: a drop-in
 * for multi-head attention in another program, DIFF or softmax, forward and
 * backward, memory linear in the sequence (FlashAttention-2 tiling).
 *
 * Layouts, row-major float32, RoPE (if any) already applied, causal:
 *   softmax: q (B, T, H*d), k and v (B, T, Hkv*d). Head i reads q columns
 *            [d*i, d*(i+1)) and KV group g = i / (H/Hkv), columns [d*g, d*(g+1)).
 *            out (B, T, H*d) = softmax(q_i k_g^T / sqrt(d)) v_g per head.
 *   DIFF:    q (B, T, H*2d): head i's Q1 and Q2 are the d-wide columns at 2d*i
 *            and 2d*i + d; k (B, T, Hkv*2d): group g's K1, K2 likewise; v
 *            (B, T, Hkv*2d): group g's value is columns [2d*g, 2d*(g+1)), 2d wide.
 *            out (B, T, H*2d) = (softmax(Q1 K1^T/sqrt(d)) - lambda softmax(Q2 K2^T/sqrt(d))) V
 *            per head, before DIFF's per-head norm (da_attention_head_norm).
 * H = n_heads must be a multiple of Hkv = n_kv_heads.
 * Implemented in src/attn/attention_api.c. */
#ifndef DIFFATTN_ATTENTION_H
#define DIFFATTN_ATTENTION_H

#include "diffattn/config.h"
#include "diffattn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    da_arch arch;   /* DA_ARCH_DIFF or DA_ARCH_SOFTMAX (the variants with one lambda per call; others are refused) */
    int batch, seq; /* B, T */
    int n_heads;    /* H (DIFF: differential heads) */
    int n_kv_heads; /* Hkv */
    int head_dim;   /* d: the width of one map's query and key rows */
} da_attention_shape;

/* Floats the forward saves for the backward: the log-sum-exp of every row
 * of every map, and for DIFF each head's normalised A1 V and A2 V. */
size_t da_attention_saved_floats(const da_attention_shape *s);

/* out as in the layout above; saved: da_attention_saved_floats floats.
 * lambda: DIFF's λ (ignored for softmax). */
da_status da_attention_forward(float *out, float *saved, const float *q, const float *k, const float *v, float lambda,
                               const da_attention_shape *s);

/* Gradients of a loss through the forward, given dout (its gradient at out):
 * dq, dk, dv overwritten; *dlambda (DIFF; may be NULL for softmax)
 * overwritten. out and saved are the forward's. */
da_status da_attention_backward(float *dq, float *dk, float *dv, float *dlambda, const float *dout, const float *out,
                                const float *saved, const float *q, const float *k, const float *v, float lambda,
                                const da_attention_shape *s);

/* DIFF's per-head normalisation: each 2d-wide row of x (rows = B*T*H) to
 * RMSNorm(row) * w * (1 - lambda_init), eps 1e-5, w: (2d) shared by the heads. */
da_status da_attention_head_norm(float *y, const float *x, const float *w, float lambda_init, int rows, int d2);

#ifdef __cplusplus
}
#endif
#endif
