/* A softmax model's weights rearranged into DIFF V1 or DIFF V2 heads
 * (da_model_convert; the constructions are written out in docs/model.md,
 * "Converting a softmax model"). Every tensor outside the attention is
 * copied; the attention's new parameters (the lambda vectors, lambda_proj,
 * subln) keep the fresh model's initialisation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/model.h"

/* n rows of width C from src row s0 to dst row d0 (row-major, torch's [out, in]). */
static void copy_rows(float *dst, int d0, const float *src, int s0, int n, int C) {
    memcpy(dst + (size_t)d0 * C, src + (size_t)s0 * C, (size_t)n * C * sizeof(float));
}

/* Columns [s0, s0+n) of src (R rows of width sw) to columns [d0, d0+n) of dst (width dw). */
static void copy_cols(float *dst, int dw, int d0, const float *src, int sw, int s0, int n, int R) {
    for (int r = 0; r < R; r++)
        memcpy(dst + (size_t)r * dw + d0, src + (size_t)r * sw + s0, (size_t)n * sizeof(float));
}

static size_t numel_of(const da_model *m, int l, const char *t) {
    char name[96];
    snprintf(name, sizeof name, "layers.%d.attn.%s", l, t);
    const da_tensor *x = da_model_find(m, name);
    return x ? x->numel : 0;
}

/* The converted model's configuration; the message says what the source lacks. */
static da_status target_config(const da_config *s, da_arch to, da_convert_recipe r, da_config *c) {
    const int H = s->n_heads, Hkv = s->n_kv_heads, d = da_head_dim(s);
    if (s->arch != DA_ARCH_SOFTMAX)
        return da_errorf("the source is a %s model; convert takes softmax models (diffattn's own, a Llama folder or "
                         "GGUF)",
                         da_arch_name(s->arch));
    if (da_config_head_norm(s))
        return da_errorf("head_norm: the source has the softmax head norm on; convert takes models without it (no "
                         "DIFF head computes a softmax head's norm)");
    if (to != DA_ARCH_DIFF && to != DA_ARCH_DIFF2)
        return da_errorf("--to %s: convert makes diff or diff2 models", da_arch_name(to));
    *c = *s;
    c->arch = to;
    c->head_norm = DA_HEAD_NORM_DEFAULT;
    c->lambda_init = 0.0f;
    if (r == DA_CONVERT_PRESERVE) {
        /* one DIFF head per source head, of the source's size: dim / (2 H) no longer gives it */
        c->head_dim = to == DA_ARCH_DIFF || d * H != s->dim ? d : 0;
        /* without the norm and its (1 - lambda_init), and with the second map held back, each head is the
         * source's */
        if (to == DA_ARCH_DIFF) c->head_norm = DA_HEAD_NORM_OFF;
        c->lambda_hold = 1.0f;
    } else {
        if (to != DA_ARCH_DIFF)
            return da_errorf("--recipe split --to %s: split pairs heads that have keys and values of their own, and "
                             "DIFF V2's two maps share one; use --recipe preserve for diff2",
                             da_arch_name(to));
        if (H % 2 || Hkv % 2)
            return da_errorf("--recipe split: the source's %d heads and %d KV heads must both be even (heads j and "
                             "j + H/2 become one DIFF head, as Hugging Face's DiffLlama pairs them)",
                             H, Hkv);
        c->n_heads = H / 2;
        c->n_kv_heads = Hkv / 2;
        c->head_dim = 2 * d * c->n_heads == s->dim ? 0 : d;
        c->lambda_hold = 0.0f;
    }
    da_status st = da_config_validate(c);
    if (st.code) return da_errorf("the converted configuration is invalid: %s", st.msg);
    return da_ok();
}

