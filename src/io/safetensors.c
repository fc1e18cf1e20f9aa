/* safetensors reader (hostile-input safe) and F32 writer (see safetensors.h). */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io/atomic_file.h"
#include "ops/qblock.h"
#include "diffattn/formats.h"

#define MAX_JSON_INT 9007199254740992.0 /* 2^53: larger JSON numbers are not exact integers */

static const struct {
    const char *name;
    size_t size;
} dtype_info[DA_ST_N_DTYPES] = {
    [DA_ST_F32] = {"F32", 4},         [DA_ST_BF16] = {"BF16", 2},     [DA_ST_F16] = {"F16", 2},
    [DA_ST_I32] = {"I32", 4},         [DA_ST_I64] = {"I64", 8},       [DA_ST_U8] = {"U8", 1},
    [DA_ST_F64] = {"F64", 8},         [DA_ST_I8] = {"I8", 1},         [DA_ST_I16] = {"I16", 2},
    [DA_ST_U16] = {"U16", 2},         [DA_ST_U32] = {"U32", 4},       [DA_ST_U64] = {"U64", 8},
    [DA_ST_BOOL] = {"BOOL", 1},       [DA_ST_F8_E4M3] = {"F8_E4M3", 1}, [DA_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *da_st_dtype_name(da_st_dtype d) {
    return ((unsigned)d < DA_ST_N_DTYPES) ? dtype_info[d].name : "?";
}

size_t da_st_dtype_size(da_st_dtype d) {
    return ((unsigned)d < DA_ST_N_DTYPES) ? dtype_info[d].size : 0;
}

static int dtype_parse(const char *s, da_st_dtype *out) {
    for (int i = 0; i < DA_ST_N_DTYPES; i++)
        if (strcmp(s, dtype_info[i].name) == 0) {
            *out = (da_st_dtype)i;
            return 0;
        }
    return -1;
}

/* A name from the file made fit for a one-line message: control characters,
 * quotes and backslashes become '?', and long names are cut (on a UTF-8
 * character boundary) with "...". */
static const char *printable(char *buf, size_t cap, const char *s) {
    size_t lim = cap - 4, n = 0;
    for (; s[n] && n < lim; n++) {
        unsigned char c = (unsigned char)s[n];
        buf[n] = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '?' : (char)c;
    }
    if (s[n]) {
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* don't split a character */
        memcpy(buf + n, "...", 4);
    } else {
        buf[n] = 0;
    }
    return buf;
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
 * Returns the offset of the first bad byte, or n when all is well. */
static size_t utf8_check(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned min;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) { len = 2; min = 0x80; c &= 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; min = 0x800; c &= 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; min = 0x10000; c &= 0x07; }
        else return i;
        if (n - i < len) return i;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            c = (c << 6) | (s[i + k] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return i;
        i += len;
    }
    return n;
}

static const char *json_type_name(const cJSON *j) {
    if (cJSON_IsObject(j)) return "an object";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    return "invalid";
}

/* A JSON number that is an exact non-negative integer representable in a
 * double without loss. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!isfinite(d) || d < 0 || d > MAX_JSON_INT || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

/* Reads the whole of a regular file into a malloc'd buffer. A copy, not a
 * mapping, so a file truncated by someone else while we hold it cannot fault. */
static da_status read_whole(const char *path, unsigned char **buf, size_t *size) {
    *buf = NULL;
    *size = 0;
    da_status open_st;
    int fd = da_open_regular(path, &open_st);
    if (fd < 0) return open_st;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return da_errorf("%s: cannot stat: %s", path, strerror(e));
    }
    if (st.st_size < 8) {
        close(fd);
        if (st.st_size == 0) return da_errorf("%s: file is empty (0 bytes), not a safetensors file", path);
        return da_errorf("%s: file is only %lld bytes, shorter than the 8-byte header length; the file may be truncated",
                         path, (long long)st.st_size);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return da_errorf("%s: file is too large for this machine (%lld bytes)", path, (long long)st.st_size);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *p = malloc(n);
    if (!p) {
        close(fd);
        return da_errorf("%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            free(p);
            close(fd);
            if (r < 0) return da_errorf("%s: read failed: %s", path, strerror(e));
            return da_errorf("%s: file shrank while being read (%zu of %zu bytes)", path, got, n);
        }
        got += (size_t)r;
    }
    close(fd);
    *buf = p;
    *size = n;
    return da_ok();
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp((*(const da_st_tensor *const *)a)->name, (*(const da_st_tensor *const *)b)->name);
}

static int cmp_tensor_begin(const void *a, const void *b) {
    const da_st_tensor *x = *(const da_st_tensor *const *)a, *y = *(const da_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_meta_key(const void *a, const void *b) {
    return strcmp((*(const da_st_meta *const *)a)->key, (*(const da_st_meta *const *)b)->key);
}

/* Fills *t from one header entry, checking everything against data_size. */
static da_status parse_tensor(const char *path, const cJSON *e, size_t data_size, da_st_tensor *t) {
    char nb[96];
    const char *nm = printable(nb, sizeof nb, e->string);
    if (strlen(e->string) >= sizeof t->name)
        return da_errorf("%s: tensor name \"%s\" is %zu bytes long, at most %zu are supported", path, nm,
                         strlen(e->string), sizeof t->name - 1);
    memcpy(t->name, e->string, strlen(e->string) + 1);
    if (!cJSON_IsObject(e))
        return da_errorf("%s: tensor \"%s\" is %s, expected an object with dtype, shape and data_offsets", path,
                         nm, json_type_name(e));

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!dt) return da_errorf("%s: tensor \"%s\" has no \"dtype\"", path, nm);
    if (!cJSON_IsString(dt) || !dt->valuestring)
        return da_errorf("%s: tensor \"%s\": \"dtype\" is %s, expected a string such as \"F32\"", path, nm,
                         json_type_name(dt));
    if (dtype_parse(dt->valuestring, &t->dtype) != 0) {
        char db[40];
        return da_errorf("%s: tensor \"%s\" has unknown dtype \"%s\"", path, nm,
                         printable(db, sizeof db, dt->valuestring));
    }

    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!sh) return da_errorf("%s: tensor \"%s\" has no \"shape\"", path, nm);
    if (!cJSON_IsArray(sh))
        return da_errorf("%s: tensor \"%s\": \"shape\" is %s, expected an array of non-negative integers", path,
                         nm, json_type_name(sh));
    int nd = cJSON_GetArraySize(sh);
    if (nd > DA_ST_MAX_DIMS)
        return da_errorf("%s: tensor \"%s\" has %d dims, at most %d are supported", path, nm, nd, DA_ST_MAX_DIMS);
    t->ndim = nd;
    int has_zero = 0, i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, sh) {
        uint64_t v;
        if (json_uint(d, &v) != 0) {
            if (cJSON_IsNumber(d))
                return da_errorf("%s: tensor \"%s\": shape[%d] = %.17g is not a non-negative integer", path, nm,
                                 i, d->valuedouble);
            return da_errorf("%s: tensor \"%s\": shape[%d] is %s, expected a non-negative integer", path, nm, i,
                             json_type_name(d));
        }
        t->shape[i++] = (int64_t)v;
        if (v == 0) has_zero = 1;
    }
    size_t numel = 1;
    size_t esize = dtype_info[t->dtype].size;
    for (i = 0; i < nd && !has_zero; i++) {
        uint64_t v = (uint64_t)t->shape[i];
        if (v > SIZE_MAX / numel)
            return da_errorf("%s: tensor \"%s\": shape has too many elements (the size overflows)", path, nm);
        numel *= (size_t)v;
    }
    if (has_zero) numel = 0;
    if (numel > SIZE_MAX / esize)
        return da_errorf("%s: tensor \"%s\": shape has too many elements (the byte size overflows)", path, nm);
    t->numel = numel;
    size_t nbytes = numel * esize;

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!off) return da_errorf("%s: tensor \"%s\" has no \"data_offsets\"", path, nm);
    uint64_t b, en;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || json_uint(cJSON_GetArrayItem(off, 0), &b) != 0 ||
        json_uint(cJSON_GetArrayItem(off, 1), &en) != 0)
        return da_errorf("%s: tensor \"%s\": \"data_offsets\" must be [begin, end], two non-negative integers",
                         path, nm);
    if (b > en)
        return da_errorf("%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] has begin after end", path,
                         nm, b, en);
    if (en - b != (uint64_t)nbytes)
        return da_errorf("%s: tensor \"%s\" data [%" PRIu64 ", %" PRIu64 ") is %" PRIu64
                         " bytes, but dtype %s with %zu elements needs %zu",
                         path, nm, b, en, en - b, dtype_info[t->dtype].name, numel, nbytes);
    if (en > (uint64_t)data_size)
        return da_errorf("%s: tensor \"%s\" data [%" PRIu64 ", %" PRIu64
                         ") lies outside the data section (%zu bytes); the file may be truncated",
                         path, nm, b, en, data_size);
    t->begin = (size_t)b;
    t->end = (size_t)en;
    return da_ok();
}

