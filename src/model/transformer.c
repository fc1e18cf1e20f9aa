/* The whole model, forward and backward, over a (B, T) batch: embedding,
 * L pre-norm blocks (attention, SwiGLU), final norm, LM head, cross-entropy. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attention.h"
#include "attn/flash_attention.h"
#include "diffattn/model.h"
#include "ops/ops.h"
#include "core/profile.h"

typedef struct {
    float *resid_in;    /* (B, T, C) block input */
    float *xn1, *rstd1; /* (B, T, C), (B, T) */
    float *q, *k, *v;   /* (B, T, Cq), (B, T, Ckv) x2; q, k after RoPE; Cq = C, DIFF2 2C */
    float *lam;         /* DIFF2 (B, T, H): sigmoid(xn1 . lambda_proj), per token and head */
    float *att;         /* reference kernel: DIFF, DIFF2 (B, H, 2, T, T); softmax (B, H, T, T) */
    float *lse;         /* flash kernel: (B, H, maps, T) */
    float *o1, *o2;     /* flash kernel, DIFF and DIFF2: (B, T, C) normalised A1 V and A2 V */
    float *opre;        /* DIFF (B, T, C): (A1 - lambda A2) V before the head norm */
    float *sub_rstd;    /* DIFF (B, T, H) */
    float *attn_out;    /* (B, T, C): input of out_proj */
    float *resid_mid;   /* (B, T, C): after the attention residual */
    float *xn2, *rstd2; /* (B, T, C), (B, T) */
    float *h1, *h3;     /* (B, T, F) */
    float *gate;        /* (B, T, F) silu(h1) * h3 */
} layer_acts;

struct da_acts {
    da_config cfg;
    int B, T;         /* shape of the last forward */
    int cap_B, cap_T; /* shape the buffers were sized for */
    int n_threads;    /* OpenMP threads the attention scratch was sized for */
    da_attn_kernel kernel;
    da_exec exec;     /* the kernels' level, bf16 matmuls, profile */
    layer_acts *layers;
    float *resid_out;   /* (B, T, C) */
    float *xf, *rstdf;  /* (B, T, C), (B, T) */
    float *logits;      /* (B, T, V); the backward overwrites it with dlogits */
    float *losses;      /* (B, T) */
    int *tokens, *targets;
    int have_targets;
    float *rope_cos, *rope_sin; /* (T, d/2) */
    float *lambda;      /* (L) lambda_full used by the forward */
    /* backward scratch */
    float *dresid, *dxn, *dattn, *dopre, *dq, *dk, *dv, *dh1, *dh3, *dgate, *scratch;
    float *dlam;        /* DIFF2 (B, T, H): d loss / d lam, then / d its logit */
    float *pool;        /* one allocation behind every float array above */
};

const float *da_acts_logits(const da_acts *a) { return a->logits; }

/* The attention kernels' name for an architecture. */
static int attn_kind_of(da_arch a) {
    return a == DA_ARCH_DIFF ? ATTN_DIFF : a == DA_ARCH_DIFF2 ? ATTN_DIFF2 : ATTN_SOFTMAX;
}

const float *da_acts_lam(const da_acts *a, int layer) { return a->layers[layer].lam; }

void da_acts_qk(const da_acts *a, int layer, const float **q, const float **k) {
    *q = a->layers[layer].q;
    *k = a->layers[layer].k;
}

const float *da_acts_v(const da_acts *a, int layer) { return a->layers[layer].v; }
const float *da_acts_attn_out(const da_acts *a, int layer) { return a->layers[layer].attn_out; }

const float *da_acts_hidden(const da_acts *a, int layer) {
    return layer + 1 < a->cfg.n_layers ? a->layers[layer + 1].resid_in : a->resid_out;
}

/* Assigns every array of a from base (or only counts, when base is NULL) and
 * returns the floats used: one layout, used both to size and to fill the pool. */
