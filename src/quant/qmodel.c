/* Quantized models: building one from a da_model, GGUF save and load, and
 * the forward pass over a KV cache (qmodel.h). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attention.h"
#include "ops/ops.h"
#include "quant/qmodel.h"

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

/* From this many tokens in one call (a prompt), an integer-activation matmul
 * dequantizes the weight matrix and the int8 activations and runs one sgemm:
 * the same products up to the order of float sums, 1.4-2x faster than an
 * int8 dot per (row, token) at 200 tokens, where the dequantization is paid
 * once for all of them. Decoding (one token) keeps the int8 dots. */
#define PREFILL_SGEMM_MIN 16

static int is_float_type(int t) { return t == DA_QT_F32 || t == DA_QT_F16 || t == DA_QT_BF16; }

/* Names and shapes of every tensor, from da_model's table (its parameter
 * buffer is calloc'd and never touched, so it costs no memory). */
static da_status make_table(da_qmodel *q, const da_config *cfg) {
    da_model tmp;
    da_status st = da_model_create(&tmp, cfg);
    if (st.code) return st;
    q->cfg = *cfg;
    q->n_tensors = tmp.n_tensors;
    q->t = calloc((size_t)tmp.n_tensors, sizeof *q->t);
    q->layers = calloc((size_t)cfg->n_layers, sizeof *q->layers);
    if (!q->t || !q->layers) st = da_errorf("out of memory");
    for (int i = 0; !st.code && i < tmp.n_tensors; i++) {
        snprintf(q->t[i].name, sizeof q->t[i].name, "%s", tmp.tensors[i].name);
        q->t[i].rows = tmp.tensors[i].shape[0];
        q->t[i].cols = tmp.tensors[i].ndim == 2 ? tmp.tensors[i].shape[1] : 0;
    }
    da_model_free(&tmp);
    return st;
}

static const float *f32_of(const da_qtensor *t) { return (const float *)(const void *)t->data; }

/* The views of q->layers, in da_model's tensor order (model.c map_weights). */
static void bind(da_qmodel *q) {
    const da_config *c = &q->cfg;
    int i = 0;
    q->tok_embeddings = f32_of(&q->t[i++]);
    const int d = da_head_dim(c);
    for (int l = 0; l < c->n_layers; l++) {
        da_qlayer *L = &q->layers[l];
        L->attention_norm = f32_of(&q->t[i++]);
        L->wq = &q->t[i++];
        L->wk = &q->t[i++];
        L->wv = &q->t[i++];
        L->wo = &q->t[i++];
        L->lambda = 0.0f;
        if (c->arch == DA_ARCH_DIFF) {
            const float *q1 = f32_of(&q->t[i++]), *k1 = f32_of(&q->t[i++]);
            const float *q2 = f32_of(&q->t[i++]), *k2 = f32_of(&q->t[i++]);
            float a = 0, b = 0;
            for (int j = 0; j < d; j++) {
                a += q1[j] * k1[j];
                b += q2[j] * k2[j];
            }
            L->lambda = expf(a) - expf(b) + da_lambda_init(l);
            L->subln = f32_of(&q->t[i++]);
        }
        L->ffn_norm = f32_of(&q->t[i++]);
        L->w1 = &q->t[i++];
        L->w2 = &q->t[i++];
        L->w3 = &q->t[i++];
    }
    q->norm = f32_of(&q->t[i++]);
    q->output = c->tie_embeddings ? &q->t[0] : &q->t[i++]; /* tied: the f32 embedding */
}

