/* GGUF v3 reader and writer (format in gguf.h). The reader checks every
 * count and length against the bytes that remain before it reads. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/gguf.h"
#include "ops/qblock.h"
#include "diffattn/formats.h"

#define GGUF_MAGIC "GGUF"

/* ---------------------------------------------------------------- reader */

typedef struct {
    const unsigned char *p;
    size_t pos, size;
    const char *path;
    char what[320]; /* the field being read, for messages */
} cursor;

static da_status truncated(const cursor *c, size_t need) {
    return da_errorf("%s: truncated at byte %zu reading %s (%zu bytes needed, %zu left); the file is incomplete "
                     "or not a GGUF",
                     c->path, c->pos, c->what, need, c->size - c->pos);
}

static da_status take(cursor *c, void *dst, size_t n) {
    if (n > c->size - c->pos) return truncated(c, n);
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return da_ok();
}

static da_status take_u32(cursor *c, uint32_t *v) { return take(c, v, 4); }
static da_status take_u64(cursor *c, uint64_t *v) { return take(c, v, 8); }

/* A string: u64 length, bytes. Returns a pointer into the file and its length. */
static da_status take_str(cursor *c, const char **s, uint64_t *len) {
    da_status st = take_u64(c, len);
    if (st.code) return st;
    if (*len > c->size - c->pos) return truncated(c, (size_t)*len > 0 ? (size_t)*len : 1);
    *s = (const char *)c->p + c->pos;
    c->pos += (size_t)*len;
    return da_ok();
}

static size_t scalar_size(uint32_t t) {
    switch (t) {
    case DA_GGUF_U8: case DA_GGUF_I8: case DA_GGUF_BOOL: return 1;
    case DA_GGUF_U16: case DA_GGUF_I16: return 2;
    case DA_GGUF_U32: case DA_GGUF_I32: case DA_GGUF_F32: return 4;
    case DA_GGUF_U64: case DA_GGUF_I64: case DA_GGUF_F64: return 8;
    default: return 0;
    }
}

/* A scalar value of type t into kv->v (widened). */
static da_status take_scalar(cursor *c, uint32_t t, da_gguf_kv *kv) {
    unsigned char b[8] = {0};
    da_status st = take(c, b, scalar_size(t));
    if (st.code) return st;
    switch (t) {
    case DA_GGUF_U8: case DA_GGUF_BOOL: kv->v.u = b[0]; break;
    case DA_GGUF_I8: kv->v.i = (int8_t)b[0]; break;
    case DA_GGUF_U16: { uint16_t x; memcpy(&x, b, 2); kv->v.u = x; break; }
    case DA_GGUF_I16: { int16_t x; memcpy(&x, b, 2); kv->v.i = x; break; }
    case DA_GGUF_U32: { uint32_t x; memcpy(&x, b, 4); kv->v.u = x; break; }
    case DA_GGUF_I32: { int32_t x; memcpy(&x, b, 4); kv->v.i = x; break; }
    case DA_GGUF_F32: { float x; memcpy(&x, b, 4); kv->v.f = x; break; }
    case DA_GGUF_U64: memcpy(&kv->v.u, b, 8); break;
    case DA_GGUF_I64: memcpy(&kv->v.i, b, 8); break;
    case DA_GGUF_F64: memcpy(&kv->v.f, b, 8); break;
    default: break;
    }
    return da_ok();
}

/* A string into dst (cap bytes with its NUL): 1..cap-1 bytes, none of them
 * NUL. owner and noun name it in errors ("key-value 3 has a key of ..."). */
static da_status take_name(cursor *c, char *dst, size_t cap, const char *owner, int index, const char *noun) {
    const char *s;
    uint64_t len;
    snprintf(c->what, sizeof c->what, "the %s of %s %d", noun, owner, index);
    da_status st = take_str(c, &s, &len);
    if (st.code) return st;
    if (len == 0 || len >= cap)
        return da_errorf("%s: %s %d has a %s of %llu bytes (expected 1..%zu)", c->path, owner, index, noun,
                         (unsigned long long)len, cap - 1);
    memcpy(dst, s, (size_t)len);
    dst[len] = 0;
    if (strlen(dst) != len) return da_errorf("%s: %s %d: the %s holds a NUL byte", c->path, owner, index, noun);
    return da_ok();
}

