/* Reference causal attention, DIFF and softmax, built from CBLAS calls per
 * (batch, head) and row-parallel softmax passes. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn/attention.h"

/* A: (T, T) = scale * Q: (T, d) @ K: (T, d)^T, rows strided by ldq, ldk. */
static void scores(float *A, const float *Q, int ldq, const float *K, int ldk, int T, int d, float scale) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, d, scale, Q, ldq, K, ldk, 0.0f, A, T);
}


/* In place: row t becomes softmax over columns lo..t (lo = attn_first_key),
 * zero elsewhere (causal, windowed). Logits are quantized over that span. */
static void causal_softmax(float *A, int T, int logit_bits, int window) {
    for (int t = 0; t < T; t++) {
        float *a = A + (size_t)t * T;
        const int lo = attn_first_key(t, window);
        if (logit_bits > 0) da_quantize_logit_row(a + lo, t + 1 - lo, logit_bits);
        float mx = a[lo];
        for (int j = lo + 1; j <= t; j++) mx = a[j] > mx ? a[j] : mx;
        float sum = 0.0f;
        for (int j = lo; j <= t; j++) {
            a[j] = expf(a[j] - mx);
            sum += a[j];
        }
        float inv = 1.0f / sum;
        for (int j = lo; j <= t; j++) a[j] *= inv;
        for (int j = 0; j < lo; j++) a[j] = 0.0f;
        for (int j = t + 1; j < T; j++) a[j] = 0.0f;
    }
}

/* dA: (T, T) -> dS = A * (c*dA - rowsum(c*dA * A)), the gradient through
 * the softmax of map A scaled by c (1 for A1, -lambda for A2). With crow
 * (DIFF2's per-row lambdas) row t's scale is -crow[t * crow_stride], not c. */
static void softmax_map_backward(float *dS, const float *dA, const float *A, float c, const float *crow,
                                 int crow_stride, int T) {
    for (int t = 0; t < T; t++) {
        const float *a = A + (size_t)t * T, *da = dA + (size_t)t * T;
        if (crow) c = -crow[(size_t)t * crow_stride];
        float *ds = dS + (size_t)t * T;
        float dot = 0.0f;
        for (int j = 0; j <= t; j++) dot += c * da[j] * a[j];
        for (int j = 0; j <= t; j++) ds[j] = a[j] * (c * da[j] - dot);
        for (int j = t + 1; j < T; j++) ds[j] = 0.0f;
    }
}

/* dQ: (T, d) = scale * dS @ K (overwrite); dK: (T, d) += scale * dS^T @ Q. */
static void map_input_grads(float *dQ, int ldq, float *dK, int ldk, const float *dS, const float *Q,
                            const float *K, int T, int d, float scale) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, T, scale, dS, T, K, ldk, 0.0f, dQ, ldq);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, d, T, scale, dS, T, Q, ldq, 1.0f, dK, ldk);
}

/* P = A1 - lambda * A2, (T, T). */
static void combine_maps(float *P, const float *A1, const float *A2, float lambda, int T) {
    size_t n = (size_t)T * T;
    for (size_t i = 0; i < n; i++) P[i] = A1[i] - lambda * A2[i];
}

