/* The whole model, forward and backward, over a (B, T) batch: embedding,
 * L pre-norm blocks (attention, SwiGLU), final norm, LM head, cross-entropy. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variant.h"
#include "model/probe.h"
#include "diffattn/model.h"
#include "ops/ops.h"
#include "core/profile.h"

typedef struct {
    float *resid_in;    /* (B, T, C) block input */
    float *xn1, *rstd1; /* (B, T, C), (B, T) */
    float *proj[ATTN_MAX_TENSORS]; /* per ATTN_IN tensor j: (B, T, rows_j), after its RoPE and act; else NULL */
    float *saved;       /* the variant's saved activations (train_floats) */
    float consts[ATTN_LAYER_CONSTS]; /* the variant's layer constants of the last forward */
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
    const attn_variant *var;
    int n_attn;                      /* the layer's attention tensors */
    attn_tensor spec[ATTN_MAX_TENSORS];
    /* backward scratch */
    float *dresid, *dxn, *dattn, *dh1, *dh3, *dgate, *scratch;
    float *dproj[ATTN_MAX_TENSORS];  /* per ATTN_IN tensor: d loss / d its product */
    float *pool;        /* one allocation behind every float array above */
};

const float *da_acts_logits(const da_acts *a) { return a->logits; }
const float *da_acts_losses(const da_acts *a) { return a->losses; }

/* Layer l's product of the tensor with view v, or NULL. */
static const float *view_of(const da_acts *a, int layer, attn_view v) {
    for (int j = 0; j < a->n_attn; j++)
        if (a->spec[j].view == v) return a->layers[layer].proj[j];
    return NULL;
}

const float *da_acts_lam(const da_acts *a, int layer) { return view_of(a, layer, ATTN_VIEW_LAM); }

void da_acts_qk(const da_acts *a, int layer, const float **q, const float **k) {
    *q = view_of(a, layer, ATTN_VIEW_Q);
    *k = view_of(a, layer, ATTN_VIEW_K);
}

void da_acts_probe(const da_acts *a, const da_model *m, int layer, attn_probe *p) {
    memset(p, 0, sizeof *p);
    p->cfg = &a->cfg;
    da_acts_qk(a, layer, &p->q, &p->k);
    p->lam = da_acts_lam(a, layer);
    p->lambda = da_model_lambda(m, layer);
    p->T = a->T;
    p->proj = (const float *const *)a->layers[layer].proj;
    p->w = (const float *const *)m->w.layers[layer].attn;
    p->saved = a->layers[layer].saved;
}

const float *da_acts_v(const da_acts *a, int layer) { return view_of(a, layer, ATTN_VIEW_V); }
const float *da_acts_attn_out(const da_acts *a, int layer) { return a->layers[layer].attn_out; }

const float *da_acts_hidden(const da_acts *a, int layer) {
    return layer + 1 < a->cfg.n_layers ? a->layers[layer + 1].resid_in : a->resid_out;
}

/* Assigns every array of a from base (or only counts, when base is NULL) and
 * returns the floats used: one layout, used both to size and to fill the pool. */