static da_status parse_kv(cursor *c, da_gguf_kv *kv, int index) {
    da_status st = take_name(c, kv->key, sizeof kv->key, "key-value", index, "key");
    if (st.code) return st;
    snprintf(c->what, sizeof c->what, "the type of \"%s\"", kv->key);
    if ((st = take_u32(c, &kv->type)).code) return st;
    snprintf(c->what, sizeof c->what, "the value of \"%s\"", kv->key);
    if (kv->type == DA_GGUF_STRING) {
        const char *s;
        uint64_t n;
        if ((st = take_str(c, &s, &n)).code) return st;
        kv->str = malloc((size_t)n + 1);
        if (!kv->str) return da_errorf("%s: out of memory reading \"%s\"", c->path, kv->key);
        memcpy(kv->str, s, (size_t)n);
        kv->str[n] = 0;
        return da_ok();
    }
    if (kv->type == DA_GGUF_ARRAY) {
        if ((st = take_u32(c, &kv->arr_type)).code) return st;
        if ((st = take_u64(c, &kv->arr_n)).code) return st;
        kv->arr_data = c->p + c->pos;
        if (kv->arr_type == DA_GGUF_STRING) {
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                const char *s;
                uint64_t n;
                if ((st = take_str(c, &s, &n)).code) return st;
            }
            return da_ok();
        }
        size_t es = scalar_size(kv->arr_type);
        if (!es)
            return da_errorf("%s: \"%s\" is an array of type %u, which is not supported (nested arrays and unknown "
                             "types are refused)",
                             c->path, kv->key, kv->arr_type);
        if (kv->arr_n > (c->size - c->pos) / es) return truncated(c, es * 2);
        c->pos += (size_t)kv->arr_n * es;
        return da_ok();
    }
    if (!scalar_size(kv->type))
        return da_errorf("%s: \"%s\" has value type %u (expected 0..12)", c->path, kv->key, kv->type);
    return take_scalar(c, kv->type, kv);
}

