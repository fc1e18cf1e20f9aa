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
#include <dirent.h>
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
#include "io/st_shards.h"

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
static char *config_text(const da_family *fam, const da_config *c, const char *torch_dtype) {
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
    cJSON_AddStringToObject(o, "torch_dtype", torch_dtype);
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
    da_st_dtype dtype; /* of every tensor in the files */
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

/* ------------------------------------------------------------ weight files and shards */

/* The names the commit owns (written, or removed from dir), in the order a
 * file system without the folder exchange renames them: weights, then the
 * stale weight files, then tokenizer.json and config.json last. */
typedef struct {
    char (*name)[48];
    int n, cap;
} hf_names;

static int names_add(hf_names *f, const char *name) {
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 16;
        void *p = realloc(f->name, (size_t)cap * sizeof *f->name);
        if (!p) return -1;
        f->name = p, f->cap = cap;
    }
    snprintf(f->name[f->n++], sizeof f->name[0], "%s", name);
    return 0;
}

static int names_have(const hf_names *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->name[i], name)) return 1;
    return 0;
}

/* A shard name as Hugging Face writes them, model-<i>-of-<n>.safetensors (any digit count). */
static int is_shard_name(const char *s) {
    size_t a = strspn(s + 6, "0123456789"), b;
    if (strncmp(s, "model-", 6) || !a || strncmp(s + 6 + a, "-of-", 4)) return 0;
    b = strspn(s + 10 + a, "0123456789");
    return b && !strcmp(s + 10 + a + b, ".safetensors");
}

/* Adds what dir holds of an earlier export's weights that this one did not
 * write: model.safetensors (which the reader takes before any index), the
 * index, and every shard name, so that none is carried into the new folder. */
static da_status add_stale(hf_names *f, const char *dir) {
    static const char *const fixed[2] = {"model.safetensors", "model.safetensors.index.json"};
    for (int i = 0; i < 2; i++)
        if (!names_have(f, fixed[i]) && names_add(f, fixed[i])) return da_errorf("%s: out of memory", dir);
    DIR *d = opendir(dir);
    if (!d) return da_ok(); /* a new folder: nothing to remove */
    const struct dirent *e;
    int bad = 0;
    while (!bad && (e = readdir(d)))
        if (is_shard_name(e->d_name) && strlen(e->d_name) < sizeof f->name[0] && !names_have(f, e->d_name))
            bad = names_add(f, e->d_name);
    closedir(d);
    return bad ? da_errorf("%s: out of memory", dir) : da_ok();
}

static size_t tensor_bytes(const da_st_write_tensor *t, size_t esz) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n * esz;
}

/* shard_of[i]: tensor i's shard, in order; a shard closes when the next
 * tensor would take it past shard_bytes, and a tensor larger than
 * shard_bytes is alone in its own (Hugging Face's split, with the order
 * kept). 0 bytes: one shard. Returns the count; *total: the tensors' bytes. */
static int plan_shards(const hf_out *o, size_t shard_bytes, int *shard_of, size_t *total) {
    int n = 0;
    size_t used = 0;
    *total = 0;
    for (int i = 0; i < o->n; i++) {
        const size_t b = tensor_bytes(&o->t[i], da_st_dtype_size(o->dtype));
        if (i > 0 && shard_bytes && (b > shard_bytes - used || used > shard_bytes)) n++, used = 0;
        shard_of[i] = n;
        used += b;
        *total += b;
    }
    return o->n ? n + 1 : 0;
}

/* model.safetensors.index.json: metadata.total_size and weight_map with
 * the names sorted, as transformers' save_pretrained writes it. */
static char *index_text(const hf_out *o, const int *shard_of, int n_shards, size_t total) {
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *wm = cJSON_AddObjectToObject(root, "weight_map");
    int *order = malloc((size_t)o->n * sizeof *order);
    char *text = NULL;
    if (meta && wm && order) {
        cJSON_AddNumberToObject(meta, "total_size", (double)total);
        for (int i = 0; i < o->n; i++) order[i] = i;
        for (int i = 1; i < o->n; i++) /* insertion sort: a few hundred names */
            for (int j = i; j > 0 && strcmp(o->t[order[j - 1]].name, o->t[order[j]].name) > 0; j--) {
                int k = order[j];
                order[j] = order[j - 1], order[j - 1] = k;
            }
        char file[48];
        for (int i = 0; i < o->n; i++) {
            snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", shard_of[order[i]] + 1, n_shards);
            cJSON_AddStringToObject(wm, o->t[order[i]].name, file);
        }
        text = cJSON_Print(root);
    }
    free(order);
    cJSON_Delete(root);
    return text;
}

/* The weights into tmp: model.safetensors when they fit in one shard of
 * shard_bytes (or shard_bytes is 0), else the shards and their index, each
 * tensor converted as it is written. The names written go to f. */
