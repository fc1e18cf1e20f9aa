/* GGUF files of engines: the keys and tensors `diffattn quantize` writes
 * (general.architecture "diffattn"; docs/formats.md), read back with every
 * key, name, shape and type checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/engine.h"
#include "io/config_gguf.h"
#include "io/gguf.h"
#include "tok/tokenizer_embed.h"

static int is_float_type(int t) { return t == DA_QT_F32 || t == DA_QT_F16 || t == DA_QT_BF16; }

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

/* llama.cpp's tokenizer keys (tokenizer.ggml.*) and, for an exact round
 * trip of what they cannot say (another pre-tokeniser, a normalizer), the
 * tokenizer.json text itself under tokenizer.huggingface.json. */
static da_status add_tokenizer(da_gguf_writer *w, const char *json) {
    da_tok_ggml g;
    da_status st = da_tok_ggml_from_json(&g, json, strlen(json));
    if (st.code) return st;
    da_gguf_add_str(w, "tokenizer.ggml.model", "gpt2");
    if (g.pre) da_gguf_add_str(w, "tokenizer.ggml.pre", g.pre);
    da_gguf_add_str_array(w, "tokenizer.ggml.tokens", (const char *const *)g.tokens, (uint64_t)g.n_tokens);
    da_gguf_add_i32_array(w, "tokenizer.ggml.token_type", g.types, (uint64_t)g.n_tokens);
    da_gguf_add_str_array(w, "tokenizer.ggml.merges", (const char *const *)g.merges, (uint64_t)g.n_merges);
    if (g.bos >= 0) da_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)g.bos);
    if (g.eos >= 0) da_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)g.eos);
    da_gguf_add_str(w, "tokenizer.huggingface.json", json);
    da_tok_ggml_free(&g);
    return da_ok();
}

/* tokenizer.ggml.tokens and .merges, when the file has them beside
 * tokenizer.huggingface.json, say what that JSON says: llama.cpp reads the
 * arrays, diffattn the JSON, so a contradiction would give two tokenizers. */
static da_status check_arrays_match_json(const da_gguf_file *f, const char *json) {
    static const char *const keys[2] = {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"};
    if (!da_gguf_kv_find(f, keys[0]) && !da_gguf_kv_find(f, keys[1])) return da_ok();
    da_tok_ggml g;
    da_status st = da_tok_ggml_from_json(&g, json, strlen(json));
    if (st.code) return da_errorf("%s: tokenizer.huggingface.json: %s", f->path, st.msg);
    for (int k = 0; k < 2 && !st.code; k++) {
        char **v = NULL;
        uint64_t n = 0;
        const int want_n = k ? g.n_merges : g.n_tokens;
        char **want = k ? g.merges : g.tokens;
        if (!da_gguf_kv_find(f, keys[k]) || (st = da_gguf_get_str_array(f, keys[k], &v, &n)).code) continue;
        uint64_t i = 0;
        while (i < n && i < (uint64_t)want_n && !strcmp(v[i], want[i])) i++;
        if (n != (uint64_t)want_n || i < n)
            st = da_errorf("%s: %s contradicts tokenizer.huggingface.json (%s; llama.cpp would read one tokenizer, "
                           "diffattn the other)",
                           f->path, keys[k],
                           n != (uint64_t)want_n ? "a different number of entries" : "an entry differs");
        da_gguf_free_str_array(v, n);
    }
    da_tok_ggml_free(&g);
    return st;
}

da_status da_gguf_tokenizer_json(const da_gguf_file *f, char **json) {
    *json = NULL;
    const char *s;
    if (da_gguf_kv_find(f, "tokenizer.huggingface.json")) {
        da_status st = da_gguf_get_str(f, "tokenizer.huggingface.json", &s);
        if (st.code) return st;
        if (!(*json = strdup(s))) return da_errorf("%s: out of memory", f->path);
        if ((st = check_arrays_match_json(f, s)).code) {
            free(*json);
            *json = NULL;
        }
        return st;
    }
    if (!da_gguf_kv_find(f, "tokenizer.ggml.model")) return da_ok();
    da_status st = da_gguf_get_str(f, "tokenizer.ggml.model", &s);
    if (st.code) return st;
    if (!strcmp(s, "none")) return da_ok(); /* ids only */
    if (!strcmp(s, "llama"))
        return da_errorf("%s: tokenizer.ggml.model is \"llama\" (SentencePiece), which diffattn does not encode; "
                         "diffattn reads byte-level BPE (\"gpt2\") and \"none\" (ids only)",
                         f->path);
    if (strcmp(s, "gpt2"))
        return da_errorf("%s: tokenizer.ggml.model is \"%s\"; diffattn reads byte-level BPE (\"gpt2\") and \"none\" "
                         "(ids only)",
                         f->path, s);
    da_tok_ggml g;
    memset(&g, 0, sizeof g);
    g.bos = g.eos = -1;
    uint64_t n_tok = 0, n_types = 0, n_merges = 0;
    if (da_gguf_kv_find(f, "tokenizer.ggml.pre") && (st = da_gguf_get_str(f, "tokenizer.ggml.pre", &g.pre)).code)
        return st;
    int64_t bos = -1;
    g.add_bos = -1;
    if (da_gguf_kv_find(f, "tokenizer.ggml.bos_token_id") &&
        (st = da_gguf_get_int(f, "tokenizer.ggml.bos_token_id", &bos)).code)
        return st;
    if (da_gguf_kv_find(f, "tokenizer.ggml.add_bos_token") &&
        (st = da_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &g.add_bos)).code)
        return st;
    g.bos = bos >= 0 && bos < (1 << 24) ? (int)bos : -1;
    int32_t *types = NULL;
    if (!(st = da_gguf_get_str_array(f, "tokenizer.ggml.tokens", &g.tokens, &n_tok)).code &&
        !(st = da_gguf_get_i32_array(f, "tokenizer.ggml.token_type", &types, &n_types)).code &&
        !(st = da_gguf_get_str_array(f, "tokenizer.ggml.merges", &g.merges, &n_merges)).code) {
        if (n_types != n_tok)
            st = da_errorf("%s: tokenizer.ggml.token_type has %llu entries, tokenizer.ggml.tokens %llu", f->path,
                           (unsigned long long)n_types, (unsigned long long)n_tok);
        else if (n_tok > (1u << 24) || n_merges > (1u << 24))
            st = da_errorf("%s: tokenizer.ggml.tokens or .merges holds more than 2^24 entries", f->path);
    }
    g.types = types;
    g.n_tokens = (int)n_tok;
    g.n_merges = (int)n_merges;
    if (!st.code) st = da_tok_ggml_to_json(&g, f->path, json);
    g.pre = NULL;
    da_gguf_free_str_array(g.tokens, n_tok);
    da_gguf_free_str_array(g.merges, n_merges);
    free(types);
    return st;
}

