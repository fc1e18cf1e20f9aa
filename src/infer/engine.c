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

#include "attn/variant.h"
#include "infer/engine.h"
#include "ops/ops.h"

/* From this many tokens in one call (a prompt), an integer-activation matmul
 * dequantizes the weight matrix and the int8 activations and runs one sgemm:
 * the same products up to the order of float sums, 1.4-2x faster than an
 * int8 dot per (row, token) at 200 tokens, where the dequantization is paid
 * once for all of them. Decoding (one token) keeps the int8 dots. */
#define PREFILL_SGEMM_MIN 16

/* Multiply-adds below which work runs on one thread. With passive waiting
 * (the CLI's default) waking the team costs tens of microseconds, and on a
 * busy machine a team waits for the core another process holds: about 2 M
 * multiply-adds, a millisecond of one core. With spinning threads
 * (OMP_WAIT_POLICY=active, a dedicated machine) a region costs about a
 * microsecond, and 32 K is enough. */
#define SMALL_WORK_PASSIVE (1L << 21)
#define SMALL_WORK_ACTIVE (1L << 15)

static long small_work_for_policy(void) {
    const char *p = getenv("OMP_WAIT_POLICY");
    return p && (!strcmp(p, "active") || !strcmp(p, "ACTIVE")) ? SMALL_WORK_ACTIVE : SMALL_WORK_PASSIVE;
}

/* How long an idle thread of the session's team spins before it sleeps:
 * longer than the gaps between the steps of one decoded token (norms,
 * activation rows, sampling), so that decoding never waits for a wake-up,
 * and short enough that an idle team gives its cores back at once. */
#define POOL_SPIN_US 200

static int is_float_type(int t) { return t == DA_QT_F32 || t == DA_QT_F16 || t == DA_QT_BF16; }

/* ---------------------------------------------------------------- running state */

struct da_session {
    da_config cfg;
    const da_engine *q;
    da_session_opts o; /* resolved: act >= 0, max_T and max_batch set */
    da_exec exec;              /* da_exec_default(): the kernels' level */
    const da_ops *ops;         /* kernels of that level */
    const attn_variant *var;   /* the model's attention variant */
    int n_attn;
    attn_tensor spec[ATTN_MAX_TENSORS];
    /* Resolved once here: the variant's table is rebuilt on each lookup, too slow for every (token, head). */
    int view_q;                   /* the tensor whose product is the query */
    int view_k, view_v, view_lam; /* the tensors whose products are the cached keys, values, and lam (or -1) */
    int attn_out;                 /* the output projection */
    int max_T, max_n, len;
    /* Cache rows per layer: max_T; or, with a sliding window shorter than max_seq_len, a ring of
     * window + max_n - 1 rows (the last window keys of every query of one call), position p in row
     * p % slots. A ring session takes positions past max_T: a query sees only keys within window
     * of it, so every RoPE distance stays one the model trained on. */
    int slots, ring;
    int kv_layer;     /* the layer attend reads the cache of */
    int d, Ckv, kb, nkb, n_threads, maxw;
    int Cao; /* the attention output's width (the output projection's input): dim unless head_dim is set */
    long small_work;  /* multiply-adds below which a step stays on one thread (small_work_for_policy) */
    /* The f32 and f16 caches hold each d-wide column block (a head's keys) of a layer contiguously, so that
     * a head's attention reads one run of memory, not d values in every Ckv-wide row. */
    float *kf, *vf;   /* f32 cache: (L, Ckv / d, slots, d) each */
    uint16_t *kh, *vh; /* f16 cache: (L, Ckv / d, slots, d) each */
    int8_t *k8, *v8;  /* int8 cache: (L, slots, Ckv) each */
    float *ks, *vs;   /* their scales: (L, slots, nkb) */
    float *rope_cos, *rope_sin; /* (max_T, d/2); positions past max_T (a ring) are computed into rope_far */
    float *rope_far;  /* (d): cos then sin of one position */
    float *x, *xn, *ao, *h1, *h3, *logits; /* (max_n, width) */
    float *proj[ATTN_MAX_TENSORS]; /* per ATTN_IN tensor: (max_n, rows), the new tokens' products */
    float *att;       /* (threads, 2, slots) */
    float *deq;       /* (threads, maxw): a dequantized weight row */
    float *wdeq;      /* batches (float activations, or int8 ones of >= PREFILL_SGEMM_MIN tokens): one dequantized matrix */
    float *xr;        /* (max_n, maxw): bf16-rounded activations, or int8 ones dequantized for a prefill sgemm */
    int8_t *aq;       /* (max_n, maxw) */
    float *ad;        /* (max_n, maxw / 32) */
    int32_t *asum;
    /* the flash prefill (f32 cache only): the variant's saved activations and scratch */
    float *fl_saved, *fl_scratch;
    /* a variant with a decoding cache of its own (attn_variant.cache_step): (L, own_floats), and one step's scratch */
    float *own, *own_scratch;
    size_t own_floats;
    const float *site_x; /* the prepared site's float input (n, width) */
    int site_w;
    const float *site_xd; /* a prompt in an int8 mode: the site's int8 activations as floats, q * d; else NULL */
    da_qstats *stats;
    da_pool *pool;    /* the team of the integer matmuls and decoding's attention (NULL: one thread) */
    da_qact *xs;      /* (max_n) views of the int8 activation rows */
};

