/* GGUF files of engines: the keys and tensors `diffattn quantize` writes
 * (general.architecture "diffattn"; docs/formats.md), read back with every
 * key, name, shape and type checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variant.h"
#include "infer/engine.h"
#include "io/gguf.h"
#include "io/family.h"
#include "io/gguf_config.h"
#include "tok/tokenizer_embed.h"
#include "tok/tokenizer_gguf.h"

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

/* t's bytes in ggml's layout: t->data, or for a packed tensor a copy in *buf to free. */
static da_status file_bytes(const da_qtensor *t, const void **data, void **buf) {
    *buf = NULL;
    *data = t->data;
    if (!t->packed) return da_ok();
    unsigned char *b = malloc(t->row_bytes * (size_t)t->rows);
    if (!b) return da_errorf("out of memory unpacking %s", t->name);
    for (int r = 0; r < t->rows; r++) {
        const unsigned char *row = da_qtensor_row(t, r, b + (size_t)r * t->row_bytes);
        if (row != b + (size_t)r * t->row_bytes) memcpy(b + (size_t)r * t->row_bytes, row, t->row_bytes);
    }
    *buf = b;
    *data = b;
    return da_ok();
}

/* The bytes of token_embd: t[0] when it has a type of its own, else the f32
 * embedding in e->embed_type (a tied model's quantized head copy is that
 * already). *buf: a copy to free, or NULL. */
static da_status embedding_bytes(const da_engine *q, int *type, const void **data, size_t *nbytes, void **buf) {
    const da_qtensor *t = &q->t[0];
    *buf = NULL;
    if (q->head_copy || t->type != DA_QT_F32) { /* the head copy, or a file's embedding kept in its type */
        const da_qtensor *h = q->head_copy ? &q->t[q->n_tensors - 1] : t;
        *type = h->type;
        *nbytes = h->row_bytes * (size_t)h->rows;
        return file_bytes(h, data, buf);
    }
    *type = q->embed_type;
    if (*type == DA_QT_F32 || t->cols % da_qtype_block(*type)) {
        *type = DA_QT_F32;
        *data = t->data;
        *nbytes = (size_t)t->rows * (size_t)t->cols * sizeof(float);
        return da_ok();
    }
    const size_t rb = da_qtype_row_bytes(*type, t->cols);
    unsigned char *b = malloc(rb * (size_t)t->rows);
    if (!b) return da_errorf("out of memory quantizing the embedding");
#pragma omp parallel for schedule(static)
    for (int r = 0; r < t->rows; r++)
        da_quantize_row(*type, b + (size_t)r * rb, (const float *)(const void *)t->data + (size_t)r * t->cols, t->cols);
    *buf = b;
    *data = b;
    *nbytes = rb * (size_t)t->rows;
    return da_ok();
}

/* Every tensor under llama.cpp's name; the head copy is token_embd itself. bufs: (n_tensors) copies of
 * packed tensors (and the embedding's) for the caller to free once the file is written. */
static da_status add_tensors(da_gguf_writer *w, const da_engine *q, void **bufs, float **rope_freqs, int streamed) {
    const int n = q->n_tensors - q->head_copy;
    char arch[64];
    const da_family *fam = da_family_gguf_of(&q->cfg, arch, sizeof arch);
    for (int i = 0; i < n; i++) {
        const da_qtensor *t = &q->t[i];
        char name[160];
        if (da_family_to_file(fam, t->name, name, sizeof name))
            return da_errorf("tensor %s has no name in family %s (io/family.c)", t->name, fam->name);
        int64_t ne[2] = {t->cols ? t->cols : t->rows, t->rows};
        if (streamed) { /* the source writes the bytes: the types and sizes are the table's */
            const int type = i == 0 ? da_engine_file_embed_type(q) : t->type;
            da_gguf_add_tensor(w, name, type, t->cols ? 2 : 1, ne, NULL,
                               t->cols ? da_qtype_row_bytes(type, t->cols) * (size_t)t->rows : (size_t)t->rows * 4);
        } else if (i == 0) {
            int type = DA_QT_F32;
            const void *data = NULL;
            size_t nbytes = 0;
            da_status st = embedding_bytes(q, &type, &data, &nbytes, &bufs[i]);
            if (st.code) return st;
            da_gguf_add_tensor(w, name, type, 2, ne, data, nbytes);
        } else {
            const void *data = NULL;
            da_status st = file_bytes(t, &data, &bufs[i]);
            if (st.code) return st;
            da_gguf_add_tensor(w, name, t->type, t->cols ? 2 : 1, ne, data, t->row_bytes * (size_t)t->rows);
        }
    }
    int nf;
    if ((*rope_freqs = da_gguf_rope_freqs(&q->cfg, &nf))) {
        int64_t ne[1] = {nf};
        da_gguf_add_tensor(w, "rope_freqs.weight", DA_QT_F32, 1, ne, *rope_freqs, (size_t)nf * sizeof(float));
    }
    return da_ok();
}