static void diff_attention_forward(float *out, float *opre, float *sub_rstd, float *att, const float *q,
                            const float *k, const float *v, const float *subln_w, float lambda,
                            float lambda_init, const attn_shape *s, float *scratch) {
    const int B = s->B, T = s->T, H = s->n_heads, d = s->d, C = s->C, Ckv = s->Ckv;
    const int n_rep = H / s->n_kv_heads, d2 = 2 * d;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t TT = (size_t)T * T;
    /* One (batch, head) per iteration; BLAS runs single-threaded inside. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int bh = 0; bh < B * H; bh++) {
        {
            const int b = bh / H, h = bh % H, g = h / n_rep;
            float *P = scratch + (size_t)omp_get_thread_num() * TT;
            const float *Q1 = q + (size_t)b * T * C + (size_t)(2 * h) * d, *Q2 = Q1 + d;
            const float *K1 = k + (size_t)b * T * Ckv + (size_t)(2 * g) * d, *K2 = K1 + d;
            const float *V = v + (size_t)b * T * Ckv + (size_t)g * d2;
            float *A1 = att + ((size_t)b * H + h) * 2 * TT, *A2 = A1 + TT;
            scores(A1, Q1, C, K1, Ckv, T, d, scale);
            scores(A2, Q2, C, K2, Ckv, T, d, scale);
            causal_softmax(A1, T, s->logit_bits, s->window);
            causal_softmax(A2, T, s->logit_bits, s->window);
            combine_maps(P, A1, A2, lambda, T);
            /* opre[b, :, h] : (T, 2d) = P @ V */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d2, T, 1.0f, P, T, V, Ckv, 0.0f,
                        opre + (size_t)b * T * C + (size_t)h * d2, C);
        }
    }
    if (subln_w) head_norm_forward(out, sub_rstd, opre, subln_w, 1.0f - lambda_init, B * T * H, d2);
}

static void diff_attention_backward(float *dq, float *dk, float *dv, float *dsubln, float *dlambda,
                             const float *dout, const float *opre, const float *sub_rstd,
                             const float *att, const float *q, const float *k, const float *v,
                             const float *subln_w, float lambda, float lambda_init,
                             const attn_shape *s, float *scratch) {
    const int B = s->B, T = s->T, H = s->n_heads, d = s->d, C = s->C, Ckv = s->Ckv;
    const int n_rep = H / s->n_kv_heads, d2 = 2 * d;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t TT = (size_t)T * T;
    const int rows = B * T * H;
    float *dnorm = scratch + (size_t)s->n_threads * 4 * TT;
    float *dlam_part = dnorm + (size_t)B * T * C; /* (B, H) */
    const float *dopre = dout; /* without the head norm (subln_w NULL) */
    if (subln_w) {
        head_norm_backward(dnorm, dsubln, dout, opre, sub_rstd, subln_w, 1.0f - lambda_init, rows, d2);
        dopre = dnorm;
    }

    memset(dk, 0, (size_t)B * T * Ckv * sizeof(float));
    memset(dv, 0, (size_t)B * T * Ckv * sizeof(float));
    /* One (batch, KV group) per iteration: the heads that share dK/dV run in
     * order on one thread, so there is no race and the sums are fixed. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int bg = 0; bg < B * s->n_kv_heads; bg++) {
        const int b = bg / s->n_kv_heads, g = bg % s->n_kv_heads;
        float *P = scratch + (size_t)omp_get_thread_num() * 4 * TT, *dP = P + TT, *dS1 = dP + TT, *dS2 = dS1 + TT;
        for (int h = g * n_rep; h < (g + 1) * n_rep; h++) {
            size_t qoff = (size_t)b * T * C + (size_t)(2 * h) * d;
            size_t koff = (size_t)b * T * Ckv + (size_t)(2 * g) * d;
            size_t voff = (size_t)b * T * Ckv + (size_t)g * d2;
            const float *A1 = att + ((size_t)b * H + h) * 2 * TT, *A2 = A1 + TT;
            const float *dO = dopre + (size_t)b * T * C + (size_t)h * d2;
            /* dP: (T, T) = dO: (T, 2d) @ V^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, d2, 1.0f, dO, C, v + voff, Ckv, 0.0f,
                        dP, T);
            /* dV += P^T @ dO */
            combine_maps(P, A1, A2, lambda, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, d2, T, 1.0f, P, T, dO, C, 1.0f, dv + voff,
                        Ckv);
            /* d lambda = -sum(dP * A2), causal part only (A2 is zero above it). */
            double dl = 0.0;
            for (size_t i = 0; i < TT; i++) dl -= (double)dP[i] * A2[i];
            dlam_part[(size_t)b * H + h] = (float)dl;
            softmax_map_backward(dS1, dP, A1, 1.0f, NULL, 0, T);
            softmax_map_backward(dS2, dP, A2, -lambda, NULL, 0, T);
            map_input_grads(dq + qoff, C, dk + koff, Ckv, dS1, q + qoff, k + koff, T, d, scale);
            map_input_grads(dq + qoff + d, C, dk + koff + d, Ckv, dS2, q + qoff + d, k + koff + d, T, d, scale);
        }
    }
    double dlam = 0.0;
    for (int i = 0; i < B * H; i++) dlam += dlam_part[i];
    *dlambda = (float)dlam;
}