static da_status parse_metadata(const char *path, const cJSON *m, da_st_file *f) {
    if (!cJSON_IsObject(m))
        return da_errorf("%s: \"__metadata__\" is %s, expected an object of strings", path, json_type_name(m));
    int n = cJSON_GetArraySize(m);
    f->meta = calloc(n > 0 ? (size_t)n : 1, sizeof *f->meta);
    if (!f->meta) return da_errorf("%s: out of memory", path);
    const cJSON *e;
    cJSON_ArrayForEach(e, m) {
        char kb[96];
        const char *kn = printable(kb, sizeof kb, e->string);
        if (!cJSON_IsString(e) || !e->valuestring)
            return da_errorf("%s: \"__metadata__\" entry \"%s\" is %s, expected a string", path, kn,
                             json_type_name(e));
        da_st_meta *md = &f->meta[f->n_meta];
        size_t kl = strlen(e->string);
        if (kl >= sizeof md->key)
            return da_errorf("%s: \"__metadata__\" key \"%s\" is %zu bytes long, at most %zu are supported", path,
                             kn, kl, sizeof md->key - 1);
        memcpy(md->key, e->string, kl + 1);
        size_t vl = strlen(e->valuestring);
        md->value = malloc(vl + 1);
        if (!md->value) return da_errorf("%s: out of memory", path);
        memcpy(md->value, e->valuestring, vl + 1);
        f->n_meta++;
    }
    return da_ok();
}