static size_t layout(da_acts *a, float *base) {
    const da_config *cfg = &a->cfg;
    const size_t B = a->cap_B, T = a->cap_T, C = cfg->dim, F = cfg->ffn_hidden, V = cfg->vocab_size;
    const size_t L = cfg->n_layers, H = cfg->n_heads, Ckv = C / (H / cfg->n_kv_heads), d = da_head_dim(cfg);
    const size_t BT = B * T, Cq = da_q_dim(cfg);
    const int diff = cfg->arch == DA_ARCH_DIFF, diff2 = cfg->arch == DA_ARCH_DIFF2, flash = a->kernel == DA_ATTN_FLASH;
    const size_t maps = da_arch_maps(cfg->arch);
    attn_shape as = {(int)B, (int)T, (int)H, cfg->n_kv_heads, (int)d, (int)C, (int)Ckv, a->n_threads, 0, cfg->window};
    size_t used = 0;
    /* TAKE(n): the next n floats (a NULL-based pointer while counting, never dereferenced) */
#define TAKE(n) (used += (n), base ? base + used - (n) : NULL)
    for (size_t l = 0; l < L; l++) {
        layer_acts *la = &a->layers[l];
        la->resid_in = TAKE(BT * C);
        la->xn1 = TAKE(BT * C);
        la->rstd1 = TAKE(BT);
        la->q = TAKE(BT * Cq);
        la->k = TAKE(BT * Ckv);
        la->v = TAKE(BT * Ckv);
        la->lam = diff2 ? TAKE(BT * H) : NULL;
        la->att = flash ? NULL : TAKE(B * H * maps * T * T);
        la->lse = flash ? TAKE(B * H * maps * T) : NULL;
        la->o1 = flash && maps == 2 ? TAKE(BT * C) : NULL;
        la->o2 = flash && maps == 2 ? TAKE(BT * C) : NULL;
        la->opre = diff ? TAKE(BT * C) : NULL;
        la->sub_rstd = diff ? TAKE(BT * H) : NULL;
        la->attn_out = TAKE(BT * C);
        la->resid_mid = TAKE(BT * C);
        la->xn2 = TAKE(BT * C);
        la->rstd2 = TAKE(BT);
        la->h1 = TAKE(BT * F);
        la->h3 = TAKE(BT * F);
        la->gate = TAKE(BT * F);
    }
    a->resid_out = TAKE(BT * C);
    a->xf = TAKE(BT * C);
    a->rstdf = TAKE(BT);
    a->logits = TAKE(BT * V);
    a->losses = TAKE(BT);
    a->rope_cos = TAKE(T * d / 2);
    a->rope_sin = TAKE(T * d / 2);
    a->lambda = TAKE(L);
    a->dresid = TAKE(BT * C);
    a->dxn = TAKE(BT * C);
    a->dattn = TAKE(BT * C);
    a->dopre = flash && diff ? TAKE(BT * C) : NULL;
    a->dq = TAKE(BT * Cq);
    a->dlam = diff2 ? TAKE(BT * H) : NULL;
    a->dk = TAKE(BT * Ckv);
    a->dv = TAKE(BT * Ckv);
    a->dh1 = TAKE(BT * F);
    a->dh3 = TAKE(BT * F);
    a->dgate = TAKE(BT * F);
    a->scratch = TAKE(flash ? flash_scratch_size(&as, attn_kind_of(cfg->arch)) : attn_scratch_size(&as));
#undef TAKE
    return used;
}

