/* Quantizing a model's weights into an engine (quantize.h). */
#include <stdlib.h>
#include <string.h>

#include "attn/variant.h"
#include "quant/quantize.h"

/* The LM head's type (cols wide) before any width check: output_type, or
 * for the 4-bit types llama.cpp's choice, Q6_K (q8_0 where the width is off
 * its 256 block); else the weight type. */
static int head_type(const da_quantize_types *o, int cols) {
    if (o->output_type >= 0) return o->output_type;
    if (o->type == DA_QT_Q4_0 || o->type == DA_QT_Q4_K) return cols % QK_K ? DA_QT_Q8_0 : DA_QT_Q6_K;
    return o->type;
}

/* f32 for the tensors that always stay f32 (the embedding, an attention
 * tensor its variant marks not quantizable), else -1. */
static int tensor_type_fixed(const da_config *c, const da_qtensor *t, int i) {
    if (i == 0) return DA_QT_F32; /* tok_embeddings */
    attn_tensor spec;
    const attn_tensor *a = da_attn_tensor_named(c, t->name, &spec);
    return a && !a->quantizable ? DA_QT_F32 : -1;
}

/* The type a 2-D tensor gets: the embedding stays f32, and so does an
 * attention tensor its variant keeps f32 (attn/variant.h: quantizable, e.g.
 * a small gate whose output goes through a sigmoid); the LM head takes
 * output_type (q6_K for the 4-bit types by default), a tied model's head as
 * a copy of the embedding. A width off the type's block: q8_0, then f32,
 * with fallback_q8; else -1. */
static int tensor_type(const da_config *c, const da_qtensor *t, int i, const da_quantize_types *o) {
    const int fixed = tensor_type_fixed(c, t, i);
    if (fixed >= 0) return fixed;
    int type = o->type;
    if (!strcmp(t->name, "output.weight")) type = head_type(o, t->cols);
    if (t->cols % da_qtype_block(type) == 0) return type;
    if (!o->fallback_q8) return -1;
    return t->cols % QK8_0 ? DA_QT_F32 : DA_QT_Q8_0;
}

/* A tied model gets a quantized copy of its embedding as the head, unless
 * the head is to stay f32 (then the embedding itself serves). */
static da_status table_for(da_engine *e, const da_config *cfg, const da_quantize_types *o) {
    da_status st = da_engine_init_table(e, cfg);
    if (!st.code && cfg->tie_embeddings && head_type(o, cfg->dim) != DA_QT_F32) st = da_engine_add_head_copy(e);
    return st;
}

/* The embedding is stored as llama.cpp stores it (token_embd): in the weight
 * type (q8_0 where the width is off the type's block, f32 off q8_0's too),
 * or, tied, as the head (its quantized copy, or f32). The engine looks rows up in f32, so they are
 * rounded through that type here, and the engine in memory computes what
 * the file it is saved to does. */
static int embed_type(const da_engine *q, const da_quantize_types *o) {
    const da_qtensor *t = &q->t[0], *src = q->head_copy ? &q->t[q->n_tensors - 1] : NULL;
    int type = src ? src->type : q->cfg.tie_embeddings ? head_type(o, t->cols) : o->type;
    if (!src && t->cols % da_qtype_block(type)) type = t->cols % QK8_0 ? DA_QT_F32 : DA_QT_Q8_0;
    return type;
}

static void round_embedding(da_engine *q, const da_quantize_types *o) {
    da_qtensor *t = &q->t[0];
    const da_qtensor *src = q->head_copy ? &q->t[q->n_tensors - 1] : NULL;
    const int type = q->embed_type = embed_type(q, o);
    if (type == DA_QT_F32) return;
    const size_t rb = da_qtype_row_bytes(type, t->cols);
    float *x = (float *)(void *)t->data;
#pragma omp parallel
    {
        unsigned char *row = src ? NULL : malloc(rb);
#pragma omp for schedule(static)
        for (int r = 0; r < t->rows; r++) {
            float *xr = x + (size_t)r * t->cols;
            if (src) {
                da_qtensor_dequantize_row(src, r, xr);
            } else if (row) {
                da_quantize_row(type, row, xr, t->cols);
                da_dequantize_row(type, row, xr, t->cols);
            }
        }
        free(row);
    }
}

/* Every tensor's type into e->t (error: the first that does not fit). */
static da_status assign_types(da_engine *e, const da_quantize_types *o, int *n_fallback) {
    if (n_fallback) *n_fallback = 0;
    for (int i = 0; i < e->n_tensors; i++) {
        da_qtensor *t = &e->t[i];
        if (!t->cols) {
            t->type = DA_QT_F32;
            continue;
        }
        t->type = tensor_type(&e->cfg, t, i, o);
        if (t->type < 0)
            return da_errorf("quantize: %s has %d columns, not a multiple of %s's block of %d; allow a fallback to "
                             "q8_0 for such matmuls, or choose another type",
                             t->name, t->cols, da_qtype_name(o->type), da_qtype_block(o->type));
        if (n_fallback && tensor_type_fixed(&e->cfg, t, i) < 0 && strcmp(t->name, "output.weight") && t->type != o->type)
            (*n_fallback)++;
    }
    return da_ok();
}

da_status da_quantize_check(const da_config *cfg, const da_quantize_types *o, int *n_fallback) {
    da_engine e;
    da_status st = table_for(&e, cfg, o);
    if (!st.code) st = assign_types(&e, o, n_fallback);
    da_engine_release(&e);
    return st;
}

da_status da_quantize_plan(da_engine *q, const da_config *cfg, const da_quantize_types *o) {
    memset(q, 0, sizeof *q);
    if (!da_qtype_name(o->type)) return da_errorf("quantize: unknown weight type %d", o->type);
    da_status st = table_for(q, cfg, o);
    if (!st.code) st = assign_types(q, o, NULL);
    if (st.code) {
        da_engine_release(q);
        return st;
    }
    q->weight_type = o->type;
    q->embed_type = embed_type(q, o);
    q->act = DA_ACTQ_Q8;
    return da_ok();
}

da_status da_engine_quantize(da_engine *q, const da_model *m, const da_quantize_types *o) {
    memset(q, 0, sizeof *q);
    if (!da_qtype_name(o->type)) return da_errorf("quantize: unknown weight type %d", o->type);
    da_status st = table_for(q, &m->cfg, o);
    if (st.code) {
        da_engine_release(q);
        return st;
    }
    q->weight_type = o->type;
    if ((st = assign_types(q, o, NULL)).code || (st = da_engine_alloc_blob(q)).code ||
        (st = da_engine_set_tokenizer(q, m->tokenizer_json, "the model")).code) {
        da_engine_release(q);
        return st;
    }
    for (int i = 0; i < q->n_tensors; i++) {
        da_qtensor *t = &q->t[i];
        const float *src = m->params + m->tensors[i < m->n_tensors ? i : 0].offset; /* the head copy: the embedding */
        const int rows = t->cols ? t->rows : 1, n = t->cols ? t->cols : t->rows;
#pragma omp parallel for schedule(dynamic, 16)
        for (int r = 0; r < rows; r++)
            da_quantize_row(t->cols ? t->type : DA_QT_F32, (unsigned char *)t->data + (size_t)r * t->row_bytes,
                            src + (size_t)r * n, n);
    }
    round_embedding(q, o);
    q->act = DA_ACTQ_Q8;
    da_engine_bind(q);
    return da_ok();
}