/* Duplicate names and overlapping data ranges, in O(n log n). */
static da_status check_unique(const char *path, da_st_file *f) {
    int n = f->n_tensors > f->n_meta ? f->n_tensors : f->n_meta;
    if (n < 2) return da_ok();
    da_status st = da_ok();
    char nb[96], nb2[96];

    const da_st_meta **mp = malloc((size_t)n * sizeof *mp);
    if (!mp) return da_errorf("%s: out of memory", path);
    for (int i = 0; i < f->n_meta; i++) mp[i] = &f->meta[i];
    qsort(mp, (size_t)f->n_meta, sizeof *mp, cmp_meta_key);
    for (int i = 1; i < f->n_meta && !st.code; i++)
        if (strcmp(mp[i - 1]->key, mp[i]->key) == 0)
            st = da_errorf("%s: \"__metadata__\" has a duplicate key \"%s\"", path,
                           printable(nb, sizeof nb, mp[i]->key));
    free(mp);
    if (st.code) return st;

    const da_st_tensor **tp = malloc((size_t)n * sizeof *tp);
    if (!tp) return da_errorf("%s: out of memory", path);
    for (int i = 0; i < f->n_tensors; i++) tp[i] = &f->tensors[i];
    qsort(tp, (size_t)f->n_tensors, sizeof *tp, cmp_tensor_name);
    for (int i = 1; i < f->n_tensors && !st.code; i++)
        if (strcmp(tp[i - 1]->name, tp[i]->name) == 0)
            st = da_errorf("%s: duplicate tensor name \"%s\" in the header", path,
                           printable(nb, sizeof nb, tp[i]->name));

    if (!st.code) qsort(tp, (size_t)f->n_tensors, sizeof *tp, cmp_tensor_begin);
    const da_st_tensor *last = NULL; /* the non-empty tensor reaching furthest so far */
    for (int i = 0; i < f->n_tensors && !st.code; i++) {
        const da_st_tensor *t = tp[i];
        if (t->begin == t->end) continue; /* empty tensors occupy no bytes */
        if (last && t->begin < last->end) {
            st = da_errorf("%s: tensor \"%s\" data [%zu, %zu) overlaps tensor \"%s\" data [%zu, %zu)", path,
                           printable(nb, sizeof nb, t->name), t->begin, t->end,
                           printable(nb2, sizeof nb2, last->name), last->begin, last->end);
            break;
        }
        if (!last || t->end > last->end) last = t;
    }
    free(tp);
    return st;
}

