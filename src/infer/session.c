/* Making and freeing a session: its options checked against the engine, its
 * KV cache (f32, f16, int8, or a variant's own) and buffers sized once, its
 * RoPE tables and thread team (session.h). */
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "infer/engine.h"
#include "infer/session.h"
#include "ops/ops.h"

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

int da_session_truncate(da_session *s, int n) {
    if (n < 0 || n > s->len) return 0;
    /* a variant's own decoding cache, or a ring's rows, hold what positions past n made */
    if (n < s->len && (s->own || s->ring)) return 0;
    s->len = n;
    return 1;
}
int da_session_len(const da_session *s) { return s->len; }
int da_session_capacity(const da_session *s) { return s->ring ? INT_MAX : s->max_T; }
int da_session_max_batch(const da_session *s) { return s->max_n; }
int da_session_vocab_size(const da_session *s) { return s->cfg.vocab_size; }
da_act_mode da_session_act(const da_session *s) { return (da_act_mode)s->o.act; }

da_session_opts da_session_opts_default(void) {
    da_session_opts o = {-1, 0, 0, 0, 0, 0};
    return o;
}

/* Checks the options against the engine and fills in the defaults. */
static da_status resolve_opts(const da_engine *q, const da_session_opts *in, da_session_opts *o) {
    const da_config *c = &q->cfg;
    *o = in ? *in : da_session_opts_default();
    if (o->act < 0) o->act = q->act;
    if (o->act > DA_ACTQ_F32) return da_errorf("session: act = %d is not an activation mode", o->act);
    /* float weights take float activations: their matmuls have no integer path */
    if (da_qtype_is_float(q->weight_type) && o->act <= DA_ACTQ_INT8_STATIC) o->act = DA_ACTQ_F32;
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
            attn_shape as = da_session_prompt_shape(s, (int)N);
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
        const int via_wdeq = N > 1 && (da_qtype_is_float(t->type) || s->o.act >= DA_ACTQ_BF16 || N >= PREFILL_SGEMM_MIN);
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