static da_status parse_tensor_info(cursor *c, da_gguf_tensor *t, int index) {
    da_status st = take_name(c, t->name, sizeof t->name, "tensor", index, "name");
    if (st.code) return st;
    snprintf(c->what, sizeof c->what, "the shape of tensor \"%s\"", t->name);
    uint32_t nd;
    if ((st = take_u32(c, &nd)).code) return st;
    if (nd < 1 || nd > DA_GGUF_MAX_DIMS)
        return da_errorf("%s: tensor \"%s\" has %u dimensions (expected 1..%d)", c->path, t->name, nd,
                         DA_GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    uint64_t numel = 1;
    for (int i = 0; i < DA_GGUF_MAX_DIMS; i++) t->ne[i] = 1;
    for (uint32_t i = 0; i < nd; i++) {
        uint64_t ne;
        if ((st = take_u64(c, &ne)).code) return st;
        if (ne < 1 || ne > ((uint64_t)1 << 40) || numel > ((uint64_t)1 << 40) / ne)
            return da_errorf("%s: tensor \"%s\" has ne[%u] = %llu: empty or impossibly large", c->path, t->name, i,
                             (unsigned long long)ne);
        numel *= ne;
        t->ne[i] = (int64_t)ne;
    }
    uint32_t type;
    snprintf(c->what, sizeof c->what, "the type of tensor \"%s\"", t->name);
    if ((st = take_u32(c, &type)).code) return st;
    if (!da_qtype_name((int)type))
        return da_errorf("%s: tensor \"%s\" has ggml type %u (%s), which diffattn does not read (f32, f16, bf16, "
                         "q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K)",
                         c->path, t->name, type, da_ggml_type_name((int)type));
    t->type = (int)type;
    if (t->ne[0] % da_qtype_block(t->type))
        return da_errorf("%s: tensor \"%s\": ne[0] = %lld is not a multiple of the %s block (%d)", c->path, t->name,
                         (long long)t->ne[0], da_qtype_name(t->type), da_qtype_block(t->type));
    t->nbytes = (size_t)(numel / (uint64_t)da_qtype_block(t->type)) * da_qtype_block_bytes(t->type);
    snprintf(c->what, sizeof c->what, "the offset of tensor \"%s\"", t->name);
    return take_u64(c, &t->offset);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* *dup: a name that two of the n records hold (each name a char array at
 * offset off), or NULL. Sorting: O(n log n), where comparing every pair made
 * a 2 MB file of 100,000 keys take 34 s. Returns -1 when out of memory. */
static int find_duplicate(const void *records, size_t n, size_t size, size_t off, const char **dup) {
    *dup = NULL;
    if (n < 2) return 0;
    const char **names = malloc(n * sizeof *names);
    if (!names) return -1;
    for (size_t i = 0; i < n; i++) names[i] = (const char *)records + i * size + off;
    qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 1; i < n && !*dup; i++)
        if (!strcmp(names[i - 1], names[i])) *dup = names[i];
    free(names);
    return 0;
}

static int cmp_offset(const void *a, const void *b) {
    const da_gguf_tensor *x = *(const da_gguf_tensor *const *)a, *y = *(const da_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The tensors' byte ranges are pairwise disjoint (sorted by offset, each
 * starts at or after the furthest end so far): tensors sharing bytes would
 * let a small file stand for a large model. Ranges already lie in the file. */
static da_status check_disjoint(const da_gguf_file *f) {
    if (f->n_tensors < 2) return da_ok();
    const da_gguf_tensor **v = malloc((size_t)f->n_tensors * sizeof *v);
    if (!v) return da_errorf("%s: out of memory checking the tensor ranges", f->path);
    for (int i = 0; i < f->n_tensors; i++) v[i] = &f->tensors[i];
    qsort(v, (size_t)f->n_tensors, sizeof *v, cmp_offset);
    da_status st = da_ok();
    const da_gguf_tensor *last = v[0];
    for (int i = 1; i < f->n_tensors && !st.code; i++) {
        if (v[i]->offset < last->offset + last->nbytes)
            st = da_errorf("%s: tensor \"%s\" (data bytes [%llu, %llu)) overlaps tensor \"%s\" ([%llu, %llu))",
                           f->path, v[i]->name, (unsigned long long)v[i]->offset,
                           (unsigned long long)(v[i]->offset + v[i]->nbytes), last->name,
                           (unsigned long long)last->offset, (unsigned long long)(last->offset + last->nbytes));
        if (v[i]->offset + v[i]->nbytes > last->offset + last->nbytes) last = v[i];
    }
    free(v);
    return st;
}

static da_status parse(da_gguf_file *f) {
    cursor c = {f->map, 0, f->size, f->path, "the magic"};
    char magic[4];
    da_status st = take(&c, magic, 4);
    if (st.code) return st;
    if (memcmp(magic, GGUF_MAGIC, 4)) return da_errorf("%s: not a GGUF file (the first 4 bytes are not \"GGUF\")", f->path);
    snprintf(c.what, sizeof c.what, "the version");
    if ((st = take_u32(&c, &f->version)).code) return st;
    if (f->version != 3)
        return da_errorf("%s: GGUF version %u is not supported (this build reads version 3)", f->path, f->version);
    uint64_t nt, nkv;
    snprintf(c.what, sizeof c.what, "the tensor count");
    if ((st = take_u64(&c, &nt)).code) return st;
    snprintf(c.what, sizeof c.what, "the key-value count");
    if ((st = take_u64(&c, &nkv)).code) return st;
    /* every key-value and tensor info takes at least 12 bytes */
    if (nt > DA_GGUF_MAX_TENSORS || nkv > DA_GGUF_MAX_KV || (nt + nkv) > (f->size - c.pos) / 12)
        return da_errorf("%s: header claims %llu tensors and %llu key-values, more than a %zu-byte file can hold",
                         f->path, (unsigned long long)nt, (unsigned long long)nkv, f->size);
    f->kv = calloc(nkv ? (size_t)nkv : 1, sizeof *f->kv);
    f->tensors = calloc(nt ? (size_t)nt : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors) return da_errorf("%s: out of memory", f->path);
    f->alignment = DA_GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < nkv; i++) {
        f->n_kv = (int)i + 1;
        if ((st = parse_kv(&c, &f->kv[i], (int)i)).code) return st;
        if (!strcmp(f->kv[i].key, "general.alignment")) {
            if (f->kv[i].type != DA_GGUF_U32 || f->kv[i].v.u == 0 || (f->kv[i].v.u & (f->kv[i].v.u - 1)) ||
                f->kv[i].v.u > 65536)
                return da_errorf("%s: general.alignment must be a u32 power of two up to 65536", f->path);
            f->alignment = (uint32_t)f->kv[i].v.u;
        }
    }
    for (uint64_t i = 0; i < nt; i++) {
        f->n_tensors = (int)i + 1;
        if ((st = parse_tensor_info(&c, &f->tensors[i], (int)i)).code) return st;
    }
    const char *dup;
    if (find_duplicate(f->kv, (size_t)f->n_kv, sizeof *f->kv, offsetof(da_gguf_kv, key), &dup))
        return da_errorf("%s: out of memory checking the keys", f->path);
    if (dup) return da_errorf("%s: key \"%s\" appears twice", f->path, dup);
    if (find_duplicate(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, offsetof(da_gguf_tensor, name), &dup))
        return da_errorf("%s: out of memory checking the tensor names", f->path);
    if (dup) return da_errorf("%s: tensor \"%s\" appears twice", f->path, dup);
    size_t data = (c.pos + f->alignment - 1) / f->alignment * f->alignment;
    if (data > f->size && nt > 0)
        return da_errorf("%s: truncated: the data section would start at byte %zu of a %zu-byte file", f->path, data,
                         f->size);
    f->data_offset = data;
    const size_t avail = data <= f->size ? f->size - data : 0;
    for (int i = 0; i < f->n_tensors; i++) {
        const da_gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment)
            return da_errorf("%s: tensor \"%s\" starts at data offset %llu, not a multiple of the alignment %u",
                             f->path, t->name, (unsigned long long)t->offset, f->alignment);
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return da_errorf("%s: tensor \"%s\" (%zu bytes at data offset %llu) runs past the end of the file "
                             "(%zu data bytes); the file is truncated or corrupt",
                             f->path, t->name, t->nbytes, (unsigned long long)t->offset, avail);
    }
    return check_disjoint(f);
}

