/* The inference engine: one forward pass over typed weights and a KV cache,
 * for prompts (n tokens a call) and batch-1 decoding alike. Per layer:
 *   xn = rmsnorm(x); q, k, v = xn Wq, xn Wk, xn Wv; RoPE(q, k) at their positions;
 *   append k, v to the cache; o = attention(q, cached K, V); x += o Wo;
 *   x += (silu(xn2 W1) * xn2 W3) W2 with xn2 = rmsnorm(x)
 * then logits = rmsnorm(x) Wout. Head layouts are those of attn/attention.h.
 * A prompt into an empty f32 cache with exact logits takes the fused flash
 * kernel the training forward uses; everything else (decoding, a prompt
 * after earlier tokens, an int8 cache, quantized logits) scores each query
 * against the cache row by row. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/engine.h"
#include "infer/session.h"
#include "ops/ops.h"

/* ---------------------------------------------------------------- forward pieces */

/* Readies the input X: (n, w) of one matmul site: statistics, then the int8
 * rows (integer modes; for a prompt also their float values, once for all
 * the site's matmuls) or the bf16-rounded copy. */
static void prep_site(da_session *s, const float *X, int n, int w, int site) {
    s->site_x = X;
    s->site_w = w;
    s->site_xd = NULL;
    if (s->stats) {
        da_qstats *st = s->stats;
        double *ch = st->chan + st->chan_off[site], *ch2 = st->chan2 + st->chan_off[site];
        float mx = st->absmax[site];
        for (int t = 0; t < n; t++)
            for (int i = 0; i < w; i++) {
                const float v = X[(size_t)t * w + i], a = fabsf(v);
                mx = a > mx ? a : mx;
                ch[i] += a;
                ch2[i] += (double)v * v;
            }
        st->absmax[site] = mx;
    }
    switch (s->o.act) {
    case DA_ACTQ_Q8:
    case DA_ACTQ_INT8_DYNAMIC:
    case DA_ACTQ_INT8_STATIC: {
        const da_act_scale_mode mode = s->o.act == DA_ACTQ_Q8             ? DA_ACT_BLOCK
                                       : s->o.act == DA_ACTQ_INT8_DYNAMIC ? DA_ACT_TOKEN
                                                                          : DA_ACT_STATIC;
        const float amax = s->q->act_absmax ? s->q->act_absmax[site] : 0.0f;
        const int prompt = n >= PREFILL_SGEMM_MIN && s->wdeq;
#pragma omp parallel for schedule(static) if ((long)n * w > s->small_work / 64)
        for (int t = 0; t < n; t++) {
            da_qact a = {w, s->aq + (size_t)t * w, s->ad + (size_t)t * w / 32, s->asum + (size_t)t * w / 32};
            s->ops->quantize_act(&a, X + (size_t)t * w, w, mode, amax);
            if (!prompt) continue;
            float *o = s->xr + (size_t)t * w;
            for (int b = 0; b < w / 32; b++)
#pragma omp simd
                for (int i = 0; i < 32; i++) o[b * 32 + i] = (float)a.q[b * 32 + i] * a.d[b];
        }
        if (prompt) s->site_xd = s->xr;
        break;
    }
    case DA_ACTQ_BF16:
        for (size_t i = 0; i < (size_t)n * w; i++) s->xr[i] = da_bf16_round(X[i]);
        s->site_x = s->xr;
        break;
    case DA_ACTQ_F32: break;
    }
}