int da_engine_file_embed_type(const da_engine *q) {
    if (q->head_copy) return q->t[q->n_tensors - 1].type;
    return q->embed_type == DA_QT_F32 || q->t[0].cols % da_qtype_block(q->embed_type) ? DA_QT_F32 : q->embed_type;
}

static da_status save(const da_engine *q, const char *path, da_gguf_tensor_source source, void *ctx) {
    const da_config *c = &q->cfg;
    da_gguf_writer w;
    da_gguf_writer_init(&w);
    char name[128];
    char arch[64];
    da_gguf_arch_of(c, arch, sizeof arch);
    da_gguf_add_str(&w, "general.architecture", arch);
    snprintf(name, sizeof name, "diffattn-%s-%dx%d-%s", da_arch_name(c->arch), c->n_layers, c->dim,
             da_qtype_name(q->weight_type));
    da_gguf_add_str(&w, "general.name", name);
    da_gguf_add_u32(&w, "general.file_type", file_type_of(q->weight_type));
    da_gguf_add_u32(&w, "general.quantization_version", 2);
    da_gguf_config_write(&w, c);
    da_gguf_add_u32(&w, "diffattn.format_version", DA_FORMAT_VERSION);
    da_gguf_add_str(&w, "diffattn.weight_type", da_qtype_name(q->weight_type));
    da_gguf_add_str(&w, "diffattn.activations", da_act_mode_name(q->act));
    da_gguf_add_bool(&w, "diffattn.awq", q->awq);
    da_gguf_add_u32(&w, "diffattn.calibration_sequences", (uint32_t)q->calib_samples);
    /* llama.cpp refuses a file with tensors it does not expect: the ranges are a key */
    if (q->act_absmax) da_gguf_add_f32_array(&w, "diffattn.act_absmax", q->act_absmax, (uint64_t)DA_N_SITES(c));
    da_status st = q->tokenizer_json ? da_gguf_add_tokenizer(&w, q->tokenizer_json, q->tok) : da_gguf_add_byte_tokenizer(&w, c->vocab_size);
    void **bufs = calloc((size_t)q->n_tensors, sizeof *bufs);
    float *rope_freqs = NULL;
    if (!st.code && !bufs) st = da_errorf("out of memory");
    if (!st.code) st = add_tensors(&w, q, bufs, &rope_freqs, source != NULL);
    if (st.code) st = da_errorf("%s: %s", path, st.msg);
    else st = da_gguf_write_from(&w, path, source, ctx);
    da_gguf_writer_free(&w);
    for (int i = 0; bufs && i < q->n_tensors; i++) free(bufs[i]);
    free(bufs);
    free(rope_freqs);
    return st;
}

da_status da_engine_save_gguf(const da_engine *q, const char *path) { return save(q, path, NULL, NULL); }

da_status da_engine_save_gguf_streamed(const da_engine *q, const char *path, da_gguf_tensor_source source, void *ctx) {
    return save(q, path, source, ctx);
}

/* The file's name of engine tensor i in family fam's names; a tied model's head copy is the embedding itself,
 * except in the older layout of diffattn's own names, which stored it as output.weight. */
static void file_name(const da_engine *q, int i, const da_family *fam, char *out, size_t n) {
    if (!fam->names_native && q->head_copy && i == q->n_tensors - 1) da_family_to_file(fam, q->t[0].name, out, n);
    else if (da_family_to_file(fam, q->t[i].name, out, n)) snprintf(out, n, "%s", q->t[i].name);
}