static size_t pad(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* Sets every tensor's type and row_bytes, allocates the blob and points data into it. */
static da_status layout_blob(da_qmodel *q) {
    size_t total = 0;
    for (int i = 0; i < q->n_tensors; i++) {
        da_qtensor *t = &q->t[i];
        t->row_bytes = t->cols ? da_qtype_row_bytes(t->type, t->cols) : 4;
        total += pad(t->row_bytes * (size_t)t->rows);
    }
    q->blob = aligned_alloc(ALIGN, pad(total ? total : 1));
    if (!q->blob) return da_errorf("out of memory allocating %.1f MB of weights", (double)total / 1e6);
    size_t off = 0;
    for (int i = 0; i < q->n_tensors; i++) {
        q->t[i].data = q->blob + off;
        off += pad(q->t[i].row_bytes * (size_t)q->t[i].rows);
    }
    return da_ok();
}

size_t da_qmodel_bytes(const da_qmodel *q) {
    size_t n = 0;
    for (int i = 0; i < q->n_tensors; i++) n += q->t[i].row_bytes * (size_t)q->t[i].rows;
    return n;
}

void da_qmodel_free(da_qmodel *q) {
    free(q->t);
    free(q->layers);
    free(q->act_absmax);
    free(q->blob);
    memset(q, 0, sizeof *q);
}

/* The type a 2-D tensor gets: the embedding stays f32; a matmul whose width
 * is not a multiple of the type's block falls back to q8_0, then f32. */
static int tensor_type(const da_qtensor *t, int i, const da_quantize_opts *o) {
    if (i == 0) return DA_QT_F32; /* tok_embeddings */
    int type = o->type;
    if (!strcmp(t->name, "output.weight"))
        type = o->output_type >= 0 ? o->output_type
                                   : (o->type == DA_QT_Q4_0 || o->type == DA_QT_Q4_K ? DA_QT_Q8_0 : o->type);
    if (t->cols % da_qtype_block(type)) type = t->cols % QK8_0 ? DA_QT_F32 : DA_QT_Q8_0;
    return type;
}

da_status da_qmodel_quantize(da_qmodel *q, const da_model *m, const da_quantize_opts *o) {
    memset(q, 0, sizeof *q);
    if (!da_qtype_name(o->type)) return da_errorf("unknown weight type %d", o->type);
    da_status st = make_table(q, &m->cfg);
    if (st.code) {
        da_qmodel_free(q);
        return st;
    }
    q->weight_type = o->type;
    for (int i = 0; i < q->n_tensors; i++) q->t[i].type = q->t[i].cols ? tensor_type(&q->t[i], i, o) : DA_QT_F32;
    if ((st = layout_blob(q)).code) {
        da_qmodel_free(q);
        return st;
    }
    for (int i = 0; i < q->n_tensors; i++) {
        da_qtensor *t = &q->t[i];
        const float *src = m->params + m->tensors[i].offset;
        const int rows = t->cols ? t->rows : 1, n = t->cols ? t->cols : t->rows;
#pragma omp parallel for schedule(dynamic, 16)
        for (int r = 0; r < rows; r++)
            da_quantize_row(t->cols ? t->type : DA_QT_F32, (unsigned char *)t->data + (size_t)r * t->row_bytes,
                            src + (size_t)r * n, n);
    }
    q->act = DA_ACTQ_Q8;
    bind(q);
    return da_ok();
}

/* ---------------------------------------------------------------- GGUF */

/* llama.cpp's general.file_type numbers for "mostly" this type. */
static uint32_t file_type_of(int t) {
    switch (t) {
    case DA_QT_F32: return 0;
    case DA_QT_F16: return 1;
    case DA_QT_Q4_0: return 2;
    case DA_QT_Q8_0: return 7;
    case DA_QT_Q4_K: return 15; /* Q4_K_M */
    case DA_QT_BF16: return 32;
    default: return 0;
    }
}

da_status da_qmodel_save(const da_qmodel *q, const char *path) {
    const da_config *c = &q->cfg;
    da_gguf_writer w;
    da_gguf_writer_init(&w);
    char name[128];
    da_gguf_add_str(&w, "general.architecture", "diffattn");
    snprintf(name, sizeof name, "diffattn-%s-%dx%d-%s", da_arch_name(c->arch), c->n_layers, c->dim,
             da_qtype_name(q->weight_type));
    da_gguf_add_str(&w, "general.name", name);
    da_gguf_add_u32(&w, "general.file_type", file_type_of(q->weight_type));
    da_gguf_add_u32(&w, "general.quantization_version", 2);
    da_gguf_add_u32(&w, "diffattn.format_version", DA_FORMAT_VERSION);
    da_gguf_add_str(&w, "diffattn.variant", da_arch_name(c->arch));
    da_gguf_add_u32(&w, "diffattn.context_length", (uint32_t)c->max_seq_len);
    da_gguf_add_u32(&w, "diffattn.embedding_length", (uint32_t)c->dim);
    da_gguf_add_u32(&w, "diffattn.block_count", (uint32_t)c->n_layers);
    da_gguf_add_u32(&w, "diffattn.feed_forward_length", (uint32_t)c->ffn_hidden);
    da_gguf_add_u32(&w, "diffattn.attention.head_count", (uint32_t)c->n_heads);
    da_gguf_add_u32(&w, "diffattn.attention.head_count_kv", (uint32_t)c->n_kv_heads);
    da_gguf_add_u32(&w, "diffattn.vocab_size", (uint32_t)c->vocab_size);
    da_gguf_add_f32(&w, "diffattn.rope.freq_base", c->rope_theta);
    da_gguf_add_f32(&w, "diffattn.attention.layer_norm_rms_epsilon", c->norm_eps);
    da_gguf_add_bool(&w, "diffattn.tie_embeddings", c->tie_embeddings);
    da_gguf_add_str(&w, "diffattn.weight_type", da_qtype_name(q->weight_type));
    da_gguf_add_str(&w, "diffattn.activations", da_act_mode_name(q->act));
    da_gguf_add_bool(&w, "diffattn.awq", q->awq);
    da_gguf_add_u32(&w, "diffattn.calibration_sequences", (uint32_t)q->calib_samples);
    for (int i = 0; i < q->n_tensors; i++) {
        const da_qtensor *t = &q->t[i];
        int64_t ne[2] = {t->cols ? t->cols : t->rows, t->rows};
        da_gguf_add_tensor(&w, t->name, t->type, t->cols ? 2 : 1, ne, t->data, t->row_bytes * (size_t)t->rows);
    }
    if (q->act_absmax) {
        int64_t ne[1] = {DA_N_SITES(c)};
        da_gguf_add_tensor(&w, "act_absmax", DA_QT_F32, 1, ne, q->act_absmax, (size_t)ne[0] * 4);
    }
    da_status st = da_gguf_write(&w, path);
    da_gguf_writer_free(&w);
    return st;
}

static da_status get_int_range(const da_gguf_file *f, const char *key, int lo, int hi, int *out) {
    int64_t v;
    da_status st = da_gguf_get_int(f, key, &v);
    if (st.code) return st;
    if (v < lo || v > hi) return da_errorf("%s: %s = %lld is out of range (%d..%d)", f->path, key, (long long)v, lo, hi);
    *out = (int)v;
    return da_ok();
}

static da_status config_from_gguf(const da_gguf_file *f, da_config *c) {
    memset(c, 0, sizeof *c);
    const char *arch, *variant;
    da_status st = da_gguf_get_str(f, "general.architecture", &arch);
    if (st.code) return da_errorf("%s: general.architecture is missing: not a model GGUF", f->path);
    if (strcmp(arch, "diffattn"))
        return da_errorf("%s: general.architecture is \"%s\", expected \"diffattn\" (a model of another family: "
                         "diffattn runs only its own models)",
                         f->path, arch);
    int fv;
    if ((st = get_int_range(f, "diffattn.format_version", 0, 1 << 30, &fv)).code) return st;
    if (fv != DA_FORMAT_VERSION)
        return da_errorf("%s: diffattn.format_version %d is not supported (this build reads %d)", f->path, fv,
                         DA_FORMAT_VERSION);
    if ((st = da_gguf_get_str(f, "diffattn.variant", &variant)).code) return st;
    if (da_arch_parse(variant, &c->arch))
        return da_errorf("%s: diffattn.variant = \"%s\" (expected diff or softmax)", f->path, variant);
    struct { const char *key; int *dst; } ints[] = {
        {"diffattn.context_length", &c->max_seq_len},   {"diffattn.embedding_length", &c->dim},
        {"diffattn.block_count", &c->n_layers},         {"diffattn.feed_forward_length", &c->ffn_hidden},
        {"diffattn.attention.head_count", &c->n_heads}, {"diffattn.attention.head_count_kv", &c->n_kv_heads},
        {"diffattn.vocab_size", &c->vocab_size},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((st = get_int_range(f, ints[i].key, 0, 1 << 30, ints[i].dst)).code) return st;
    if ((st = da_gguf_get_f32(f, "diffattn.rope.freq_base", &c->rope_theta)).code) return st;
    if ((st = da_gguf_get_f32(f, "diffattn.attention.layer_norm_rms_epsilon", &c->norm_eps)).code) return st;
    if ((st = da_gguf_get_bool(f, "diffattn.tie_embeddings", &c->tie_embeddings)).code) return st;
    st = da_config_validate(c);
    if (st.code) return da_errorf("%s: impossible configuration: %s", f->path, st.msg);
    return da_ok();
}

da_status da_qmodel_load(da_qmodel *q, const char *path) {
    memset(q, 0, sizeof *q);
    da_gguf_file f;
    da_status st = da_gguf_open(&f, path);
    if (st.code) return st;
    da_config c;
    if (!(st = config_from_gguf(&f, &c)).code) st = make_table(q, &c);
    /* check every tensor before allocating */
    for (int i = 0; !st.code && i < q->n_tensors; i++) {
        da_qtensor *t = &q->t[i];
        const da_gguf_tensor *g = da_gguf_tensor_find(&f, t->name);
        if (!g) {
            st = da_errorf("%s: tensor \"%s\" is missing (the file's keys say %s, dim %d, %d layers)", path, t->name,
                           da_arch_name(c.arch), c.dim, c.n_layers);
            break;
        }
        const int want_nd = t->cols ? 2 : 1;
        const int64_t want0 = t->cols ? t->cols : t->rows;
        if (g->n_dims != want_nd || g->ne[0] != want0 || (want_nd == 2 && g->ne[1] != t->rows)) {
            st = da_errorf("%s: tensor \"%s\" has ne [%lld, %lld] (%d dims), expected [%lld, %d] (%d dims)", path,
                           t->name, (long long)g->ne[0], (long long)g->ne[1], g->n_dims, (long long)want0,
                           want_nd == 2 ? t->rows : 1, want_nd);
            break;
        }
        /* vectors and the embedding are read as f32 */
        t->type = (!t->cols || i == 0) ? DA_QT_F32 : g->type;
        if (t->type == DA_QT_F32 && !is_float_type(g->type)) {
            st = da_errorf("%s: tensor \"%s\" is %s; diffattn expects f32, f16 or bf16 for norms, lambdas and the "
                           "embedding",
                           path, t->name, da_qtype_name(g->type));
            break;
        }
    }
    const da_gguf_tensor *ga = st.code ? NULL : da_gguf_tensor_find(&f, "act_absmax");
    if (ga && (ga->type != DA_QT_F32 || ga->n_dims != 1 || ga->ne[0] != DA_N_SITES(&c)))
        st = da_errorf("%s: tensor \"act_absmax\" must be f32 [%d] (4 per layer + 1)", path, DA_N_SITES(&c));
    if (!st.code) st = layout_blob(q);
    for (int i = 0; !st.code && i < q->n_tensors; i++) {
        da_qtensor *t = &q->t[i];
        const da_gguf_tensor *g = da_gguf_tensor_find(&f, t->name);
        const unsigned char *src = da_gguf_data(&f, g);
        if (t->type == g->type) memcpy((void *)t->data, src, g->nbytes);
        else da_dequantize_row(g->type, src, (float *)(void *)t->data, (int64_t)g->ne[0] * g->ne[1]);
    }
    if (!st.code && ga) {
        q->act_absmax = malloc((size_t)ga->ne[0] * sizeof(float));
        if (!q->act_absmax) st = da_errorf("out of memory");
        else memcpy(q->act_absmax, da_gguf_data(&f, ga), (size_t)ga->ne[0] * sizeof(float));
        for (int i = 0; !st.code && i < ga->ne[0]; i++)
            if (!(q->act_absmax[i] >= 0.0f) || !isfinite(q->act_absmax[i]))
                st = da_errorf("%s: act_absmax[%d] = %g is not a finite non-negative range", path, i,
                               (double)q->act_absmax[i]);
    }
    if (!st.code) {
        const da_gguf_kv *kv;
        const char *s;
        int64_t v;
        q->act = DA_ACTQ_Q8;
        if (!da_gguf_get_str(&f, "diffattn.activations", &s).code && da_act_mode_parse(s, &q->act))
            st = da_errorf("%s: diffattn.activations = \"%s\" (expected q8, int8-dynamic, int8-static, bf16 or f32)",
                           path, s);
        if ((kv = da_gguf_kv_find(&f, "diffattn.awq")) && kv->type == DA_GGUF_BOOL) q->awq = kv->v.u != 0;
        if (!da_gguf_get_int(&f, "diffattn.calibration_sequences", &v).code && v >= 0 && v < (1 << 30))
            q->calib_samples = (int)v;
        q->weight_type = q->n_tensors > 2 ? q->t[2].type : DA_QT_F32; /* layers.0.attn.q_proj */
        if (!st.code && q->act == DA_ACTQ_INT8_STATIC && !q->act_absmax)
            st = da_errorf("%s: activations are int8-static but the file has no act_absmax ranges", path);
    }
    q->file_bytes = f.size;
    da_gguf_close(&f);
    if (st.code) da_qmodel_free(q);
    else bind(q);
    return st;
}

da_status da_model_load_gguf(da_model *m, const char *path) {
    memset(m, 0, sizeof *m);
    da_qmodel q;
    da_status st = da_qmodel_load(&q, path);
    if (st.code) return st;
    if (!(st = da_model_create(m, &q.cfg)).code)
        for (int i = 0; i < q.n_tensors; i++) {
            const da_qtensor *t = &q.t[i];
            const int64_t rows = t->cols ? t->rows : 1, n = t->cols ? t->cols : t->rows;
            for (int64_t r = 0; r < rows; r++)
                da_dequantize_row(t->type, t->data + (size_t)r * t->row_bytes, m->params + m->tensors[i].offset + r * n, n);
        }
    da_qmodel_free(&q);
    return st;
}

/* ---------------------------------------------------------------- running state */

struct da_qstate {
    da_config cfg;
    const da_qmodel *q;
    da_qrun_opts o;
    const da_ops *ops; /* integer dots and activation rows of da_exec_default()'s level */
    int max_T, max_n, len;
    int d, Ckv, maps, kb, nkb, n_threads, maxw;
    float *kf, *vf;   /* f32 cache: (L, max_T, Ckv) each */
    int8_t *k8, *v8;  /* int8 cache: (L, max_T, Ckv) each */
    float *ks, *vs;   /* their scales: (L, max_T, nkb) */
    float *rope_cos, *rope_sin; /* (max_T, d/2) */
    float *x, *xn, *qv, *kn, *vn, *ao, *h1, *h3, *logits; /* (max_n, width) */
    float *att;       /* (threads, maps, max_T) */
    float *deq;       /* (threads, maxw): a dequantized weight row */
    float *wdeq;      /* batches (float activations, or int8 ones of >= PREFILL_SGEMM_MIN tokens): one dequantized matrix */
    float *xr;        /* (max_n, maxw): bf16-rounded activations, or int8 ones dequantized for a prefill sgemm */
    int8_t *aq;       /* (max_n, maxw) */
    float *ad;        /* (max_n, maxw / 32) */
    int32_t *asum;
    const float *site_x; /* the prepared site's float input (n, width) */
    int site_w;
    const float *site_xd; /* a prompt in an int8 mode: the site's int8 activations as floats, q * d; else NULL */
    da_qstats *stats;
};

void da_qstate_free(da_qstate *s) {
    if (!s) return;
    void *ps[] = {s->kf, s->vf, s->k8, s->v8, s->ks, s->vs, s->rope_cos, s->rope_sin, s->x, s->xn, s->qv,
                  s->kn, s->vn, s->ao, s->h1, s->h3, s->logits, s->att, s->deq, s->wdeq, s->xr, s->aq, s->ad, s->asum};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    free(s);
}

void da_qstate_reset(da_qstate *s) { s->len = 0; }
int da_qstate_len(const da_qstate *s) { return s->len; }

da_status da_qstate_create(da_qstate **out, const da_qmodel *q, const da_qrun_opts *o, int max_T, int max_n) {
    *out = NULL;
    const da_config *c = &q->cfg;
    if (max_T <= 0 || max_T > c->max_seq_len)
        return da_errorf("cache length %d is out of range (1..max_seq_len=%d)", max_T, c->max_seq_len);
    if (max_n <= 0 || max_n > max_T) return da_errorf("tokens per call %d is out of range (1..%d)", max_n, max_T);
    if (o->act == DA_ACTQ_INT8_STATIC && !q->act_absmax)
        return da_errorf("--act int8-static needs calibrated activation ranges: quantize with --calib DATA");
    if ((o->act == DA_ACTQ_Q8 || o->act == DA_ACTQ_INT8_DYNAMIC || o->act == DA_ACTQ_INT8_STATIC) &&
        (c->dim % 32 || c->ffn_hidden % 32))
        return da_errorf("int8 activations need dim and ffn_hidden multiples of 32 (dim %d, ffn %d); use --act f32",
                         c->dim, c->ffn_hidden);
    da_qstate *s = calloc(1, sizeof *s);
    if (!s) return da_errorf("out of memory");
    s->cfg = *c;
    s->q = q;
    s->ops = da_ops_of(da_exec_default().isa);
    s->o = *o;
    s->max_T = max_T;
    s->max_n = max_n;
    s->d = da_head_dim(c);
    s->Ckv = c->dim / (c->n_heads / c->n_kv_heads);
    s->maps = c->arch == DA_ARCH_DIFF ? 2 : 1;
    s->kb = s->d % 32 == 0 ? 32 : s->d;
    s->nkb = s->Ckv / s->kb;
    s->n_threads = omp_get_max_threads();
    s->maxw = c->dim > c->ffn_hidden ? c->dim : c->ffn_hidden;
    const size_t L = c->n_layers, T = max_T, N = max_n, C = c->dim, F = c->ffn_hidden, V = c->vocab_size;
    const size_t Ckv = s->Ckv, W = s->maxw;
    int fail = 0;
#define ALLOC(p, n) fail |= !((p) = malloc((n) * sizeof *(p)))
    if (o->kv_int8) {
        ALLOC(s->k8, L * T * Ckv);
        ALLOC(s->v8, L * T * Ckv);
        ALLOC(s->ks, L * T * s->nkb);
        ALLOC(s->vs, L * T * s->nkb);
    } else {
        ALLOC(s->kf, L * T * Ckv);
        ALLOC(s->vf, L * T * Ckv);
    }
    ALLOC(s->rope_cos, T * s->d / 2);
    ALLOC(s->rope_sin, T * s->d / 2);
    ALLOC(s->x, N * C);
    ALLOC(s->xn, N * C);
    ALLOC(s->qv, N * C);
    ALLOC(s->kn, N * Ckv);
    ALLOC(s->vn, N * Ckv);
    ALLOC(s->ao, N * C);
    ALLOC(s->h1, N * F);
    ALLOC(s->h3, N * F);
    ALLOC(s->logits, N * V);
    ALLOC(s->att, (size_t)s->n_threads * s->maps * T);
    ALLOC(s->deq, (size_t)s->n_threads * W);
    if (o->act == DA_ACTQ_BF16 || o->act == DA_ACTQ_F32 || max_n >= PREFILL_SGEMM_MIN) {
        size_t big = 0;
        for (int i = 0; i < q->n_tensors; i++)
            if (q->t[i].cols && (size_t)q->t[i].rows * q->t[i].cols > big) big = (size_t)q->t[i].rows * q->t[i].cols;
        ALLOC(s->wdeq, big);
    }
    ALLOC(s->xr, N * W);
    ALLOC(s->aq, N * W);
    ALLOC(s->ad, N * W / 32 + 1);
    ALLOC(s->asum, N * W / 32 + 1);
#undef ALLOC
    if (fail) {
        da_qstate_free(s);
        return da_errorf("out of memory allocating the inference state for %d positions", max_T);
    }
    rope_tables(s->rope_cos, s->rope_sin, max_T, s->d, c->rope_theta);
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

void da_qstate_attach_stats(da_qstate *s, da_qstats *st) { s->stats = st; }

/* ---------------------------------------------------------------- forward pieces */

/* Readies the input X: (n, w) of one matmul site: statistics, then the int8
 * rows (integer modes; for a prompt also their float values, once for all
 * the site's matmuls) or the bf16-rounded copy. */
static void prep_site(da_qstate *s, const float *X, int n, int w, int site) {
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
#pragma omp parallel for schedule(static) if (n > 1)
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
static void qmatmul(da_qstate *s, float *out, const da_qtensor *W, int n, int accumulate) {
    const int rows = W->rows, cols = W->cols;
    const int integer = !is_float_type(W->type) && s->o.act <= DA_ACTQ_INT8_STATIC;
    if (W->type == DA_QT_F32 && !integer) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, s->site_x, cols,
                    (const float *)(const void *)W->data, cols, accumulate ? 1.0f : 0.0f, out, rows);
        return;
    }
    const float *X = s->site_x;
    if ((!integer && n > 1) || (integer && s->site_xd)) {
        /* a batch: dequantize the matrix once, then one sgemm (int8
         * activations enter as their float values, from prep_site) */
        float *Wf = s->wdeq;
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++) da_dequantize_row(W->type, W->data + (size_t)r * W->row_bytes, Wf + (size_t)r * cols, cols);
        if (integer) X = s->site_xd;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, X, cols, Wf, cols,
                    accumulate ? 1.0f : 0.0f, out, rows);
        return;
    }
#pragma omp parallel for schedule(static) if ((long)rows * cols * n > 32768)
    for (int r = 0; r < rows; r++) {
        const unsigned char *wr = W->data + (size_t)r * W->row_bytes;
        float *deq = s->deq + (size_t)omp_get_thread_num() * s->maxw;
        if (!integer) da_dequantize_row(W->type, wr, deq, cols);
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

static void rmsnorm_rows(float *out, const float *x, const float *w, int n, int C, float eps) {
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * C;
        float ss = 0.0f;
        for (int i = 0; i < C; i++) ss += xr[i] * xr[i];
        const float r = 1.0f / sqrtf(ss / C + eps);
        for (int i = 0; i < C; i++) out[(size_t)t * C + i] = xr[i] * r * w[i];
    }
}

static void rope_rows(float *x, const da_qstate *s, int pos0, int n, int width) {
    const int d = s->d, half = d / 2;
    for (int t = 0; t < n; t++) {
        const float *cr = s->rope_cos + (size_t)(pos0 + t) * half, *sr = s->rope_sin + (size_t)(pos0 + t) * half;
        for (int h = 0; h < width / d; h++) {
            float *v = x + (size_t)t * width + (size_t)h * d;
            for (int j = 0; j < half; j++) {
                float x0 = v[2 * j], x1 = v[2 * j + 1];
                v[2 * j] = x0 * cr[j] - x1 * sr[j];
                v[2 * j + 1] = x0 * sr[j] + x1 * cr[j];
            }
        }
    }
}

/* Stores the n new K and V rows of layer l at positions len.. (int8: a scale
 * per kb-wide block, absmax / 127). */
static void kv_store(da_qstate *s, int l, int n) {
    const size_t T = s->max_T, Ckv = s->Ckv;
    for (int t = 0; t < n; t++) {
        const size_t row = (size_t)l * T + s->len + t;
        const float *k = s->kn + (size_t)t * Ckv, *v = s->vn + (size_t)t * Ckv;
        if (!s->o.kv_int8) {
            memcpy(s->kf + row * Ckv, k, Ckv * sizeof(float));
            memcpy(s->vf + row * Ckv, v, Ckv * sizeof(float));
            continue;
        }
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

/* a: (n) = softmax(scale * Q: (d) . K rows 0..n-1 at column col of layer l). */
static void scores(const da_qstate *s, float *a, const float *Q, int l, int col, int n, float scale) {
    const size_t T = s->max_T, Ckv = s->Ckv, base = (size_t)l * T;
    const int d = s->d, kb = s->kb;
    float mx = -INFINITY;
    for (int t = 0; t < n; t++) {
        float dot = 0.0f;
        if (!s->o.kv_int8) {
            dot = fdot(Q, s->kf + (base + t) * Ckv + col, d);
        } else {
            const int8_t *kr = s->k8 + (base + t) * Ckv + col;
            const float *sc = s->ks + (base + t) * s->nkb + col / kb;
            for (int b = 0; b < d / kb; b++) {
                float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
                for (int i = 0; i < kb; i++) acc += Q[b * kb + i] * (float)kr[b * kb + i];
                dot += sc[b] * acc;
            }
        }
        a[t] = scale * dot;
        mx = a[t] > mx ? a[t] : mx;
    }
    float sum = 0.0f;
    for (int t = 0; t < n; t++) {
        a[t] = expf(a[t] - mx);
        sum += a[t];
    }
    const float inv = 1.0f / sum;
    for (int t = 0; t < n; t++) a[t] *= inv;
}

/* o: (w) = sum_t p[t] * V row t at column col of layer l. */
static void mix_values(const da_qstate *s, float *o, const float *p, int l, int col, int n, int w) {
    const size_t T = s->max_T, Ckv = s->Ckv, base = (size_t)l * T;
    for (int i = 0; i < w; i++) o[i] = 0.0f;
    for (int t = 0; t < n; t++) {
        if (!s->o.kv_int8) {
            const float *vr = s->vf + (base + t) * Ckv + col;
            const float pt = p[t];
#pragma omp simd
            for (int i = 0; i < w; i++) o[i] += pt * vr[i];
        } else {
            const int8_t *vr = s->v8 + (base + t) * Ckv + col;
            const float *sc = s->vs + (base + t) * s->nkb + col / s->kb;
            for (int b = 0; b < w / s->kb; b++) {
                const float ps = p[t] * sc[b];
#pragma omp simd
                for (int i = 0; i < s->kb; i++) o[b * s->kb + i] += ps * (float)vr[b * s->kb + i];
            }
        }
    }
}

/* Attention of the n new queries (s->qv, after RoPE) of layer l; writes s->ao. */
static void attend(da_qstate *s, const da_qlayer *L, int l, int n) {
    const da_config *c = &s->cfg;
    const int H = c->n_heads, d = s->d, n_rep = H / c->n_kv_heads, C = c->dim, T = s->max_T;
    const float scale = 1.0f / sqrtf((float)d), post = 1.0f - da_lambda_init(l);
    const int diff = c->arch == DA_ARCH_DIFF;
#pragma omp parallel for schedule(dynamic, 1) if (n * H > 1)
    for (int job = 0; job < n * H; job++) {
        const int t = job / H, h = job % H, g = h / n_rep, len = s->len + t + 1;
        float *A1 = s->att + (size_t)omp_get_thread_num() * s->maps * T;
        const float *q = s->qv + (size_t)t * C;
        float *o = s->ao + (size_t)t * C;
        if (diff) {
            const int d2 = 2 * d;
            float *A2 = A1 + T;
            scores(s, A1, q + (size_t)(2 * h) * d, l, 2 * g * d, len, scale);
            scores(s, A2, q + (size_t)(2 * h + 1) * d, l, (2 * g + 1) * d, len, scale);
            for (int i = 0; i < len; i++) A1[i] -= L->lambda * A2[i];
            float *oh = o + (size_t)h * d2;
            mix_values(s, oh, A1, l, g * d2, len, d2);
            float ss = 0.0f;
            for (int i = 0; i < d2; i++) ss += oh[i] * oh[i];
            const float r = 1.0f / sqrtf(ss / d2 + DA_SUBLN_EPS);
            for (int i = 0; i < d2; i++) oh[i] = oh[i] * r * L->subln[i] * post;
        } else {
            scores(s, A1, q + (size_t)h * d, l, g * d, len, scale);
            mix_values(s, o + (size_t)h * d, A1, l, g * d, len, d);
        }
    }
}

da_status da_qforward(const da_qmodel *q, da_qstate *s, const int *tokens, int n, int all_logits,
                      const float **logits) {
    if (logits) *logits = NULL;
    const da_config *c = &q->cfg;
    if (s->q != q) return da_errorf("this inference state was created for another model");
    if (n <= 0 || n > s->max_n) return da_errorf("%d tokens in one call; 1..%d allowed", n, s->max_n);
    if (s->len + n > s->max_T)
        return da_errorf("the cache holds %d positions and %d are used; %d more do not fit (at most max_seq_len=%d)",
                         s->max_T, s->len, n, c->max_seq_len);
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return da_errorf("token %d is out of range (0..%d for vocab_size %d)", tokens[t], c->vocab_size - 1,
                             c->vocab_size);
    const int C = c->dim, F = c->ffn_hidden, V = c->vocab_size, Ckv = s->Ckv;
    for (int t = 0; t < n; t++)
        memcpy(s->x + (size_t)t * C, q->tok_embeddings + (size_t)tokens[t] * C, (size_t)C * sizeof(float));
    if (s->stats) s->stats->rows += n;
    for (int l = 0; l < c->n_layers; l++) {
        const da_qlayer *L = &q->layers[l];
        const int site = DA_SITES_PER_LAYER * l;
        rmsnorm_rows(s->xn, s->x, L->attention_norm, n, C, c->norm_eps);
        prep_site(s, s->xn, n, C, site + DA_SITE_ATTN_IN);
        qmatmul(s, s->qv, L->wq, n, 0);
        qmatmul(s, s->kn, L->wk, n, 0);
        qmatmul(s, s->vn, L->wv, n, 0);
        rope_rows(s->qv, s, s->len, n, C);
        rope_rows(s->kn, s, s->len, n, Ckv);
        kv_store(s, l, n);
        attend(s, L, l, n);
        prep_site(s, s->ao, n, C, site + DA_SITE_ATTN_OUT);
        qmatmul(s, s->x, L->wo, n, 1);

        rmsnorm_rows(s->xn, s->x, L->ffn_norm, n, C, c->norm_eps);
        prep_site(s, s->xn, n, C, site + DA_SITE_FFN_IN);
        qmatmul(s, s->h1, L->w1, n, 0);
        qmatmul(s, s->h3, L->w3, n, 0);
#pragma omp parallel for schedule(static) if (n > 1)
        for (size_t i = 0; i < (size_t)n * F; i++) {
            const float h = s->h1[i];
            s->h1[i] = h / (1.0f + expf(-h)) * s->h3[i]; /* the gate, in h1 */
        }
        prep_site(s, s->h1, n, F, site + DA_SITE_FFN_GATE);
        qmatmul(s, s->x, L->w2, n, 1);
    }
    const int first = all_logits ? 0 : n - 1, m = n - first;
    rmsnorm_rows(s->xn, s->x + (size_t)first * C, q->norm, m, C, c->norm_eps);
    prep_site(s, s->xn, m, C, DA_SITES_PER_LAYER * c->n_layers);
    qmatmul(s, s->logits, q->output, m, 0);
    s->len += n;
    (void)V;
    if (logits) *logits = s->logits;
    return da_ok();
}
