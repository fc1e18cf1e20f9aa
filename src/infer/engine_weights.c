/* An engine's weights: the tensor table, its storage, and an engine made from
 * a da_model in memory. Loading from a file is engine_load.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "attn/variant.h"
#include "infer/engine.h"
#include "infer/session.h"
#include "ops/finite.h"

#define ALIGN 64

const char *da_act_mode_name(da_act_mode m) {
    static const char *names[] = {"q8", "int8-dynamic", "int8-static", "bf16", "f32"};
    return (unsigned)m < 5 ? names[m] : "?";
}

int da_act_mode_parse(const char *s, da_act_mode *out) {
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, da_act_mode_name((da_act_mode)i))) {
            *out = (da_act_mode)i;
            return 0;
        }
    return -1;
}

/* Names and shapes from da_model's table, without its parameters: a
 * file's declared configuration must not cost memory before the file's
 * tensors are checked against it. */
da_status da_engine_init_table(da_engine *e, const da_config *cfg) {
    memset(e, 0, sizeof *e);
    da_model tmp;
    da_status st = da_model_create_table(&tmp, cfg);
    if (st.code) return st;
    e->cfg = *cfg;
    e->n_tensors = tmp.n_tensors;
    e->t = calloc((size_t)tmp.n_tensors, sizeof *e->t);
    e->layers = calloc((size_t)cfg->n_layers, sizeof *e->layers);
    if (!e->t || !e->layers) st = da_errorf("out of memory");
    for (int i = 0; !st.code && i < tmp.n_tensors; i++) {
        snprintf(e->t[i].name, sizeof e->t[i].name, "%s", tmp.tensors[i].name);
        e->t[i].rows = tmp.tensors[i].shape[0];
        e->t[i].cols = tmp.tensors[i].ndim == 2 ? tmp.tensors[i].shape[1] : 0;
    }
    da_model_free(&tmp);
    if (st.code) da_engine_release(e);
    return st;
}

da_status da_engine_add_head_copy(da_engine *e) {
    da_qtensor *t = realloc(e->t, (size_t)(e->n_tensors + 1) * sizeof *t);
    if (!t) return da_errorf("out of memory");
    e->t = t;
    da_qtensor *h = &e->t[e->n_tensors++];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "output.weight");
    h->rows = e->cfg.vocab_size;
    h->cols = e->cfg.dim;
    e->head_copy = 1;
    return da_ok();
}

static const float *f32_of(const da_qtensor *t) { return (const float *)(const void *)t->data; }

/* The views of e->layers, in da_model's tensor order (model.c map_weights). */
void da_engine_bind(da_engine *e) {
    const da_config *c = &e->cfg;
    int i = 0;
    i++; /* the embedding, looked up row by row (da_engine_embed_row) */
    const attn_variant *var = da_attn_variant_of(c->arch);
    attn_tensor spec[ATTN_MAX_TENSORS];
    const int n_attn = da_attn_tensors(c, spec);
    for (int l = 0; l < c->n_layers; l++) {
        da_qlayer *L = &e->layers[l];
        L->attention_norm = f32_of(&e->t[i++]);
        for (int j = 0; j < n_attn; j++, i++) {
            L->attn[j] = &e->t[i];
            L->attn_f32[j] = spec[j].role == ATTN_PARAM ? f32_of(&e->t[i]) : NULL;
        }
        memset(L->attn_consts, 0, sizeof L->attn_consts);
        if (var->layer_consts) var->layer_consts(c, l, L->attn_f32, L->attn_consts);
        L->ffn_norm = f32_of(&e->t[i++]);
        L->w1 = &e->t[i++];
        L->w2 = &e->t[i++];
        L->w3 = &e->t[i++];
        L->poly_w = c->mlp == DA_MLP_POLYNORM ? f32_of(&e->t[i++]) : NULL;
        L->poly_b = c->mlp == DA_MLP_POLYNORM ? f32_of(&e->t[i++]) : NULL;
    }
    e->norm = f32_of(&e->t[i++]);
    /* tied: the head copy, else the f32 embedding */
    e->output = !c->tie_embeddings ? &e->t[i++] : e->head_copy ? &e->t[e->n_tensors - 1] : &e->t[0];
}

