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
#include "io/hf_model.h"
#include "diffattn/formats.h"

#define MAX_SHARDS 256
#define MAX_HEADER (100u * 1000u * 1000u)

/* ------------------------------------------------------------ files */

static da_status read_text(const char *path, char **out) {
    return da_read_regular(path, MAX_HEADER, out, NULL);
}

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

/* ------------------------------------------------------------ config.json */

typedef struct {
    int diff;           /* model_type diffllama */
    int H, Hkv, d;      /* Hugging Face query heads, KV heads, head size */
    int n_rep_native;   /* DIFF: diff heads per native KV group */
    float head_norm_eps; /* DIFF: rms_norm_eps */
} hf_shape;

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* An integer key; absent -> def (or an error when def < 0). */
static da_status cfg_int(const char *path, const cJSON *o, const char *k, int def, int *out) {
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return da_errorf("%s: lacks \"%s\"", path, k);
        *out = def;
        return da_ok();
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 1e9)
        return da_errorf("%s: \"%s\" must be a positive integer", path, k);
    *out = (int)v->valuedouble;
    return da_ok();
}

static da_status cfg_num(const char *path, const cJSON *o, const char *k, double def, int required, double *out) {
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) {
        if (required) return da_errorf("%s: lacks \"%s\"", path, k);
        *out = def;
        return da_ok();
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return da_errorf("%s: \"%s\" must be a number", path, k);
    *out = v->valuedouble;
    return da_ok();
}

static da_status cfg_bool(const char *path, const cJSON *o, const char *k, int def, int *out) {
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) *out = def;
    else if (cJSON_IsBool(v)) *out = cJSON_IsTrue(v);
    else return da_errorf("%s: \"%s\" must be true or false", path, k);
    return da_ok();
}

/* rope_scaling and rope_parameters both given must say the same: each key
 * present in both (and the rope_type, and rope_theta beside the top-level
 * one) is equal, or which one transformers reads decides the model. */
static da_status check_rope_agree(const char *path, const cJSON *root, const cJSON *rs, const cJSON *rp) {
    static const char *const keys[] = {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings", "rope_theta"};
    const cJSON *pairs[2][2] = {{rs, rp}, {root, rp}};
    for (int p = 0; p < 2; p++) {
        const cJSON *a = pairs[p][0], *b = pairs[p][1];
        if (!cJSON_IsObject(a) || !cJSON_IsObject(b)) continue;
        for (size_t k = p ? 6 : 0; k < sizeof keys / sizeof keys[0]; k++) {
            const cJSON *x = get(a, keys[k]), *y = get(b, keys[k]);
            if (!x || !y || cJSON_Compare(x, y, 1)) continue;
            return da_errorf("%s: %s%s and rope_parameters.%s differ; which one applies depends on the transformers "
                             "version: keep one",
                             path, p ? "" : "rope_scaling.", keys[k], keys[k]);
        }
    }
    return da_ok();
}

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A key that appears twice in one object of the tree at o, or NULL (sorted:
 * O(n log n) per object). cJSON would take the first, Python the last.
 * *oom is set when the check could not be made. */
static const char *duplicate_key(const cJSON *o, int *oom) {
    if (!cJSON_IsObject(o) && !cJSON_IsArray(o)) return NULL;
    int n = 0;
    for (const cJSON *e = o->child; e; e = e->next) {
        const char *d = duplicate_key(e, oom);
        if (d || *oom) return d;
        n++;
    }
    if (!cJSON_IsObject(o) || n < 2) return NULL;
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names) {
        *oom = 1;
        return NULL;
    }
    n = 0;
    for (const cJSON *e = o->child; e; e = e->next) names[n++] = e->string;
    qsort(names, (size_t)n, sizeof *names, cmp_key);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (!strcmp(names[i - 1], names[i])) dup = names[i];
    free(names);
    return dup;
}