static size_t layout(da_acts *a, float *base) {
    const da_config *cfg = &a->cfg;
    const size_t B = a->cap_B, T = a->cap_T, C = cfg->dim, F = cfg->ffn_hidden, V = cfg->vocab_size;
    const size_t L = cfg->n_layers, d = da_head_dim(cfg);
    const size_t BT = B * T, A = da_attn_out_cols(cfg); /* the attention's width: dim unless head_dim is set */
    const int flash = a->kernel == DA_ATTN_FLASH;
    const attn_variant *var = a->var;
    const attn_shape as = da_attn_shape_of(cfg, (int)B, (int)T, a->n_threads);
    size_t used = 0;
    /* TAKE(n): the next n floats (a NULL-based pointer while counting, never dereferenced) */
#define TAKE(n) (used += (n), base ? base + used - (n) : NULL)
    for (size_t l = 0; l < L; l++) {
        layer_acts *la = &a->layers[l];
        la->resid_in = TAKE(BT * C);
        la->xn1 = TAKE(BT * C);
        la->rstd1 = TAKE(BT);
        for (int j = 0; j < a->n_attn; j++) la->proj[j] = a->spec[j].role == ATTN_IN ? TAKE(BT * a->spec[j].rows) : NULL;
        la->saved = TAKE(var->train_floats(&as, flash));
        la->attn_out = TAKE(BT * A);
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
    a->dresid = TAKE(BT * C);
    a->dxn = TAKE(BT * C);
    a->dattn = TAKE(BT * A);
    for (int j = 0; j < a->n_attn; j++) a->dproj[j] = a->spec[j].role == ATTN_IN ? TAKE(BT * a->spec[j].rows) : NULL;
    a->dh1 = TAKE(BT * F);
    a->dh3 = TAKE(BT * F);
    a->dgate = TAKE(BT * F);
    a->scratch = TAKE(da_attn_scratch_floats(var, &as, flash));
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
    a->var = da_attn_variant_of(cfg->arch);
    a->n_attn = da_attn_tensors(cfg, a->spec);
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
    da_rope_tables(cfg, a->rope_cos, a->rope_sin, T);
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

/* The variant's view of layer l (weights w, gradients g: NULL in the forward). */
static attn_train_ctx attn_ctx_of(da_acts *a, int l, float *const *w, float *const *g) {
    layer_acts *la = &a->layers[l];
    attn_train_ctx x = {&a->cfg,     &a->exec,    l,     a->kernel == DA_ATTN_FLASH,
                        da_attn_shape_of(&a->cfg, a->B, a->T, a->n_threads),
                        a->cap_B,    a->cap_T,    w,     g,
                        la->proj,    a->dproj,    la->saved, a->scratch,
                        la->consts,  la->attn_out, a->dattn};
    return x;
}

/* proj_j = act_j(RoPE_j(xn1 W_j^T)) for the layer's ATTN_IN tensors. */
static void attn_inputs(da_acts *a, const da_layer_weights *w, layer_acts *la, const da_ops *op) {
    const da_exec *ex = &a->exec;
    double *prof = ex->prof_s;
    const int B = a->B, T = a->T, N = B * T, C = a->cfg.dim, d = da_head_dim(&a->cfg);
    for (int j = 0; j < a->n_attn; j++)
        if (a->spec[j].role == ATTN_IN)
            DA_PROF(prof, DA_PROF_MATMUL_FWD,
                    da_matmul_forward(ex, la->proj[j], la->xn1, w->attn[j], N, C, a->spec[j].rows, 0));
    for (int j = 0; j < a->n_attn; j++)
        if (a->spec[j].rope)
            DA_PROF(prof, DA_PROF_ROPE,
                    op->rope_apply(la->proj[j], a->rope_cos, a->rope_sin, B, T, a->spec[j].rows / d, d, 0));
    for (int j = 0; j < a->n_attn; j++)
        if (a->spec[j].act == ATTN_ACT_SIGMOID) {
            float *p = la->proj[j];
            for (size_t i = 0; i < (size_t)N * a->spec[j].rows; i++) p[i] = 1.0f / (1.0f + expf(-p[i]));
        }
}

/* d loss / d proj_j -> dxn (overwritten) and the W_j gradients: through the act, RoPE, the matmuls. */
static void attn_inputs_backward(da_acts *a, const da_layer_weights *w, da_layer_weights *g, layer_acts *la,
                                 const da_ops *op) {
    const da_exec *ex = &a->exec;
    double *prof = ex->prof_s;
    const int B = a->B, T = a->T, N = B * T, C = a->cfg.dim, d = da_head_dim(&a->cfg);
    for (int j = 0; j < a->n_attn; j++)
        if (a->spec[j].rope)
            DA_PROF(prof, DA_PROF_ROPE,
                    op->rope_apply(a->dproj[j], a->rope_cos, a->rope_sin, B, T, a->spec[j].rows / d, d, 1));
    int first = 1;
    for (int j = 0; j < a->n_attn; j++) {
        if (a->spec[j].role != ATTN_IN) continue;
        const int rows = a->spec[j].rows;
        if (a->spec[j].act == ATTN_ACT_SIGMOID) {
            /* d act -> d its input: s (1 - s) */
            const float *p = la->proj[j];
            float *dp = a->dproj[j];
            for (size_t i = 0; i < (size_t)N * rows; i++) dp[i] *= p[i] * (1.0f - p[i]);
        }
        DA_PROF(prof, DA_PROF_MATMUL_BWD,
                da_matmul_backward(ex, a->dxn, g->attn[j], a->dproj[j], la->xn1, w->attn[j], N, C, rows, !first));
        first = 0;
    }
}

float da_forward(da_model *m, da_acts *a, const int *tokens, const int *targets, int B, int T) {
    const da_config *c = &m->cfg;
    /* A smaller (B, T) than the acts were made for reuses their buffers. */
    if (B <= 0 || T <= 0 || B > a->cap_B || T > a->cap_T) return NAN;
    a->B = B;
    a->T = T;
    /* the one field training changes between steps (the --lambda-ramp state) reaches the acts' copy */
    a->cfg.lambda_hold = c->lambda_hold;
    const int C = c->dim, F = c->ffn_hidden, V = c->vocab_size, N = B * T;
    const int out = da_attn_out_tensor(c);
    const da_exec *ex = &a->exec;
    const da_ops *op = da_ops_of(ex->isa);
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
        attn_inputs(a, w, la, op);
        double t_attn = prof ? da_now_s() : 0.0, hn0 = prof ? prof[DA_PROF_HEAD_NORM] : 0.0;
        attn_train_ctx actx = attn_ctx_of(a, l, w->attn, NULL);
        a->var->forward(&actx);
        /* a head norm is charged to its own phase and taken out of the attention's */
        if (prof) prof[DA_PROF_ATTN_FWD] += da_now_s() - t_attn - (prof[DA_PROF_HEAD_NORM] - hn0);
        DA_PROF(prof, DA_PROF_RESIDUAL, memcpy(la->resid_mid, la->resid_in, (size_t)N * C * sizeof(float)));
        DA_PROF(prof, DA_PROF_MATMUL_FWD,
                da_matmul_forward(ex, la->resid_mid, la->attn_out, w->attn[out], N, a->spec[out].cols, C, 1));

        DA_PROF(prof, DA_PROF_RMSNORM,
                op->rmsnorm_forward(la->xn2, la->rstd2, la->resid_mid, w->ffn_norm, N, C, c->norm_eps));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, da_matmul_forward(ex, la->h1, la->xn2, w->w1, N, C, F, 0));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, da_matmul_forward(ex, la->h3, la->xn2, w->w3, N, C, F, 0));
        if (w->poly_w)
            DA_PROF(prof, DA_PROF_SWIGLU, da_polynorm_forward(la->gate, la->h1, la->h3, w->poly_w, w->poly_b, N, F));
        else
            DA_PROF(prof, DA_PROF_SWIGLU, op->swiglu_forward(la->gate, la->h1, la->h3, (size_t)N * F));
        DA_PROF(prof, DA_PROF_RESIDUAL, memcpy(next, la->resid_mid, (size_t)N * C * sizeof(float)));
        DA_PROF(prof, DA_PROF_MATMUL_FWD, da_matmul_forward(ex, next, la->gate, w->w2, N, F, C, 1));
    }
    DA_PROF(prof, DA_PROF_RMSNORM,
            op->rmsnorm_forward(a->xf, a->rstdf, a->resid_out, m->w.norm, N, C, c->norm_eps));
    DA_PROF(prof, DA_PROF_MATMUL_FWD, da_matmul_forward(ex, a->logits, a->xf, m->w.output, N, C, V, 0));
    if (!targets) return 0.0f;
    float loss;
    DA_PROF(prof, DA_PROF_LOSS, loss = op->cross_entropy_forward(a->losses, a->logits, targets, N, V));
    return loss;
}