static void softmax_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                               const attn_shape *s) {
    const int B = s->B, T = s->T, H = s->n_heads, d = s->d, C = s->C, Ckv = s->Ckv;
    const int n_rep = H / s->n_kv_heads;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t TT = (size_t)T * T;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int bh = 0; bh < B * H; bh++) {
        {
            const int b = bh / H, h = bh % H, g = h / n_rep;
            const float *Q = q + (size_t)b * T * C + (size_t)h * d;
            const float *K = k + (size_t)b * T * Ckv + (size_t)g * d;
            const float *V = v + (size_t)b * T * Ckv + (size_t)g * d;
            float *A = att + ((size_t)b * H + h) * TT;
            scores(A, Q, C, K, Ckv, T, d, scale);
            causal_softmax(A, T, s->logit_bits, s->window);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, T, 1.0f, A, T, V, Ckv, 0.0f,
                        out + (size_t)b * T * C + (size_t)h * d, C);
        }
    }
}

static void softmax_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *att,
                                const float *q, const float *k, const float *v, const attn_shape *s,
                                float *scratch) {
    const int B = s->B, T = s->T, H = s->n_heads, d = s->d, C = s->C, Ckv = s->Ckv;
    const int n_rep = H / s->n_kv_heads;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t TT = (size_t)T * T;
    memset(dk, 0, (size_t)B * T * Ckv * sizeof(float));
    memset(dv, 0, (size_t)B * T * Ckv * sizeof(float));
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int bg = 0; bg < B * s->n_kv_heads; bg++) {
        const int b = bg / s->n_kv_heads, g = bg % s->n_kv_heads;
        float *dA = scratch + (size_t)omp_get_thread_num() * 4 * TT, *dS = dA + TT;
        for (int h = g * n_rep; h < (g + 1) * n_rep; h++) {
            size_t qoff = (size_t)b * T * C + (size_t)h * d;
            size_t kvoff = (size_t)b * T * Ckv + (size_t)g * d;
            const float *A = att + ((size_t)b * H + h) * TT;
            const float *dO = dout + qoff;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, d, 1.0f, dO, C, v + kvoff, Ckv, 0.0f, dA,
                        T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, d, T, 1.0f, A, T, dO, C, 1.0f, dv + kvoff,
                        Ckv);
            softmax_map_backward(dS, dA, A, 1.0f, NULL, 0, T);
            map_input_grads(dq + qoff, C, dk + kvoff, Ckv, dS, q + qoff, k + kvoff, T, d, scale);
        }
    }
}