static da_status parse_buffer(da_gguf_file *f, const char *name, unsigned char *buf, size_t size, int mapped) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", name);
    f->map = buf;
    f->size = size;
    f->mapped = mapped;
    da_status st = parse(f);
    if (st.code) da_gguf_close(f);
    return st;
}

da_status da_gguf_parse(da_gguf_file *f, const char *name, unsigned char *buf, size_t size) {
    return parse_buffer(f, name, buf, size, 0);
}

da_status da_gguf_open(da_gguf_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    da_status open_st;
    int fd = da_open_regular(path, &open_st);
    if (fd < 0) return open_st;
    struct stat sb;
    if (fstat(fd, &sb) || sb.st_size < 0) {
        close(fd);
        return da_errorf("%s: cannot read the file", path);
    }
    if (sb.st_size == 0) { /* nothing to map; the parser reports the missing magic */
        close(fd);
        unsigned char *empty = malloc(1);
        return empty ? parse_buffer(f, path, empty, 0, 0) : da_errorf("out of memory");
    }
    /* mapped, not read: the engine copies each tensor out and releases its pages */
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return da_errorf("%s: cannot map the file: %s", path, strerror(errno));
    return parse_buffer(f, path, p, (size_t)sb.st_size, 1);
}

void da_gguf_close(da_gguf_file *f) {
    for (int i = 0; f->kv && i < f->n_kv; i++) free(f->kv[i].str);
    free(f->kv);
    free(f->tensors);
    if (f->mapped) munmap(f->map, f->size);
    else free(f->map);
    memset(f, 0, sizeof *f);
}