static da_status parse_header(da_st_file *f) {
    const char *path = f->path;
    uint64_t hlen = le64(f->map);
    /* the length is not echoed: its 8 bytes may be anything, a secret included */
    if (hlen > DA_ST_MAX_HEADER)
        return da_errorf("%s: the header length in its first 8 bytes is absurd (over %u bytes); not a safetensors "
                         "file?",
                         path, DA_ST_MAX_HEADER);
    if (hlen > f->size - 8)
        return da_errorf("%s: the header length in its first 8 bytes exceeds the %zu bytes after it; the file may "
                         "be truncated",
                         path, f->size - 8);
    f->data_offset = 8 + (size_t)hlen;
    const unsigned char *h = f->map + 8;
    if (memchr(h, 0, (size_t)hlen))
        return da_errorf("%s: header contains a NUL byte; not a safetensors file?", path);
    size_t bad = utf8_check(h, (size_t)hlen);
    if (bad != hlen) return da_errorf("%s: header is not valid UTF-8 (at byte %zu)", path, bad);

    char *txt = malloc((size_t)hlen + 1);
    if (!txt) return da_errorf("%s: out of memory for a %" PRIu64 "-byte header", path, hlen);
    memcpy(txt, h, (size_t)hlen);
    txt[hlen] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(txt, &end, 1);
    if (!root) {
        size_t at = end ? (size_t)(end - txt) : 0;
        free(txt);
        return da_errorf("%s: header is not valid JSON (error near byte %zu of %" PRIu64 ")", path, at, hlen);
    }
    free(txt);

    da_status st = da_ok();
    if (!cJSON_IsObject(root)) {
        st = da_errorf("%s: header is %s, expected a JSON object", path, json_type_name(root));
        goto done;
    }
    int n_entries = cJSON_GetArraySize(root);
    f->tensors = calloc(n_entries > 0 ? (size_t)n_entries : 1, sizeof *f->tensors);
    if (!f->tensors) {
        st = da_errorf("%s: out of memory for %d tensors", path, n_entries);
        goto done;
    }
    size_t data_size = f->size - f->data_offset;
    int seen_meta = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (!e->string) {
            st = da_errorf("%s: header entry without a name", path);
            goto done;
        }
        if (strcmp(e->string, "__metadata__") == 0) {
            if (seen_meta) {
                st = da_errorf("%s: duplicate \"__metadata__\" in the header", path);
                goto done;
            }
            seen_meta = 1;
            st = parse_metadata(path, e, f);
        } else {
            st = parse_tensor(path, e, data_size, &f->tensors[f->n_tensors]);
            if (!st.code) f->n_tensors++;
        }
        if (st.code) goto done;
    }
    st = check_unique(path, f);
done:
    cJSON_Delete(root);
    return st;
}

