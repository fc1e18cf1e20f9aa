/* What DIFF (diff.c) shares with the grouped differential attention
 * (gda.c): the layer's tensors in one order, lambda, and the two-map
 * kernels run on a query laid out as DIFF's (head i's Q1, Q2 = q sub-heads
 * 2i, 2i+1). Internal to src/attn/. */
#ifndef DA_ATTN_DIFF_H
#define DA_ATTN_DIFF_H

#include "attn/variant.h"

/* The layer's tensors, in checkpoint order (subln only with the head norm). */
enum { DIFF_Q, DIFF_K, DIFF_V, DIFF_OUT, DIFF_LQ1, DIFF_LK1, DIFF_LQ2, DIFF_LK2, DIFF_SUBLN, DIFF_N_TENSORS };
/* layer consts: lambda_full, the head norm's scale (1 - lambda_init), lambda_init */
enum { DIFF_C_LAMBDA, DIFF_C_POST, DIFF_C_INIT };

/* The tensors (q_proj is q_rows wide; the rest as DIFF's) into t; returns their count. */
int attn_diff_tensors(const da_config *c, int q_rows, attn_tensor *t);

/* consts from the lambda vectors w[DIFF_LQ1..DIFF_LK2] and lambda_init `init`:
 * lambda = (1 - lambda_hold) (exp(lq1 . lk1) - exp(lq2 . lk2) + init). */
void attn_diff_lambda_consts(const da_config *c, float init, const float *const *w, float *consts);

/* x->out from q (B, T, C): per head, subln((A1 - lambda A2) V) * post with
 * the consts already in x->consts; fills x->saved as DIFF's forward does. */
void attn_diff_maps_forward(const attn_train_ctx *x, const float *q);
/* dq (B, T, C) overwritten, x->dproj[DIFF_K], [DIFF_V] overwritten, and the
 * lambda vectors' and subln's gradients (+=), from x->dout. */
void attn_diff_maps_backward(const attn_train_ctx *x, const float *q, float *dq);
/* Floats of x->saved and x->scratch the two functions above use. */
size_t attn_diff_train_floats(const attn_shape *cap, int flash);
size_t attn_diff_scratch_floats(const attn_shape *s, int flash);

/* One decode head: o (2d) = subln((A1 - lambda A2) V) * post, A1 from q1
 * against K sub-head 2g, A2 from q2 against 2g + 1, V the group's 2d columns. */
void attn_diff_decode_pair(const attn_decode_head *x, const float *q1, const float *q2);

/* attn_flops_per_token of DIFF and GDA. QK^T: 2 flops per key per query
 * column (dim); PV: 2 maps x 2 per key per value column (dim). GDA's are
 * counted as DIFF's kernels compute them: per signal head, two d-wide maps
 * against a 2d-wide value (the noise map recomputed for each of its group's
 * signal heads). */
double attn_diff_flops(const da_config *c, int T);

#endif
