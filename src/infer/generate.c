/* Incremental decoding with a KV cache: one token at a time, the same math
 * as the batched da_forward (transformer.c + attn/attention.c), but each
 * position's keys and values are computed once and kept.
 *
 * Per layer the cache holds K and V: (max_T, Ckv), K with RoPE already
 * applied at its own position. A step at position pos = len:
 *   x = emb[token]
 *   per layer: xn = rmsnorm(x); q = Wq xn, k = Wk xn, v = Wv xn; RoPE(q, k, pos);
 *              append k, v; o = attention(q, K[0..pos], V[0..pos]);
 *              x += Wo o; x += W2 (silu(W1 rmsnorm(x)) * W3 rmsnorm(x))
 *   logits = Wout rmsnorm(x)
 * Head layouts are those documented in attn/attention.h. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attention.h"
#include "diffattn/generate.h"
#include "ops/ops.h"


/* Threading: the matrix-vector products are left to the BLAS's own threads.
 * The attention stays serial: when this project linked the pthreads
 * OpenBLAS, an OpenMP region per step left its workers spinning against the
 * BLAS threads, and decoding got 2-20x slower (measured on 2 cores, 256 and
 * 2048 positions). The build now requires the OpenMP OpenBLAS; a parallel
 * decode attention has not been measured since. RoPE is applied here rather
 * than through rope_apply for the same reason. */

struct da_kv_cache {
    da_config cfg;
    int max_T; /* positions the cache can hold */
    int len;   /* positions filled; the next token goes at position len */
    int d, Ckv, maps; /* sub-head size, KV width, maps per head (DIFF 2, softmax 1) */
    float *k, *v;     /* (L, max_T, Ckv) each; k after RoPE */
    float *rope_cos, *rope_sin; /* (max_T, d/2) */
    /* one-token scratch */
    float *x;        /* (C) residual stream */
    float *xn;       /* (C) normed input of a projection */
    float *q;        /* (C) after RoPE */
    float *attn_out; /* (C) input of out_proj */
    float *h1, *h3, *gate; /* (F) each */
    float *att;      /* (H, maps, max_T) attention weights, one row per head and map */
    float *logits;   /* (V) */
    float *pool;     /* one allocation behind every float array above */
};

da_status da_kv_create(da_kv_cache **out, const da_config *cfg, int max_T) {
    *out = NULL;
    da_status st = da_config_validate(cfg);
    if (st.code) return st;
    if (max_T <= 0 || max_T > cfg->max_seq_len)
        return da_errorf("KV cache length %d is out of range (1..max_seq_len=%d); generate fewer tokens "
                         "(--max-new) or use a model with a larger max_seq_len",
                         max_T, cfg->max_seq_len);
    const size_t C = cfg->dim, F = cfg->ffn_hidden, V = cfg->vocab_size, L = cfg->n_layers;
    const size_t H = cfg->n_heads, Ckv = C / (H / cfg->n_kv_heads), d = da_head_dim(cfg);
    const size_t T = max_T, maps = cfg->arch == DA_ARCH_DIFF ? 2 : 1;
    const size_t total = 2 * L * T * Ckv + T * d + 4 * C + 3 * F + H * maps * T + V;

    da_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return da_errorf("out of memory allocating the KV cache");
    kv->pool = malloc(total * sizeof(float));
    if (!kv->pool) {
        free(kv);
        return da_errorf("out of memory allocating the KV cache for %d positions (%.1f MB); "
                         "generate fewer tokens (--max-new)",
                         max_T, (double)total * 4 / 1e6);
    }
    kv->cfg = *cfg;
    kv->max_T = max_T;
    kv->len = 0;
    kv->d = (int)d;
    kv->Ckv = (int)Ckv;
    kv->maps = (int)maps;
    float *p = kv->pool;
#define TAKE(n) (p += (n), p - (n))
    kv->k = TAKE(L * T * Ckv);
    kv->v = TAKE(L * T * Ckv);
    kv->rope_cos = TAKE(T * d / 2);
    kv->rope_sin = TAKE(T * d / 2);
    kv->x = TAKE(C);
    kv->xn = TAKE(C);
    kv->q = TAKE(C);
    kv->attn_out = TAKE(C);
    kv->h1 = TAKE(F);
    kv->h3 = TAKE(F);
    kv->gate = TAKE(F);
    kv->att = TAKE(H * maps * T);
    kv->logits = TAKE(V);
#undef TAKE
    da_rope_tables(cfg, kv->rope_cos, kv->rope_sin, max_T);
    *out = kv;
    return da_ok();
}