da_status da_st_open(da_st_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    if (!path || !path[0]) return da_errorf("safetensors: empty path");
    size_t pl = strlen(path);
    if (pl >= sizeof f->path) return da_errorf("%.200s...: path is too long", path);
    memcpy(f->path, path, pl + 1);
    da_status st = read_whole(path, &f->map, &f->size);
    if (!st.code) st = parse_header(f);
    if (st.code) da_st_close(f);
    return st;
}

void da_st_close(da_st_file *f) {
    free(f->map);
    free(f->tensors);
    for (int i = 0; i < f->n_meta; i++) free(f->meta[i].value);
    free(f->meta);
    memset(f, 0, sizeof *f);
}

const da_st_tensor *da_st_find(const da_st_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

const char *da_st_meta_get(const da_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

const unsigned char *da_st_data(const da_st_file *f, const da_st_tensor *t) {
    return f->map + f->data_offset + t->begin;
}

static float bits_to_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0) {
        float v = (float)man * 5.9604644775390625e-8f; /* zero or subnormal: man * 2^-24, exact */
        return sign ? -v : v;
    }
    if (exp == 31) return bits_to_f32(sign | 0x7F800000u | (man << 13)); /* inf, NaN (payload kept) */
    return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

da_status da_st_read_f32(const da_st_file *f, const da_st_tensor *t, float *out) {
    char nb[96];
    size_t data_size = f->size - f->data_offset;
    size_t esize = da_st_dtype_size(t->dtype);
    if (t->begin > t->end || t->end > data_size || esize == 0 || t->end - t->begin != t->numel * esize)
        return da_errorf("%s: tensor \"%s\" does not belong to this file", f->path,
                         printable(nb, sizeof nb, t->name));
    const unsigned char *p = da_st_data(f, t);
    size_t n = t->numel;
    switch (t->dtype) {
    case DA_ST_F32:
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (n) memcpy(out, p, n * 4);
#else
        for (size_t i = 0; i < n; i++)
            out[i] = bits_to_f32((uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                                 (uint32_t)p[4 * i + 3] << 24);
#endif
        return da_ok();
    case DA_ST_BF16:
        for (size_t i = 0; i < n; i++)
            out[i] = bits_to_f32(((uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8) << 16);
        return da_ok();
    case DA_ST_F16:
        for (size_t i = 0; i < n; i++) out[i] = f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return da_ok();
    default:
        return da_errorf("%s: tensor \"%s\" has dtype %s; only F32, BF16 and F16 can be read as float", f->path,
                         printable(nb, sizeof nb, t->name), da_st_dtype_name(t->dtype));
    }
}

/* ---------------------------------------------------------------- writer */

static cJSON *json_int(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_CreateRaw(buf);
}

/* Builds the header JSON; on error returns NULL with *st set. */
static char *build_header(const char *path, const da_st_write_tensor *ts, int n, da_st_dtype dtype,
                          const char *const *mk, const char *const *mv, int n_meta, da_status *st) {
    cJSON *root = cJSON_CreateObject();
    int ok = root != NULL;
    if (ok && n_meta > 0) {
        cJSON *m = cJSON_CreateObject();
        ok = m && cJSON_AddItemToObject(root, "__metadata__", m);
        if (!ok) cJSON_Delete(m);
        for (int i = 0; ok && i < n_meta; i++) {
            cJSON *v = cJSON_CreateString(mv[i]);
            ok = v && cJSON_AddItemToObject(m, mk[i], v);
            if (!ok) cJSON_Delete(v);
        }
    }
    uint64_t off = 0;
    for (int i = 0; ok && i < n; i++) {
        const da_st_write_tensor *t = &ts[i];
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToObject(root, t->name, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        ok = cJSON_AddStringToObject(o, "dtype", da_st_dtype_name(dtype)) != NULL;
        cJSON *sh = ok ? cJSON_AddArrayToObject(o, "shape") : NULL;
        cJSON *dof = sh ? cJSON_AddArrayToObject(o, "data_offsets") : NULL;
        ok = dof != NULL;
        uint64_t numel = 1;
        for (int d = 0; ok && d < t->ndim; d++) {
            numel *= (uint64_t)t->shape[d]; /* overflow ruled out by check_write_args */
            cJSON *v = json_int((uint64_t)t->shape[d]);
            ok = v && cJSON_AddItemToArray(sh, v);
            if (!ok) cJSON_Delete(v);
        }
        for (int k = 0; ok && k < 2; k++) {
            cJSON *v = json_int(off);
            ok = v && cJSON_AddItemToArray(dof, v);
            if (!ok) cJSON_Delete(v);
            if (k == 0) off += numel * da_st_dtype_size(dtype);
        }
    }
    char *txt = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!txt) *st = da_errorf("%s: out of memory building the header", path);
    return txt;
}

static da_status check_write_args(const char *path, const da_st_write_tensor *ts, int n, const char *const *mk,
                                  const char *const *mv, int n_meta) {
    if (n < 0 || n_meta < 0) return da_errorf("%s: negative tensor or metadata count", path);
    if (n > 0 && !ts) return da_errorf("%s: %d tensors but no tensor array", path, n);
    if (n_meta > 0 && (!mk || !mv)) return da_errorf("%s: %d metadata entries but no key/value arrays", path, n_meta);
    char nb[96];
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const da_st_write_tensor *t = &ts[i];
        if (!t->name) return da_errorf("%s: tensor %d has no name", path, i);
        const char *nm = printable(nb, sizeof nb, t->name);
        if (utf8_check((const unsigned char *)t->name, strlen(t->name)) != strlen(t->name))
            return da_errorf("%s: tensor name \"%s\" is not valid UTF-8", path, nm);
        if (strlen(t->name) >= sizeof(((da_st_tensor *)0)->name))
            return da_errorf("%s: tensor name \"%s\" is too long (at most %zu bytes)", path, nm,
                             sizeof(((da_st_tensor *)0)->name) - 1);
        if (strcmp(t->name, "__metadata__") == 0)
            return da_errorf("%s: \"__metadata__\" is reserved and cannot name a tensor", path);
        if (t->ndim < 0 || t->ndim > DA_ST_MAX_DIMS)
            return da_errorf("%s: tensor \"%s\" has %d dims, expected 0 to %d", path, nm, t->ndim, DA_ST_MAX_DIMS);
        size_t numel = 1;
        int zero = 0;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) return da_errorf("%s: tensor \"%s\": shape[%d] is negative", path, nm, d);
            if (t->shape[d] == 0) zero = 1;
        }
        for (int d = 0; d < t->ndim && !zero; d++) {
            if ((uint64_t)t->shape[d] > (SIZE_MAX / 4) / numel)
                return da_errorf("%s: tensor \"%s\" is too large (size overflows)", path, nm);
            numel *= (size_t)t->shape[d];
        }
        if (zero) numel = 0;
        if (numel * 4 > SIZE_MAX - total) return da_errorf("%s: tensors are too large in total", path);
        total += numel * 4; /* at most 4 bytes an element */
        if (numel > 0 && !t->data) return da_errorf("%s: tensor \"%s\" has no data", path, nm);
        for (int j = 0; j < i; j++)
            if (strcmp(ts[j].name, t->name) == 0) return da_errorf("%s: duplicate tensor name \"%s\"", path, nm);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!mk[i] || !mv[i]) return da_errorf("%s: metadata entry %d has a NULL key or value", path, i);
        if (utf8_check((const unsigned char *)mk[i], strlen(mk[i])) != strlen(mk[i]) ||
            utf8_check((const unsigned char *)mv[i], strlen(mv[i])) != strlen(mv[i]))
            return da_errorf("%s: metadata entry \"%s\" is not valid UTF-8", path, printable(nb, sizeof nb, mk[i]));
        if (strlen(mk[i]) >= sizeof(((da_st_meta *)0)->key))
            return da_errorf("%s: metadata key \"%s\" is too long", path, printable(nb, sizeof nb, mk[i]));
        for (int j = 0; j < i; j++)
            if (strcmp(mk[j], mk[i]) == 0)
                return da_errorf("%s: duplicate metadata key \"%s\"", path, printable(nb, sizeof nb, mk[i]));
    }
    return da_ok();
}

