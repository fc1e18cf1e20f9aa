/* diffattn models -> Hugging Face DiffLlama and Llama folders
 * (da_model_export_hf): the inverse of hf_model.c's mapping, plus the two
 * things a native model has that Hugging Face lacks, folded exactly:
 *   - subln, the head norm's 2d-wide weight: the norm's output is multiplied
 *     elementwise by it and then by o_proj, so it becomes a scale of
 *     o_proj's columns (column c of diff head j: subln[c mod 2d]);
 *   - the head norm's fixed eps 1e-5 (DA_SUBLN_EPS) against DiffLlama's
 *     rms_norm_eps, which the layer norms share: rms_norm_eps is written as
 *     norm_eps and v_proj scaled by s = sqrt(norm_eps / 1e-5), since
 *     RMSNorm(s*x, s^2*eps) = RMSNorm(x, eps) and the norm's input is linear
 *     in v (the loader scales by 1/s);
 *   - the DIFF framework's RoPE rule theta^(-j/(d/2-1)) is Llama's
 *     theta'^(-2j/d) at theta' = theta^(d/(d-2)).
 * KV heads: native DIFF group g holds k sub-heads 2g, 2g+1 and the 2d-wide v
 * of its diff heads; with 2*n_kv Hugging Face KV heads, diff head j of group
 * g = j / r (r = n_heads / n_kv) reads KV heads j / r = g and
 * (j + H/2) / r = g + n_kv, so KV head g is sub-head 2g and KV head
 * g + n_kv sub-head 2g+1: every native layout is expressed without copies,
 * and the loader's fewest-groups rule finds r again. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/variant.h"
#include "attn/attention.h"
#include "io/atomic_file.h"
#include "io/family.h"
#include "io/hf_model.h"
#include "io/safetensors.h"

/* ------------------------------------------------------------ config.json */

/* Shortest decimal that reads back as the same float, as a JSON number. */
static cJSON *json_float(float v) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return cJSON_CreateRaw(buf);
}

/* The theta Llama's rule needs to give c's frequencies. */
static double hf_rope_theta(const da_config *c) {
    const double d = (double)da_head_dim(c);
    return c->rope_freq == DA_ROPE_FREQ_LLAMA ? (double)c->rope_theta : pow((double)c->rope_theta, d / (d - 2.0));
}

static cJSON *rope_scaling_json(const da_config *c) {
    if (c->rope_scaling == DA_ROPE_SCALE_NONE) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "rope_type", c->rope_scaling == DA_ROPE_SCALE_LINEAR ? "linear" : "llama3");
    cJSON_AddItemToObject(o, "factor", json_float(c->rope_factor));
    if (c->rope_scaling == DA_ROPE_SCALE_LLAMA3) {
        cJSON_AddItemToObject(o, "low_freq_factor", json_float(c->rope_low_freq_factor));
        cJSON_AddItemToObject(o, "high_freq_factor", json_float(c->rope_high_freq_factor));
        cJSON_AddNumberToObject(o, "original_max_position_embeddings", c->rope_original_max_pos);
    }
    return o;
}