da_status da_acts_create_ex(da_acts **out, const da_config *cfg, int B, int T, da_attn_kernel kernel,
                           const da_exec *x) {
    *out = NULL;
    da_status st = da_config_validate(cfg);
    if (st.code) return st;
    if (B <= 0 || T <= 0) return da_errorf("batch %d x seq %d: both must be positive", B, T);
    if (T > cfg->max_seq_len)
        return da_errorf("sequence length %d exceeds the model's max_seq_len %d", T, cfg->max_seq_len);
    da_acts *a = calloc(1, sizeof *a);
    if (!a) return da_errorf("out of memory");
    a->cfg = *cfg;
    a->B = a->cap_B = B;
    a->T = a->cap_T = T;
    a->kernel = kernel;
    a->exec = x ? *x : da_exec_default();
    a->n_threads = omp_get_max_threads();
    a->layers = calloc((size_t)cfg->n_layers, sizeof(layer_acts));
    a->tokens = malloc((size_t)B * T * sizeof(int));
    a->targets = malloc((size_t)B * T * sizeof(int));
    size_t total = a->layers ? layout(a, NULL) : 0;
    a->pool = malloc(total * sizeof(float));
    if (!a->layers || !a->tokens || !a->targets || !a->pool) {
        da_acts_free(a);
        return da_errorf("out of memory allocating activations for batch %d x seq %d (%.1f MB); "
                         "lower --batch or --seq",
                         B, T, (double)total * 4 / 1e6);
    }
    layout(a, a->pool);
    rope_tables(a->rope_cos, a->rope_sin, T, da_head_dim(cfg), cfg->rope_theta);
    *out = a;
    return da_ok();
}

da_status da_acts_create(da_acts **out, const da_config *cfg, int B, int T) {
    return da_acts_create_ex(out, cfg, B, T, DA_ATTN_FLASH, NULL);
}

void da_acts_free(da_acts *a) {
    if (!a) return;
    free(a->layers);
    free(a->tokens);
    free(a->targets);
    free(a->pool);
    free(a);
}

static attn_shape shape_of(const da_acts *a) {
    const da_config *c = &a->cfg;
    attn_shape s = {a->B, a->T, c->n_heads, c->n_kv_heads, da_head_dim(c), c->dim,
                    c->dim / (c->n_heads / c->n_kv_heads), a->n_threads, 0, c->window};
    return s;
}