static float fdot(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* out: (n, W->rows) (+)= prepared site input (n, W->cols) @ W^T. Threads over
 * the output rows; each weight row is read once for all n tokens. */
static void qmatmul(da_session *s, float *out, const da_qtensor *W, int n, int accumulate) {
    const int rows = W->rows, cols = W->cols;
    const int integer = !da_qtype_is_float(W->type) && s->o.act <= DA_ACTQ_INT8_STATIC;
    if (W->type == DA_QT_F32 && n == 1 && (long)rows * cols <= s->small_work) {
        /* decoding a small matrix: one thread, no parallel region to wake */
        const float *Wf = (const float *)(const void *)W->data;
        for (int r = 0; r < rows; r++) {
            const float v = fdot(Wf + (size_t)r * cols, s->site_x, cols);
            out[r] = accumulate ? out[r] + v : v;
        }
        return;
    }
    if (W->type == DA_QT_F32 && n == 1) {
        /* decoding: a matrix-vector product (OpenBLAS's sgemm packs the whole matrix even for one row) */
        cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, (const float *)(const void *)W->data, cols,
                    s->site_x, 1, accumulate ? 1.0f : 0.0f, out, 1);
        return;
    }
    if (W->type == DA_QT_F32 && !integer) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, s->site_x, cols,
                    (const float *)(const void *)W->data, cols, accumulate ? 1.0f : 0.0f, out, rows);
        return;
    }
    /* int8 dots for decoding; for a prompt too where the level has a many-row kernel for the type (fewer
     * instructions than dequantizing the matrix for one sgemm: 1.4x at 128 tokens, counted by callgrind) */
    if (integer && (!s->site_xd || (s->ops->qgemm_tiled >> W->type & 1u))) {
        for (int t = 0; t < n; t++)
            s->xs[t] = (da_qact){cols, s->aq + (size_t)t * cols, s->ad + (size_t)t * cols / 32,
                                 s->asum + (size_t)t * cols / 32};
        da_engine_qmatmul_int(s->pool, s->ops, W, s->xs, n, out, accumulate);
        return;
    }
    if (!integer && n == 1 && (W->type == DA_QT_F16 || W->type == DA_QT_BF16)) {
        da_engine_matmul_half(s->pool, s->ops, W, s->site_x, n, out, accumulate);
        return;
    }
    const float *X = s->site_x;
    if ((!integer && n > 1) || (integer && s->site_xd)) {
        /* a batch: dequantize the matrix once, then one sgemm (int8
         * activations enter as their float values, from prep_site) */
        float *Wf = s->wdeq;
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++) da_qtensor_dequantize_row(W, r, Wf + (size_t)r * cols);
        if (integer) X = s->site_xd;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, X, cols, Wf, cols,
                    accumulate ? 1.0f : 0.0f, out, rows);
        return;
    }
#pragma omp parallel for schedule(static) if ((long)rows * cols * n > s->small_work)
    for (int r = 0; r < rows; r++) {
        float *deq = s->deq + (size_t)omp_get_thread_num() * s->maxw;
        /* a packed row unpacked into deq's bytes: in this branch the activations are int8 (deq is unused) */
        const unsigned char *wr = integer ? da_qtensor_row(W, r, (unsigned char *)deq) : NULL;
        if (!integer) da_qtensor_dequantize_row(W, r, deq);
        for (int t = 0; t < n; t++) {
            float v;
            if (integer) {
                da_qact a = {cols, s->aq + (size_t)t * cols, s->ad + (size_t)t * cols / 32,
                             s->asum + (size_t)t * cols / 32};
                v = s->ops->vec_dot(W->type, wr, &a, cols);
            } else {
                v = fdot(deq, X + (size_t)t * cols, cols);
            }
            float *o = out + (size_t)t * rows + r;
            *o = accumulate ? *o + v : v;
        }
    }
}

/* W goes through qmatmul's integer kernels on the team (the path qmatmul_many merges). */
static int team_integer(const da_session *s, const da_qtensor *W) {
    return !da_qtype_is_float(W->type) && s->o.act <= DA_ACTQ_INT8_STATIC &&
           (!s->site_xd || (s->ops->qgemm_tiled >> W->type & 1u));
}

/* out[i] = the prepared site's n rows @ W[i]^T for m matrices of that input: those of the team's integer path
 * in one team step (one wake-up and join for all, qmatmul's products bit for bit), the others through
 * one_matmul (qmatmul, or batch_matmul for a batch of sessions). */