void da_session_free(da_session *s) {
    if (!s) return;
    void *ps[] = {s->kf,  s->vf,   s->kh, s->vh, s->k8, s->v8, s->ks, s->vs,   s->rope_cos, s->rope_sin, s->x,        s->xn,
                  s->ao,  s->h1,   s->h3, s->logits, s->att, s->deq, s->wdeq, s->xr, s->aq, s->ad, s->asum,
                  s->fl_saved, s->fl_scratch, s->rope_far, s->own, s->own_scratch};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    for (int j = 0; j < ATTN_MAX_TENSORS; j++) free(s->proj[j]);
    da_pool_free(s->pool);
    free(s->xs);
    free(s);
}

void da_session_reset(da_session *s) { s->len = 0; }
int da_session_len(const da_session *s) { return s->len; }
int da_session_capacity(const da_session *s) { return s->ring ? INT_MAX : s->max_T; }
int da_session_max_batch(const da_session *s) { return s->max_n; }
int da_session_vocab_size(const da_session *s) { return s->cfg.vocab_size; }
da_act_mode da_session_act(const da_session *s) { return (da_act_mode)s->o.act; }

da_session_opts da_session_opts_default(void) {
    da_session_opts o = {-1, 0, 0, 0, 0, 0};
    return o;
}

/* The shape of the flash kernel's call for a prompt of n tokens. */
static attn_shape prompt_shape(const da_session *s, int n) { return da_attn_shape_of(&s->cfg, 1, n, s->n_threads); }

/* Checks the options against the engine and fills in the defaults. */
static da_status resolve_opts(const da_engine *q, const da_session_opts *in, da_session_opts *o) {
    const da_config *c = &q->cfg;
    *o = in ? *in : da_session_opts_default();
    if (o->act < 0) o->act = q->act;
    if (o->act > DA_ACTQ_F32) return da_errorf("session: act = %d is not an activation mode", o->act);
    /* float weights take float activations: their matmuls have no integer path */
    if (is_float_type(q->weight_type) && o->act <= DA_ACTQ_INT8_STATIC) o->act = DA_ACTQ_F32;
    if (!o->max_T) o->max_T = c->max_seq_len;
    if (!o->max_batch) o->max_batch = o->max_T;
    if (o->max_T < 0 || o->max_T > c->max_seq_len)
        return da_errorf("session: max_T = %d is out of range (1..max_seq_len=%d)", o->max_T, c->max_seq_len);
    if (o->max_batch < 0 || o->max_batch > o->max_T)
        return da_errorf("session: max_batch = %d is out of range (1..max_T=%d)", o->max_batch, o->max_T);
    if (o->kv_int8 && o->kv_f16) return da_errorf("session: kv_int8 and kv_f16 are both set; pick one KV cache type");
    if (o->logit_bits < 0 || o->logit_bits == 1 || o->logit_bits > 24)
        return da_errorf("session: logit_bits = %d is out of range (0 = exact, or 2..24)", o->logit_bits);
    if (o->act == DA_ACTQ_INT8_STATIC && !q->act_absmax)
        return da_errorf("session: act int8-static needs calibrated activation ranges (quantize with calibration data)");
    if (da_attn_variant_of(c->arch)->cache_step && (o->kv_int8 || o->kv_f16 || o->logit_bits))
        return da_errorf("session: --arch %s keeps a decoding cache of its own, f32 with exact logits; "
                         "kv_int8, kv_f16 and logit_bits do not apply to it",
                         da_arch_name(c->arch));
    if (o->act <= DA_ACTQ_INT8_STATIC && (c->dim % 32 || c->ffn_hidden % 32 || da_attn_out_cols(c) % 32))
        return da_errorf("session: int8 activations need dim and ffn_hidden multiples of 32 (dim %d, ffn_hidden %d); "
                         "use act f32",
                         c->dim, c->ffn_hidden);
    return da_ok();
}

