/* A model folder's safetensors shards, memory-mapped (st_shards.h). */
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

#include "diffattn/formats.h"
#include "io/st_shards.h"

#define MAX_HEADER (100u * 1000u * 1000u)

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

da_status da_text_file_read(const char *path, char **out) {
    return da_read_regular(path, MAX_HEADER, out, NULL);
}

static int is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}


void da_shards_close(da_shards *f) {
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

da_shard_tensor *da_shards_find(da_shards *F, const char *name) {
    if (!F->n_slots) return NULL;
    for (size_t i = name_hash(name) & (F->n_slots - 1);; i = (i + 1) & (F->n_slots - 1)) {
        const int k = F->slot[i];
        if (!k) return NULL;
        if (!strcmp(F->t[k - 1].name, name)) return &F->t[k - 1];
    }
}

/* Files F->t[k] under its name: 0, or the index + 1 of a tensor already
 * holding that name. */
static int slot_put(da_shards *F, int k) {
    size_t i = name_hash(F->t[k].name) & (F->n_slots - 1);
    for (; F->slot[i]; i = (i + 1) & (F->n_slots - 1))
        if (!strcmp(F->t[F->slot[i] - 1].name, F->t[k].name)) return F->slot[i];
    F->slot[i] = k + 1;
    return 0;
}

/* Appends t and files it by name; a name seen before (in this shard or
 * another) is an error. */
static da_status add_tensor(da_shards *F, const da_shard_tensor *t, const char *path) {
    if (F->n == F->cap) {
        int cap = F->cap ? 2 * F->cap : 256;
        da_shard_tensor *nt = realloc(F->t, (size_t)cap * sizeof *nt);
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
    const da_shard_tensor *x = *(const da_shard_tensor *const *)a, *y = *(const da_shard_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/* The byte ranges of a shard's tensors F->t[first..n) are pairwise disjoint:
 * sorted by start, each begins at or after the furthest end so far. Two
 * tensors over the same bytes would let a small file stand for a large model. */
static da_status check_disjoint(const da_shards *F, int first, const unsigned char *base, const char *path) {
    const int n = F->n - first;
    if (n < 2) return da_ok();
    const da_shard_tensor **v = malloc((size_t)n * sizeof *v);
    if (!v) return da_errorf("%s: out of memory", path);
    for (int i = 0; i < n; i++) v[i] = &F->t[first + i];
    qsort(v, (size_t)n, sizeof *v, cmp_data_start);
    da_status st = da_ok();
    const da_shard_tensor *last = NULL; /* the non-empty tensor reaching furthest so far */
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
static da_status check_inside(const da_shards *F, const char *path) {
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
static da_status resolve_root(da_shards *F, const char *dir) {
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
static da_status open_shard(da_shards *F, const char *path) {
    if (F->n_shards == DA_MAX_SHARDS) return da_errorf("%s: more than %d shards", path, DA_MAX_SHARDS);
    da_status st = check_inside(F, path);
    if (st.code) return st;
    da_shard *sh = &F->shard[F->n_shards];
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
        da_shard_tensor t = {0};
        snprintf(t.name, sizeof t.name, "%s", e->string);
        size_t esz;
        if (!strcmp(dt->valuestring, "F32")) t.dtype = DA_SHARD_F32, esz = 4;
        else if (!strcmp(dt->valuestring, "F16")) t.dtype = DA_SHARD_F16, esz = 2;
        else if (!strcmp(dt->valuestring, "BF16")) t.dtype = DA_SHARD_BF16, esz = 2;
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
da_status da_shards_open(da_shards *F, const char *dir) {
    char path[4200], ipath[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(ipath, sizeof ipath, "%s/model.safetensors.index.json", dir);
    da_status st = resolve_root(F, dir);
    if (st.code) return st;
    if (is_file(path)) return open_shard(F, path);
    if (!is_file(ipath)) return da_errorf("%s: holds neither model.safetensors nor model.safetensors.index.json", dir);
    char *text;
    if ((st = da_text_file_read(ipath, &text)).code) return st;
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
        da_shard_tensor *t = da_shards_find(F, e->string);
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
void da_shard_convert(float *dst, const da_shard_tensor *t, size_t first, size_t n, float scale) {
    const unsigned char *p = t->data;
    const long nn = (long)n;
    if (t->dtype == DA_SHARD_F32) {
#pragma omp parallel for schedule(static) if (nn > (1L << 16))
        for (long i = 0; i < nn; i++) {
            const unsigned char *b = p + 4 * (first + (size_t)i);
            uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
            float v;
            memcpy(&v, &u, 4);
            dst[i] = v * scale;
        }
    } else if (t->dtype == DA_SHARD_BF16) {
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
void da_shard_release(const da_shard_tensor *t) {
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)t->data, b = a + t->nbytes;
    a = (a + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    b = b / (uintptr_t)pg * (uintptr_t)pg;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

