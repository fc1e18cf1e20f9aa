/* The parameter table: every tensor's name, shape and place in one flat
 * buffer, so that gradients, optimizer moments and checkpoints all share
 * one layout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/model.h"

typedef struct {
    da_tensor *t;
    int n, cap;
    size_t offset;
} table_builder;

static int table_add(table_builder *b, const char *name, int rows, int cols, int decay) {
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 32;
        da_tensor *t = realloc(b->t, (size_t)cap * sizeof *t);
        if (!t) return -1;
        b->t = t;
        b->cap = cap;
    }
    da_tensor *t = &b->t[b->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->numel = (size_t)rows * (size_t)(cols ? cols : 1);
    t->offset = b->offset;
    t->decay = decay;
    b->offset += t->numel;
    return 0;
}

/* Fills w with pointers into base following m's tensor table. */
static void map_weights(const da_model *m, float *base, da_weights *w) {
    const da_config *c = &m->cfg;
    int i = 0;
#define NEXT() (base + m->tensors[i++].offset)
    w->tok_embeddings = NEXT();
    for (int l = 0; l < c->n_layers; l++) {
        da_layer_weights *L = &w->layers[l];
        memset(L, 0, sizeof *L);
        L->attention_norm = NEXT();
        L->wq = NEXT();
        L->wk = NEXT();
        L->wv = NEXT();
        L->wo = NEXT();
        if (c->arch == DA_ARCH_DIFF2) L->lambda_proj = NEXT();
        if (c->arch == DA_ARCH_DIFF) {
            L->lambda_q1 = NEXT();
            L->lambda_k1 = NEXT();
            L->lambda_q2 = NEXT();
            L->lambda_k2 = NEXT();
            L->subln = NEXT();
        }
        L->ffn_norm = NEXT();
        L->w1 = NEXT();
        L->w2 = NEXT();
        L->w3 = NEXT();
    }
    w->norm = NEXT();
    w->output = c->tie_embeddings ? w->tok_embeddings : NEXT();
#undef NEXT
}

da_status da_model_create_table(da_model *m, const da_config *cfg) {
    memset(m, 0, sizeof *m);
    da_status st = da_config_validate(cfg);
    if (st.code) return st;
    m->cfg = *cfg;
    const int C = cfg->dim, F = cfg->ffn_hidden, V = cfg->vocab_size;
    const int Ckv = C / (cfg->n_heads / cfg->n_kv_heads), d = da_head_dim(cfg);
    table_builder b = {0};
    char name[96];
    int fail = table_add(&b, "tok_embeddings.weight", V, C, 1);
    for (int l = 0; l < cfg->n_layers && !fail; l++) {
#define ADD(suffix, rows, cols, decay)                               \
    do {                                                             \
        snprintf(name, sizeof name, "layers.%d.%s", l, suffix);      \
        fail |= table_add(&b, name, rows, cols, decay);              \
    } while (0)
        ADD("attention_norm.weight", C, 0, 0);
        ADD("attn.q_proj.weight", da_q_dim(cfg), C, 1);
        ADD("attn.k_proj.weight", Ckv, C, 1);
        ADD("attn.v_proj.weight", Ckv, C, 1);
        ADD("attn.out_proj.weight", C, C, 1);
        if (cfg->arch == DA_ARCH_DIFF2) ADD("attn.lambda_proj.weight", cfg->n_heads, C, 1);
        if (cfg->arch == DA_ARCH_DIFF) {
            ADD("attn.lambda_q1", d, 0, 0);
            ADD("attn.lambda_k1", d, 0, 0);
            ADD("attn.lambda_q2", d, 0, 0);
            ADD("attn.lambda_k2", d, 0, 0);
            ADD("attn.subln.weight", 2 * d, 0, 0);
        }
        ADD("ffn_norm.weight", C, 0, 0);
        ADD("feed_forward.w1.weight", F, C, 1);
        ADD("feed_forward.w2.weight", C, F, 1);
        ADD("feed_forward.w3.weight", F, C, 1);
#undef ADD
    }
    if (!fail) fail = table_add(&b, "norm.weight", C, 0, 0);
    if (!fail && !cfg->tie_embeddings) fail = table_add(&b, "output.weight", V, C, 1);
    if (fail) {
        free(b.t);
        return da_errorf("out of memory building the tensor table");
    }
    m->tensors = b.t;
    m->n_tensors = b.n;
    m->n_params = b.offset;
    return da_ok();
}