static void qmatmul_many(da_session *s, float *const *out, const da_qtensor *const *W, int m, int n,
                         void (*one_matmul)(da_session *, float *, const da_qtensor *, int, int)) {
    const da_qtensor *tw[ATTN_MAX_TENSORS + 2];
    float *to[ATTN_MAX_TENSORS + 2];
    int k = 0, cols = 0;
    for (int i = 0; i < m; i++)
        if (team_integer(s, W[i])) tw[k] = W[i], to[k++] = out[i], cols = W[i]->cols;
        else one_matmul(s, out[i], W[i], n, 0);
    if (!k) return;
    for (int t = 0; t < n; t++)
        s->xs[t] = (da_qact){cols, s->aq + (size_t)t * cols, s->ad + (size_t)t * cols / 32, s->asum + (size_t)t * cols / 32};
    da_engine_qmatmul_many(s->pool, s->ops, k, tw, to, s->xs, n, 0);
}

static void rmsnorm_rows(const da_session *s, float *out, const float *x, const float *w, int n, int C) {
    for (int t = 0; t < n; t++) s->ops->rmsnorm_row(out + (size_t)t * C, x + (size_t)t * C, w, C, s->cfg.norm_eps);
}

/* Rotates n rows of width floats (d-wide sub-heads) at positions pos0..;
 * a ring session's positions past the tables get their angles computed. */
static void rope_rows(float *x, const da_session *s, int pos0, int n, int width) {
    const int d = s->d, half = d / 2;
    for (int t = 0; t < n; t++) {
        const int pos = pos0 + t;
        const float *cr = s->rope_cos + (size_t)pos * half, *sr = s->rope_sin + (size_t)pos * half;
        if (pos >= s->max_T) {
            da_rope_at(&s->cfg, pos, s->rope_far, s->rope_far + half);
            cr = s->rope_far, sr = s->rope_far + half;
        }
        s->ops->rope_row(x + (size_t)t * width, cr, sr, width / d, d, 0);
    }
}

/* Stores the n new K and V rows of layer l at positions len.. (int8: a scale
 * per kb-wide block, absmax / 127), in their rows of the cache. */
static void kv_store(da_session *s, int l, int n) {
    const size_t T = s->slots, Ckv = s->Ckv, hd = s->d;
    for (int t = 0; t < n; t++) {
        const size_t row = (size_t)l * T + (size_t)(s->len + t) % T;
        const float *k = s->proj[s->view_k] + (size_t)t * Ckv, *v = s->proj[s->view_v] + (size_t)t * Ckv;
        for (size_t j = 0; !s->o.kv_int8 && j < Ckv / hd; j++) { /* block j of position p: ((l Ckv/d + j) T + p) d */
            const size_t at = (((size_t)l * (Ckv / hd) + j) * T + (s->len + t) % T) * hd;
            if (s->o.kv_f16) {
                s->ops->half_from_f32(k + j * hd, (int64_t)hd, s->kh + at);
                s->ops->half_from_f32(v + j * hd, (int64_t)hd, s->vh + at);
            } else {
                memcpy(s->kf + at, k + j * hd, hd * sizeof(float));
                memcpy(s->vf + at, v + j * hd, hd * sizeof(float));
            }
        }
        if (!s->o.kv_int8) continue;
        for (int b = 0; b < s->nkb; b++)
            for (int which = 0; which < 2; which++) {
                const float *src = (which ? v : k) + (size_t)b * s->kb;
                int8_t *dst = (which ? s->v8 : s->k8) + row * Ckv + (size_t)b * s->kb;
                float amax = 0.0f;
                for (int i = 0; i < s->kb; i++) amax = fmaxf(amax, fabsf(src[i]));
                const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
                for (int i = 0; i < s->kb; i++) {
                    float r = roundf(src[i] * id);
                    dst[i] = (int8_t)(r == r ? r : 0.0f);
                }
                (which ? s->vs : s->ks)[row * s->nkb + b] = d;
            }
    }
}