/* 1 for engine tensor i when it is one of its variant's ATTN_PARAM tensors (NSA's cmp_k, cmp_pe_k, gate, ...),
 * which the kernels read as f32; found by name, since a layer's other tensors (the MLP's) vary in count. */
static int is_attn_param(const da_engine *q, int i) {
    attn_tensor spec;
    const attn_tensor *a = da_attn_tensor_named(&q->cfg, q->t[i].name, &spec);
    return a && a->role == ATTN_PARAM;
}

/* Every tensor's file entry found and its shape and type checked, before anything is allocated. */
static da_status check_tensors(da_engine *q, const da_gguf_file *f, const da_family *fam) {
    const da_config *c = &q->cfg;
    for (int i = 0; i < q->n_tensors; i++) {
        da_qtensor *t = &q->t[i];
        char name[160];
        file_name(q, i, fam, name, sizeof name);
        const da_gguf_tensor *g = da_gguf_tensor_find(f, name);
        if (!g)
            return da_errorf("%s: tensor \"%s\" is missing (the file's keys say %s, dim %d, %d layers)", f->path, name,
                             da_arch_name(c->arch), c->dim, c->n_layers);
        const int want_nd = t->cols ? 2 : 1;
        const int64_t want0 = t->cols ? t->cols : t->rows;
        if (g->n_dims != want_nd || g->ne[0] != want0 || (want_nd == 2 && g->ne[1] != t->rows))
            return da_errorf("%s: tensor \"%s\" has ne [%lld, %lld] (%d dims), expected [%lld, %d] (%d dims)", f->path,
                             name, (long long)g->ne[0], (long long)g->ne[1], g->n_dims, (long long)want0,
                             want_nd == 2 ? t->rows : 1, want_nd);
        /* vectors and the variant's own parameters are f32 (converted as they are read); the matrices keep their
         * type (the embedding's rows are dequantized as they are looked up) */
        t->type = !t->cols || is_attn_param(q, i) ? DA_QT_F32 : g->type;
        if (!t->cols && !da_qtype_is_float(g->type))
            return da_errorf("%s: tensor \"%s\" is %s; diffattn expects f32, f16 or bf16 for norms and lambdas",
                             f->path, name, da_qtype_name(g->type));
        if (i == 0) q->embed_type = g->type;
    }
    return da_ok();
}

/* Every tensor of the file is one the model reads: the engine's, rope_freqs (the RoPE scaling), the
 * act_absmax of older files. Anything else (an attention bias, a block past block_count, junk) is refused
 * by name rather than dropped: the answer would differ from that of a reader that uses it (llama.cpp's
 * llama loads blk.N.attn_q.bias). */
static da_status check_unused_tensors(const da_engine *q, const da_gguf_file *f, const da_family *fam) {
    unsigned char *used = calloc((size_t)f->n_tensors + 1, 1);
    if (!used) return da_errorf("%s: out of memory", f->path);
    for (int i = 0; i < q->n_tensors; i++) {
        char name[160];
        file_name(q, i, fam, name, sizeof name);
        const da_gguf_tensor *g = da_gguf_tensor_find(f, name);
        if (g) used[g - f->tensors] = 1;
    }
    static const char *const extra[] = {"rope_freqs.weight", "act_absmax"};
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) {
        const da_gguf_tensor *g = da_gguf_tensor_find(f, extra[k]);
        if (g) used[g - f->tensors] = 1;
    }
    int n_unused = 0, first = -1;
    for (int i = 0; i < f->n_tensors; i++)
        if (!used[i] && n_unused++ == 0) first = i;
    free(used);
    if (!n_unused) return da_ok();
    const char *name = f->tensors[first].name;
    int blk = -1;
    char hint[200] = "";
    if (sscanf(name, "blk.%d.", &blk) == 1 && blk >= q->cfg.n_layers)
        snprintf(hint, sizeof hint, "; block_count says %d layers", q->cfg.n_layers);
    else if (strstr(name, ".bias"))
        snprintf(hint, sizeof hint, "; diffattn's %s layers have no biases", da_arch_name(q->cfg.arch));
    return da_errorf("%s: tensor \"%s\" is not one a %s model of %d layers reads (%d such tensor%s)%s; refused "
                     "rather than ignored, since a reader that uses it computes something else",
                     f->path, name, da_arch_name(q->cfg.arch), q->cfg.n_layers, n_unused, n_unused == 1 ? "" : "s",
                     hint);
}