/* Writes n floats little-endian. */
static int write_f32_le(FILE *fp, const float *x, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return fwrite(x, 4, n, fp) == n ? 0 : -1;
#else
    unsigned char buf[4096];
    while (n) {
        size_t k = n < sizeof buf / 4 ? n : sizeof buf / 4;
        for (size_t i = 0; i < k; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            for (int b = 0; b < 4; b++) buf[4 * i + b] = (unsigned char)(u >> (8 * b));
        }
        if (fwrite(buf, 4, k, fp) != k) return -1;
        x += k;
        n -= k;
    }
    return 0;
#endif
}

/* x rounded to BF16 or F16 (the GGUF writer's conversion, da_quantize_row), written a block at a time. */
static int write_half_le(FILE *fp, da_st_dtype dtype, const float *x, size_t n) {
    uint16_t buf[4096];
    while (n) {
        size_t k = n < 4096 ? n : 4096;
        da_quantize_row(dtype == DA_ST_BF16 ? DA_QT_BF16 : DA_QT_F16, buf, x, (int64_t)k);
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
        for (size_t i = 0; i < k; i++) buf[i] = (uint16_t)(buf[i] << 8 | buf[i] >> 8);
#endif
        if (fwrite(buf, 2, k, fp) != k) return -1;
        x += k;
        n -= k;
    }
    return 0;
}