/* a: (n) = softmax(scale * Q: (d) . the keys of positions p0..p0+n-1 at column col of layer l). */
static void scores(const da_session *s, float *a, const float *Q, int l, int col, int p0, int n, float scale) {
    const size_t T = s->slots, Ckv = s->Ckv;
    const int d = s->d, kb = s->kb;
    float mx = -INFINITY;
    /* f16 and f32 caches: the level's vector kernels over runs of consecutive cache rows (a ring wraps once) */
    const int type = s->o.kv_f16 ? DA_QT_F16 : DA_QT_F32, es = s->o.kv_f16 ? 2 : 4;
    const unsigned char *keys = s->o.kv_f16 ? (const unsigned char *)s->kh : (const unsigned char *)s->kf;
    for (int t = 0, len; !s->o.kv_int8 && t < n; t += len) {
        const size_t row = (size_t)(p0 + t) % T;
        len = n - t < (int)(T - row) ? n - t : (int)(T - row);
        const unsigned char *kr = keys + ((((size_t)l * (Ckv / d) + (size_t)col / d) * T + row) * d) * es;
        s->ops->half_gemm(type, kr, (size_t)d * es, 0, len, d, Q, d, 1, a + t, len, 0);
        for (int i = t; i < t + len; i++) a[i] *= scale;
    }
    for (int t = 0; s->o.kv_int8 && t < n; t++) {
        const size_t base = (size_t)l * T + (size_t)(p0 + t) % T - (size_t)t; /* base + t: the row of position p0 + t */
        float dot = 0.0f;
        const int8_t *kr = s->k8 + (base + t) * Ckv + col;
        const float *sc = s->ks + (base + t) * s->nkb + col / kb;
        for (int b = 0; b < d / kb; b++) {
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int i = 0; i < kb; i++) acc += Q[b * kb + i] * (float)kr[b * kb + i];
            dot += sc[b] * acc;
        }
        a[t] = scale * dot;
    }
    if (s->o.logit_bits > 0) da_quantize_logit_row(a, n, s->o.logit_bits);
    for (int t = 0; t < n; t++) mx = a[t] > mx ? a[t] : mx;
    float sum = 0.0f;
    for (int t = 0; t < n; t++) {
        a[t] = expf(a[t] - mx);
        sum += a[t];
    }
    const float inv = 1.0f / sum;
    for (int t = 0; t < n; t++) a[t] *= inv;
}

/* o: (w) = sum_t p[t] * the value of position p0 + t at column col of layer l. */
static void mix_values(const da_session *s, float *o, const float *p, int l, int col, int p0, int n, int w) {
    const size_t T = s->slots, Ckv = s->Ckv;
    for (int i = 0; i < w; i++) o[i] = 0.0f;
    const int type = s->o.kv_f16 ? DA_QT_F16 : DA_QT_F32, es = s->o.kv_f16 ? 2 : 4;
    const unsigned char *vals = s->o.kv_f16 ? (const unsigned char *)s->vh : (const unsigned char *)s->vf;
    const size_t d = s->d;
    for (int t = 0, len; !s->o.kv_int8 && t < n; t += len) {
        const size_t row = (size_t)(p0 + t) % T;
        len = n - t < (int)(T - row) ? n - t : (int)(T - row);
        for (size_t j = (size_t)col / d; j < (size_t)(col + w) / d; j++) /* the d-wide blocks of the w columns */
            s->ops->half_axpy(type, vals + (((size_t)l * (Ckv / d) + j) * T + row) * d * es, d * es, len, p + t,
                              (int64_t)d, o + (j * d - (size_t)col));
    }
    for (int t = 0; s->o.kv_int8 && t < n; t++) {
        const size_t base = (size_t)l * T + (size_t)(p0 + t) % T - (size_t)t;
        const int8_t *vr = s->v8 + (base + t) * Ckv + col;
        const float *sc = s->vs + (base + t) * s->nkb + col / s->kb;
        for (int b = 0; b < w / s->kb; b++) {
            const float ps = p[t] * sc[b];
#pragma omp simd
            for (int i = 0; i < s->kb; i++) o[b * s->kb + i] += ps * (float)vr[b * s->kb + i];
        }
    }
}

/* The cache as the variants' decode steps see it. */
static void kv_scores(const void *self, float *a, const float *Q, int col, int p0, int n, float scale) {
    const da_session *s = self;
    scores(s, a, Q, s->kv_layer, col, p0, n, scale);
}

static void kv_mix(const void *self, float *o, const float *p, int col, int p0, int n, int w) {
    const da_session *s = self;
    mix_values(s, o, p, s->kv_layer, col, p0, n, w);
}