void da_kv_free(da_kv_cache *kv) {
    if (!kv) return;
    free(kv->pool);
    free(kv);
}

void da_kv_reset(da_kv_cache *kv) {
    if (kv) kv->len = 0;
}

/* y: (out) = W: (out, in) @ x: (in), overwritten (beta 0) or added to (beta 1). */
static void matvec(float *y, const float *W, const float *x, int out, int in, float beta) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, W, in, x, 1, beta, y, 1);
}

/* out: (C) = x * rsqrt(mean(x^2) + eps) * w; as rmsnorm_forward for one row. */
static void rmsnorm_row(float *out, const float *x, const float *w, int C, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < C; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / C + eps);
    for (int i = 0; i < C; i++) out[i] = x[i] * r * w[i];
}

/* Rotates, in place, each d-wide sub-head of x: (n_sub*d) by one position's
 * table row; rope_apply's forward for B = T = 1, without its parallel region. */
static void rope_row(float *x, const float *cos_row, const float *sin_row, int n_sub, int d) {
    const int half = d / 2;
    for (int h = 0; h < n_sub; h++) {
        float *v = x + (size_t)h * d;
        for (int j = 0; j < half; j++) {
            float x0 = v[2 * j], x1 = v[2 * j + 1];
            v[2 * j] = x0 * cos_row[j] - x1 * sin_row[j];
            v[2 * j + 1] = x0 * sin_row[j] + x1 * cos_row[j];
        }
    }
}

/* a: (n) = softmax(scale * Q: (d) . K rows 0..n-1, each ldk apart). */
static void score_softmax(float *a, const float *Q, const float *K, int ldk, int n, int d, float scale,
                          int logit_bits) {
    float mx = -INFINITY;
    for (int t = 0; t < n; t++) {
        const float *kr = K + (size_t)t * ldk;
        float s = 0.0f;
        for (int i = 0; i < d; i++) s += Q[i] * kr[i];
        a[t] = scale * s;
    }
    if (logit_bits > 0) da_quantize_logit_row(a, n, logit_bits);
    for (int t = 0; t < n; t++) mx = a[t] > mx ? a[t] : mx;
    float sum = 0.0f;
    for (int t = 0; t < n; t++) {
        a[t] = expf(a[t] - mx);
        sum += a[t];
    }
    float inv = 1.0f / sum;
    for (int t = 0; t < n; t++) a[t] *= inv;
}

/* o: (w) = sum_t p[t] * V row t (rows ldv apart), t in 0..n-1. */
static void weighted_rows(float *o, const float *p, const float *V, int ldv, int n, int w) {
    for (int i = 0; i < w; i++) o[i] = 0.0f;
    for (int t = 0; t < n; t++) {
        const float *vr = V + (size_t)t * ldv;
        const float pt = p[t];
        for (int i = 0; i < w; i++) o[i] += pt * vr[i];
    }
}

/* One layer's attention for the query kv->q at position pos, over cache
 * rows 0..pos of layer l; writes kv->attn_out: (C). */