/* One layer's q, k, v, out: the out model's are zeroed first, then filled. */
static void convert_layer(const da_model *src, da_model *out, int l, da_convert_recipe r) {
    const da_config *s = &src->cfg;
    const int C = s->dim, H = s->n_heads, Hkv = s->n_kv_heads, d = da_head_dim(s), Hd = H * d;
    const da_layer_weights *S = &src->w.layers[l];
    da_layer_weights *D = &out->w.layers[l];
    memset(D->wq, 0, numel_of(out, l, "q_proj.weight") * sizeof(float));
    memset(D->wk, 0, numel_of(out, l, "k_proj.weight") * sizeof(float));
    memset(D->wv, 0, numel_of(out, l, "v_proj.weight") * sizeof(float));
    memset(D->wo, 0, numel_of(out, l, "out_proj.weight") * sizeof(float));
    if (r == DA_CONVERT_SPLIT) {
        /* DIFF head j: maps of source heads j and j + H/2; KV group g: K sub-heads and value halves of source
         * KV heads g and g + Hkv/2; its 2d output columns take those two heads' o_proj columns */
        const int Hn = H / 2, nk = Hkv / 2;
        for (int j = 0; j < Hn; j++) {
            copy_rows(D->wq, 2 * j * d, S->wq, j * d, d, C);
            copy_rows(D->wq, (2 * j + 1) * d, S->wq, (j + Hn) * d, d, C);
            copy_cols(D->wo, Hd, 2 * d * j, S->wo, Hd, d * j, d, C);
            copy_cols(D->wo, Hd, 2 * d * j + d, S->wo, Hd, d * (j + Hn), d, C);
        }
        for (int g = 0; g < nk; g++)
            for (int half = 0; half < 2; half++) {
                copy_rows(D->wk, (2 * g + half) * d, S->wk, (g + half * nk) * d, d, C);
                copy_rows(D->wv, (2 * g + half) * d, S->wv, (g + half * nk) * d, d, C);
            }
        return;
    }
    if (out->cfg.arch == DA_ARCH_DIFF2) {
        /* query head 2i is source head i, 2i+1 starts at zero; K, V and out are the source's */
        for (int i = 0; i < H; i++) copy_rows(D->wq, 2 * i * d, S->wq, i * d, d, C);
        memcpy(D->wk, S->wk, (size_t)Hkv * d * C * sizeof(float));
        memcpy(D->wv, S->wv, (size_t)Hkv * d * C * sizeof(float));
        memcpy(D->wo, S->wo, (size_t)C * Hd * sizeof(float));
        return;
    }
    /* DIFF V1: Q1, K1 the source head's, Q2, K2 zero; the 2d value is the source's followed by zeros, and
     * so are the head's output columns */
    for (int i = 0; i < H; i++) {
        copy_rows(D->wq, 2 * i * d, S->wq, i * d, d, C);
        copy_cols(D->wo, 2 * Hd, 2 * d * i, S->wo, Hd, d * i, d, C);
    }
    for (int g = 0; g < Hkv; g++) {
        copy_rows(D->wk, 2 * g * d, S->wk, g * d, d, C);
        copy_rows(D->wv, 2 * g * d, S->wv, g * d, d, C);
    }
}

da_status da_model_convert(const da_model *src, da_arch to, da_convert_recipe r, uint64_t seed, da_model *out) {
    memset(out, 0, sizeof *out);
    da_config c;
    da_status st = target_config(&src->cfg, to, r, &c);
    if (st.code) return st;
    if ((st = da_model_create(out, &c)).code) return st;
    da_model_init(out, seed); /* the new attention parameters; the rest is overwritten */
    const da_config *s = &src->cfg;
    const size_t C = (size_t)s->dim, F = (size_t)s->ffn_hidden, V = (size_t)s->vocab_size;
    memcpy(out->w.tok_embeddings, src->w.tok_embeddings, V * C * sizeof(float));
    memcpy(out->w.norm, src->w.norm, C * sizeof(float));
    if (!s->tie_embeddings) memcpy(out->w.output, src->w.output, V * C * sizeof(float));
    for (int l = 0; l < s->n_layers; l++) {
        const da_layer_weights *S = &src->w.layers[l];
        da_layer_weights *D = &out->w.layers[l];
        memcpy(D->attention_norm, S->attention_norm, C * sizeof(float));
        memcpy(D->ffn_norm, S->ffn_norm, C * sizeof(float));
        memcpy(D->w1, S->w1, F * C * sizeof(float));
        memcpy(D->w2, S->w2, C * F * sizeof(float));
        memcpy(D->w3, S->w3, F * C * sizeof(float));
        convert_layer(src, out, l, r);
    }
    if (src->tokenizer_json) {
        const size_t n = strlen(src->tokenizer_json) + 1;
        out->tokenizer_json = malloc(n);
        if (!out->tokenizer_json) {
            da_model_free(out);
            return da_errorf("out of memory copying the tokenizer");
        }
        memcpy(out->tokenizer_json, src->tokenizer_json, n);
    }
    return da_ok();
}