int da_gguf_is_gguf(const char *path) {
    FILE *fp = da_fopen_regular(path, NULL);
    if (!fp) return 0;
    char m[4] = {0};
    size_t n = fread(m, 1, 4, fp);
    fclose(fp);
    return n == 4 && !memcmp(m, GGUF_MAGIC, 4);
}

const da_gguf_kv *da_gguf_kv_find(const da_gguf_file *f, const char *key) {
    for (int i = 0; i < f->n_kv; i++)
        if (!strcmp(f->kv[i].key, key)) return &f->kv[i];
    return NULL;
}

const da_gguf_tensor *da_gguf_tensor_find(const da_gguf_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

const unsigned char *da_gguf_data(const da_gguf_file *f, const da_gguf_tensor *t) {
    return f->map + f->data_offset + t->offset;
}

void da_gguf_release(const da_gguf_file *f, const da_gguf_tensor *t) {
    if (!f->mapped) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)da_gguf_data(f, t);
    const uintptr_t a = (start + page - 1) / page * page, b = (start + t->nbytes) / page * page; /* whole pages inside */
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

static da_status need(const da_gguf_file *f, const char *key, const da_gguf_kv **kv) {
    *kv = da_gguf_kv_find(f, key);
    if (!*kv) return da_errorf("%s: key \"%s\" is missing (was this file written by diffattn quantize?)", f->path, key);
    return da_ok();
}

da_status da_gguf_get_int(const da_gguf_file *f, const char *key, int64_t *out) {
    const da_gguf_kv *kv;
    da_status st = need(f, key, &kv);
    if (st.code) return st;
    switch (kv->type) {
    case DA_GGUF_U8: case DA_GGUF_U16: case DA_GGUF_U32: case DA_GGUF_U64:
        if (kv->v.u > (uint64_t)INT64_MAX) break;
        *out = (int64_t)kv->v.u;
        return da_ok();
    case DA_GGUF_I8: case DA_GGUF_I16: case DA_GGUF_I32: case DA_GGUF_I64: *out = kv->v.i; return da_ok();
    default: break;
    }
    return da_errorf("%s: key \"%s\" has type %u, expected an integer", f->path, key, kv->type);
}

da_status da_gguf_get_f32(const da_gguf_file *f, const char *key, float *out) {
    const da_gguf_kv *kv;
    da_status st = need(f, key, &kv);
    if (st.code) return st;
    if (kv->type != DA_GGUF_F32 && kv->type != DA_GGUF_F64)
        return da_errorf("%s: key \"%s\" has type %u, expected f32", f->path, key, kv->type);
    *out = (float)kv->v.f;
    return da_ok();
}

da_status da_gguf_get_bool(const da_gguf_file *f, const char *key, int *out) {
    const da_gguf_kv *kv;
    da_status st = need(f, key, &kv);
    if (st.code) return st;
    if (kv->type != DA_GGUF_BOOL || kv->v.u > 1)
        return da_errorf("%s: key \"%s\" is not a bool (type %u)", f->path, key, kv->type);
    *out = (int)kv->v.u;
    return da_ok();
}

da_status da_gguf_get_str(const da_gguf_file *f, const char *key, const char **out) {
    const da_gguf_kv *kv;
    da_status st = need(f, key, &kv);
    if (st.code) return st;
    if (kv->type != DA_GGUF_STRING) return da_errorf("%s: key \"%s\" has type %u, expected a string", f->path, key, kv->type);
    *out = kv->str;
    return da_ok();
}

/* The open already checked that every element lies inside the file, so
 * these only walk it; the copies are bounded by the file's size. */
da_status da_gguf_get_str_array(const da_gguf_file *f, const char *key, char ***out, uint64_t *n) {
    *out = NULL;
    *n = 0;
    const da_gguf_kv *kv;
    da_status st = need(f, key, &kv);
    if (st.code) return st;
    if (kv->type != DA_GGUF_ARRAY || kv->arr_type != DA_GGUF_STRING)
        return da_errorf("%s: key \"%s\" is not an array of strings", f->path, key);
    char **v = calloc((size_t)kv->arr_n + 1, sizeof *v);
    if (!v) return da_errorf("%s: out of memory reading \"%s\"", f->path, key);
    const unsigned char *p = kv->arr_data;
    for (uint64_t i = 0; i < kv->arr_n && !st.code; i++) {
        uint64_t len;
        memcpy(&len, p, 8);
        if (!(v[i] = malloc((size_t)len + 1))) {
            st = da_errorf("%s: out of memory reading \"%s\"", f->path, key);
            break;
        }
        memcpy(v[i], p + 8, (size_t)len);
        v[i][len] = 0;
        if (strlen(v[i]) != len) st = da_errorf("%s: \"%s\"[%llu] holds a NUL byte", f->path, key, (unsigned long long)i);
        p += 8 + (size_t)len;
    }
    if (st.code) {
        da_gguf_free_str_array(v, kv->arr_n);
        return st;
    }
    *out = v;
    *n = kv->arr_n;
    return da_ok();
}

void da_gguf_free_str_array(char **v, uint64_t n) {
    for (uint64_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

da_status da_gguf_get_i32_array(const da_gguf_file *f, const char *key, int32_t **out, uint64_t *n) {
    *out = NULL;
    *n = 0;
    const da_gguf_kv *kv;
    da_status st = need(f, key, &kv);
    if (st.code) return st;
    if (kv->type != DA_GGUF_ARRAY || (kv->arr_type != DA_GGUF_I32 && kv->arr_type != DA_GGUF_U32))
        return da_errorf("%s: key \"%s\" is not an array of 32-bit integers", f->path, key);
    int32_t *v = malloc((size_t)kv->arr_n * 4 + 4);
    if (!v) return da_errorf("%s: out of memory reading \"%s\"", f->path, key);
    memcpy(v, kv->arr_data, (size_t)kv->arr_n * 4);
    *out = v;
    *n = kv->arr_n;
    return da_ok();
}

/* ---------------------------------------------------------------- writer */

void da_gguf_writer_init(da_gguf_writer *w) { memset(w, 0, sizeof *w); }

void da_gguf_writer_free(da_gguf_writer *w) {
    free(w->kv);
    free(w->t);
    memset(w, 0, sizeof *w);
}

static void put(da_gguf_writer *w, const void *p, size_t n) {
    if (w->oom) return;
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 1024;
        while (cap < w->kv_len + n) cap *= 2;
        unsigned char *b = realloc(w->kv, cap);
        if (!b) {
            w->oom = 1;
            return;
        }
        w->kv = b;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}

static void put_str(da_gguf_writer *w, const char *s) {
    uint64_t n = strlen(s);
    put(w, &n, 8);
    put(w, s, (size_t)n);
}

static void put_key(da_gguf_writer *w, const char *key, uint32_t type) {
    put_str(w, key);
    put(w, &type, 4);
    w->n_kv++;
}

void da_gguf_add_u32(da_gguf_writer *w, const char *key, uint32_t v) {
    put_key(w, key, DA_GGUF_U32);
    put(w, &v, 4);
}

void da_gguf_add_f32(da_gguf_writer *w, const char *key, float v) {
    put_key(w, key, DA_GGUF_F32);
    put(w, &v, 4);
}

void da_gguf_add_bool(da_gguf_writer *w, const char *key, int v) {
    put_key(w, key, DA_GGUF_BOOL);
    uint8_t b = v ? 1 : 0;
    put(w, &b, 1);
}

void da_gguf_add_str(da_gguf_writer *w, const char *key, const char *v) {
    put_key(w, key, DA_GGUF_STRING);
    put_str(w, v);
}

void da_gguf_add_f32_array(da_gguf_writer *w, const char *key, const float *v, uint64_t n) {
    put_key(w, key, DA_GGUF_ARRAY);
    uint32_t t = DA_GGUF_F32;
    put(w, &t, 4);
    put(w, &n, 8);
    put(w, v, (size_t)n * 4);
}

void da_gguf_add_str_array(da_gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    put_key(w, key, DA_GGUF_ARRAY);
    uint32_t t = DA_GGUF_STRING;
    put(w, &t, 4);
    put(w, &n, 8);
    for (uint64_t i = 0; i < n; i++) put_str(w, v[i]);
}

void da_gguf_add_i32_array(da_gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    put_key(w, key, DA_GGUF_ARRAY);
    uint32_t t = DA_GGUF_I32;
    put(w, &t, 4);
    put(w, &n, 8);
    put(w, v, (size_t)n * 4);
}

void da_gguf_add_tensor(da_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                        const void *data, size_t nbytes) {
    if (w->oom) return;
    if (w->n_t == w->cap_t) {
        int cap = w->cap_t ? 2 * w->cap_t : 64;
        da_gguf_wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) {
            w->oom = 1;
            return;
        }
        w->t = t;
        w->cap_t = cap;
    }
    da_gguf_wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    for (int i = 0; i < n_dims && i < DA_GGUF_MAX_DIMS; i++) t->ne[i] = ne[i];
    t->data = data;
    t->nbytes = nbytes;
}

static size_t pad_to(size_t n, size_t a) { return (n + a - 1) / a * a; }

da_status da_gguf_write(da_gguf_writer *w, const char *path) { return da_gguf_write_from(w, path, NULL, NULL); }

da_status da_gguf_write_from(da_gguf_writer *w, const char *path, da_gguf_tensor_source source, void *ctx) {
    da_gguf_add_u32(w, "general.alignment", DA_GGUF_DEFAULT_ALIGNMENT);
    if (w->oom) return da_errorf("%s: out of memory building the GGUF header", path);
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    FILE *fp = af.fp;
    size_t pos = 0;
    int ok = 1;
#define W(p, n) (ok = ok && fwrite((p), 1, (n), fp) == (size_t)(n), pos += (n))
    uint32_t version = 3;
    uint64_t nt = (uint64_t)w->n_t;
    W(GGUF_MAGIC, 4);
    W(&version, 4);
    W(&nt, 8);
    W(&w->n_kv, 8);
    W(w->kv, w->kv_len);
    uint64_t off = 0;
    for (int i = 0; i < w->n_t; i++) {
        const da_gguf_wtensor *t = &w->t[i];
        uint64_t n = strlen(t->name), ne;
        uint32_t nd = (uint32_t)t->n_dims, type = (uint32_t)t->type;
        W(&n, 8);
        W(t->name, n);
        W(&nd, 4);
        for (int d = 0; d < t->n_dims; d++) {
            ne = (uint64_t)t->ne[d];
            W(&ne, 8);
        }
        W(&type, 4);
        W(&off, 8);
        off = pad_to(off + t->nbytes, DA_GGUF_DEFAULT_ALIGNMENT);
    }
    static const unsigned char zeros[DA_GGUF_DEFAULT_ALIGNMENT];
    W(zeros, pad_to(pos, DA_GGUF_DEFAULT_ALIGNMENT) - pos);
    for (int i = 0; i < w->n_t && ok; i++) {
        if (w->t[i].data || !w->t[i].nbytes) {
            W(w->t[i].data, w->t[i].nbytes);
        } else {
            const long before = ftell(fp);
            st = source ? source(ctx, i, fp) : da_errorf("%s: tensor %s has no data", path, w->t[i].name);
            const long after = ftell(fp);
            /* a pipe or device written through has no position: its count goes unchecked */
            if (!st.code && (ferror(fp) || (before >= 0 && (size_t)(after - before) != w->t[i].nbytes)))
                st = ferror(fp) ? da_errorf("%s: writing tensor %s failed", path, w->t[i].name)
                                : da_errorf("%s: tensor %s: %ld bytes written, its header says %zu", path,
                                            w->t[i].name, after - before, w->t[i].nbytes);
            if (st.code) {
                da_atomic_abort(&af);
                return st;
            }
            pos += w->t[i].nbytes;
        }
        W(zeros, pad_to(w->t[i].nbytes, DA_GGUF_DEFAULT_ALIGNMENT) - w->t[i].nbytes);
    }
#undef W
    if (!ok) return da_atomic_fail(&af, errno); /* the first failed fwrite's: later ones were skipped */
    return da_atomic_commit(&af);
}