da_status da_engine_pack(da_engine *e, const da_ops *ops) {
    if (!ops->q8_0_r16) return da_ok();
    size_t widest = 0;
    for (int i = 0; i < e->n_tensors; i++)
        if (e->t[i].type == DA_QT_Q8_0 && e->t[i].row_bytes > widest) widest = e->t[i].row_bytes;
    unsigned char *tmp = widest ? malloc(16 * widest) : NULL;
    if (widest && !tmp) return da_errorf("out of memory packing the Q8_0 matrices (%zu bytes)", 16 * widest);
    for (int i = 0; i < e->n_tensors; i++) {
        da_qtensor *t = &e->t[i];
        /* the embedding only where it is the head too: its lookups would unpack a row each */
        if (t->type != DA_QT_Q8_0 || !t->cols || t->packed || (i == 0 && e->output != t)) continue;
        for (int g = 0; g + 16 <= t->rows; g += 16)
            da_q8_0_pack16((unsigned char *)t->data + (size_t)g * t->row_bytes, t->cols / QK8_0, tmp);
        t->packed = 1;
    }
    free(tmp);
    return da_ok();
}

void da_engine_embed_row(const da_engine *e, int token, float *out) {
    const da_qtensor *t = &e->t[0];
    if (t->type == DA_QT_F32) memcpy(out, t->data + (size_t)token * t->row_bytes, (size_t)t->cols * sizeof(float));
    else da_qtensor_dequantize_row(t, token, out);
}

