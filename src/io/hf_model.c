/* Hugging Face DiffLlama and Llama folders -> diffattn models (hf_model.h). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/attention.h"
#include "io/family.h"
#include "io/hf_model.h"
#include "io/st_shards.h"

static int is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

int da_hf_is_folder(const char *path) {
    struct stat sb;
    if (stat(path, &sb) || !S_ISDIR(sb.st_mode)) return 0;
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", path);
    return is_file(p);
}

int da_model_tokenizer_path(const char *model_path, char *out, size_t n) {
    struct stat sb;
    if (stat(model_path, &sb) || !S_ISDIR(sb.st_mode)) return 0;
    int w = snprintf(out, n, "%s/tokenizer.json", model_path);
    return w > 0 && (size_t)w < n && is_file(out);
}

size_t da_model_file_bytes(const char *path) {
    struct stat sb;
    if (stat(path, &sb)) return 0;
    if (!S_ISDIR(sb.st_mode)) return (size_t)sb.st_size;
    DIR *d = opendir(path);
    if (!d) return 0;
    size_t n = 0;
    char p[4400];
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 12 || strcmp(e->d_name + len - 12, ".safetensors")) continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (!stat(p, &sb) && S_ISREG(sb.st_mode)) n += (size_t)sb.st_size;
    }
    closedir(d);
    return n;
}

static da_status take(da_shards *F, const char *name, int64_t rows, int64_t cols, da_shard_tensor **out) {
    da_shard_tensor *t = da_shards_find(F, name);
    if (!t) return da_errorf("missing tensor %s", name);
    int ok = cols ? t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols : t->ndim == 1 && t->shape[0] == rows;
    if (!ok) {
        char want[64], got[64];
        if (cols) snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
        else snprintf(want, sizeof want, "[%lld]", (long long)rows);
        if (t->ndim == 2) snprintf(got, sizeof got, "[%lld, %lld]", (long long)t->shape[0], (long long)t->shape[1]);
        else if (t->ndim == 1) snprintf(got, sizeof got, "[%lld]", (long long)t->shape[0]);
        else snprintf(got, sizeof got, "a scalar");
        return da_errorf("tensor %s has shape %s, expected %s (does config.json match the weights?)", name, got, want);
    }
    t->used = 1;
    *out = t;
    return da_ok();
}

static da_status copy_plain(da_shards *F, const char *name, int64_t rows, int64_t cols, float *dst) {
    da_shard_tensor *t;
    da_status st = take(F, name, rows, cols, &t);
    if (st.code) return st;
    da_shard_convert(dst, t, 0, (size_t)rows * (size_t)(cols ? cols : 1), 1.0f);
    da_shard_release(t);
    return da_ok();
}

/* One d-row head of a q or k projection, rows permuted from Hugging Face's
 * rotate_half pairs (i, i + d/2) to diffattn's adjacent pairs (2i, 2i+1). */
static void copy_rope_head(float *dst, const da_shard_tensor *t, int hf_head, int d, int C) {
    for (int i = 0; i < d / 2; i++) {
        da_shard_convert(dst + (size_t)(2 * i) * C, t, ((size_t)hf_head * d + i) * C, (size_t)C, 1.0f);
        da_shard_convert(dst + (size_t)(2 * i + 1) * C, t, ((size_t)hf_head * d + d / 2 + i) * C, (size_t)C, 1.0f);
    }
}

/* The family's name of a native tensor outside the layers ("output.weight" -> "lm_head.weight"). */
static const char *global_name(const da_family *f, const char *native, char *out, size_t n) {
    if (da_family_to_file(f, native, out, n)) snprintf(out, n, "%s", native);
    return out;
}

/* The family's own tensors of layer l (its layer_own rows) that m has, as they are. */
static da_status copy_own(da_shards *F, da_model *m, const da_family *fam, int l) {
    for (const da_family_name *r = fam->layer_own; r && r->native; r++) {
        char native[128], n[192];
        snprintf(native, sizeof native, "layers.%d.%s", l, r->native);
        const da_tensor *t = da_model_find(m, native);
        if (!t) continue; /* an option off (SwiGLU: no PolyNorm weights); a tensor in the file is then unexpected */
        da_family_layer_name(fam, l, r->native, n, sizeof n);
        da_status st = copy_plain(F, n, t->shape[0], t->ndim == 2 ? t->shape[1] : 0, m->params + t->offset);
        if (st.code) return st;
    }
    return da_ok();
}

