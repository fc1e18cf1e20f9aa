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


/* ---------------------------------------------------------------- streaming */

struct da_hf_stream {
    char dir[4200];
    da_shards F;
    da_hf_shape hs;
    da_model table;     /* the tensor table alone (no parameters) */
    da_model win;       /* m->cfg and layer pointers into layer, for load_layer */
    float *layer;       /* one layer's tensors in f32, table order */
    int loaded;         /* the layer in layer, or -1 */
    size_t layer_base;  /* the table offset of layer 0's first tensor */
    size_t layer_span;  /* floats per layer */
};

/* The layer of table tensor i ("layers.N."), or -1 outside the layers. */
static int tensor_layer(const da_hf_stream *s, int i) {
    int l;
    return sscanf(s->table.tensors[i].name, "layers.%d.", &l) == 1 ? l : -1;
}

da_status da_hf_stream_open(da_hf_stream **out, const char *dir, da_config *cfg) {
    da_hf_stream *s = *out = calloc(1, sizeof *s);
    if (!s) return da_errorf("out of memory");
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->loaded = -1;
    da_status st = da_hf_config_parse(dir, cfg, &s->hs);
    if (!st.code) st = da_shards_open(&s->F, dir);
    if (!st.code) st = check_shapes(&s->F, cfg, &s->hs);
    if (!st.code) st = check_declared_size(&s->F, cfg, dir);
    if (!st.code) st = da_model_create_table(&s->table, cfg);
    if (!st.code) {
        /* a layer's tensors are contiguous in the table, layer after layer, the same span each */
        int first = -1, next = -1;
        for (int i = 0; i < s->table.n_tensors; i++) {
            const int l = tensor_layer(s, i);
            if (l == 0 && first < 0) first = i;
            if (l == 1 && next < 0) next = i;
        }
        s->layer_base = s->table.tensors[first].offset;
        s->layer_span = (next >= 0 ? s->table.tensors[next].offset : s->table.n_params) - s->layer_base;
        if (next < 0) /* one layer: up to the tensor after it */
            for (int i = first; i < s->table.n_tensors; i++)
                if (tensor_layer(s, i) != 0) {
                    s->layer_span = s->table.tensors[i].offset - s->layer_base;
                    break;
                }
        /* the window: the table's names, the loaded layer's offsets made relative to s->layer (copy_own finds
         * a family's own tensors by name) */
        s->win.cfg = *cfg;
        s->layer = malloc(s->layer_span * sizeof(float));
        s->win.w.layers = calloc((size_t)cfg->n_layers, sizeof *s->win.w.layers);
        s->win.tensors = malloc((size_t)s->table.n_tensors * sizeof *s->win.tensors);
        if (!s->layer || !s->win.w.layers || !s->win.tensors) st = da_errorf("out of memory");
        else memcpy(s->win.tensors, s->table.tensors, (size_t)s->table.n_tensors * sizeof *s->win.tensors);
        s->win.n_tensors = s->table.n_tensors;
        s->win.params = s->layer;
    }
    if (st.code && strncmp(st.msg, dir, strlen(dir))) st = da_errorf("%s: %s", dir, st.msg);
    if (st.code) {
        da_hf_stream_close(s);
        *out = NULL;
    }
    return st;
}

/* Layer l into s->layer, through load_layer on pointers into it (the table's order, as model.c lays out a layer). */
static da_status stream_load_layer(da_hf_stream *s, int l) {
    da_layer_weights *L = &s->win.w.layers[l];
    memset(L, 0, sizeof *L);
    float **slots[DA_ATTN_MAX_TENSORS + 8], *at[DA_ATTN_MAX_TENSORS + 8];
    int n = 0;
    for (int i = 0; i < s->table.n_tensors && n < DA_ATTN_MAX_TENSORS + 8; i++)
        if (tensor_layer(s, i) == l) {
            s->win.tensors[i].offset = s->table.tensors[i].offset - s->layer_base - (size_t)l * s->layer_span;
            at[n++] = s->layer + s->win.tensors[i].offset;
        }
    const int n_mlp = 4 + (s->win.cfg.mlp == DA_MLP_POLYNORM ? 2 : 0), n_attn = n - 1 - n_mlp;
    int k = 0;
    slots[k++] = &L->attention_norm;
    for (int j = 0; j < n_attn; j++) slots[k++] = &L->attn[j];
    slots[k++] = &L->ffn_norm;
    slots[k++] = &L->w1;
    slots[k++] = &L->w2;
    slots[k++] = &L->w3;
    if (n_mlp == 6) {
        slots[k++] = &L->poly_w;
        slots[k++] = &L->poly_b;
    }
    for (int j = 0; j < n; j++) *slots[j] = at[j];
    memset(s->layer, 0, s->layer_span * sizeof(float));
    da_status st = load_layer(&s->F, &s->win, &s->hs, l);
    s->loaded = st.code ? -1 : l;
    return st;
}

da_status da_hf_stream_rows(da_hf_stream *s, int i, int64_t row0, int64_t n_rows, float *dst) {
    const da_tensor *t = &s->table.tensors[i];
    const size_t width = t->ndim == 2 ? (size_t)t->shape[1] : (size_t)t->shape[0];
    const int l = tensor_layer(s, i);
    da_status st = da_ok();
    if (l >= 0) {
        if (s->loaded != l && (st = stream_load_layer(s, l)).code) return da_errorf("%s: %s", s->dir, st.msg);
        memcpy(dst, s->layer + (t->offset - s->layer_base - (size_t)l * s->layer_span) + (size_t)row0 * width,
               (size_t)n_rows * width * sizeof(float));
        return da_ok();
    }
    char name[192];
    da_shard_tensor *src;
    global_name(s->hs.fam, t->name, name, sizeof name);
    if ((st = take(&s->F, name, t->shape[0], t->ndim == 2 ? t->shape[1] : 0, &src)).code)
        return da_errorf("%s: %s", s->dir, st.msg);
    da_shard_convert(dst, src, (size_t)row0 * width, (size_t)n_rows * width, 1.0f);
    da_shard_release(src);
    return da_ok();
}

da_status da_hf_stream_finish(da_hf_stream *s) {
    char name[192];
    da_shard_tensor *head = da_shards_find(&s->F, global_name(s->hs.fam, "output.weight", name, sizeof name));
    if (head && s->win.cfg.tie_embeddings) head->used = 1; /* transformers ignores a saved copy of a tied head */
    for (int i = 0; i < s->F.n; i++) {
        if (s->F.t[i].used || strstr(s->F.t[i].name, "rotary_emb.inv_freq")) continue;
        return da_errorf("%s: unexpected tensor %s in %s for a %s model with %d layers%s", s->dir, s->F.t[i].name,
                         s->F.shard[s->F.t[i].shard].path, s->hs.fam->tag, s->win.cfg.n_layers,
                         strstr(s->F.t[i].name, "bias") ? " (biases are not supported)" : "");
    }
    return da_ok();
}

void da_hf_stream_close(da_hf_stream *s) {
    if (!s) return;
    da_shards_close(&s->F);
    da_model_free(&s->table);
    free(s->win.w.layers);
    free(s->win.tensors);
    free(s->layer);
    free(s);
}