static void attend(da_kv_cache *kv, int l, int pos, float lambda, float lambda_init, const float *subln_w,
                   int logit_bits) {
    const da_config *c = &kv->cfg;
    const int H = c->n_heads, d = kv->d, Ckv = kv->Ckv, maps = kv->maps;
    const int n_rep = H / c->n_kv_heads, n = pos + 1, T = kv->max_T;
    const float scale = 1.0f / sqrtf((float)d);
    const float *Kl = kv->k + (size_t)l * T * Ckv, *Vl = kv->v + (size_t)l * T * Ckv;
    const int diff = c->arch == DA_ARCH_DIFF;
    for (int h = 0; h < H; h++) {
        const int g = h / n_rep;
        float *A1 = kv->att + (size_t)h * maps * T;
        if (diff) {
            /* head h: Q1, Q2 = q sub-heads 2h, 2h+1; K1, K2 = k sub-heads 2g, 2g+1;
             * V = v columns [2d*g, 2d*(g+1)). */
            const int d2 = 2 * d;
            float *A2 = A1 + T;
            const float *Q1 = kv->q + (size_t)(2 * h) * d, *Q2 = Q1 + d;
            const float *K1 = Kl + (size_t)(2 * g) * d, *K2 = K1 + d;
            score_softmax(A1, Q1, K1, Ckv, n, d, scale, logit_bits);
            score_softmax(A2, Q2, K2, Ckv, n, d, scale, logit_bits);
            for (int t = 0; t < n; t++) A1[t] = A1[t] - lambda * A2[t]; /* P = A1 - lambda A2 */
            float *o = kv->attn_out + (size_t)h * d2;
            weighted_rows(o, A1, Vl + (size_t)g * d2, Ckv, n, d2);
            /* RMSNorm over the head's 2d, shared weight, then the (1 - lambda_init) scale. */
            float ss = 0.0f;
            for (int i = 0; i < d2; i++) ss += o[i] * o[i];
            const float r = 1.0f / sqrtf(ss / d2 + DA_SUBLN_EPS), post = 1.0f - lambda_init;
            for (int i = 0; i < d2; i++) o[i] = o[i] * r * subln_w[i] * post;
        } else {
            /* head h: q columns [d*h, d*(h+1)); K, V columns [d*g, d*(g+1)). */
            score_softmax(A1, kv->q + (size_t)h * d, Kl + (size_t)g * d, Ckv, n, d, scale, logit_bits);
            weighted_rows(kv->attn_out + (size_t)h * d, A1, Vl + (size_t)g * d, Ckv, n, d);
        }
    }
}

/* The fields that fix the shapes of the weights and of the cache. */
static int same_shape(const da_config *a, const da_config *b) {
    return a->arch == b->arch && a->dim == b->dim && a->n_layers == b->n_layers && a->n_heads == b->n_heads &&
           a->n_kv_heads == b->n_kv_heads && a->vocab_size == b->vocab_size && a->ffn_hidden == b->ffn_hidden &&
           a->rope_theta == b->rope_theta && a->rope_freq == b->rope_freq && a->rope_scaling == b->rope_scaling &&
           a->rope_factor == b->rope_factor && a->rope_low_freq_factor == b->rope_low_freq_factor &&
           a->rope_high_freq_factor == b->rope_high_freq_factor && a->rope_original_max_pos == b->rope_original_max_pos;
}

/* An error unless kv was created for a model shaped like c. */
static da_status check_cache_shape(const da_config *c, const da_kv_cache *kv) {
    if (same_shape(c, &kv->cfg)) return da_ok();
    return da_errorf("KV cache was created for a different model (dim %d, %d layers, %d/%d heads, "
                     "vocab %d, arch %s; the model has dim %d, %d layers, %d/%d heads, vocab %d, arch %s); "
                     "create it from the model's config",
                     kv->cfg.dim, kv->cfg.n_layers, kv->cfg.n_heads, kv->cfg.n_kv_heads, kv->cfg.vocab_size,
                     da_arch_name(kv->cfg.arch), c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size,
                     da_arch_name(c->arch));
}