/* One (token t, head h) job of attend, job = t * H + h, through the variant; ith picks the thread's scratch. */
static void attend_job(da_session *s, const da_qlayer *L, int l, int job, int ith) {
    const da_config *c = &s->cfg;
    const int H = c->n_heads, d = s->d, n_rep = H / c->n_kv_heads, C = s->Cao, T = s->slots;
    const int q = s->view_q, Cq = s->spec[q].rows;
    const attn_kv kv = {s, kv_scores, kv_mix};
    /* query position pos sees keys p0 .. pos: len of them */
    const int t = job / H, h = job % H, pos = s->len + t;
    const int p0 = attn_first_key(pos, c->window);
    attn_decode_head x = {&kv,
                          c,
                          L->attn_f32,
                          L->attn_consts,
                          l,
                          h,
                          h / n_rep,
                          d,
                          p0,
                          pos - p0 + 1,
                          T,
                          s->proj[q] + (size_t)t * Cq,
                          s->view_lam >= 0 ? s->proj[s->view_lam] + (size_t)t * H : NULL,
                          s->att + (size_t)ith * 2 * T,
                          s->ao + (size_t)t * C};
    s->var->decode_head(&x);
}

typedef struct {
    da_session *s;
    const da_qlayer *L;
    int l, jobs;
    _Atomic int next;
} attend_team_job;

static void attend_on_team(void *arg, int ith, int nth) {
    (void)nth;
    attend_team_job *j = arg;
    int lo, hi;
    while (da_pool_chunk(&j->next, j->jobs, 1, &lo, &hi)) attend_job(j->s, j->L, j->l, lo, ith);
}

/* Attention of the n new tokens of layer l (their products in s->proj, after
 * RoPE), one (token, head) at a time through the variant; writes s->ao. */
static void attend(da_session *s, const da_qlayer *L, int l, int n) {
    const da_config *c = &s->cfg;
    const int H = c->n_heads;
    s->kv_layer = l;
    if (n == 1 && s->pool) { /* decoding: the heads on the team that runs the matmuls, already awake */
        attend_team_job j = {s, L, l, H, 0};
        da_pool_run(s->pool, attend_on_team, &j);
        return;
    }
    /* small work (one token over a short cache) stays on one thread: a
     * parallel region costs more than it saves, and far more when another
     * process holds a core */
    const long keys = c->window > 0 && s->len + n > c->window ? c->window : (long)s->len + n;
    const long work = (long)n * H * keys * s->d;
#pragma omp parallel for schedule(dynamic, 1) if (n * H > 1 && work > s->small_work)
    for (int job = 0; job < n * H; job++) attend_job(s, L, l, job, omp_get_thread_num());
}

/* A prompt into an empty f32 cache, exact logits: the variant's training
 * forward with the flash kernel over the n new tokens (contiguous in s->proj). */
static int use_flash(const da_session *s, int n) {
    return s->len == 0 && n > 1 && !s->o.kv_int8 && s->o.logit_bits == 0 && s->fl_saved;
}

static void attend_flash(da_session *s, const da_qlayer *L, int l, int n) {
    float consts[ATTN_LAYER_CONSTS];
    attn_train_ctx x = {&s->cfg,  &s->exec,  l,        1,           da_session_prompt_shape(s, n),
                        1,        s->max_n,  (float *const *)L->attn_f32, NULL, s->proj,
                        NULL,     s->fl_saved, s->fl_scratch, consts, s->ao, NULL};
    s->var->forward(&x);
}

/* The n new tokens of layer l through the variant's own cache, one at a time. */
static void attend_own_cache(da_session *s, const da_qlayer *L, int l, int n) {
    const int C = s->Cao;
    for (int t = 0; t < n; t++) {
        const float *rows[ATTN_MAX_TENSORS] = {0};
        for (int j = 0; j < s->n_attn; j++)
            if (s->spec[j].role == ATTN_IN) rows[j] = s->proj[j] + (size_t)t * s->spec[j].rows;
        const attn_cache_step x = {&s->cfg, s->own + (size_t)l * s->own_floats, s->max_T, s->len + t, rows,
                                   L->attn_f32, s->own_scratch, s->ao + (size_t)t * C};
        s->var->cache_step(&x);
    }
}