/* rope_scaling (older files) or rope_parameters (newer transformers). */
static da_status parse_rope(const char *path, const cJSON *root, da_config *c) {
    const cJSON *rs = get(root, "rope_scaling");
    const char *key = "rope_scaling";
    const cJSON *rp = get(root, "rope_parameters");
    da_status agree = check_rope_agree(path, root, rs, rp);
    if (agree.code) return agree;
    if ((!rs || cJSON_IsNull(rs)) && rp && !cJSON_IsNull(rp)) rs = rp, key = "rope_parameters";
    double theta;
    da_status st = cfg_num(path, root, "rope_theta", 10000.0, 0, &theta);
    if (st.code) return st;
    if (rs && cJSON_IsObject(rs) && get(rs, "rope_theta") && (st = cfg_num(path, rs, "rope_theta", 0, 1, &theta)).code)
        return st;
    c->rope_theta = (float)theta;
    c->rope_freq = DA_ROPE_FREQ_LLAMA;
    c->rope_scaling = DA_ROPE_SCALE_NONE;
    double prf;
    if ((st = cfg_num(path, root, "partial_rotary_factor", 1.0, 0, &prf)).code) return st;
    if (rs && cJSON_IsObject(rs) && (st = cfg_num(path, rs, "partial_rotary_factor", prf, 0, &prf)).code) return st;
    if (prf != 1.0)
        return da_errorf("%s: partial_rotary_factor = %g is not supported (diffattn rotates whole heads)", path, prf);
    if (!rs || cJSON_IsNull(rs)) return da_ok();
    if (!cJSON_IsObject(rs)) return da_errorf("%s: \"%s\" must be an object or null", path, key);
    const cJSON *type = get(rs, "rope_type");
    if (!type) type = get(rs, "type");
    if (!type) return da_ok(); /* rope_parameters holding rope_theta only */
    if (!cJSON_IsString(type)) return da_errorf("%s: %s.rope_type must be a string", path, key);
    const char *t = type->valuestring;
    if (!strcmp(t, "default")) return da_ok();
    double v;
    if (!strcmp(t, "linear")) {
        if ((st = cfg_num(path, rs, "factor", 0, 1, &v)).code) return st;
        c->rope_scaling = DA_ROPE_SCALE_LINEAR;
        c->rope_factor = (float)v;
        return da_ok();
    }
    if (!strcmp(t, "llama3")) {
        c->rope_scaling = DA_ROPE_SCALE_LLAMA3;
        if ((st = cfg_num(path, rs, "factor", 0, 1, &v)).code) return st;
        c->rope_factor = (float)v;
        if ((st = cfg_num(path, rs, "low_freq_factor", 0, 1, &v)).code) return st;
        c->rope_low_freq_factor = (float)v;
        if ((st = cfg_num(path, rs, "high_freq_factor", 0, 1, &v)).code) return st;
        c->rope_high_freq_factor = (float)v;
        /* transformers falls back to max_position_embeddings */
        int orig;
        if ((st = cfg_int(path, rs, "original_max_position_embeddings", c->max_seq_len, &orig)).code) return st;
        c->rope_original_max_pos = orig;
        return da_ok();
    }
    return da_errorf("%s: %s.rope_type \"%s\" is not supported (supported: default, linear, llama3)", path, key, t);
}

/* The fewest native KV groups for DiffLlama: diff head j (j < H/2) reads the
 * KV heads of query heads j and j + H/2; a group of consecutive diff heads
 * may share one native group only when they read the same pair. */
static int diff_native_rep(int H, int Hkv) {
    const int Hn = H / 2, G = H / Hkv;
    for (int r = Hn; r > 1; r--) {
        if (Hn % r) continue;
        int ok = 1;
        for (int j = 0; j < Hn && ok; j++) {
            int j0 = j / r * r;
            ok = j / G == j0 / G && (j + Hn) / G == (j0 + Hn) / G;
        }
        if (ok) return r;
    }
    return 1;
}