/* malloc of n elements, at least one (a zero-sized buffer still gets a pointer). */
static void *malloc_n(size_t n, size_t size) { return malloc((n ? n : 1) * size); }

/* Allocates every buffer of s for its options (sizes from s's fields). */
static int alloc_buffers(da_session *s) {
    const da_config *c = &s->cfg;
    const da_engine *q = s->q;
    const size_t L = c->n_layers, N = s->max_n, C = c->dim, F = c->ffn_hidden, V = c->vocab_size;
    const size_t Ckv = s->Ckv, W = s->maxw, T = s->slots;
    int fail = 0;
#define ALLOC(p, n) fail |= !((p) = malloc_n((n), sizeof *(p)))
    if (s->var->cache_step) {
        s->own_floats = s->var->cache_floats(c, s->max_T);
        ALLOC(s->own, L * s->own_floats);
        ALLOC(s->own_scratch, s->var->cache_scratch_floats(c, s->max_T));
    } else if (s->o.kv_int8) {
        ALLOC(s->k8, L * T * Ckv);
        ALLOC(s->v8, L * T * Ckv);
        ALLOC(s->ks, L * T * s->nkb);
        ALLOC(s->vs, L * T * s->nkb);
    } else {
        if (s->o.kv_f16) {
            ALLOC(s->kh, L * T * Ckv);
            ALLOC(s->vh, L * T * Ckv);
        } else {
            ALLOC(s->kf, L * T * Ckv);
            ALLOC(s->vf, L * T * Ckv);
        }
        if (N > 1) {
            attn_shape as = prompt_shape(s, (int)N);
            ALLOC(s->fl_saved, s->var->train_floats(&as, 1));
            ALLOC(s->fl_scratch, da_attn_scratch_floats(s->var, &as, 1));
        }
    }
    ALLOC(s->rope_cos, (size_t)s->max_T * s->d / 2);
    ALLOC(s->rope_sin, (size_t)s->max_T * s->d / 2);
    ALLOC(s->rope_far, (size_t)s->d);
    ALLOC(s->x, N * C);
    ALLOC(s->xn, N * C);
    for (int j = 0; j < s->n_attn; j++)
        if (s->spec[j].role == ATTN_IN) ALLOC(s->proj[j], N * s->spec[j].rows);
    ALLOC(s->ao, N * s->Cao);
    ALLOC(s->h1, N * F);
    ALLOC(s->h3, N * F);
    ALLOC(s->logits, N * V);
    if (!s->var->cache_step) ALLOC(s->att, (size_t)s->n_threads * 2 * T);
    ALLOC(s->deq, (size_t)s->n_threads * W);
    /* one dequantized matrix, for the batches (N > 1) of the matrices qmatmul multiplies through it: an F16 or
     * BF16 one always (float activations, whatever the session's mode), an integer-quantized one with float
     * activations, or with int8 ones from PREFILL_SGEMM_MIN tokens. Each matrix in its own type: a file may mix
     * them (llama.cpp's --output-tensor-type, --tensor-type). */
    size_t big = 0;
    for (int i = 0; i < q->n_tensors; i++) {
        const da_qtensor *t = &q->t[i];
        const int via_wdeq = N > 1 && (is_float_type(t->type) || s->o.act >= DA_ACTQ_BF16 || N >= PREFILL_SGEMM_MIN);
        if (t->cols && t->type != DA_QT_F32 && via_wdeq && (size_t)t->rows * t->cols > big)
            big = (size_t)t->rows * t->cols;
    }
    if (big) ALLOC(s->wdeq, big);
    ALLOC(s->xr, N * W);
    ALLOC(s->aq, N * W);
    ALLOC(s->ad, N * W / 32 + 1);
    ALLOC(s->asum, N * W / 32 + 1);
    ALLOC(s->xs, N);
#undef ALLOC
    return fail;
}