/* proj_j = xn W_j^T for the layer's ATTN_IN tensors (q, k, v, ... of one input: one team step). */
static void attn_in_matmuls(da_session *s, const da_qlayer *L, int n,
                            void (*one_matmul)(da_session *, float *, const da_qtensor *, int, int)) {
    const da_qtensor *W[ATTN_MAX_TENSORS];
    float *out[ATTN_MAX_TENSORS];
    int m = 0;
    for (int j = 0; j < s->n_attn; j++)
        if (s->spec[j].role == ATTN_IN) W[m] = L->attn[j], out[m++] = s->proj[j];
    qmatmul_many(s, out, W, m, n, one_matmul);
}

/* proj_j = act_j(RoPE_j(xn W_j^T)) for the layer's ATTN_IN tensors, n new tokens. */
static void attn_inputs(da_session *s, const da_qlayer *L, int n) {
    attn_in_matmuls(s, L, n, qmatmul);
    for (int j = 0; j < s->n_attn; j++) {
        const size_t m = (size_t)n * s->spec[j].rows;
        float *p = s->proj[j];
        if (s->spec[j].act == ATTN_ACT_SIGMOID)
            for (size_t i = 0; i < m; i++) p[i] = 1.0f / (1.0f + expf(-p[i]));
        if (s->spec[j].rope) rope_rows(p, s, s->len, n, s->spec[j].rows);
    }
}

/* x += attention(rmsnorm(x)) Wo for layer l's n new positions. */
static void attention_block(da_session *s, const da_qlayer *L, int l, int n) {
    const da_config *c = &s->cfg;
    const int C = c->dim, site = DA_SITES_PER_LAYER * l;
    rmsnorm_rows(s, s->xn, s->x, L->attention_norm, n, C);
    prep_site(s, s->xn, n, C, site + DA_SITE_ATTN_IN);
    attn_inputs(s, L, n);
    if (s->var->cache_step) {
        attend_own_cache(s, L, l, n);
    } else {
        kv_store(s, l, n);
        if (use_flash(s, n)) attend_flash(s, L, l, n);
        else attend(s, L, l, n);
    }
    const da_qtensor *Wo = L->attn[s->attn_out];
    prep_site(s, s->ao, n, Wo->cols, site + DA_SITE_ATTN_OUT);
    qmatmul(s, s->x, Wo, n, 1);
}

/* x += (silu(xn W1) * xn W3) W2 with xn = rmsnorm(x), for n positions. */
static void ffn_block(da_session *s, const da_qlayer *L, int l, int n) {
    const da_config *c = &s->cfg;
    const int C = c->dim, F = c->ffn_hidden, site = DA_SITES_PER_LAYER * l;
    rmsnorm_rows(s, s->xn, s->x, L->ffn_norm, n, C);
    prep_site(s, s->xn, n, C, site + DA_SITE_FFN_IN);
    const da_qtensor *W[2] = {L->w1, L->w3};
    float *out[2] = {s->h1, s->h3};
    qmatmul_many(s, out, W, 2, n, qmatmul);
    /* the gate, in h1: training's own kernel */
    if (L->poly_w) da_polynorm_forward(s->h1, s->h1, s->h3, L->poly_w, L->poly_b, n, F);
    else s->ops->swiglu_forward(s->h1, s->h1, s->h3, (size_t)n * F);
    prep_site(s, s->h1, n, F, site + DA_SITE_FFN_GATE);
    qmatmul(s, s->x, L->w2, n, 1);
}