static da_status parse_config(const char *dir, da_config *c, hf_shape *hs) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text;
    da_status st = read_text(path, &text);
    if (st.code) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return da_errorf("%s: not a JSON object", path);
    }
    int oom = 0;
    const char *dup = duplicate_key(root, &oom);
    if (dup || oom) {
        da_status e = oom ? da_errorf("%s: out of memory", path)
                          : da_errorf("%s: key \"%.80s\" appears twice in one object (Python's json takes the last, "
                                      "other readers the first): keep one",
                                      path, dup);
        cJSON_Delete(root);
        return e;
    }
    da_config_default(c); /* every field is set below, the RoPE scaling's where the file has one */
    memset(hs, 0, sizeof *hs);
    const cJSON *mt = get(root, "model_type");
    int hidden = 0, H = 0, Hkv = 0, head_dim = 0, bias = 0, mlp_bias = 0;
    double eps = 0;
    if (!cJSON_IsString(mt)) st = da_errorf("%s: lacks \"model_type\" (expected \"diffllama\" or \"llama\")", path);
    else if (!strcmp(mt->valuestring, "diffllama")) hs->diff = 1;
    else if (strcmp(mt->valuestring, "llama"))
        st = da_errorf("%s: model_type \"%s\" is not supported (supported: diffllama, llama)", path, mt->valuestring);
    if (!st.code) st = cfg_int(path, root, "hidden_size", -1, &hidden);
    if (!st.code) st = cfg_int(path, root, "num_hidden_layers", -1, &c->n_layers);
    if (!st.code) st = cfg_int(path, root, "num_attention_heads", -1, &H);
    if (!st.code) st = cfg_int(path, root, "num_key_value_heads", H, &Hkv);
    if (!st.code) st = cfg_int(path, root, "intermediate_size", -1, &c->ffn_hidden);
    if (!st.code) st = cfg_int(path, root, "vocab_size", -1, &c->vocab_size);
    if (!st.code) st = cfg_int(path, root, "max_position_embeddings", 2048, &c->max_seq_len);
    if (!st.code) st = cfg_num(path, root, "rms_norm_eps", hs->diff ? 1e-5 : 1e-6, 0, &eps);
    if (!st.code) st = cfg_bool(path, root, "tie_word_embeddings", 0, &c->tie_embeddings);
    if (!st.code) st = cfg_bool(path, root, "attention_bias", 0, &bias);
    if (!st.code) st = cfg_bool(path, root, "mlp_bias", 0, &mlp_bias);
    if (!st.code && (bias || mlp_bias))
        st = da_errorf("%s: %s is true; diffattn's projections have no biases", path,
                       bias ? "attention_bias" : "mlp_bias");
    if (!st.code) {
        const cJSON *act = get(root, "hidden_act");
        if (act && !(cJSON_IsString(act) && !strcmp(act->valuestring, "silu")))
            st = da_errorf("%s: hidden_act \"%s\" is not supported (diffattn's feed-forward is SwiGLU: \"silu\")",
                           path, cJSON_IsString(act) ? act->valuestring : "(not a string)");
    }
    if (!st.code && Hkv > H) st = da_errorf("%s: num_key_value_heads %d exceeds num_attention_heads %d", path, Hkv, H);
    if (!st.code && H % Hkv)
        st = da_errorf("%s: num_key_value_heads %d does not divide num_attention_heads %d", path, Hkv, H);
    /* head_dim, when given, may differ from hidden_size / num_attention_heads (diffattn's explicit head size) */
    if (!st.code) st = cfg_int(path, root, "head_dim", hidden % H ? 0 : hidden / H, &head_dim);
    if (!st.code && !head_dim)
        st = da_errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d, and head_dim is not given",
                       path, hidden, H);
    if (!st.code && head_dim % 2) st = da_errorf("%s: head_dim %d is odd; RoPE rotates pairs", path, head_dim);
    if (!st.code && hs->diff && H % 2)
        st = da_errorf("%s: num_attention_heads %d is odd; DiffLlama pairs query heads j and j + H/2", path, H);
    if (!st.code && !(eps >= 1e-10 && eps < 1))
        st = da_errorf("%s: rms_norm_eps %g must lie in [1e-10, 1) (smaller, a zero row's norm overflows)", path, eps);
    if (!st.code) st = parse_rope(path, root, c);
    cJSON_Delete(root);
    if (st.code) return st;
    c->dim = hidden;
    c->norm_eps = (float)eps;
    hs->H = H;
    hs->Hkv = Hkv;
    hs->d = head_dim;
    c->head_dim = head_dim * H == hidden ? 0 : head_dim; /* a DIFF head's sub-heads are HF's heads: the same d */
    if (hs->diff) {
        c->arch = DA_ARCH_DIFF;
        c->n_heads = H / 2;
        hs->n_rep_native = diff_native_rep(H, Hkv);
        c->n_kv_heads = c->n_heads / hs->n_rep_native;
        hs->head_norm_eps = (float)eps;
    } else {
        c->arch = DA_ARCH_SOFTMAX;
        c->n_heads = H;
        c->n_kv_heads = Hkv;
    }
    st = da_config_validate(c);
    if (st.code) return da_errorf("%s: this configuration does not fit diffattn: %s", path, st.msg);
    return da_ok();
}

da_status da_hf_config_load(da_config *c, const char *dir) {
    hf_shape hs;
    return parse_config(dir, c, &hs);
}

/* ------------------------------------------------------------ safetensors, mapped */

enum { DT_F32, DT_F16, DT_BF16 };

typedef struct {
    char name[160];
    int dtype;
    int ndim;
    int64_t shape[2];
    const unsigned char *data; /* inside the shard's mapping */
    size_t nbytes;
    int shard, used;
    int listed; /* named by the index's weight_map */
} hf_tensor;

typedef struct {
    char path[4200];
    unsigned char *map;
    size_t size;
} hf_shard;

