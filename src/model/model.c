/* The parameter table: every tensor's name, shape and place in one flat
 * buffer, so that gradients, optimizer moments and checkpoints all share
 * one layout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variant.h"
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
    attn_tensor spec[ATTN_MAX_TENSORS];
    const int n_attn = da_attn_tensors(c, spec);
    int i = 0;
#define NEXT() (base + m->tensors[i++].offset)
    w->tok_embeddings = NEXT();
    for (int l = 0; l < c->n_layers; l++) {
        da_layer_weights *L = &w->layers[l];
        memset(L, 0, sizeof *L);
        L->attention_norm = NEXT();
        for (int j = 0; j < n_attn; j++) L->attn[j] = NEXT();
        L->ffn_norm = NEXT();
        L->w1 = NEXT();
        L->w2 = NEXT();
        L->w3 = NEXT();
        if (c->mlp == DA_MLP_POLYNORM) {
            L->poly_w = NEXT();
            L->poly_b = NEXT();
        }
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
    attn_tensor spec[ATTN_MAX_TENSORS];
    const int n_attn = da_attn_tensors(cfg, spec);
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
        for (int j = 0; j < n_attn; j++) {
            char attn_name[64];
            snprintf(attn_name, sizeof attn_name, "attn.%.39s", spec[j].name);
            ADD(attn_name, spec[j].rows, spec[j].cols, spec[j].decay);
        }
        ADD("ffn_norm.weight", C, 0, 0);
        ADD("feed_forward.w1.weight", F, C, 1);
        ADD("feed_forward.w2.weight", C, F, 1);
        ADD("feed_forward.w3.weight", F, C, 1);
        if (cfg->mlp == DA_MLP_POLYNORM) {
            ADD("feed_forward.poly.weight", 3, 0, 0);
            ADD("feed_forward.poly.bias", 1, 0, 0);
        }
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
 *   norms                      1
 *   PolyNorm's weights, bias   1/3, 0 (the PolyNorm paper's init)
 *   w2                         N(0, 0.02^2 / (2 * n_layers))  (GPT-2 residual scaling)
 *   every other matrix         N(0, 0.02^2)
 *   attention tensors          as their variant's table says (attn/variant.h: attn_init) */
void da_model_init(da_model *m, uint64_t seed) {
    da_rng rng;
    da_rng_seed(&rng, seed);
    const float resid_std = 0.02f / sqrtf(2.0f * (float)m->cfg.n_layers);
    attn_tensor t_attn;
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        const attn_tensor *a = da_attn_tensor_named(&m->cfg, t->name, &t_attn);
        attn_init init = a ? a->init : t->ndim == 1 ? ATTN_INIT_ONES
                                     : ends_with(t->name, "w2.weight") ? ATTN_INIT_RESIDUAL : ATTN_INIT_NORMAL;
        const float std = a ? a->std : 0.02f;
        if (!a && strstr(t->name, "feed_forward.poly.")) {
            const int bias = strstr(t->name, ".bias") != NULL;
            for (size_t k = 0; k < t->numel; k++) p[k] = bias ? 0.0f : 1.0f / 3.0f;
        } else if (init == ATTN_INIT_VARIANT) {
            da_attn_init_tensor(&m->cfg, a, p);
        } else if (init == ATTN_INIT_ONES || init == ATTN_INIT_ZEROS) {
            for (size_t k = 0; k < t->numel; k++) p[k] = init == ATTN_INIT_ONES ? 1.0f : 0.0f;
        } else if (init == ATTN_INIT_FAN_IN_UNIFORM) {
            const float bound = 1.0f / sqrtf((float)t->shape[1]);
            for (size_t k = 0; k < t->numel; k++) p[k] = bound * (2.0f * da_rng_uniform(&rng) - 1.0f);
        } else {
            const float sd = init == ATTN_INIT_RESIDUAL ? resid_std : std;
            for (size_t k = 0; k < t->numel; k++) p[k] = sd * da_rng_normal(&rng);
        }
    }
}

float da_model_lambda(const da_model *m, int layer) {
    const attn_variant *v = da_attn_variant_of(m->cfg.arch);
    if (!v->per_layer_lambda) return 0.0f;
    float consts[ATTN_LAYER_CONSTS];
    v->layer_consts(&m->cfg, layer, (const float *const *)m->w.layers[layer].attn, consts);
    return consts[0];
}

size_t da_config_param_count(const da_config *c) {
    /* the tensor table's sizes, summed without building it; test_hostile checks the two agree for every arch */
    const uint64_t C = (uint64_t)c->dim, F = (uint64_t)c->ffn_hidden, V = (uint64_t)c->vocab_size;
    attn_tensor t[ATTN_MAX_TENSORS];
    const int n_attn = da_attn_tensors(c, t);
    uint64_t layer = C + C + 3 * F * C + (c->mlp == DA_MLP_POLYNORM ? 4 : 0); /* norms, ffn */
    for (int j = 0; j < n_attn; j++) layer += (uint64_t)t[j].rows * (uint64_t)(t[j].cols ? t[j].cols : 1);
    uint64_t n = V * C + (uint64_t)c->n_layers * layer + C + (c->tie_embeddings ? 0 : V * C);
    return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}