static size_t pad(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

da_status da_engine_alloc_blob(da_engine *e) {
    size_t total = 0;
    for (int i = 0; i < e->n_tensors; i++) {
        da_qtensor *t = &e->t[i];
        t->row_bytes = t->cols ? da_qtype_row_bytes(t->type, t->cols) : 4;
        total += pad(t->row_bytes * (size_t)t->rows);
    }
    /* On 2 MB pages where the kernel lends them: a decoding step streams every weight once, and with 4 KB pages
     * each 4 KB costs a TLB miss. A model under 8 MB keeps small pages (rounding it up would cost more than it
     * reads). */
    const size_t huge = (size_t)2 << 20, need = pad(total ? total : 1);
    const int on_huge = need >= 4 * huge;
    const size_t bytes = on_huge ? (need + huge - 1) / huge * huge : need;
    e->blob = aligned_alloc(on_huge ? huge : ALIGN, bytes);
    if (!e->blob) return da_errorf("out of memory allocating %.1f MB of weights", (double)total / 1e6);
#ifdef MADV_HUGEPAGE
    if (on_huge) (void)madvise(e->blob, bytes, MADV_HUGEPAGE); /* advice: without it the weights work as they are */
#endif
    size_t off = 0;
    for (int i = 0; i < e->n_tensors; i++) {
        e->t[i].data = e->blob + off;
        off += pad(e->t[i].row_bytes * (size_t)e->t[i].rows);
    }
    return da_ok();
}

void da_engine_release(da_engine *e) {
    free(e->tokenizer_json);
    da_tokenizer_free(e->tok);
    free(e->t);
    free(e->layers);
    free(e->act_absmax);
    free(e->blob);
    memset(e, 0, sizeof *e);
}

da_status da_engine_init_from_model(da_engine *e, const da_model *m) {
    da_status st = da_engine_init_table(e, &m->cfg);
    if (st.code) return st;
    for (int i = 0; i < e->n_tensors; i++) {
        da_qtensor *t = &e->t[i];
        t->type = DA_QT_F32;
        t->row_bytes = t->cols ? (size_t)t->cols * 4 : 4;
        t->data = (const unsigned char *)(const void *)(m->params + m->tensors[i].offset);
    }
    e->weight_type = DA_QT_F32;
    e->act = DA_ACTQ_F32;
    da_engine_bind(e);
    if ((st = da_engine_set_tokenizer(e, m->tokenizer_json, "the model")).code) da_engine_release(e);
    return st;
}

da_status da_engine_set_tokenizer(da_engine *e, const char *json, const char *where) {
    free(e->tokenizer_json);
    da_tokenizer_free(e->tok);
    e->tokenizer_json = NULL;
    e->tok = NULL;
    if (!json) return da_ok();
    if (!(e->tokenizer_json = strdup(json))) return da_errorf("%s: out of memory", where);
    char name[4200];
    snprintf(name, sizeof name, "%s: the embedded tokenizer", where);
    da_status st = da_tokenizer_from_json(&e->tok, json, strlen(json), name);
    if (!st.code && da_tokenizer_vocab_size(e->tok) != e->cfg.vocab_size)
        st = da_errorf("%s has %d tokens but the model's vocabulary (vocab_size) %d", name,
                       da_tokenizer_vocab_size(e->tok), e->cfg.vocab_size);
    return st;
}

const da_tokenizer *da_engine_tokenizer(const da_engine *e) { return e->tok; }

da_status da_engine_to_model(const da_engine *e, da_model *m) {
    da_status st = da_model_create(m, &e->cfg);
    if (st.code) return st;
    for (int i = 0; i < m->n_tensors; i++) { /* not the head copy: the embedding holds the tied head */
        const da_qtensor *t = &e->t[i];
        const int64_t rows = t->cols ? t->rows : 1, n = t->cols ? t->cols : t->rows;
        for (int64_t r = 0; r < rows; r++) da_qtensor_dequantize_row(t, (int)r, m->params + m->tensors[i].offset + r * n);
    }
    if (e->tokenizer_json && !(m->tokenizer_json = strdup(e->tokenizer_json))) {
        da_model_free(m);
        return da_errorf("out of memory");
    }
    return da_ok();
}

/* ---------------------------------------------------------------- public */

da_status da_engine_from_model(da_engine **out, const da_model *m) {
    *out = calloc(1, sizeof **out);
    if (!*out) return da_errorf("out of memory");
    da_status st = da_engine_init_from_model(*out, m);
    if (st.code) {
        free(*out);
        *out = NULL;
    }
    return st;
}

void da_engine_free(da_engine *e) {
    if (!e) return;
    da_engine_release(e);
    free(e);
}

const da_config *da_engine_config(const da_engine *e) { return &e->cfg; }
const char *da_engine_weight_type(const da_engine *e) { return da_qtype_name(e->weight_type); }
da_act_mode da_engine_default_act(const da_engine *e) { return e->act; }

int da_engine_n_tensors(const da_engine *e) { return e->n_tensors; }

void da_engine_tensor(const da_engine *e, int i, const char **name, const char **type, int *rows, int *cols) {
    const da_qtensor *t = &e->t[i];
    if (name) *name = t->name;
    if (type) *type = da_qtype_name(t->type);
    if (rows) *rows = t->rows;
    if (cols) *cols = t->cols;
}

size_t da_engine_file_bytes(const da_engine *e) { return e->file_bytes; }

double da_engine_decode_bytes(const da_engine *e, long context, int kv_int8, int kv_f16) {
    const da_config *c = &e->cfg;
    double bytes = 0;
    for (int i = 1; i < e->n_tensors; i++) bytes += (double)e->t[i].row_bytes * e->t[i].rows;
    bytes += e->output == &e->t[0] ? (double)e->t[0].row_bytes * e->t[0].rows : (double)e->t[0].row_bytes;
    const attn_variant *var = da_attn_variant_of(c->arch);
    if (var->cache_read_bytes) return bytes + (double)c->n_layers * var->cache_read_bytes(c, context);
    const int kb = da_kv_scale_block(da_head_dim(c));
    const double Ckv = (double)da_attn_kv_cols(c);
    const long keys = c->window > 0 && context > c->window ? c->window : context;
    /* one position's keys, or its values */
    const double per_row = kv_int8 ? Ckv + 4.0 * Ckv / kb : kv_f16 ? 2.0 * Ckv : 4.0 * Ckv;
    return bytes + (double)c->n_layers * keys * 2.0 * per_row;
}

size_t da_engine_weight_bytes(const da_engine *e) {
    size_t n = 0;
    for (int i = 0; i < e->n_tensors; i++) n += e->t[i].row_bytes * (size_t)e->t[i].rows;
    return n;
}

/* Every weight dequantized row by row (f16 and bf16 values, block scales)
 * and checked: a NaN scale of one q4_K block made eval loss NaN while eval
 * ppl reported a finite number. */
da_status da_engine_check_finite(const da_engine *e, const char *path) {
    int widest = 1;
    for (int i = 0; i < e->n_tensors; i++)
        if (e->t[i].cols > widest) widest = e->t[i].cols;
    float *row = malloc((size_t)widest * sizeof *row);
    if (!row) return da_errorf("out of memory");
    da_status st = da_ok();
    for (int i = 0; i < e->n_tensors && !st.code; i++) {
        const da_qtensor *t = &e->t[i];
        const int rows = t->cols ? t->rows : 1, cols = t->cols ? t->cols : t->rows;
        for (int r = 0; r < rows && !st.code; r++) {
            const float *x = row;
            if (t->type == DA_QT_F32) x = (const float *)(const void *)(t->data + (size_t)r * t->row_bytes);
            else da_qtensor_dequantize_row(t, r, row);
            size_t at = da_first_nonfinite(x, (size_t)cols);
            if (at < (size_t)cols)
                st = da_errorf("%s: tensor %s (%s) holds %g at row %d, column %zu%s; a model with non-finite "
                               "weights is refused (--allow-nonfinite loads it anyway, for debugging)",
                               path, t->name, da_qtype_name(t->type), (double)x[at], r, at,
                               t->type == DA_QT_F32 || t->type == DA_QT_F16 || t->type == DA_QT_BF16
                                   ? ""
                                   : " (a block's scale is not finite)");
        }
    }
    free(row);
    return st;
}