void da_backward(da_model *m, da_acts *a) {
    const da_config *c = &m->cfg;
    const int B = a->B, T = a->T, C = c->dim, F = c->ffn_hidden;
    const int V = c->vocab_size, N = B * T, out = da_attn_out_tensor(c);
    if (!a->have_targets || !m->grads) return;
    const da_exec *ex = &a->exec;
    const da_ops *op = da_ops_of(ex->isa);
    double *prof = ex->prof_s;

    DA_PROF(prof, DA_PROF_LOSS, op->cross_entropy_backward(a->logits, a->targets, N, V));
    float *dlogits = a->logits;
    DA_PROF(prof, DA_PROF_MATMUL_BWD,
            da_matmul_backward(ex, a->dxn, m->g.output, dlogits, a->xf, m->w.output, N, C, V, 0));
    DA_PROF(prof, DA_PROF_RESIDUAL, memset(a->dresid, 0, (size_t)N * C * sizeof(float)));
    DA_PROF(prof, DA_PROF_RMSNORM,
            op->rmsnorm_backward(a->dresid, m->g.norm, a->dxn, a->resid_out, m->w.norm, a->rstdf, N, C));

    for (int l = c->n_layers - 1; l >= 0; l--) {
        layer_acts *la = &a->layers[l];
        const da_layer_weights *w = &m->w.layers[l];
        da_layer_weights *g = &m->g.layers[l];

        /* feed-forward: dresid holds d loss / d block output */
        DA_PROF(prof, DA_PROF_MATMUL_BWD,
                da_matmul_backward(ex, a->dgate, g->w2, a->dresid, la->gate, w->w2, N, F, C, 0));
        if (w->poly_w)
            DA_PROF(prof, DA_PROF_SWIGLU, da_polynorm_backward(a->dh1, a->dh3, g->poly_w, g->poly_b, a->dgate, la->h1,
                                                               la->h3, w->poly_w, w->poly_b, N, F));
        else
            DA_PROF(prof, DA_PROF_SWIGLU,
                    op->swiglu_backward(a->dh1, a->dh3, a->dgate, la->h1, la->h3, (size_t)N * F));
        DA_PROF(prof, DA_PROF_MATMUL_BWD, da_matmul_backward(ex, a->dxn, g->w1, a->dh1, la->xn2, w->w1, N, C, F, 0));
        DA_PROF(prof, DA_PROF_MATMUL_BWD, da_matmul_backward(ex, a->dxn, g->w3, a->dh3, la->xn2, w->w3, N, C, F, 1));
        DA_PROF(prof, DA_PROF_RMSNORM,
                op->rmsnorm_backward(a->dresid, g->ffn_norm, a->dxn, la->resid_mid, w->ffn_norm, la->rstd2, N, C));

        /* attention: dresid now holds d loss / d resid_mid */
        DA_PROF(prof, DA_PROF_MATMUL_BWD, da_matmul_backward(ex, a->dattn, g->attn[out], a->dresid, la->attn_out,
                                                          w->attn[out], N, a->spec[out].cols, C, 0));
        double t_attn = prof ? da_now_s() : 0.0, hn0 = prof ? prof[DA_PROF_HEAD_NORM] : 0.0;
        attn_train_ctx actx = attn_ctx_of(a, l, w->attn, g->attn);
        a->var->backward(&actx);
        if (prof) prof[DA_PROF_ATTN_BWD] += da_now_s() - t_attn - (prof[DA_PROF_HEAD_NORM] - hn0);
        attn_inputs_backward(a, w, g, la, op);
        DA_PROF(prof, DA_PROF_RMSNORM, op->rmsnorm_backward(a->dresid, g->attention_norm, a->dxn, la->resid_in,
                                                            w->attention_norm, la->rstd1, N, C));
    }
    DA_PROF(prof, DA_PROF_EMBEDDING,
            op->embedding_backward(m->g.tok_embeddings, a->dresid, a->tokens, N, C));
}