/* The static int8 ranges: diffattn.act_absmax, or the act_absmax tensor of older files. */
static da_status read_act_absmax(da_engine *q, const da_gguf_file *f) {
    const int n = DA_N_SITES(&q->cfg);
    const da_gguf_kv *kv = da_gguf_kv_find(f, "diffattn.act_absmax");
    const da_gguf_tensor *ga = da_gguf_tensor_find(f, "act_absmax");
    const void *src = NULL;
    if (kv) {
        if (kv->type != DA_GGUF_ARRAY || kv->arr_type != DA_GGUF_F32 || kv->arr_n != (uint64_t)n)
            return da_errorf("%s: diffattn.act_absmax must be an f32 array of %d (4 per layer + 1)", f->path, n);
        src = kv->arr_data;
    } else if (ga) {
        if (ga->type != DA_QT_F32 || ga->n_dims != 1 || ga->ne[0] != n)
            return da_errorf("%s: tensor \"act_absmax\" must be f32 [%d] (4 per layer + 1)", f->path, n);
        src = da_gguf_data(f, ga);
    }
    if (!src) return da_ok();
    if (!(q->act_absmax = malloc((size_t)n * sizeof(float)))) return da_errorf("out of memory");
    memcpy(q->act_absmax, src, (size_t)n * sizeof(float));
    for (int i = 0; i < n; i++)
        if (!(q->act_absmax[i] >= 0.0f) || !isfinite(q->act_absmax[i]))
            return da_errorf("%s: act_absmax[%d] = %g is not a finite non-negative range", f->path, i,
                             (double)q->act_absmax[i]);
    return da_ok();
}

/* The first matmul weight (a 2-D tensor other than the embedding) stored in an integer-quantized type
 * and the first in a float one (-1: none). */
static void matmul_types(const da_engine *q, int *first_int, int *first_float) {
    *first_int = *first_float = -1;
    for (int i = 1; i < q->n_tensors; i++) {
        if (!q->t[i].cols) continue;
        int *slot = da_qtype_is_float(q->t[i].type) ? first_float : first_int;
        if (*slot < 0) *slot = i;
    }
}

/* diffattn.weight_type, the type diffattn quantized the matmuls to. A key whose kind (float or
 * integer-quantized) no matmul weight has contradicts the tensors, and is refused; except a float type
 * in a file whose general.file_type is a quantized one: llama.cpp requantized a diffattn export (its
 * quantizer copies the keys it does not know). *own_keys = 1 (and q->weight_type the key's) when the
 * key is the file's own: general.file_type absent or agreeing. */
static da_status weight_type_key(da_engine *q, const da_gguf_file *f, const da_family *fam, int first_int, int first_float,
                                 int *own_keys) {
    *own_keys = 0;
    const char *s;
    da_qtype wt;
    da_status st = da_gguf_get_str(f, "diffattn.weight_type", &s);
    if (st.code) return st;
    if (da_qtype_parse(s, &wt))
        return da_errorf("%s: diffattn.weight_type = \"%s\" is not a type (f32, f16, bf16, q8_0, q4_0, q4_K, ...)",
                         f->path, s);
    int64_t ft = -1;
    if (da_gguf_kv_find(f, "general.file_type") && (st = da_gguf_get_int(f, "general.file_type", &ft)).code) return st;
    const int ft_float = ft == 0 || ft == 1 || ft == 32;
    if (ft >= 0 && da_qtype_is_float(wt) && !ft_float) return da_ok(); /* requantized by llama.cpp */
    const int want_int = !da_qtype_is_float(wt), other = want_int ? first_float : first_int;
    char name[160];
    if (other >= 0) file_name(q, other, fam, name, sizeof name);
    if ((want_int ? first_int : first_float) < 0 && other >= 0)
        return da_errorf("%s: diffattn.weight_type = %s contradicts the tensors: no matmul weight is %s (%s is %s); "
                         "the key was edited or the tensors replaced: remove the key or correct it",
                         f->path, s, want_int ? "integer-quantized" : "f32, f16 or bf16", name,
                         da_qtype_name(q->t[other].type));
    if (ft >= 0 && ft != (int64_t)file_type_of(wt)) return da_ok(); /* the tensors' own types */
    q->weight_type = wt;
    *own_keys = 1;
    return da_ok();
}

