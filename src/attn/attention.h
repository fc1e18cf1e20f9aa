/* Reference (non-fused) causal attention for both architectures: clear, exact,
 * and O(T^2) in memory. It stores the probability maps for the backward and
 * for the evaluations that inspect them.
 *
 * The kernels exist once per instruction-set level (attn_variant.c, as the
 * ops of ops.h) and are reached through that level's table:
 *     da_attn_ops_of(x->isa)->flash_forward(...)
 *
 * Layouts: q: (B, T, C) and k, v: (B, T, Ckv), RoPE already applied.
 * Causal, and with attn_shape.window > 0 a sliding window: each map's row t
 * is zero outside keys t-window+1 .. t.
 *   DIFF:    head i owns q sub-heads 2i (Q1), 2i+1 (Q2), each d wide; its KV
 *            group g = i / n_rep gives K1 = k sub-head 2g, K2 = 2g+1 and V =
 *            v columns [2d*g, 2d*(g+1)). att: (B, H, 2, T, T) holds A1, A2.
 *   softmax: head i is q columns [d*i, d*(i+1)), group g = i / n_rep.
 *            att: (B, H, T, T).
 *   DIFF2:   q: (B, T, 2C), 2H query heads of size d; head i owns query heads
 *            2i (Q1) and 2i+1 (Q2), both against K = k columns [d*g, d*(g+1))
 *            and V the same columns of v, g = i / n_rep (so C = H*d, Ckv =
 *            n_kv*d). Output (B, T, C): head i is columns [d*i, d*(i+1)).
 *            lam: (B, T, H), sigmoid(lambda) per token and head.
 *            att: (B, H, 2, T, T) holds A1, A2. */
#ifndef DA_ATTENTION_H
#define DA_ATTENTION_H

#include <stddef.h>

#include "diffattn/config.h"
#include "diffattn/core.h"
#include "diffattn/exec.h"

/* Where a variant's heads sit in q, k and v rows: what the kernels shared by
 * every variant (flash attention) need to know of it. Head h of KV group g
 * owns `maps` d-wide query sub-heads, columns (maps*h + m)*d of q; map m
 * reads the K sub-head maps*g + m when k_per_map is 1, else sub-head g; the
 * group's value is v_subheads d-wide sub-heads from column v_subheads*d*g.
 * A head's output is v_subheads*d wide. */
typedef struct {
    int maps;       /* probability maps per head: 1 or 2 */
    int k_per_map;  /* 1: each map its own K sub-head; 0: every map reads the group's one K */
    int v_subheads; /* value (and output) width of a head, in sub-heads of d */
} attn_layout;

typedef struct {
    int B, T;
    int n_heads, n_kv_heads;
    int d; /* DIFF: sub-head size; softmax, DIFF2: head size */
    int C, Ckv; /* widths of a token's output (and of q, except DIFF2's 2C) and of k, v */
    int n_threads; /* OpenMP threads the scratch was sized for */
    int logit_bits; /* reference kernel: logits fake-quantized to this many bits (da_model.attn_logit_bits; 0 exact) */
    int window;     /* sliding window: query t sees keys t-window+1 .. t in every map; 0 = all keys 0 .. t */
    int head_norm;  /* 1: the variant's per-head norm is on (da_attn_head_norm_on): its saved rows and scratch */
    const da_config *cfg; /* the model's configuration (a variant's own hyper-parameters), or NULL */
} attn_shape;

#define DA_SUBLN_EPS 1e-5f

/* First key query t sees: 0, or t - window + 1 with a window. */
static inline int attn_first_key(int t, int window) { return window > 0 && t >= window ? t - window + 1 : 0; }

/* a: (n) logits of one query row, rounded in place to 2^(bits-1) - 1 levels
 * of max|a| / (2^(bits-1) - 1). */
void da_quantize_logit_row(float *a, int n, int bits);

/* Scratch floats the reference kernels need with s->n_threads threads. */
size_t da_attn_scratch_size(const attn_shape *s);