da_status da_engine_save_gguf(const da_engine *q, const char *path) {
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
    da_config_gguf_add_rope(&w, c);
    da_gguf_add_f32(&w, "diffattn.attention.layer_norm_rms_epsilon", c->norm_eps);
    da_gguf_add_bool(&w, "diffattn.tie_embeddings", c->tie_embeddings);
    if (c->window > 0) da_gguf_add_u32(&w, "diffattn.attention.sliding_window", (uint32_t)c->window);
    da_gguf_add_str(&w, "diffattn.weight_type", da_qtype_name(q->weight_type));
    da_gguf_add_str(&w, "diffattn.activations", da_act_mode_name(q->act));
    da_gguf_add_bool(&w, "diffattn.awq", q->awq);
    da_gguf_add_u32(&w, "diffattn.calibration_sequences", (uint32_t)q->calib_samples);
    da_status st = q->tokenizer_json ? add_tokenizer(&w, q->tokenizer_json) : da_ok();
    if (st.code) {
        da_gguf_writer_free(&w);
        return da_errorf("%s: %s", path, st.msg);
    }
    for (int i = 0; i < q->n_tensors; i++) {
        const da_qtensor *t = &q->t[i];
        int64_t ne[2] = {t->cols ? t->cols : t->rows, t->rows};
        da_gguf_add_tensor(&w, t->name, t->type, t->cols ? 2 : 1, ne, t->data, t->row_bytes * (size_t)t->rows);
    }
    if (q->act_absmax) {
        int64_t ne[1] = {DA_N_SITES(c)};
        da_gguf_add_tensor(&w, "act_absmax", DA_QT_F32, 1, ne, q->act_absmax, (size_t)ne[0] * 4);
    }
    st = da_gguf_write(&w, path);
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
        return da_errorf("%s: diffattn.variant = \"%s\" (expected diff, diff2 or softmax)", f->path, variant);
    struct { const char *key; int *dst; } ints[] = {
        {"diffattn.context_length", &c->max_seq_len},   {"diffattn.embedding_length", &c->dim},
        {"diffattn.block_count", &c->n_layers},         {"diffattn.feed_forward_length", &c->ffn_hidden},
        {"diffattn.attention.head_count", &c->n_heads}, {"diffattn.attention.head_count_kv", &c->n_kv_heads},
        {"diffattn.vocab_size", &c->vocab_size},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((st = get_int_range(f, ints[i].key, 0, 1 << 30, ints[i].dst)).code) return st;
    if ((st = da_gguf_get_f32(f, "diffattn.rope.freq_base", &c->rope_theta)).code) return st;
    if ((st = da_config_gguf_get_rope(f, c)).code) return st;
    if ((st = da_gguf_get_f32(f, "diffattn.attention.layer_norm_rms_epsilon", &c->norm_eps)).code) return st;
    if ((st = da_gguf_get_bool(f, "diffattn.tie_embeddings", &c->tie_embeddings)).code) return st;
    if (da_gguf_kv_find(f, "diffattn.attention.sliding_window") &&
        (st = get_int_range(f, "diffattn.attention.sliding_window", 0, 1 << 30, &c->window)).code)
        return st;
    st = da_config_validate(c);
    if (st.code) return da_errorf("%s: impossible configuration: %s", f->path, st.msg);
    return da_ok();
}

/* The file's tensor of engine tensor i: llama.cpp's names in a `llama` file,
 * where a tied head copy reads token_embd. */
static const da_gguf_tensor *file_tensor(const da_gguf_file *f, const da_engine *q, int i, int llama) {
    char buf[96];
    if (!llama) return da_gguf_tensor_find(f, q->t[i].name);
    if (q->head_copy && i == q->n_tensors - 1) return da_gguf_tensor_find(f, "token_embd.weight");
    return da_gguf_tensor_find(f, da_llama_gguf_name(q->t[i].name, buf, sizeof buf));
}

static int is_llama_file(const da_gguf_file *f) {
    const char *arch;
    return !da_gguf_get_str(f, "general.architecture", &arch).code && !strcmp(arch, "llama");
}

da_status da_engine_load_gguf(da_engine *q, const char *path) {
    memset(q, 0, sizeof *q);
    da_gguf_file f;
    da_status st = da_gguf_open(&f, path);
    if (st.code) return st;
    da_config c;
    const int llama = is_llama_file(&f);
    if (!(st = llama ? da_llama_gguf_config(&f, &c) : config_from_gguf(&f, &c)).code) st = da_engine_init_table(q, &c);
    if (!st.code && c.tie_embeddings && (llama || da_gguf_tensor_find(&f, "output.weight")))
        st = da_engine_add_head_copy(q);
    /* check every tensor before allocating */
    for (int i = 0; !st.code && i < q->n_tensors; i++) {
        da_qtensor *t = &q->t[i];
        const da_gguf_tensor *g = file_tensor(&f, q, i, llama);
        if (!g) {
            char buf[96];
            st = da_errorf("%s: tensor \"%s\" is missing (the file's keys say %s, dim %d, %d layers)", path,
                           llama ? da_llama_gguf_name(t->name, buf, sizeof buf) : t->name,
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
        /* vectors and the embedding are read as f32 (a block-quantized embedding, as llama.cpp's
         * quantizer writes it, is dequantized) */
        t->type = (!t->cols || i == 0) ? DA_QT_F32 : g->type;
        if (!t->cols && !is_float_type(g->type)) {
            st = da_errorf("%s: tensor \"%s\" is %s; diffattn expects f32, f16 or bf16 for norms and lambdas",
                           path, t->name, da_qtype_name(g->type));
            break;
        }
    }
    const da_gguf_tensor *ga = st.code ? NULL : da_gguf_tensor_find(&f, "act_absmax");
    if (ga && (ga->type != DA_QT_F32 || ga->n_dims != 1 || ga->ne[0] != DA_N_SITES(&c)))
        st = da_errorf("%s: tensor \"act_absmax\" must be f32 [%d] (4 per layer + 1)", path, DA_N_SITES(&c));
    if (!st.code) st = da_engine_alloc_blob(q);
    for (int i = 0; !st.code && i < q->n_tensors; i++) {
        da_qtensor *t = &q->t[i];
        const da_gguf_tensor *g = file_tensor(&f, q, i, llama);
        const unsigned char *src = da_gguf_data(&f, g);
        if (t->type == g->type) memcpy((void *)t->data, src, g->nbytes);
        else da_dequantize_row(g->type, src, (float *)(void *)t->data, (int64_t)g->ne[0] * g->ne[1]);
        da_gguf_release(&f, g);
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
        /* the type asked for at quantization; a file without the key: layers.0.attn.q_proj's */
        q->weight_type = q->n_tensors > 2 ? q->t[2].type : DA_QT_F32;
        da_qtype wt;
        if (!da_gguf_get_str(&f, "diffattn.weight_type", &s).code && !da_qtype_parse(s, &wt)) q->weight_type = wt;
        if (!st.code && q->act == DA_ACTQ_INT8_STATIC && !q->act_absmax)
            st = da_errorf("%s: activations are int8-static but the file has no act_absmax ranges", path);
    }
    char *tok_json = NULL;
    if (!st.code) st = da_gguf_tokenizer_json(&f, &tok_json);
    if (!st.code) st = da_engine_set_tokenizer(q, tok_json, path);
    free(tok_json);
    q->file_bytes = f.size;
    da_gguf_close(&f);
    if (st.code) da_engine_release(q);
    else da_engine_bind(q);
    return st;
}