typedef struct {
    hf_shard shard[MAX_SHARDS];
    int n_shards;
    hf_tensor *t;
    int n, cap;
    int *slot;       /* open addressing over t by name: index + 1, 0 when empty */
    size_t n_slots;  /* a power of two, at least twice n */
    char root[4200]; /* the folder, symlinks resolved: every shard must lie inside */
    char blobs[4200]; /* a Hugging Face cache snapshot's ../../blobs, resolved; else empty */
} hf_files;

static void files_close(hf_files *f) {
    for (int i = 0; i < f->n_shards; i++)
        if (f->shard[i].map) munmap(f->shard[i].map, f->shard[i].size);
    free(f->t);
    free(f->slot);
    memset(f, 0, sizeof *f);
}

/* ------------------------------------------------------------ tensors by name, in O(1) */

static size_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

static hf_tensor *find(hf_files *F, const char *name) {
    if (!F->n_slots) return NULL;
    for (size_t i = name_hash(name) & (F->n_slots - 1);; i = (i + 1) & (F->n_slots - 1)) {
        const int k = F->slot[i];
        if (!k) return NULL;
        if (!strcmp(F->t[k - 1].name, name)) return &F->t[k - 1];
    }
}

/* Files F->t[k] under its name: 0, or the index + 1 of a tensor already
 * holding that name. */
static int slot_put(hf_files *F, int k) {
    size_t i = name_hash(F->t[k].name) & (F->n_slots - 1);
    for (; F->slot[i]; i = (i + 1) & (F->n_slots - 1))
        if (!strcmp(F->t[F->slot[i] - 1].name, F->t[k].name)) return F->slot[i];
    F->slot[i] = k + 1;
    return 0;
}

/* Appends t and files it by name; a name seen before (in this shard or
 * another) is an error. */
static da_status add_tensor(hf_files *F, const hf_tensor *t, const char *path) {
    if (F->n == F->cap) {
        int cap = F->cap ? 2 * F->cap : 256;
        hf_tensor *nt = realloc(F->t, (size_t)cap * sizeof *nt);
        if (!nt) return da_errorf("%s: out of memory", path);
        F->t = nt;
        F->cap = cap;
    }
    if (2 * (size_t)(F->n + 1) > F->n_slots) { /* grow and refile */
        size_t n_slots = F->n_slots ? 4 * F->n_slots : 1024;
        int *slot = calloc(n_slots, sizeof *slot);
        if (!slot) return da_errorf("%s: out of memory", path);
        free(F->slot);
        F->slot = slot;
        F->n_slots = n_slots;
        for (int k = 0; k < F->n; k++) (void)slot_put(F, k);
    }
    F->t[F->n] = *t;
    const int dup = slot_put(F, F->n);
    if (dup)
        return da_errorf("%s: tensor %s appears twice (also in %s)", path, t->name, F->shard[F->t[dup - 1].shard].path);
    F->n++;
    return da_ok();
}