static da_status load_layer(da_shards *F, da_model *m, const da_hf_shape *hs, int l) {
    const da_config *c = &m->cfg;
    da_layer_weights *L = &m->w.layers[l];
    const int C = c->dim, d = hs->d, H = hs->H, Hkv = hs->Hkv, G = H / Hkv, Fh = c->ffn_hidden;
    char n[192];
    da_status st;
    da_shard_tensor *q, *k, *v;
#define NAME(s) da_family_layer_name(hs->fam, l, s, n, sizeof n)
    if ((st = copy_plain(F, NAME("attention_norm.weight"), C, 0, L->attention_norm)).code) return st;
    if ((st = copy_plain(F, NAME("ffn_norm.weight"), C, 0, L->ffn_norm)).code) return st;
    if ((st = copy_plain(F, NAME("feed_forward.w1.weight"), Fh, C, L->w1)).code) return st;
    if ((st = copy_plain(F, NAME("feed_forward.w3.weight"), Fh, C, L->w3)).code) return st;
    if ((st = copy_plain(F, NAME("feed_forward.w2.weight"), C, Fh, L->w2)).code) return st;
    if ((st = copy_plain(F, NAME("attn.out_proj.weight"), C, hs->A, L->wo)).code) return st;
    if ((st = take(F, NAME("attn.q_proj.weight"), (int64_t)H * d, C, &q)).code) return st;
    if ((st = take(F, NAME("attn.k_proj.weight"), (int64_t)Hkv * d, C, &k)).code) return st;
    if ((st = take(F, NAME("attn.v_proj.weight"), (int64_t)Hkv * d, C, &v)).code) return st;
    if (hs->fam->heads_per_native == 1) {
        for (int h = 0; h < H; h++) copy_rope_head(L->wq + (size_t)h * d * C, q, h, d, C);
        for (int g = 0; g < Hkv; g++) copy_rope_head(L->wk + (size_t)g * d * C, k, g, d, C);
        da_shard_convert(L->wv, v, 0, (size_t)Hkv * d * C, hs->v_scale);
        if ((st = copy_own(F, m, hs->fam, l)).code) return st;
    } else {
        const int Hn = H / 2, r = hs->n_rep_native, n_kv = Hn / r;
        for (int j = 0; j < Hn; j++) {
            copy_rope_head(L->wq + (size_t)(2 * j) * d * C, q, j, d, C);
            copy_rope_head(L->wq + (size_t)(2 * j + 1) * d * C, q, j + Hn, d, C);
        }
        /* the head norm's eps, folded into v (hf_model.h) */
        const float vscale = sqrtf(DA_SUBLN_EPS / hs->head_norm_eps);
        for (int g = 0; g < n_kv; g++) {
            int j0 = g * r, a = j0 / G, b = (j0 + Hn) / G;
            copy_rope_head(L->wk + (size_t)(2 * g) * d * C, k, a, d, C);
            copy_rope_head(L->wk + (size_t)(2 * g + 1) * d * C, k, b, d, C);
            da_shard_convert(L->wv + (size_t)(2 * g) * d * C, v, (size_t)a * d * C, (size_t)d * C, vscale);
            da_shard_convert(L->wv + (size_t)(2 * g + 1) * d * C, v, (size_t)b * d * C, (size_t)d * C, vscale);
        }
        if ((st = copy_plain(F, NAME("attn.lambda_q1"), d, 0, L->lambda_q1)).code) return st;
        if ((st = copy_plain(F, NAME("attn.lambda_k1"), d, 0, L->lambda_k1)).code) return st;
        if ((st = copy_plain(F, NAME("attn.lambda_q2"), d, 0, L->lambda_q2)).code) return st;
        if ((st = copy_plain(F, NAME("attn.lambda_k2"), d, 0, L->lambda_k2)).code) return st;
        for (int i = 0; i < 2 * d; i++) L->subln[i] = 1.0f;
    }
    da_shard_release(q);
    da_shard_release(k);
    da_shard_release(v);
#undef NAME
    return da_ok();
}

/* Every matrix the configuration implies is in the files with its shape:
 * checked before the model is allocated, so that a config.json declaring
 * more than the files hold costs no memory. (DiffLlama's KV pairs may
 * duplicate k and v heads, never beyond q_proj's size, which is checked.) */