typedef struct {
    da_isa isa; /* the level this table's code was compiled for */

    /* The DIFF head norm: y = x * rstd * w * post over each 2d-wide row, with
     * rstd = 1/sqrt(mean(x^2) + DA_SUBLN_EPS) saved. x, y: (rows, d2). */
    void (*head_norm_forward)(float *y, float *rstd, const float *x, const float *w, float post, int rows, int d2);
    /* dx: (rows, d2) overwritten; dw: (d2) +=. */
    void (*head_norm_backward)(float *dx, float *dw, const float *dy, const float *x, const float *rstd,
                               const float *w, float post, int rows, int d2);

    /* Reference DIFF: out: (B, T, C) = subln((A1 - lambda*A2) V) * (1 - lambda_init),
     * per head. opre: (B, T, C) the pre-norm head outputs, sub_rstd: (B, T, H)
     * the norm's rstd, att: the maps; all three saved for the backward.
     * subln_w NULL: no head norm (head_norm off): out = opre, the same
     * pointer, sub_rstd unused; the backward then takes dsubln NULL. */
    void (*diff_forward)(float *out, float *opre, float *sub_rstd, float *att, const float *q, const float *k,
                         const float *v, const float *subln_w, float lambda, float lambda_init, const attn_shape *s,
                         float *scratch);
    /* dq overwritten; dk, dv overwritten; dsubln (2d) +=; *dlambda overwritten
     * with d loss / d lambda. dout: (B, T, C). */
    void (*diff_backward)(float *dq, float *dk, float *dv, float *dsubln, float *dlambda, const float *dout,
                          const float *opre, const float *sub_rstd, const float *att, const float *q, const float *k,
                          const float *v, const float *subln_w, float lambda, float lambda_init, const attn_shape *s,
                          float *scratch);
    /* Reference DIFF2: out: (B, T, C) = A1 V - lam * A2 V per head, lam per row; att saved. */
    void (*diff2_forward)(float *out, float *att, const float *q, const float *k, const float *v, const float *lam,
                          const attn_shape *s, float *scratch);
    /* dq: (B, T, 2C), dk, dv overwritten; dlam: (B, T, H) overwritten with d loss / d lam. */
    void (*diff2_backward)(float *dq, float *dk, float *dv, float *dlam, const float *dout, const float *att,
                           const float *q, const float *k, const float *v, const float *lam, const attn_shape *s,
                           float *scratch);
    /* Reference softmax: out: (B, T, C) = softmax(Q K^T / sqrt(d)) V per head; att saved. */
    void (*softmax_forward)(float *out, float *att, const float *q, const float *k, const float *v,
                            const attn_shape *s);
    /* dq, dk, dv overwritten. */
    void (*softmax_backward)(float *dq, float *dk, float *dv, const float *dout, const float *att, const float *q,
                             const float *k, const float *v, const attn_shape *s, float *scratch);

    /* Flash attention, every kind (flash_attention.h: what is saved). opre:
     * (B, T, C) = per head sum_m c_m A_m V with c = (1, -lam[b, t, h]) when lam
     * (B, T, H) is given, else (1, -lambda) for two maps, (1) for one. o1, o2
     * (two maps; else NULL) and lse are saved. */
    void (*flash_forward)(float *opre, float *o1, float *o2, float *lse, const float *q, const float *k,
                          const float *v, float lambda, const float *lam, const attn_layout *lay,
                          const attn_shape *s, float *scratch);
    /* dq, dk, dv overwritten; *dlambda overwritten with d loss / d lambda
     * (a scalar lambda; may be NULL); dlam: (B, T, H) overwritten with d loss
     * / d lam (lam given; else NULL). dopre: (B, T, C), the gradient of opre. */
    void (*flash_backward)(float *dq, float *dk, float *dv, float *dlambda, float *dlam, const float *dopre,
                           const float *opre, const float *o1, const float *o2, const float *lse, const float *q,
                           const float *k, const float *v, float lambda, const float *lam,
                           const attn_layout *lay, const attn_shape *s, float *scratch);
} da_attn_ops;

/* The table of level isa, or of the best level below it that this CPU runs. */
const da_attn_ops *da_attn_ops_of(da_isa isa);

#endif
