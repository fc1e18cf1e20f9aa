/* The elementwise and matrix ops of the transformer, each forward beside its
 * backward. N is the number of rows (B*T). Every backward says whether it
 * accumulates (+=) or overwrites. */
#ifndef DA_OPS_H
#define DA_OPS_H

#include <stddef.h>

/* 1: large matmuls take bf16 inputs with fp32 accumulation (AVX512-BF16
 * builds only); 0 (default): fp32 throughout. */
extern int da_matmul_bf16;

/* out: (N, Cout) = inp: (N, Cin) @ W: (Cout, Cin)^T. Overwrites out (beta=0), or adds
 * to it when accumulate is 1. */
void matmul_forward(float *out, const float *inp, const float *W, int N, int Cin, int Cout, int accumulate);
/* dinp: (N, Cin) (+= when accumulate_dinp, else overwritten; skipped when NULL),
 * dW: (Cout, Cin) += dout^T @ inp (skipped when NULL). dout: (N, Cout). */
void matmul_backward(float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int Cin, int Cout, int accumulate_dinp);

/* out: (N, C) = x * rstd * w; rstd: (N) = 1/sqrt(mean(x^2) + eps), saved for the backward. */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps);
/* dx: (N, C) +=, dw: (C) +=. */
void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int N, int C);

/* RoPE tables: cos_tab, sin_tab: (T, d/2), angle = t * theta^(-j/(d/2-1)). */
void rope_tables(float *cos_tab, float *sin_tab, int T, int d, float theta);
/* Rotates, in place, every d-wide sub-head of x: (B, T, n_sub*d) by its
 * position, GPT-J interleaved pairs. inverse=1 applies the transpose
 * rotation, which is the backward. */
void rope_apply(float *x, const float *cos_tab, const float *sin_tab, int B, int T, int n_sub, int d,
                int inverse);

/* gate: (N, F) = silu(h1) * h3. */
void swiglu_forward(float *gate, const float *h1, const float *h3, size_t n);
/* dh1, dh3: (N, F), overwritten. */
void swiglu_backward(float *dh1, float *dh3, const float *dgate, const float *h1, const float *h3, size_t n);

/* out: (N, C) = emb[tokens]. */
void embedding_forward(float *out, const int *tokens, const float *emb, int N, int C);
/* demb: (V, C) += scatter of dout: (N, C). Serial, so the sum order is fixed. */
void embedding_backward(float *demb, const float *dout, const int *tokens, int N, int C);

/* losses: (N) = logsumexp(logits) - logits[target]; 0 where target is -1
 * (masked). Returns their mean over the counted (target >= 0) positions, 0
 * when none counts. */
float cross_entropy_forward(float *losses, const float *logits, const int *targets, int N, int V);
/* Overwrites logits: (N, V) in place with d(mean loss)/d logits =
 * (softmax - onehot) / n_counted; rows with target -1 become 0. */
void cross_entropy_backward(float *logits, const int *targets, int N, int V);

#endif