/* The config.json text (malloc'd), or NULL when out of memory. */
static char *config_text(const da_family *fam, const da_config *c) {
    const int d = da_head_dim(c), H = fam->heads_per_native * c->n_heads, Hkv = fam->heads_per_native * c->n_kv_heads;
    cJSON *o = cJSON_CreateObject(), *arch = cJSON_CreateArray();
    if (!o || !arch) {
        cJSON_Delete(o);
        cJSON_Delete(arch);
        return NULL;
    }
#define KEY(q) da_family_key_of(fam, q, NULL, NULL, 0)
    cJSON_AddItemToArray(arch, cJSON_CreateString(fam->hf_class));
    cJSON_AddItemToObject(o, "architectures", arch);
    cJSON_AddStringToObject(o, "model_type", fam->tag);
    cJSON_AddNumberToObject(o, KEY("dim"), c->dim);
    cJSON_AddNumberToObject(o, KEY("ffn_hidden"), c->ffn_hidden);
    cJSON_AddNumberToObject(o, KEY("n_layers"), c->n_layers);
    cJSON_AddNumberToObject(o, KEY("n_heads"), H);
    cJSON_AddNumberToObject(o, KEY("n_kv_heads"), Hkv);
    cJSON_AddNumberToObject(o, KEY("head_dim"), d);
    cJSON_AddNumberToObject(o, KEY("vocab_size"), c->vocab_size);
    cJSON_AddNumberToObject(o, KEY("max_seq_len"), c->max_seq_len);
    cJSON_AddItemToObject(o, KEY("norm_eps"), json_float(c->norm_eps));
    cJSON_AddNumberToObject(o, KEY("rope_theta"), hf_rope_theta(c));
    cJSON_AddItemToObject(o, "rope_scaling", rope_scaling_json(c));
    cJSON_AddBoolToObject(o, KEY("tie_embeddings"), c->tie_embeddings);
#undef KEY
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "attention_bias", 0);
    if (fam->writes_mlp_bias) cJSON_AddBoolToObject(o, "mlp_bias", 0);
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    if (fam->hf_rule && fam->hf_rule->write(o, c)) {
        cJSON_Delete(o);
        return NULL;
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

/* ------------------------------------------------------------ tensors */

typedef struct {
    const da_family *fam;
    da_st_write_tensor *t;
    char (*names)[96];
    int n, cap;
    float *buf; /* the permuted and folded copies */
} hf_out;

static void add(hf_out *o, const char *name, int rows, int cols, const float *data) {
    snprintf(o->names[o->n], sizeof o->names[0], "%s", name);
    da_st_write_tensor *t = &o->t[o->n];
    memset(t, 0, sizeof *t);
    t->name = o->names[o->n];
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->data = data;
    o->n++;
}

/* One d-row head of q or k back to Hugging Face's rotate_half order: row i
 * <- native row 2i, row d/2 + i <- native row 2i + 1. */
static void rope_head_to_hf(float *dst, const float *src, int d, int C) {
    for (int i = 0; i < d / 2; i++) {
        memcpy(dst + (size_t)i * C, src + (size_t)(2 * i) * C, (size_t)C * sizeof(float));
        memcpy(dst + (size_t)(d / 2 + i) * C, src + (size_t)(2 * i + 1) * C, (size_t)C * sizeof(float));
    }
}

/* Floats of copies one layer needs (layer_tensors' use of buf). */
static size_t layer_copy_floats(const da_family *fam, const da_config *c) {
    const size_t C = (size_t)c->dim, Ckv = (size_t)da_attn_kv_cols(c), A = (size_t)da_attn_out_cols(c);
    return fam->folds_head_norm ? 2 * A * C + 2 * Ckv * C : A * C + Ckv * C;
}

/* The rows of layer l's native tensor suffix (a q or k projection). */
static int tensor_rows(const da_model *m, int l, const char *suffix) {
    char native[128];
    snprintf(native, sizeof native, "layers.%d.%s", l, suffix);
    const da_tensor *t = da_model_find(m, native);
    return t ? (int)t->shape[0] : 0;
}

static void layer_tensors(hf_out *o, const da_model *m, int l, float *buf) {
    const da_config *c = &m->cfg;
    const da_layer_weights *L = &m->w.layers[l];
    /* A: the attention's width, dim unless head_dim is set */
    const int C = c->dim, d = da_head_dim(c), n_kv = c->n_kv_heads, A = da_attn_out_cols(c);
    const size_t Ckv = (size_t)da_attn_kv_cols(c), hd = (size_t)d * C;
    /* paired heads with the head norm folded: q, k, v, o copies; else q and k (v and o go as they are) */
    float *q = buf, *k = q + (size_t)A * C, *v = k + Ckv * C, *wo = v + Ckv * C;
    int qrows = A, krows = (int)Ckv;
    char n[128];
#define NAME(s) da_family_layer_name(o->fam, l, s, n, sizeof n)
    add(o, NAME("attention_norm.weight"), C, 0, L->attention_norm);
    if (o->fam->heads_per_native == 2 && o->fam->folds_head_norm) {
        const int Hn = c->n_heads;
        for (int j = 0; j < Hn; j++) {
            rope_head_to_hf(q + (size_t)j * hd, L->wq + (size_t)(2 * j) * hd, d, C);
            rope_head_to_hf(q + (size_t)(j + Hn) * hd, L->wq + (size_t)(2 * j + 1) * hd, d, C);
        }
        /* the head norm's eps (see the top of this file) */
        const float s = (float)sqrt((double)c->norm_eps / (double)DA_SUBLN_EPS);
        for (int g = 0; g < n_kv; g++)
            for (int half = 0; half < 2; half++) {
                const size_t src = (size_t)(2 * g + half) * hd, dst = (size_t)(g + half * n_kv) * hd;
                rope_head_to_hf(k + dst, L->wk + src, d, C);
                for (size_t i = 0; i < hd; i++) v[dst + i] = L->wv[src + i] * s;
            }
        for (int r = 0; r < C; r++)
            for (int col = 0; col < A; col++)
                wo[(size_t)r * A + col] = L->wo[(size_t)r * A + col] * L->subln[col % (2 * d)];
    } else {
        /* q and k as many d-wide heads as the native tensors hold (GDA's q: signal and noise heads) */
        qrows = tensor_rows(m, l, "attn.q_proj.weight"), krows = tensor_rows(m, l, "attn.k_proj.weight");
        for (int h = 0; h < qrows / d; h++) rope_head_to_hf(q + (size_t)h * hd, L->wq + (size_t)h * hd, d, C);
        for (int g = 0; g < krows / d; g++) rope_head_to_hf(k + (size_t)g * hd, L->wk + (size_t)g * hd, d, C);
        v = L->wv;
        wo = L->wo;
    }
    add(o, NAME("attn.q_proj.weight"), qrows, C, q);
    add(o, NAME("attn.k_proj.weight"), krows, C, k);
    add(o, NAME("attn.v_proj.weight"), (int)Ckv, C, v);
    add(o, NAME("attn.out_proj.weight"), C, A, wo);
    /* the variant's own tensors the family carries as they are (DiffLlama's lambdas) */
    for (const da_family_name *r = o->fam->layer_own; r && r->native; r++) {
        char native[128];
        snprintf(native, sizeof native, "layers.%d.%s", l, r->native);
        const da_tensor *t = da_model_find(m, native);
        if (t) add(o, NAME(r->native), t->shape[0], t->ndim == 2 ? t->shape[1] : 0, m->params + t->offset);
    }
    add(o, NAME("ffn_norm.weight"), C, 0, L->ffn_norm);
    add(o, NAME("feed_forward.w1.weight"), c->ffn_hidden, C, L->w1);
    add(o, NAME("feed_forward.w3.weight"), c->ffn_hidden, C, L->w3);
    add(o, NAME("feed_forward.w2.weight"), C, c->ffn_hidden, L->w2);
#undef NAME
}

static void out_free(hf_out *o) {
    free(o->t);
    free(o->names);
    free(o->buf);
    memset(o, 0, sizeof *o);
}

static da_status build_tensors(hf_out *o, const da_family *fam, const da_model *m, const char *path) {
    const da_config *c = &m->cfg;
    memset(o, 0, sizeof *o);
    o->fam = fam;
    int own = 0;
    for (const da_family_name *r = fam->layer_own; r && r->native; r++) own++;
    o->cap = 3 + c->n_layers * (9 + own);
    const size_t per = layer_copy_floats(fam, c);
    o->t = calloc((size_t)o->cap, sizeof *o->t);
    o->names = calloc((size_t)o->cap, sizeof *o->names);
    o->buf = malloc(per * (size_t)c->n_layers * sizeof(float));
    if (!o->t || !o->names || !o->buf) {
        out_free(o);
        return da_errorf("%s: out of memory for the permuted attention weights (%.1f MB)", path,
                         (double)(per * (size_t)c->n_layers * sizeof(float)) / 1e6);
    }
    char n[128];
#define GLOBAL(s) (da_family_to_file(fam, s, n, sizeof n), n)
    add(o, GLOBAL("tok_embeddings.weight"), c->vocab_size, c->dim, m->w.tok_embeddings);
    for (int l = 0; l < c->n_layers; l++) layer_tensors(o, m, l, o->buf + per * (size_t)l);
    add(o, GLOBAL("norm.weight"), c->dim, 0, m->w.norm);
    if (!c->tie_embeddings) add(o, GLOBAL("output.weight"), c->vocab_size, c->dim, m->w.output);
#undef GLOBAL
    return da_ok();
}

/* ------------------------------------------------------------ the folder */

/* "diff (DiffLlama) or softmax (Llama)": the variants with a Hugging Face family. */
static void hf_variants(char *out, size_t n) {
    int count;
    const da_family *f = da_family_all(&count);
    out[0] = 0;
    int k = 0, j = 0;
    for (int i = 0; i < count; i++) k += f[i].container == DA_FAMILY_HF;
    for (int i = 0; i < count; i++) {
        if (f[i].container != DA_FAMILY_HF) continue;
        const char *sep = !j ? "" : j < k - 1 ? ", " : " or ";
        const char *cls = f[i].hf_class, *end = strstr(cls, "ForCausalLM");
        const int len = end ? (int)(end - cls) : (int)strlen(cls);
        snprintf(out + strlen(out), n - strlen(out), "%s%s (%.*s)", sep, f[i].variant, len, cls);
        j++;
    }
}

static da_status check_exportable(const da_family *fam, const da_config *c, const char *dir) {
    const attn_variant *v = da_attn_variant_of(c->arch);
    char which[160];
    hf_variants(which, sizeof which);
    if (!fam)
        return da_errorf("%s: arch %s (%s) has no Hugging Face architecture; export takes %s", dir, v->name, v->about,
                         which);
    if (c->window > 0)
        return da_errorf("%s: window %d (sliding-window attention) has no field in DiffLlama's or Llama's "
                         "config.json; export takes models that attend to every earlier token",
                         dir, c->window);
    if (v->head_norm_option == 2 && !da_attn_head_norm_on(c))
        return da_errorf("%s: head_norm off (a `convert --recipe preserve` model, or --head-norm off): %s always "
                         "applies the per-head norm and its (1 - lambda_init) scale, which would change this model's "
                         "output; only a model with the head norm (e.g. --recipe split) exports as %s",
                         dir, fam->hf_class, fam->hf_class);
    if (c->lambda_hold > 0.0f)
        return da_errorf("%s: lambda_hold %g (a --lambda-ramp not finished, or a converted model not yet trained): "
                         "%s has no weight on its second map; train past the ramp first",
                         dir, (double)c->lambda_hold, fam->hf_class);
    if (da_attn_head_norm_on(c) != (v->head_norm_option == 2))
        return da_errorf("%s: head_norm %s: %s always %s the per-head norm; export takes the default head_norm",
                         dir, da_attn_head_norm_on(c) ? "on" : "off", fam->hf_class,
                         v->head_norm_option == 2 ? "applies" : "lacks");
    char poly[128];
    if (c->mlp == DA_MLP_POLYNORM && da_family_to_file(fam, "layers.0.feed_forward.poly.weight", poly, sizeof poly))
        return da_errorf("%s: mlp polynorm: %s's MLP is SwiGLU; export takes --mlp swiglu models", dir,
                         fam->hf_class);
    if (c->lambda_init > 0.0f)
        return da_errorf("%s: lambda_init %g: %s derives lambda_init from the depth (0.8 - 0.6 exp(-0.3 l)); export "
                         "takes --lambda-init depth",
                         dir, (double)c->lambda_init, fam->hf_class);
    return da_ok();
}

/* path, a new file of the temporary folder, holding text. */
static da_status write_text(const char *path, const char *text) {
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    size_t n = strlen(text);
    if (fwrite(text, 1, n, af.fp) != n) return da_atomic_fail(&af, errno);
    return da_atomic_commit(&af);
}

/* The files are written into a new sibling folder that then takes dir's
 * place in one step (da_atomic_folder_commit): a kill or a full disk at any
 * moment leaves the previous export or this one, never the weights of one
 * with the config.json of the other. */
da_status da_model_export_hf(const da_model *m, const char *dir) {
    const da_config *c = &m->cfg;
    const da_family *fam = da_family_hf_of(c);
    da_status st = check_exportable(fam, c, dir);
    if (st.code) return st;
    char tmp[4200], cfg_path[4300], st_path[4300], tok_path[4300];
    if ((st = da_atomic_folder_open(dir, tmp, sizeof tmp)).code) return st;
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", tmp);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", tmp);
    snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", tmp);
    char *cfg_text = config_text(fam, c);
    hf_out o;
    if (!cfg_text) st = da_errorf("%s: out of memory", cfg_path);
    else if (!(st = build_tensors(&o, fam, m, st_path)).code) {
        st = da_st_write(st_path, o.t, o.n, NULL, NULL, 0);
        if (!st.code && m->tokenizer_json) st = write_text(tok_path, m->tokenizer_json);
        if (!st.code) st = write_text(cfg_path, cfg_text);
        out_free(&o);
    }
    free(cfg_text);
    /* a tokenizer.json of an earlier export is not carried over: it would be taken for this model's */
    const char *owned[3] = {"model.safetensors", "tokenizer.json", "config.json"};
    if (!st.code) st = da_atomic_folder_commit(tmp, dir, owned, 3);
    da_atomic_folder_abort(tmp);
    return st;
}