da_status da_engine_load_gguf(da_engine *q, const char *path) {
    memset(q, 0, sizeof *q);
    da_gguf_file f;
    da_status st = da_gguf_open(&f, path);
    if (st.code) return st;
    da_config c;
    const da_family *fam = NULL;
    if (!(st = da_gguf_config_read(&f, &c, &fam)).code) st = da_engine_init_table(q, &c);
    /* tied: in llama.cpp's layout token_embd is the head, in its own type; diffattn's older layout
     * stored the head's quantized copy as output.weight beside an f32 embedding */
    if (!st.code && c.tie_embeddings && fam->names_native && da_gguf_tensor_find(&f, "output.weight") != NULL)
        st = da_engine_add_head_copy(q);
    if (!st.code) st = check_tensors(q, &f, fam);
    if (!st.code) st = check_unused_tensors(q, &f, fam);
    if (!st.code) st = da_engine_alloc_blob(q);
    for (int i = 0; !st.code && i < q->n_tensors; i++) {
        da_qtensor *t = &q->t[i];
        char name[160];
        file_name(q, i, fam, name, sizeof name);
        const da_gguf_tensor *g = da_gguf_tensor_find(&f, name);
        const unsigned char *src = da_gguf_data(&f, g);
        if (t->type == g->type) memcpy((void *)t->data, src, g->nbytes);
        else da_dequantize_row(g->type, src, (float *)(void *)t->data, (int64_t)g->ne[0] * g->ne[1]);
        da_gguf_release(&f, g);
    }
    if (!st.code) st = read_act_absmax(q, &f);
    if (!st.code) {
        const da_gguf_kv *kv;
        const char *s;
        int64_t v;
        q->act = DA_ACTQ_Q8;
        if ((kv = da_gguf_kv_find(&f, "diffattn.awq")) && kv->type == DA_GGUF_BOOL) q->awq = kv->v.u != 0;
        if (!da_gguf_get_int(&f, "diffattn.calibration_sequences", &v).code && v >= 0 && v < (1 << 30))
            q->calib_samples = (int)v;
        /* the type asked for at quantization; a file without the key (llama.cpp's): its first
         * integer-quantized matmul weight's (else the first one's), so its matmuls take integer
         * activations. Each matrix is multiplied in its own type whatever this says (engine_forward.c qmatmul). */
        int first_int = -1, first_float = -1;
        matmul_types(q, &first_int, &first_float);
        q->weight_type = first_int >= 0 ? q->t[first_int].type : first_float >= 0 ? q->t[first_float].type : DA_QT_F32;
        int own_keys = 0;
        if (da_gguf_kv_find(&f, "diffattn.weight_type")) st = weight_type_key(q, &f, fam, first_int, first_float, &own_keys);
        /* the activations diffattn chose for its own weights; a requantized file (llama.cpp's
         * quantizer copies an f16 export's "f32") takes the default for its new type */
        if (!st.code && own_keys && !da_gguf_get_str(&f, "diffattn.activations", &s).code &&
            da_act_mode_parse(s, &q->act))
            st = da_errorf("%s: diffattn.activations = \"%s\" (expected q8, int8-dynamic, int8-static, bf16 or f32)",
                           path, s);
        if (!st.code && q->act == DA_ACTQ_INT8_STATIC && !q->act_absmax)
            st = da_errorf("%s: activations are int8-static but the file has no act_absmax ranges", path);
    }
    char *tok_json = NULL;
    if (!st.code) st = da_gguf_tokenizer_json(&f, q->cfg.vocab_size, &tok_json);
    if (!st.code) st = da_engine_set_tokenizer(q, tok_json, path);
    free(tok_json);
    q->file_bytes = f.size;
    da_gguf_close(&f);
    if (st.code) da_engine_release(q);
    else da_engine_bind(q);
    return st;
}