da_status da_st_write(const char *path, const da_st_write_tensor *tensors, int n_tensors,
                      const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    return da_st_write_as(path, tensors, n_tensors, DA_ST_F32, meta_keys, meta_values, n_meta);
}

da_status da_st_write_as(const char *path, const da_st_write_tensor *tensors, int n_tensors, da_st_dtype dtype,
                         const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    if (!path) return da_errorf("safetensors: NULL output path");
    if (dtype != DA_ST_F32 && dtype != DA_ST_BF16 && dtype != DA_ST_F16)
        return da_errorf("%s: dtype %s is not written (F32, BF16 or F16)", path, da_st_dtype_name(dtype));
    da_status st = check_write_args(path, tensors, n_tensors, meta_keys, meta_values, n_meta);
    if (st.code) return st;
    char *hdr = build_header(path, tensors, n_tensors, dtype, meta_keys, meta_values, n_meta, &st);
    if (!hdr) return st;
    size_t hl = strlen(hdr);
    size_t pad = (8 - (8 + hl) % 8) % 8; /* spaces, so that the data starts 8-aligned */
    if (hl + pad > DA_ST_MAX_HEADER) { /* a file the reader would refuse: nothing is written */
        free(hdr);
        return da_errorf("%s: the header would be %zu bytes, over the %u bytes a safetensors reader accepts (its "
                         "metadata, such as an embedded tokenizer, is too large)",
                         path, hl + pad, DA_ST_MAX_HEADER);
    }

    da_atomic_file af;
    st = da_atomic_open(&af, path);
    if (st.code) {
        free(hdr);
        return st;
    }
    unsigned char len[8];
    uint64_t n = (uint64_t)(hl + pad);
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
    static const char spaces[] = "        ";
    int bad = fwrite(len, 1, 8, af.fp) != 8 || fwrite(hdr, 1, hl, af.fp) != hl ||
              (pad && fwrite(spaces, 1, pad, af.fp) != pad);
    free(hdr);
    for (int i = 0; i < n_tensors && !bad; i++) {
        size_t numel = 1;
        for (int d = 0; d < tensors[i].ndim; d++) numel *= (size_t)tensors[i].shape[d];
        if (numel)
            bad = (dtype == DA_ST_F32 ? write_f32_le(af.fp, tensors[i].data, numel)
                                      : write_half_le(af.fp, dtype, tensors[i].data, numel)) != 0;
    }
    if (bad) return da_atomic_fail(&af, errno);
    return da_atomic_commit(&af);
}