da_status da_session_feed(da_session *s, const int *tokens, int n, int all_logits, const float **logits) {
    if (logits) *logits = NULL;
    const da_engine *q = s->q;
    const da_config *c = &q->cfg;
    if (n <= 0 || n > s->max_n)
        return da_errorf("%d tokens in one call; 1..%d allowed (the session's max_batch)", n, s->max_n);
    if (s->ring ? s->len > INT_MAX - n : s->len + n > s->max_T)
        return da_errorf("the KV cache holds %d positions and %d are used; %d more do not fit (a session holds at "
                         "most max_seq_len=%d: reset it, or use a model with a longer context)",
                         s->max_T, s->len, n, c->max_seq_len);
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return da_errorf("token %d at position %d is out of range (0..%d for vocab_size %d)", tokens[t], t,
                             c->vocab_size - 1, c->vocab_size);
    const int C = c->dim;
    for (int t = 0; t < n; t++) da_engine_embed_row(q, tokens[t], s->x + (size_t)t * C);
    if (s->stats) s->stats->rows += n;
    for (int l = 0; l < c->n_layers; l++) {
        attention_block(s, &q->layers[l], l, n);
        ffn_block(s, &q->layers[l], l, n);
    }
    const int first = all_logits ? 0 : n - 1, m = n - first;
    rmsnorm_rows(s, s->xn, s->x + (size_t)first * C, q->norm, m, C);
    prep_site(s, s->xn, m, C, DA_SITES_PER_LAYER * c->n_layers);
    qmatmul(s, s->logits, q->output, m, 0);
    s->len += n;
    if (logits) *logits = s->logits;
    return da_ok();
}

/* ---------------------------------------------------------------- batched decoding (several sessions) */

/* Tokens per pass: below PREFILL_SGEMM_MIN every matmul keeps the per-row
 * int8 dots (or, for float weights, the decoding products), so a session's
 * numbers do not depend on how many others share its pass. */
#define BATCH_MAX (PREFILL_SGEMM_MIN - 1)

static da_status batch_check(da_session *w, da_session *const *ss, int n, const int *tokens) {
    const da_config *c = &w->cfg;
    if (w->max_n < (n < BATCH_MAX ? n : BATCH_MAX))
        return da_errorf("decode_batch: the work session takes %d tokens a call; %d sessions need %d (make it with "
                         "max_batch >= %d)",
                         w->max_n, n, n < BATCH_MAX ? n : BATCH_MAX, n < BATCH_MAX ? n : BATCH_MAX);
    for (int i = 0; i < n; i++) {
        const da_session *s = ss[i];
        if (s->q != w->q || s->o.act != w->o.act)
            return da_errorf("decode_batch: session %d runs another engine or activation mode than the work session", i);
        if (!s->ring && s->len + 1 > s->max_T)
            return da_errorf("decode_batch: session %d is full (%d positions): reset it", i, s->max_T);
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return da_errorf("decode_batch: token %d of session %d is out of range (0..%d)", tokens[i], i,
                             c->vocab_size - 1);
        for (int k = 0; k < i; k++)
            if (ss[k] == s) return da_errorf("decode_batch: session %d appears twice (as %d too)", i, k);
    }
    return da_ok();
}

typedef struct {
    da_session *const *ss;
    const da_qlayer *L;
    int l, H, jobs;
    _Atomic int next;
} batch_attend_job;

/* Job i * H + h: head h of session i's one new token. */
static void batch_attend_on_team(void *arg, int ith, int nth) {
    (void)nth;
    batch_attend_job *j = arg;
    int lo, hi;
    while (da_pool_chunk(&j->next, j->jobs, 1, &lo, &hi)) attend_job(j->ss[lo / j->H], j->L, j->l, lo % j->H, ith);
}

/* The attention of one new token of each session in layer l: its rows of
 * w->proj go to the session's own cache, every (session, head) runs on w's
 * team (the sessions' own teams stay asleep), the results come back to the
 * rows of w->ao. */
static void batch_attend(da_session *w, da_session *const *ss, int n, const da_qlayer *L, int l) {
    const int C = w->cfg.dim, H = w->cfg.n_heads;
    for (int i = 0; i < n; i++) {
        da_session *s = ss[i];
        for (int j = 0; j < w->n_attn; j++)
            if (w->spec[j].role == ATTN_IN)
                memcpy(s->proj[j], w->proj[j] + (size_t)i * w->spec[j].rows, (size_t)w->spec[j].rows * sizeof(float));
        for (int j = 0; j < w->n_attn; j++)
            if (w->spec[j].rope) rope_rows(s->proj[j], s, s->len, 1, w->spec[j].rows);
        if (s->var->cache_step) {
            attend_own_cache(s, L, l, 1);
        } else {
            kv_store(s, l, 1);
            s->kv_layer = l;
        }
    }
    if (!w->var->cache_step) {
        batch_attend_job j = {ss, L, l, H, n * H, 0};
        if (w->pool) da_pool_run(w->pool, batch_attend_on_team, &j);
        else batch_attend_on_team(&j, 0, 1);
    }
    for (int i = 0; i < n; i++) memcpy(w->ao + (size_t)i * C, ss[i]->ao, (size_t)C * sizeof(float));
}