static void diff2_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                             const float *lam, const attn_shape *s, float *scratch) {
    const int B = s->B, T = s->T, H = s->n_heads, d = s->d, C = s->C, Cq = 2 * C, Ckv = s->Ckv;
    const int n_rep = H / s->n_kv_heads;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t TT = (size_t)T * T;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H, g = h / n_rep;
        float *P = scratch + (size_t)omp_get_thread_num() * 4 * TT;
        const float *Q1 = q + (size_t)b * T * Cq + (size_t)(2 * h) * d, *Q2 = Q1 + d;
        const float *K = k + (size_t)b * T * Ckv + (size_t)g * d, *V = v + (size_t)b * T * Ckv + (size_t)g * d;
        const float *lam_h = lam + (size_t)b * T * H + h; /* row t at lam_h[t * H] */
        float *A1 = att + ((size_t)b * H + h) * 2 * TT, *A2 = A1 + TT;
        scores(A1, Q1, Cq, K, Ckv, T, d, scale);
        scores(A2, Q2, Cq, K, Ckv, T, d, scale);
        causal_softmax(A1, T, s->logit_bits, s->window);
        causal_softmax(A2, T, s->logit_bits, s->window);
        for (int t = 0; t < T; t++) {
            const float l = lam_h[(size_t)t * H];
            for (int j = 0; j < T; j++) P[(size_t)t * T + j] = A1[(size_t)t * T + j] - l * A2[(size_t)t * T + j];
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, T, 1.0f, P, T, V, Ckv, 0.0f,
                    out + (size_t)b * T * C + (size_t)h * d, C);
    }
}

static void diff2_attention_backward(float *dq, float *dk, float *dv, float *dlam, const float *dout, const float *att,
                              const float *q, const float *k, const float *v, const float *lam,
                              const attn_shape *s, float *scratch) {
    const int B = s->B, T = s->T, H = s->n_heads, d = s->d, C = s->C, Cq = 2 * C, Ckv = s->Ckv;
    const int n_rep = H / s->n_kv_heads;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t TT = (size_t)T * T;
    memset(dk, 0, (size_t)B * T * Ckv * sizeof(float));
    memset(dv, 0, (size_t)B * T * Ckv * sizeof(float));
    /* One (batch, KV group) per iteration, as in diff_attention_backward. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int bg = 0; bg < B * s->n_kv_heads; bg++) {
        const int b = bg / s->n_kv_heads, g = bg % s->n_kv_heads;
        float *P = scratch + (size_t)omp_get_thread_num() * 4 * TT, *dP = P + TT, *dS1 = dP + TT, *dS2 = dS1 + TT;
        const size_t kvoff = (size_t)b * T * Ckv + (size_t)g * d;
        for (int h = g * n_rep; h < (g + 1) * n_rep; h++) {
            const size_t qoff = (size_t)b * T * Cq + (size_t)(2 * h) * d;
            const float *A1 = att + ((size_t)b * H + h) * 2 * TT, *A2 = A1 + TT;
            const float *dO = dout + (size_t)b * T * C + (size_t)h * d;
            const float *lam_h = lam + (size_t)b * T * H + h;
            float *dlam_h = dlam + (size_t)b * T * H + h;
            /* dP: (T, T) = dO: (T, d) @ V^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, d, 1.0f, dO, C, v + kvoff, Ckv, 0.0f, dP, T);
            for (int t = 0; t < T; t++) {
                const float l = lam_h[(size_t)t * H];
                const float *a1 = A1 + (size_t)t * T, *a2 = A2 + (size_t)t * T, *dp = dP + (size_t)t * T;
                float *p = P + (size_t)t * T;
                double dl = 0.0; /* d lam_t = -sum_j dP[t, j] A2[t, j] */
                for (int j = 0; j < T; j++) {
                    p[j] = a1[j] - l * a2[j];
                    dl -= (double)dp[j] * a2[j];
                }
                dlam_h[(size_t)t * H] = (float)dl;
            }
            /* dV += P^T @ dO */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, d, T, 1.0f, P, T, dO, C, 1.0f, dv + kvoff, Ckv);
            softmax_map_backward(dS1, dP, A1, 1.0f, NULL, 0, T);
            softmax_map_backward(dS2, dP, A2, 0.0f, lam_h, H, T);
            /* both maps read the one K: their dK add up */
            map_input_grads(dq + qoff, Cq, dk + kvoff, Ckv, dS1, q + qoff, k + kvoff, T, d, scale);
            map_input_grads(dq + qoff + d, Cq, dk + kvoff, Ckv, dS2, q + qoff + d, k + kvoff, T, d, scale);
        }
    }
}