static da_status write_weights(const hf_out *o, const char *tmp, const char *dir, size_t shard_bytes, hf_names *f) {
    int *shard_of = malloc(((size_t)o->n + 1) * sizeof *shard_of);
    if (!shard_of) return da_errorf("%s: out of memory", dir);
    size_t total;
    const int n_shards = plan_shards(o, shard_bytes, shard_of, &total);
    char path[4300], name[48];
    da_status st = da_ok();
    if (n_shards > DA_MAX_SHARDS)
        st = da_errorf("%s: a shard size of %zu bytes splits the %zu bytes of weights into %d shards, more than the "
                       "%d a folder may hold to load back; give a larger shard size",
                       dir, shard_bytes, total, n_shards, DA_MAX_SHARDS);
    for (int s = 0, first = 0; !st.code && s < n_shards; s++) {
        int end = first;
        while (end < o->n && shard_of[end] == s) end++;
        if (n_shards == 1) snprintf(name, sizeof name, "model.safetensors");
        else snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        snprintf(path, sizeof path, "%s/%s", tmp, name);
        st = da_st_write_as(path, o->t + first, end - first, o->dtype, NULL, NULL, 0);
        if (!st.code && names_add(f, name)) st = da_errorf("%s: out of memory", dir);
        first = end;
    }
    if (!st.code && n_shards > 1) {
        char *text = index_text(o, shard_of, n_shards, total);
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", tmp);
        st = !text ? da_errorf("%s: out of memory", path) : write_text(path, text);
        if (!st.code && names_add(f, "model.safetensors.index.json")) st = da_errorf("%s: out of memory", dir);
        free(text);
    }
    free(shard_of);
    return st;
}

/* type -> the safetensors dtype and config.json's torch_dtype. */
static da_status hf_dtype(const char *type, const char *dir, da_st_dtype *dt, const char **torch_dtype) {
    static const struct {
        const char *type, *torch;
        da_st_dtype dt;
    } types[3] = {{"f32", "float32", DA_ST_F32}, {"bf16", "bfloat16", DA_ST_BF16}, {"f16", "float16", DA_ST_F16}};
    for (int i = 0; i < 3; i++)
        if (type && !strcmp(type, types[i].type)) {
            *dt = types[i].dt, *torch_dtype = types[i].torch;
            return da_ok();
        }
    return da_errorf("%s: type \"%s\" is not one of f32, bf16, f16 for a Hugging Face folder (quantized types: "
                     "diffattn quantize, to GGUF)",
                     dir, type ? type : "(null)");
}

/* ------------------------------------------------------------ the folder */

/* The files are written into a new sibling folder that then takes dir's
 * place in one step (da_atomic_folder_commit): a kill or a full disk at any
 * moment leaves the previous export or this one, never the weights of one
 * with the config.json of the other, nor the shards of two exports. */
da_status da_model_export_hf_as(const da_model *m, const char *dir, const char *type, size_t shard_bytes) {
    const da_config *c = &m->cfg;
    const da_family *fam = da_family_hf_of(c);
    da_st_dtype dt = DA_ST_F32;
    const char *torch_dtype = "float32";
    da_status st = hf_dtype(type, dir, &dt, &torch_dtype);
    if (!st.code) st = check_exportable(fam, c, dir);
    if (st.code) return st;
    char tmp[4200], cfg_path[4300], tok_path[4300];
    if ((st = da_atomic_folder_open(dir, tmp, sizeof tmp)).code) return st;
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", tmp);
    snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", tmp);
    char *cfg_text = config_text(fam, c, torch_dtype);
    hf_out o;
    hf_names owned = {0};
    if (!cfg_text) st = da_errorf("%s: out of memory", cfg_path);
    else if (!(st = build_tensors(&o, fam, m, dir)).code) {
        o.dtype = dt;
        st = write_weights(&o, tmp, dir, shard_bytes, &owned);
        if (!st.code && m->tokenizer_json) st = write_text(tok_path, m->tokenizer_json);
        if (!st.code) st = write_text(cfg_path, cfg_text);
        out_free(&o);
    }
    free(cfg_text);
    /* a tokenizer.json of an earlier export is not carried over: it would be taken for this model's */
    if (!st.code) st = add_stale(&owned, dir);
    if (!st.code && (names_add(&owned, "tokenizer.json") || names_add(&owned, "config.json")))
        st = da_errorf("%s: out of memory", dir);
    const char **list = st.code ? NULL : malloc((size_t)owned.n * sizeof *list);
    if (!st.code && !list) st = da_errorf("%s: out of memory", dir);
    for (int i = 0; list && i < owned.n; i++) list[i] = owned.name[i];
    if (!st.code) st = da_atomic_folder_commit(tmp, dir, list, owned.n);
    da_atomic_folder_abort(tmp);
    free(list);
    free(owned.name);
    return st;
}

da_status da_model_export_hf(const da_model *m, const char *dir) { return da_model_export_hf_as(m, dir, "f32", 0); }