float da_forward(da_model *m, da_acts *a, const int *tokens, const int *targets, int B, int T) {
    const da_config *c = &m->cfg;
    /* A smaller (B, T) than the acts were made for reuses their buffers. */
    if (B <= 0 || T <= 0 || B > a->cap_B || T > a->cap_T) return NAN;
    a->B = B;
    a->T = T;
    const int C = c->dim, Cq = da_q_dim(c), F = c->ffn_hidden, V = c->vocab_size, N = B * T;
    attn_shape as = shape_of(a);
    const int d = as.d, Ckv = as.Ckv;
    const da_exec *ex = &a->exec;
    const da_ops *op = da_ops_of(ex->isa);
    const da_attn_ops *at = da_attn_ops_of(ex->isa);
    double *prof = ex->prof_s;
    memcpy(a->tokens, tokens, (size_t)N * sizeof(int));
    a->have_targets = targets != NULL;
    if (targets) memcpy(a->targets, targets, (size_t)N * sizeof(int));

    DA_PROF(prof, DA_PROF_EMBEDDING,
            op->embedding_forward(a->layers[0].resid_in, tokens, m->w.tok_embeddings, N, C));
    for (int l = 0; l < c->n_layers; l++) {
        layer_acts *la = &a->layers[l];
        const da_layer_weights *w = &m->w.layers[l];
        float *next = l + 1 < c->n_layers ? a->layers[l + 1].resid_in : a->resid_out;

        DA_PROF(prof, DA_PROF_RMSNORM,
                op->rmsnorm_forward(la->xn1, la->rstd1, la->resid_in, w->attention_norm, N, C, c->norm_eps));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, matmul_forward(ex, la->q, la->xn1, w->wq, N, C, Cq, 0));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, matmul_forward(ex, la->k, la->xn1, w->wk, N, C, Ckv, 0));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, matmul_forward(ex, la->v, la->xn1, w->wv, N, C, Ckv, 0));
        DA_PROF(prof, DA_PROF_ROPE, op->rope_apply(la->q, a->rope_cos, a->rope_sin, B, T, Cq / d, d, 0));
        DA_PROF(prof, DA_PROF_ROPE, op->rope_apply(la->k, a->rope_cos, a->rope_sin, B, T, Ckv / d, d, 0));
        const int diff = c->arch == DA_ARCH_DIFF;
        if (diff) a->lambda[l] = da_model_lambda(m, l);
        if (c->arch == DA_ARCH_DIFF2) {
            DA_PROF(prof, DA_PROF_MATMUL_FWD,
                    matmul_forward(ex, la->lam, la->xn1, w->lambda_proj, N, C, c->n_heads, 0));
            for (size_t i = 0; i < (size_t)N * c->n_heads; i++) la->lam[i] = 1.0f / (1.0f + expf(-la->lam[i]));
        }
        double t_attn = prof ? da_now_s() : 0.0, hn0 = prof ? prof[DA_PROF_HEAD_NORM] : 0.0;
        if (a->kernel == DA_ATTN_FLASH) {
            at->flash_forward(diff ? la->opre : la->attn_out, la->o1, la->o2, la->lse, la->q, la->k, la->v,
                              diff ? a->lambda[l] : 0.0f, la->lam, attn_kind_of(c->arch), &as, a->scratch);
            if (diff)
                DA_PROF(prof, DA_PROF_HEAD_NORM,
                        at->head_norm_forward(la->attn_out, la->sub_rstd, la->opre, w->subln,
                                              1.0f - da_lambda_init(l), N * c->n_heads, 2 * d));
        } else if (diff) {
            at->diff_forward(la->attn_out, la->opre, la->sub_rstd, la->att, la->q, la->k, la->v, w->subln,
                             a->lambda[l], da_lambda_init(l), &as, a->scratch);
        } else if (c->arch == DA_ARCH_DIFF2) {
            at->diff2_forward(la->attn_out, la->att, la->q, la->k, la->v, la->lam, &as, a->scratch);
        } else {
            at->softmax_forward(la->attn_out, la->att, la->q, la->k, la->v, &as);
        }
        /* the head norm is charged to its own phase and taken out of the attention's */
        if (prof) prof[DA_PROF_ATTN_FWD] += da_now_s() - t_attn - (prof[DA_PROF_HEAD_NORM] - hn0);
        DA_PROF(prof, DA_PROF_RESIDUAL, memcpy(la->resid_mid, la->resid_in, (size_t)N * C * sizeof(float)));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, matmul_forward(ex, la->resid_mid, la->attn_out, w->wo, N, C, C, 1));

        DA_PROF(prof, DA_PROF_RMSNORM,
                op->rmsnorm_forward(la->xn2, la->rstd2, la->resid_mid, w->ffn_norm, N, C, c->norm_eps));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, matmul_forward(ex, la->h1, la->xn2, w->w1, N, C, F, 0));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, matmul_forward(ex, la->h3, la->xn2, w->w3, N, C, F, 0));
        DA_PROF(prof, DA_PROF_SWIGLU, op->swiglu_forward(la->gate, la->h1, la->h3, (size_t)N * F));
        DA_PROF(prof, DA_PROF_RESIDUAL, memcpy(next, la->resid_mid, (size_t)N * C * sizeof(float)));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, matmul_forward(ex, next, la->gate, w->w2, N, F, C, 1));
    }
    DA_PROF(prof, DA_PROF_RMSNORM,
            op->rmsnorm_forward(a->xf, a->rstdf, a->resid_out, m->w.norm, N, C, c->norm_eps));
    DA_PROF(prof, DA_PROF_MATMUL_FWD, matmul_forward(ex, a->logits, a->xf, m->w.output, N, C, V, 0));
    if (!targets) return 0.0f;
    float loss;
    DA_PROF(prof, DA_PROF_LOSS, loss = op->cross_entropy_forward(a->losses, a->logits, targets, N, V));
    return loss;
}