static int cmp_data_start(const void *a, const void *b) {
    const hf_tensor *x = *(const hf_tensor *const *)a, *y = *(const hf_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/* The byte ranges of a shard's tensors F->t[first..n) are pairwise disjoint:
 * sorted by start, each begins at or after the furthest end so far. Two
 * tensors over the same bytes would let a small file stand for a large model. */
static da_status check_disjoint(const hf_files *F, int first, const unsigned char *base, const char *path) {
    const int n = F->n - first;
    if (n < 2) return da_ok();
    const hf_tensor **v = malloc((size_t)n * sizeof *v);
    if (!v) return da_errorf("%s: out of memory", path);
    for (int i = 0; i < n; i++) v[i] = &F->t[first + i];
    qsort(v, (size_t)n, sizeof *v, cmp_data_start);
    da_status st = da_ok();
    const hf_tensor *last = NULL; /* the non-empty tensor reaching furthest so far */
    for (int i = 0; i < n && !st.code; i++) {
        if (!v[i]->nbytes) continue;
        if (last && v[i]->data < last->data + last->nbytes)
            st = da_errorf("%s: tensor %s data [%zu, %zu) overlaps tensor %s data [%zu, %zu)", path, v[i]->name,
                           (size_t)(v[i]->data - base), (size_t)(v[i]->data - base) + v[i]->nbytes, last->name,
                           (size_t)(last->data - base), (size_t)(last->data - base) + last->nbytes);
        if (!last || v[i]->data + v[i]->nbytes > last->data + last->nbytes) last = v[i];
    }
    free(v);
    return st;
}

/* A shard resolves (symlinks followed) to a file inside the folder, or inside
 * the blobs folder of the Hugging Face cache snapshot the folder is. */
static da_status check_inside(const hf_files *F, const char *path) {
    char real[PATH_MAX];
    if (!realpath(path, real)) return da_errorf("%s: cannot resolve: %s", path, strerror(errno));
    const char *roots[2] = {F->root, F->blobs};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(roots[i]);
        if (n && !strncmp(real, roots[i], n) && real[n] == '/') return da_ok();
    }
    return da_errorf("%s: resolves to a file outside the model folder; a shard must lie in the folder", path);
}

/* F->root and F->blobs for the folder dir. */
static da_status resolve_root(hf_files *F, const char *dir) {
    char real[PATH_MAX], up[PATH_MAX + 16];
    if (!realpath(dir, real)) return da_errorf("%s: cannot resolve: %s", dir, strerror(errno));
    snprintf(F->root, sizeof F->root, "%s", real);
    const char *slash = strrchr(real, '/');
    /* <repo>/snapshots/<revision>: the files are symlinks to <repo>/blobs/<hash> */
    if (slash && slash - real >= 10 && !strncmp(slash - 10, "/snapshots", 10)) {
        snprintf(up, sizeof up, "%.*s/blobs", (int)(slash - real - 10), real);
        if (realpath(up, real)) snprintf(F->blobs, sizeof F->blobs, "%s", real);
    }
    return da_ok();
}

/* Maps one shard and appends its tensors; every offset is checked against the file. */
static da_status open_shard(hf_files *F, const char *path) {
    if (F->n_shards == MAX_SHARDS) return da_errorf("%s: more than %d shards", path, MAX_SHARDS);
    da_status st = check_inside(F, path);
    if (st.code) return st;
    hf_shard *sh = &F->shard[F->n_shards];
    snprintf(sh->path, sizeof sh->path, "%s", path);
    int fd = da_open_regular(path, &st);
    if (fd < 0) return st;
    struct stat sb;
    if (fstat(fd, &sb) || sb.st_size < 8) {
        close(fd);
        return da_errorf("%s: shorter than a safetensors header (8 bytes)", path);
    }
    sh->size = (size_t)sb.st_size;
    void *p = mmap(NULL, sh->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return da_errorf("%s: cannot map: %s", path, strerror(errno));
    sh->map = p;
    const int shard_index = F->n_shards++;
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | sh->map[i];
    if (hn > MAX_HEADER || hn > sh->size - 8) /* the 8 bytes are not echoed: the file may be anything */
        return da_errorf("%s: its first 8 bytes do not give a header length within the file (%zu bytes); not a "
                         "safetensors file?",
                         path, sh->size);
    const size_t data_off = 8 + (size_t)hn, data_size = sh->size - data_off;
    cJSON *h = cJSON_ParseWithLength((const char *)sh->map + 8, (size_t)hn);
    if (!h || !cJSON_IsObject(h)) {
        cJSON_Delete(h);
        return da_errorf("%s: the header is not a JSON object", path);
    }
    const int first = F->n;
    for (const cJSON *e = h->child; e && !st.code; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            if (!cJSON_IsObject(e)) st = da_errorf("%s: __metadata__ is not an object (of strings)", path);
            continue;
        }
        const cJSON *dt = get(e, "dtype"), *shape = get(e, "shape"), *off = get(e, "data_offsets");
        if (strlen(e->string) >= sizeof F->t[0].name) {
            st = da_errorf("%s: tensor name \"%.60s...\" is too long", path, e->string);
            break;
        }
        if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) {
            st = da_errorf("%s: tensor %s lacks dtype, shape or data_offsets", path, e->string);
            break;
        }
        hf_tensor t = {0};
        snprintf(t.name, sizeof t.name, "%s", e->string);
        size_t esz;
        if (!strcmp(dt->valuestring, "F32")) t.dtype = DT_F32, esz = 4;
        else if (!strcmp(dt->valuestring, "F16")) t.dtype = DT_F16, esz = 2;
        else if (!strcmp(dt->valuestring, "BF16")) t.dtype = DT_BF16, esz = 2;
        else {
            st = da_errorf("%s: tensor %s has dtype %s (supported: F32, F16, BF16)", path, e->string,
                           dt->valuestring);
            break;
        }
        t.ndim = cJSON_GetArraySize(shape);
        if (t.ndim > 2) {
            st = da_errorf("%s: tensor %s has %d dimensions (expected 1 or 2)", path, e->string, t.ndim);
            break;
        }
        size_t numel = 1;
        int k = 0;
        for (const cJSON *s = shape->child; s; s = s->next, k++) {
            if (!cJSON_IsNumber(s) || s->valuedouble < 0 || s->valuedouble > 1e12 ||
                s->valuedouble != floor(s->valuedouble)) {
                st = da_errorf("%s: tensor %s has an invalid shape", path, e->string);
                break;
            }
            t.shape[k] = (int64_t)s->valuedouble;
            numel *= (size_t)t.shape[k];
        }
        if (st.code) break;
        const cJSON *b = off->child, *en = b->next;
        if (!cJSON_IsNumber(b) || !cJSON_IsNumber(en) || b->valuedouble != floor(b->valuedouble) ||
            en->valuedouble != floor(en->valuedouble)) {
            st = da_errorf("%s: tensor %s has data_offsets that are not integers", path, e->string);
            break;
        }
        if (b->valuedouble < 0 || en->valuedouble < b->valuedouble || en->valuedouble > (double)data_size) {
            st = da_errorf("%s: tensor %s has data_offsets outside the data section (%zu bytes)", path, e->string,
                           data_size);
            break;
        }
        size_t bo = (size_t)b->valuedouble, eo = (size_t)en->valuedouble;
        if (eo - bo != numel * esz) {
            st = da_errorf("%s: tensor %s holds %zu bytes, its shape and dtype need %zu", path, e->string, eo - bo,
                           numel * esz);
            break;
        }
        t.data = sh->map + data_off + bo;
        t.nbytes = eo - bo;
        t.shard = shard_index;
        st = add_tensor(F, &t, path);
    }
    cJSON_Delete(h);
    if (!st.code) st = check_disjoint(F, first, sh->map + data_off, path);
    return st;
}