da_status da_model_create(da_model *m, const da_config *cfg) {
    da_status st = da_model_create_table(m, cfg);
    if (st.code) return st;
    m->params = calloc(m->n_params, sizeof(float));
    m->w.layers = calloc((size_t)cfg->n_layers, sizeof(da_layer_weights));
    m->g.layers = calloc((size_t)cfg->n_layers, sizeof(da_layer_weights));
    if (!m->params || !m->w.layers || !m->g.layers) {
        const size_t n = m->n_params;
        da_model_free(m);
        return da_errorf("out of memory allocating %zu parameters (%.1f MB)", n, (double)n * 4 / 1e6);
    }
    map_weights(m, m->params, &m->w);
    return da_ok();
}

da_status da_model_alloc_grads(da_model *m) {
    if (m->grads) return da_ok();
    m->grads = calloc(m->n_params, sizeof(float));
    if (!m->grads) return da_errorf("out of memory allocating gradients (%.1f MB)", (double)m->n_params * 4 / 1e6);
    map_weights(m, m->grads, &m->g);
    return da_ok();
}

void da_model_zero_grads(da_model *m) {
    if (m->grads) memset(m->grads, 0, m->n_params * sizeof(float));
}

void da_model_free(da_model *m) {
    free(m->tensors);
    free(m->params);
    free(m->grads);
    free(m->w.layers);
    free(m->g.layers);
    free(m->tokenizer_json);
    memset(m, 0, sizeof *m);
}

const da_tensor *da_model_find(const da_model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Initialisation (documented in docs/model.md):
 *   norms, subln               1
 *   lambda_{q1,k1,q2,k2}       N(0, 0.1^2)   (the paper's choice)
 *   out_proj, w2               N(0, 0.02^2 / (2 * n_layers))  (GPT-2 residual scaling)
 *   lambda_proj (DIFF2)        U(-1/sqrt(dim), 1/sqrt(dim)): torch's nn.Linear default, which the
 *                              official V2 module keeps (it sets no init of its own); sigmoid(lambda)
 *                              then starts near 0.5 with a spread of about +-0.14 per token
 *   every other matrix         N(0, 0.02^2) */
void da_model_init(da_model *m, uint64_t seed) {
    da_rng rng;
    da_rng_seed(&rng, seed);
    const float resid_std = 0.02f / sqrtf(2.0f * (float)m->cfg.n_layers);
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        float std = 0.02f;
        if (t->ndim == 1 && strstr(t->name, "lambda_")) std = 0.1f;
        else if (t->ndim == 1) {
            for (size_t k = 0; k < t->numel; k++) p[k] = 1.0f;
            continue;
        } else if (ends_with(t->name, "lambda_proj.weight")) {
            const float bound = 1.0f / sqrtf((float)t->shape[1]);
            for (size_t k = 0; k < t->numel; k++) p[k] = bound * (2.0f * da_rng_uniform(&rng) - 1.0f);
            continue;
        } else if (ends_with(t->name, "out_proj.weight") || ends_with(t->name, "w2.weight"))
            std = resid_std;
        for (size_t k = 0; k < t->numel; k++) p[k] = std * da_rng_normal(&rng);
    }
}

float da_model_lambda(const da_model *m, int layer) {
    if (m->cfg.arch != DA_ARCH_DIFF) return 0.0f;
    const da_layer_weights *L = &m->w.layers[layer];
    int d = da_head_dim(&m->cfg);
    float a = 0, b = 0;
    for (int i = 0; i < d; i++) {
        a += L->lambda_q1[i] * L->lambda_k1[i];
        b += L->lambda_q2[i] * L->lambda_k2[i];
    }
    return expf(a) - expf(b) + da_lambda_init(layer);
}