/* d lambda_full -> the four lambda vectors: lambda = exp(q1.k1) - exp(q2.k2) + init. */
static void lambda_backward(da_layer_weights *g, const da_layer_weights *w, float dlambda, int d) {
    float a = 0, b = 0;
    for (int i = 0; i < d; i++) {
        a += w->lambda_q1[i] * w->lambda_k1[i];
        b += w->lambda_q2[i] * w->lambda_k2[i];
    }
    float e1 = expf(a) * dlambda, e2 = expf(b) * dlambda;
    for (int i = 0; i < d; i++) {
        g->lambda_q1[i] += e1 * w->lambda_k1[i];
        g->lambda_k1[i] += e1 * w->lambda_q1[i];
        g->lambda_q2[i] -= e2 * w->lambda_k2[i];
        g->lambda_k2[i] -= e2 * w->lambda_q2[i];
    }
}

void da_backward(da_model *m, da_acts *a) {
    const da_config *c = &m->cfg;
    const int B = a->B, T = a->T, C = c->dim, Cq = da_q_dim(c), H = c->n_heads, F = c->ffn_hidden;
    const int V = c->vocab_size, N = B * T;
    attn_shape as = shape_of(a);
    const int d = as.d, Ckv = as.Ckv;
    if (!a->have_targets || !m->grads) return;
    const da_exec *ex = &a->exec;
    const da_ops *op = da_ops_of(ex->isa);
    const da_attn_ops *at = da_attn_ops_of(ex->isa);
    double *prof = ex->prof_s;

    DA_PROF(prof, DA_PROF_LOSS, op->cross_entropy_backward(a->logits, a->targets, N, V));
    float *dlogits = a->logits;
    DA_PROF(prof, DA_PROF_MATMUL_BWD,
            matmul_backward(ex, a->dxn, m->g.output, dlogits, a->xf, m->w.output, N, C, V, 0));
    DA_PROF(prof, DA_PROF_RESIDUAL, memset(a->dresid, 0, (size_t)N * C * sizeof(float)));
    DA_PROF(prof, DA_PROF_RMSNORM,
            op->rmsnorm_backward(a->dresid, m->g.norm, a->dxn, a->resid_out, m->w.norm, a->rstdf, N, C));

    for (int l = c->n_layers - 1; l >= 0; l--) {
        layer_acts *la = &a->layers[l];
        const da_layer_weights *w = &m->w.layers[l];
        da_layer_weights *g = &m->g.layers[l];

        /* feed-forward: dresid holds d loss / d block output */
        DA_PROF(prof, DA_PROF_MATMUL_BWD,
                matmul_backward(ex, a->dgate, g->w2, a->dresid, la->gate, w->w2, N, F, C, 0));
        DA_PROF(prof, DA_PROF_SWIGLU,
                op->swiglu_backward(a->dh1, a->dh3, a->dgate, la->h1, la->h3, (size_t)N * F));
        DA_PROF(prof, DA_PROF_MATMUL_BWD, matmul_backward(ex, a->dxn, g->w1, a->dh1, la->xn2, w->w1, N, C, F, 0));
        DA_PROF(prof, DA_PROF_MATMUL_BWD, matmul_backward(ex, a->dxn, g->w3, a->dh3, la->xn2, w->w3, N, C, F, 1));
        DA_PROF(prof, DA_PROF_RMSNORM,
                op->rmsnorm_backward(a->dresid, g->ffn_norm, a->dxn, la->resid_mid, w->ffn_norm, la->rstd2, N, C));

        /* attention: dresid now holds d loss / d resid_mid */
        DA_PROF(prof, DA_PROF_MATMUL_BWD,
                matmul_backward(ex, a->dattn, g->wo, a->dresid, la->attn_out, w->wo, N, C, C, 0));
        double t_attn = prof ? da_now_s() : 0.0, hn0 = prof ? prof[DA_PROF_HEAD_NORM] : 0.0;
        if (a->kernel == DA_ATTN_FLASH && c->arch == DA_ARCH_DIFF) {
            float dlambda = 0.0f;
            DA_PROF(prof, DA_PROF_HEAD_NORM,
                    at->head_norm_backward(a->dopre, g->subln, a->dattn, la->opre, la->sub_rstd, w->subln,
                                           1.0f - da_lambda_init(l), N * c->n_heads, 2 * d));
            at->flash_backward(a->dq, a->dk, a->dv, &dlambda, NULL, a->dopre, la->opre, la->o1, la->o2, la->lse,
                               la->q, la->k, la->v, a->lambda[l], NULL, ATTN_DIFF, &as, a->scratch);
            lambda_backward(g, w, dlambda, d);
        } else if (a->kernel == DA_ATTN_FLASH) {
            at->flash_backward(a->dq, a->dk, a->dv, NULL, a->dlam, a->dattn, la->attn_out, la->o1, la->o2, la->lse,
                               la->q, la->k, la->v, 0.0f, la->lam, attn_kind_of(c->arch), &as, a->scratch);
        } else if (c->arch == DA_ARCH_DIFF) {
            float dlambda = 0.0f;
            at->diff_backward(a->dq, a->dk, a->dv, g->subln, &dlambda, a->dattn, la->opre, la->sub_rstd, la->att,
                              la->q, la->k, la->v, w->subln, a->lambda[l], da_lambda_init(l), &as, a->scratch);
            lambda_backward(g, w, dlambda, d);
        } else if (c->arch == DA_ARCH_DIFF2) {
            at->diff2_backward(a->dq, a->dk, a->dv, a->dlam, a->dattn, la->att, la->q, la->k, la->v, la->lam, &as,
                               a->scratch);
        } else {
            at->softmax_backward(a->dq, a->dk, a->dv, a->dattn, la->att, la->q, la->k, la->v, &as, a->scratch);
        }
        if (prof) prof[DA_PROF_ATTN_BWD] += da_now_s() - t_attn - (prof[DA_PROF_HEAD_NORM] - hn0);
        DA_PROF(prof, DA_PROF_ROPE, op->rope_apply(a->dq, a->rope_cos, a->rope_sin, B, T, Cq / d, d, 1));
        DA_PROF(prof, DA_PROF_ROPE, op->rope_apply(a->dk, a->rope_cos, a->rope_sin, B, T, Ckv / d, d, 1));
        DA_PROF(prof, DA_PROF_MATMUL_BWD, matmul_backward(ex, a->dxn, g->wq, a->dq, la->xn1, w->wq, N, C, Cq, 0));
        DA_PROF(prof, DA_PROF_MATMUL_BWD, matmul_backward(ex, a->dxn, g->wk, a->dk, la->xn1, w->wk, N, C, Ckv, 1));
        DA_PROF(prof, DA_PROF_MATMUL_BWD, matmul_backward(ex, a->dxn, g->wv, a->dv, la->xn1, w->wv, N, C, Ckv, 1));
        if (c->arch == DA_ARCH_DIFF2) {
            /* d lam -> d of its logit through the sigmoid, then into lambda_proj and x */
            for (size_t i = 0; i < (size_t)N * H; i++) a->dlam[i] *= la->lam[i] * (1.0f - la->lam[i]);
            DA_PROF(prof, DA_PROF_MATMUL_BWD,
                    matmul_backward(ex, a->dxn, g->lambda_proj, a->dlam, la->xn1, w->lambda_proj, N, C, H, 1));
        }
        DA_PROF(prof, DA_PROF_RMSNORM, op->rmsnorm_backward(a->dresid, g->attention_norm, a->dxn, la->resid_in,
                                                            w->attention_norm, la->rstd1, N, C));
    }
    DA_PROF(prof, DA_PROF_EMBEDDING,
            op->embedding_backward(m->g.tok_embeddings, a->dresid, a->tokens, N, C));
}