static da_status check_shapes(da_shards *F, const da_config *c, const da_hf_shape *hs) {
    const int C = c->dim, d = hs->d, H = hs->H, Hkv = hs->Hkv, Fh = c->ffn_hidden;
    da_shard_tensor *t;
    char n[192];
    da_status st = take(F, global_name(hs->fam, "tok_embeddings.weight", n, sizeof n), c->vocab_size, C, &t);
    for (int l = 0; l < c->n_layers && !st.code; l++) {
        const struct {
            const char *name;
            int64_t rows, cols;
        } want[] = {{"attention_norm.weight", C, 0},
                    {"ffn_norm.weight", C, 0},
                    {"feed_forward.w1.weight", Fh, C},
                    {"feed_forward.w3.weight", Fh, C},
                    {"feed_forward.w2.weight", C, Fh},
                    {"attn.out_proj.weight", C, hs->A},
                    {"attn.q_proj.weight", (int64_t)H * d, C},
                    {"attn.k_proj.weight", (int64_t)Hkv * d, C},
                    {"attn.v_proj.weight", (int64_t)Hkv * d, C}};
        for (size_t i = 0; i < sizeof want / sizeof want[0] && !st.code; i++) {
            da_family_layer_name(hs->fam, l, want[i].name, n, sizeof n);
            st = take(F, n, want[i].rows, want[i].cols, &t);
        }
    }
    for (int i = 0; i < F->n; i++) F->t[i].used = 0; /* the load marks what it reads */
    return st;
}

/* The model config.json declares is allocated in f32: bounded by the bytes
 * of its tensors first. A tensor element takes at least 2 bytes, and
 * DiffLlama's duplicated KV heads (hf_model.h) at most triple the elements
 * (k and v are each at most q's size), so a folder whose weights belong to
 * its config.json always has need <= 2 * bytes. */
static da_status check_declared_size(const da_shards *F, const da_config *c, const char *dir) {
    size_t bytes = 0;
    for (int i = 0; i < F->n; i++) bytes += F->t[i].nbytes; /* disjoint ranges inside the files */
    const size_t need = da_config_param_count(c);
    if (need / 2 <= bytes) return da_ok();
    return da_errorf("%s/config.json declares a model of %zu parameters (hidden_size %d, %d layers, vocab_size %d, "
                     "intermediate_size %d), but the safetensors files hold %zu bytes of tensors; does config.json "
                     "belong to these weights?",
                     dir, need, c->dim, c->n_layers, c->vocab_size, c->ffn_hidden, bytes);
}

da_status da_hf_model_load(da_model *m, const char *dir) {
    memset(m, 0, sizeof *m);
    da_config cfg;
    da_hf_shape hs;
    da_status st = da_hf_config_parse(dir, &cfg, &hs);
    if (st.code) return st;
    da_shards F;
    memset(&F, 0, sizeof F);
    if ((st = da_shards_open(&F, dir)).code) goto done;
    if ((st = check_shapes(&F, &cfg, &hs)).code) goto done;
    if ((st = check_declared_size(&F, &cfg, dir)).code) goto done;
    if ((st = da_model_create(m, &cfg)).code) goto done;
    const int C = cfg.dim, V = cfg.vocab_size;
    char name[192];
    if ((st = copy_plain(&F, global_name(hs.fam, "tok_embeddings.weight", name, sizeof name), V, C, m->w.tok_embeddings)).code)
        goto done;
    for (int l = 0; l < cfg.n_layers; l++)
        if ((st = load_layer(&F, m, &hs, l)).code) goto done;
    if ((st = copy_plain(&F, global_name(hs.fam, "norm.weight", name, sizeof name), C, 0, m->w.norm)).code) goto done;
    da_shard_tensor *head = da_shards_find(&F, global_name(hs.fam, "output.weight", name, sizeof name));
    if (cfg.tie_embeddings) {
        /* transformers ties lm_head to the embedding and ignores a saved copy */
        if (head) head->used = 1;
    } else if (!head) {
        st = da_errorf("missing tensor %s (set %s to true if the head is tied)", name,
                       da_family_key_of(hs.fam, "tie_embeddings", NULL, NULL, 0));
        goto done;
    } else if ((st = copy_plain(&F, name, V, C, m->w.output)).code) goto done;
    for (int i = 0; i < F.n; i++) {
        if (F.t[i].used || strstr(F.t[i].name, "rotary_emb.inv_freq")) continue; /* old Llama files save this buffer */
        st = da_errorf("unexpected tensor %s in %s for a %s model with %d layers%s", F.t[i].name,
                       F.shard[F.t[i].shard].path, hs.fam->tag, cfg.n_layers,
                       strstr(F.t[i].name, "bias") ? " (biases are not supported)" : "");
        goto done;
    }
done:
    if (st.code && strncmp(st.msg, dir, strlen(dir))) {
        da_status e = da_errorf("%s: %s", dir, st.msg);
        st = e;
    }
    da_shards_close(&F);
    if (st.code) da_model_free(m);
    return st;
}