/* model.safetensors, or every shard named by model.safetensors.index.json
 * (each tensor must lie in the shard the index names). */
static da_status open_files(hf_files *F, const char *dir) {
    char path[4200], ipath[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(ipath, sizeof ipath, "%s/model.safetensors.index.json", dir);
    da_status st = resolve_root(F, dir);
    if (st.code) return st;
    if (is_file(path)) return open_shard(F, path);
    if (!is_file(ipath)) return da_errorf("%s: holds neither model.safetensors nor model.safetensors.index.json", dir);
    char *text;
    if ((st = read_text(ipath, &text)).code) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *wm = root ? get(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) st = da_errorf("%s: lacks the object \"weight_map\"", ipath);
    for (const cJSON *e = wm ? wm->child : NULL; e && !st.code; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring[0] || strchr(e->valuestring, '/') || e->valuestring[0] == '.') {
            st = da_errorf("%s: weight_map.%s must name a file in the folder", ipath, e->string);
            break;
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
        int have = -1;
        for (int i = 0; i < F->n_shards; i++)
            if (!strcmp(F->shard[i].path, path)) have = i;
        if (have < 0) {
            if (!is_file(path)) {
                st = da_errorf("%s: weight_map.%s names %s, which is missing", ipath, e->string, e->valuestring);
                break;
            }
            if ((st = open_shard(F, path)).code) break;
            have = F->n_shards - 1;
        }
        hf_tensor *t = find(F, e->string);
        if (!t || t->shard != have)
            st = da_errorf("%s: weight_map.%s names %s, which does not hold it", ipath, e->string, e->valuestring);
        else t->listed = 1;
    }
    for (int i = 0; i < F->n && !st.code; i++)
        if (!F->t[i].listed)
            st = da_errorf("%s: tensor %s of %s is not in weight_map", ipath, F->t[i].name, F->shard[F->t[i].shard].path);
    cJSON_Delete(root);
    return st;
}

/* ------------------------------------------------------------ conversion */

static float half_to_float(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
    if (e == 0) {
        if (!m) u = s;
        else { /* subnormal: renormalise */
            e = 127 - 15 + 1;
            while (!(m & 0x400)) m <<= 1, e--;
            u = s | e << 23 | (m & 0x3ff) << 13;
        }
    } else if (e == 31) u = s | 0x7f800000u | m << 13;
    else u = s | (e + 127 - 15) << 23 | m << 13;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* dst[0..n) = scale * element [first, first + n) of t (little-endian in the
 * file; possibly unaligned). Threads split large ranges: the file's pages are
 * read in as they are touched. */
static void convert(float *dst, const hf_tensor *t, size_t first, size_t n, float scale) {
    const unsigned char *p = t->data;
    const long nn = (long)n;
    if (t->dtype == DT_F32) {
#pragma omp parallel for schedule(static) if (nn > (1L << 16))
        for (long i = 0; i < nn; i++) {
            const unsigned char *b = p + 4 * (first + (size_t)i);
            uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
            float v;
            memcpy(&v, &u, 4);
            dst[i] = v * scale;
        }
    } else if (t->dtype == DT_BF16) {
#pragma omp parallel for schedule(static) if (nn > (1L << 16))
        for (long i = 0; i < nn; i++) {
            const unsigned char *b = p + 2 * (first + (size_t)i);
            uint32_t u = ((uint32_t)b[0] | (uint32_t)b[1] << 8) << 16;
            float v;
            memcpy(&v, &u, 4);
            dst[i] = v * scale;
        }
    } else {
#pragma omp parallel for schedule(static) if (nn > (1L << 16))
        for (long i = 0; i < nn; i++) {
            const unsigned char *b = p + 2 * (first + (size_t)i);
            dst[i] = half_to_float((uint16_t)(b[0] | b[1] << 8)) * scale;
        }
    }
}

/* The pages of a converted tensor leave the resident set (the file still
 * holds them), so that a model's peak memory is its f32 copy plus one
 * tensor rather than plus the whole file. */
static void release(const hf_tensor *t) {
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)t->data, b = a + t->nbytes;
    a = (a + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    b = b / (uintptr_t)pg * (uintptr_t)pg;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* The tensor name, checked for shape; marks it used. */
static da_status take(hf_files *F, const char *name, int64_t rows, int64_t cols, hf_tensor **out) {
    hf_tensor *t = find(F, name);
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

static da_status copy_plain(hf_files *F, const char *name, int64_t rows, int64_t cols, float *dst) {
    hf_tensor *t;
    da_status st = take(F, name, rows, cols, &t);
    if (st.code) return st;
    convert(dst, t, 0, (size_t)rows * (size_t)(cols ? cols : 1), 1.0f);
    release(t);
    return da_ok();
}

/* One d-row head of a q or k projection, rows permuted from Hugging Face's
 * rotate_half pairs (i, i + d/2) to diffattn's adjacent pairs (2i, 2i+1). */
static void copy_rope_head(float *dst, const hf_tensor *t, int hf_head, int d, int C) {
    for (int i = 0; i < d / 2; i++) {
        convert(dst + (size_t)(2 * i) * C, t, ((size_t)hf_head * d + i) * C, (size_t)C, 1.0f);
        convert(dst + (size_t)(2 * i + 1) * C, t, ((size_t)hf_head * d + d / 2 + i) * C, (size_t)C, 1.0f);
    }
}

static da_status load_layer(hf_files *F, da_model *m, const hf_shape *hs, int l) {
    const da_config *c = &m->cfg;
    da_layer_weights *L = &m->w.layers[l];
    const int C = c->dim, d = hs->d, H = hs->H, Hkv = hs->Hkv, G = H / Hkv, Fh = c->ffn_hidden;
    char n[192];
    da_status st;
    hf_tensor *q, *k, *v;
#define NAME(s) (snprintf(n, sizeof n, "model.layers.%d.%s", l, s), n)
    if ((st = copy_plain(F, NAME("input_layernorm.weight"), C, 0, L->attention_norm)).code) return st;
    if ((st = copy_plain(F, NAME("post_attention_layernorm.weight"), C, 0, L->ffn_norm)).code) return st;
    if ((st = copy_plain(F, NAME("mlp.gate_proj.weight"), Fh, C, L->w1)).code) return st;
    if ((st = copy_plain(F, NAME("mlp.up_proj.weight"), Fh, C, L->w3)).code) return st;
    if ((st = copy_plain(F, NAME("mlp.down_proj.weight"), C, Fh, L->w2)).code) return st;
    if ((st = copy_plain(F, NAME("self_attn.o_proj.weight"), C, (int64_t)H * d, L->wo)).code) return st;
    if ((st = take(F, NAME("self_attn.q_proj.weight"), (int64_t)H * d, C, &q)).code) return st;
    if ((st = take(F, NAME("self_attn.k_proj.weight"), (int64_t)Hkv * d, C, &k)).code) return st;
    if ((st = take(F, NAME("self_attn.v_proj.weight"), (int64_t)Hkv * d, C, &v)).code) return st;
    if (!hs->diff) {
        for (int h = 0; h < H; h++) copy_rope_head(L->wq + (size_t)h * d * C, q, h, d, C);
        for (int g = 0; g < Hkv; g++) copy_rope_head(L->wk + (size_t)g * d * C, k, g, d, C);
        convert(L->wv, v, 0, (size_t)Hkv * d * C, 1.0f);
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
            convert(L->wv + (size_t)(2 * g) * d * C, v, (size_t)a * d * C, (size_t)d * C, vscale);
            convert(L->wv + (size_t)(2 * g + 1) * d * C, v, (size_t)b * d * C, (size_t)d * C, vscale);
        }
        if ((st = copy_plain(F, NAME("self_attn.lambda_q1"), d, 0, L->lambda_q1)).code) return st;
        if ((st = copy_plain(F, NAME("self_attn.lambda_k1"), d, 0, L->lambda_k1)).code) return st;
        if ((st = copy_plain(F, NAME("self_attn.lambda_q2"), d, 0, L->lambda_q2)).code) return st;
        if ((st = copy_plain(F, NAME("self_attn.lambda_k2"), d, 0, L->lambda_k2)).code) return st;
        for (int i = 0; i < 2 * d; i++) L->subln[i] = 1.0f;
    }
    release(q);
    release(k);
    release(v);
#undef NAME
    return da_ok();
}

/* Every matrix the configuration implies is in the files with its shape:
 * checked before the model is allocated, so that a config.json declaring
 * more than the files hold costs no memory. (DiffLlama's KV pairs may
 * duplicate k and v heads, never beyond q_proj's size, which is checked.) */
static da_status check_shapes(hf_files *F, const da_config *c, const hf_shape *hs) {
    const int C = c->dim, d = hs->d, H = hs->H, Hkv = hs->Hkv, Fh = c->ffn_hidden;
    hf_tensor *t;
    char n[192];
    da_status st = take(F, "model.embed_tokens.weight", c->vocab_size, C, &t);
    for (int l = 0; l < c->n_layers && !st.code; l++) {
        const struct {
            const char *name;
            int64_t rows, cols;
        } want[] = {{"input_layernorm.weight", C, 0},
                    {"post_attention_layernorm.weight", C, 0},
                    {"mlp.gate_proj.weight", Fh, C},
                    {"mlp.up_proj.weight", Fh, C},
                    {"mlp.down_proj.weight", C, Fh},
                    {"self_attn.o_proj.weight", C, (int64_t)H * d},
                    {"self_attn.q_proj.weight", (int64_t)H * d, C},
                    {"self_attn.k_proj.weight", (int64_t)Hkv * d, C},
                    {"self_attn.v_proj.weight", (int64_t)Hkv * d, C}};
        for (size_t i = 0; i < sizeof want / sizeof want[0] && !st.code; i++) {
            snprintf(n, sizeof n, "model.layers.%d.%s", l, want[i].name);
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
static da_status check_declared_size(const hf_files *F, const da_config *c, const char *dir) {
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
    hf_shape hs;
    da_status st = parse_config(dir, &cfg, &hs);
    if (st.code) return st;
    hf_files F;
    memset(&F, 0, sizeof F);
    if ((st = open_files(&F, dir)).code) goto done;
    if ((st = check_shapes(&F, &cfg, &hs)).code) goto done;
    if ((st = check_declared_size(&F, &cfg, dir)).code) goto done;
    if ((st = da_model_create(m, &cfg)).code) goto done;
    const int C = cfg.dim, V = cfg.vocab_size;
    if ((st = copy_plain(&F, "model.embed_tokens.weight", V, C, m->w.tok_embeddings)).code) goto done;
    for (int l = 0; l < cfg.n_layers; l++)
        if ((st = load_layer(&F, m, &hs, l)).code) goto done;
    if ((st = copy_plain(&F, "model.norm.weight", C, 0, m->w.norm)).code) goto done;
    hf_tensor *head = find(&F, "lm_head.weight");
    if (cfg.tie_embeddings) {
        /* transformers ties lm_head to the embedding and ignores a saved copy */
        if (head) head->used = 1;
    } else if (!head) {
        st = da_errorf("missing tensor lm_head.weight (set tie_word_embeddings to true if the head is tied)");
        goto done;
    } else if ((st = copy_plain(&F, "lm_head.weight", V, C, m->w.output)).code) goto done;
    for (int i = 0; i < F.n; i++) {
        if (F.t[i].used || strstr(F.t[i].name, "rotary_emb.inv_freq")) continue; /* old Llama files save this buffer */
        st = da_errorf("unexpected tensor %s in %s for a %s model with %d layers%s", F.t[i].name,
                       F.shard[F.t[i].shard].path, hs.diff ? "diffllama" : "llama", cfg.n_layers,
                       strstr(F.t[i].name, "bias") ? " (biases are not supported)" : "");
        goto done;
    }
done:
    if (st.code && strncmp(st.msg, dir, strlen(dir))) {
        da_status e = da_errorf("%s: %s", dir, st.msg);
        st = e;
    }
    files_close(&F);
    if (st.code) da_model_free(m);
    return st;
}