/* out: (n, W->rows) (+)= the prepared site's n rows @ W^T, in one pass. A
 * float matrix in a quantized model (DIFF V2's lambda projection) goes row by
 * row through decoding's own products instead, so that they stay decoding's
 * bit for bit (an sgemm sums in another order than sgemv). */
static void batch_matmul(da_session *w, float *out, const da_qtensor *W, int n, int accumulate) {
    if (n == 1 || W->type != DA_QT_F32 || da_qtype_is_float(w->q->weight_type)) {
        qmatmul(w, out, W, n, accumulate);
        return;
    }
    const float *x = w->site_x;
    for (int i = 0; i < n; i++) {
        w->site_x = x + (size_t)i * W->cols;
        qmatmul(w, out + (size_t)i * W->rows, W, 1, accumulate);
    }
    w->site_x = x;
}

/* One layer for n tokens, one per session: the matmuls on w (each weight
 * read once for all n), the attention on each session's cache. */
static void batch_layer(da_session *w, da_session *const *ss, int n, const da_qlayer *L, int l) {
    const da_config *c = &w->cfg;
    const int C = c->dim, site = DA_SITES_PER_LAYER * l;
    rmsnorm_rows(w, w->xn, w->x, L->attention_norm, n, C);
    prep_site(w, w->xn, n, C, site + DA_SITE_ATTN_IN);
    attn_in_matmuls(w, L, n, batch_matmul);
    for (int j = 0; j < w->n_attn; j++)
        if (w->spec[j].act == ATTN_ACT_SIGMOID) {
            float *p = w->proj[j];
            for (size_t i = 0; i < (size_t)n * w->spec[j].rows; i++) p[i] = 1.0f / (1.0f + expf(-p[i]));
        }
    batch_attend(w, ss, n, L, l);
    const da_qtensor *Wo = L->attn[da_attn_out_tensor(c)];
    prep_site(w, w->ao, n, Wo->cols, site + DA_SITE_ATTN_OUT);
    batch_matmul(w, w->x, Wo, n, 1);
    ffn_block(w, L, l, n);
}

/* logits: (n, vocab), written by the LM head directly. */
static void batch_pass(da_session *w, da_session *const *ss, int n, const int *tokens, float *logits) {
    const da_engine *q = w->q;
    const da_config *c = &q->cfg;
    const int C = c->dim;
    for (int i = 0; i < n; i++) da_engine_embed_row(q, tokens[i], w->x + (size_t)i * C);
    for (int l = 0; l < c->n_layers; l++) batch_layer(w, ss, n, &q->layers[l], l);
    rmsnorm_rows(w, w->xn, w->x, q->norm, n, C);
    prep_site(w, w->xn, n, C, DA_SITES_PER_LAYER * c->n_layers);
    qmatmul(w, logits, q->output, n, 0);
    for (int i = 0; i < n; i++) ss[i]->len++;
}

da_status da_session_decode_batch(da_session *w, da_session *const *ss, int n, const int *tokens, float *logits) {
    if (n <= 0) return da_errorf("decode_batch: n = %d sessions; at least 1", n);
    da_status st = batch_check(w, ss, n, tokens);
    if (st.code) return st;
    const size_t V = (size_t)w->cfg.vocab_size;
    for (int i = 0; i < n; i += BATCH_MAX) {
        const int m = n - i < BATCH_MAX ? n - i : BATCH_MAX;
        batch_pass(w, ss + i, m, tokens + i, logits + (size_t)i * V);
    }
    return da_ok();
}