da_status da_session_create(da_session **out, const da_engine *q, const da_session_opts *opts) {
    *out = NULL;
    da_session_opts o;
    da_status st = resolve_opts(q, opts, &o);
    if (st.code) return st;
    const da_config *c = &q->cfg;
    da_session *s = calloc(1, sizeof *s);
    if (!s) return da_errorf("out of memory");
    s->cfg = *c;
    s->q = q;
    s->o = o;
    s->ops = da_ops_of(da_exec_default().isa);
    s->max_T = o.max_T;
    s->max_n = o.max_batch;
    s->ring = c->window > 0 && c->window < c->max_seq_len;
    /* a ring needs every key the call's first query sees kept while the call stores its n: window - 1 + n
     * rows, which may be more than max_T when max_batch is close to it */
    s->slots = s->ring ? c->window - 1 + s->max_n : s->max_T;
    s->d = da_head_dim(c);
    s->Ckv = da_attn_kv_cols(c);
    s->Cao = da_attn_out_cols(c);
    s->exec = da_exec_default();
    s->var = da_attn_variant_of(c->arch);
    s->n_attn = da_attn_tensors(c, s->spec);
    s->view_q = da_attn_tensor_with_view(c, ATTN_VIEW_Q);
    s->view_k = da_attn_tensor_with_view(c, ATTN_VIEW_K);
    s->view_v = da_attn_tensor_with_view(c, ATTN_VIEW_V);
    s->view_lam = da_attn_tensor_with_view(c, ATTN_VIEW_LAM);
    s->attn_out = da_attn_out_tensor(c);
    s->kb = da_kv_scale_block(s->d);
    s->nkb = s->Ckv / s->kb;
    s->n_threads = omp_get_max_threads();
    s->small_work = small_work_for_policy();
    s->maxw = c->dim > c->ffn_hidden ? c->dim : c->ffn_hidden;
    if (s->Cao > s->maxw) s->maxw = s->Cao;
    if (alloc_buffers(s)) {
        da_session_free(s);
        return da_errorf("out of memory allocating the inference state for %d positions", o.max_T);
    }
    da_rope_tables(c, s->rope_cos, s->rope_sin, s->max_T);
    s->pool = da_pool_create(s->n_threads, POOL_SPIN_US); /* NULL for one thread, or when threads cannot be made */
    *out = s;
    return da_ok();
}

da_status da_qstats_create(da_qstats *st, const da_config *cfg) {
    memset(st, 0, sizeof *st);
    const int n = DA_N_SITES(cfg);
    st->absmax = calloc((size_t)n, sizeof *st->absmax);
    st->chan_off = calloc((size_t)n + 1, sizeof *st->chan_off);
    if (!st->absmax || !st->chan_off) {
        da_qstats_free(st);
        return da_errorf("out of memory");
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        st->chan_off[i] = off;
        off += (i < n - 1 && i % DA_SITES_PER_LAYER == DA_SITE_FFN_GATE) ? (size_t)cfg->ffn_hidden : (size_t)cfg->dim;
    }
    st->chan_off[n] = off;
    st->chan = calloc(off, sizeof *st->chan);
    st->chan2 = calloc(off, sizeof *st->chan2);
    if (!st->chan || !st->chan2) {
        da_qstats_free(st);
        return da_errorf("out of memory");
    }
    return da_ok();
}

void da_qstats_free(da_qstats *st) {
    free(st->absmax);
    free(st->chan);
    free(st->chan2);
    free(st->chan_off);
    memset(st, 0, sizeof *st);
}

void da_session_attach_stats(da_session *s, da_qstats *st) { s->stats = st; }

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
    const int integer = !is_float_type(W->type) && s->o.act <= DA_ACTQ_INT8_STATIC;
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
    return !is_float_type(W->type) && s->o.act <= DA_ACTQ_INT8_STATIC &&
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
    attn_train_ctx x = {&s->cfg,  &s->exec,  l,        1,           prompt_shape(s, n),
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
    s->ops->swiglu_forward(s->h1, s->h1, s->h3, (size_t)n * F); /* the gate, in h1: training's own kernel */
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
    if (n == 1 || W->type != DA_QT_F32 || is_float_type(w->q->weight_type)) {
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