da_status da_decode_step(const da_model *m, da_kv_cache *kv, int token, const float **logits) {
    if (logits) *logits = NULL;
    const da_config *c = &m->cfg;
    da_status st = check_cache_shape(c, kv);
    if (st.code) return st;
    if (token < 0 || token >= c->vocab_size)
        return da_errorf("token %d is out of range (0..%d for vocab_size %d)", token, c->vocab_size - 1,
                         c->vocab_size);
    if (kv->len >= kv->max_T)
        return da_errorf("KV cache is full: it holds %d positions and all are used; use a larger cache "
                         "(a larger --max-new, at most max_seq_len=%d, or a model with a larger max_seq_len)",
                         kv->max_T, c->max_seq_len);

    const int C = c->dim, F = c->ffn_hidden, V = c->vocab_size, d = kv->d, Ckv = kv->Ckv;
    const int pos = kv->len, T = kv->max_T, half = d / 2;
    const float *cos_row = kv->rope_cos + (size_t)pos * half, *sin_row = kv->rope_sin + (size_t)pos * half;
    float *x = kv->x, *xn = kv->xn;

    memcpy(x, m->w.tok_embeddings + (size_t)token * C, (size_t)C * sizeof(float));
    for (int l = 0; l < c->n_layers; l++) {
        const da_layer_weights *w = &m->w.layers[l];
        float *kr = kv->k + ((size_t)l * T + pos) * Ckv, *vr = kv->v + ((size_t)l * T + pos) * Ckv;

        rmsnorm_row(xn, x, w->attention_norm, C, c->norm_eps);
        matvec(kv->q, w->wq, xn, C, C, 0.0f);
        matvec(kr, w->wk, xn, Ckv, C, 0.0f);
        matvec(vr, w->wv, xn, Ckv, C, 0.0f);
        rope_row(kv->q, cos_row, sin_row, C / d, d);
        rope_row(kr, cos_row, sin_row, Ckv / d, d);
        if (c->arch == DA_ARCH_DIFF)
            attend(kv, l, pos, da_model_lambda(m, l), da_lambda_init(l), w->subln, m->attn_logit_bits);
        else
            attend(kv, l, pos, 0.0f, 0.0f, NULL, m->attn_logit_bits);
        matvec(x, w->wo, kv->attn_out, C, C, 1.0f); /* x += Wo o */

        rmsnorm_row(xn, x, w->ffn_norm, C, c->norm_eps);
        matvec(kv->h1, w->w1, xn, F, C, 0.0f);
        matvec(kv->h3, w->w3, xn, F, C, 0.0f);
        for (int i = 0; i < F; i++) {
            float sig = 1.0f / (1.0f + expf(-kv->h1[i]));
            kv->gate[i] = kv->h1[i] * sig * kv->h3[i];
        }
        matvec(x, w->w2, kv->gate, C, F, 1.0f); /* x += W2 gate */
    }
    rmsnorm_row(xn, x, m->w.norm, C, c->norm_eps);
    matvec(kv->logits, m->w.output, xn, V, C, 0.0f);
    kv->len = pos + 1;
    if (logits) *logits = kv->logits;
    return da_ok();
}

da_status da_kv_prefill(da_model *m, da_kv_cache *kv, da_acts *a, const int *tokens, int n, const float **logits) {
    if (logits) *logits = NULL;
    const da_config *c = &m->cfg;
    da_status st = check_cache_shape(c, kv);
    if (st.code) return st;
    if (kv->len != 0) return da_errorf("da_kv_prefill needs an empty KV cache (da_kv_reset it first)");
    if (n < 1 || n > kv->max_T)
        return da_errorf("a prompt of %d tokens does not fit the KV cache of %d positions", n, kv->max_T);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return da_errorf("token %d at position %d is out of range (0..%d for vocab_size %d)", tokens[i], i,
                             c->vocab_size - 1, c->vocab_size);
    da_forward(m, a, tokens, NULL, 1, n);
    const size_t Ckv = kv->Ckv, T = kv->max_T;
    for (int l = 0; l < c->n_layers; l++) {
        const float *q, *k;
        da_acts_qk(a, l, &q, &k);
        memcpy(kv->k + (size_t)l * T * Ckv, k, (size_t)n * Ckv * sizeof(float));
        memcpy(kv->v + (size_t)l * T * Ckv, da_acts_v(a, l), (size_t)n * Ckv * sizeof(float));
    }
    memcpy(kv->logits, da_acts_logits(a) + (size_t)(n - 1) * c->vocab_size, (size_t)c->vocab_size * sizeof(float));
    kv->len = n;
    if (logits) *logits = kv->logits;
    return da_ok();
}
