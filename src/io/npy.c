/* NumPy .npy float32 reader and writer (see npy.h). */
#include "io/npy.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/atomic_file.h"
#include "diffattn/formats.h"

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
#define NPY_ALIGN 64
#define NPY_MAX_HEADER (1u << 20) /* real headers are ~100 bytes; a larger one is corrupt */

static int little_endian_host(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

da_status da_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape) {
    if (!path) return da_errorf("npy: NULL output path");
    if (ndim < 0 || ndim > DA_NPY_MAX_DIMS)
        return da_errorf("%s: %d dims, expected 0 to %d", path, ndim, DA_NPY_MAX_DIMS);
    if (ndim > 0 && !shape) return da_errorf("%s: no shape given for %d dims", path, ndim);

    /* The dict numpy writes, then spaces and '\n' up to the 64-byte boundary. */
    char hdr[512];
    int len = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    size_t numel = 1;
    int zero = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return da_errorf("%s: shape[%d] = %" PRId64 " is negative", path, d, shape[d]);
        if (shape[d] == 0) zero = 1;
        /* Python's tuple repr: (), (3,), (2, 3) */
        len += snprintf(hdr + len, sizeof hdr - (size_t)len, "%s%" PRId64 "%s", d ? ", " : "", shape[d],
                        ndim == 1 ? "," : "");
    }
    for (int d = 0; d < ndim && !zero; d++) {
        if ((uint64_t)shape[d] > (SIZE_MAX / 4) / numel) return da_errorf("%s: array is too large", path);
        numel *= (size_t)shape[d];
    }
    if (zero) numel = 0;
    if (numel > 0 && !data) return da_errorf("%s: no data given for %zu elements", path, numel);
    len += snprintf(hdr + len, sizeof hdr - (size_t)len, "), }");
    size_t total = 10 + (size_t)len + 1; /* magic+version+u16 length, dict, '\n' */
    size_t pad = (NPY_ALIGN - total % NPY_ALIGN) % NPY_ALIGN;
    memset(hdr + len, ' ', pad);
    len += (int)pad;
    hdr[len++] = '\n';

    unsigned char pre[10];
    memcpy(pre, npy_magic, 6);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)(len & 0xFF);
    pre[9] = (unsigned char)(len >> 8);

    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    int bad = fwrite(pre, 1, 10, af.fp) != 10 || fwrite(hdr, 1, (size_t)len, af.fp) != (size_t)len;
    if (!bad && numel) {
        if (little_endian_host()) {
            bad = fwrite(data, 4, numel, af.fp) != numel;
        } else {
            for (size_t i = 0; i < numel && !bad; i++) {
                uint32_t u;
                unsigned char b[4];
                memcpy(&u, &data[i], 4);
                for (int k = 0; k < 4; k++) b[k] = (unsigned char)(u >> (8 * k));
                bad = fwrite(b, 1, 4, af.fp) != 4;
            }
        }
    }
    if (bad) return da_atomic_fail(&af, errno);
    return da_atomic_commit(&af);
}

/* ---------------------------------------------------------------- reader */

/* A cursor over the header dict, a Python literal such as
 * {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } */
typedef struct {
    const char *s, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->s < c->end && isspace((unsigned char)*c->s)) c->s++;
}

static int accept(cursor *c, char ch) {
    skip_ws(c);
    if (c->s < c->end && *c->s == ch) {
        c->s++;
        return 1;
    }
    return 0;
}

/* A quoted string ('...' or "...", no escapes) into out. */
static int parse_str(cursor *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->s >= c->end || (*c->s != '\'' && *c->s != '"')) return -1;
    char q = *c->s++;
    size_t n = 0;
    while (c->s < c->end && *c->s != q) {
        if (*c->s == '\\' || n + 1 >= cap) return -1;
        out[n++] = *c->s++;
    }
    if (c->s >= c->end) return -1;
    c->s++;
    out[n] = 0;
    return 0;
}

static int parse_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->s) < n || memcmp(c->s, w, n) != 0) return 0;
    c->s += n;
    return 1;
}

static int parse_shape(cursor *c, int *ndim, int64_t *shape) {
    if (!accept(c, '(')) return -1;
    *ndim = 0;
    for (;;) {
        if (accept(c, ')')) return 0;
        skip_ws(c);
        if (c->s >= c->end || !isdigit((unsigned char)*c->s)) return -1;
        int64_t v = 0;
        while (c->s < c->end && isdigit((unsigned char)*c->s)) {
            if (v > (INT64_MAX - 9) / 10) return -1;
            v = v * 10 + (*c->s++ - '0');
        }
        if (c->s < c->end && *c->s == 'L') c->s++; /* Python 2 long */
        if (*ndim >= DA_NPY_MAX_DIMS) return -2;
        shape[(*ndim)++] = v;
        if (accept(c, ',')) continue;
        if (accept(c, ')')) return *ndim == 1 ? -1 : 0; /* "(3)" is not a tuple */
        return -1;
    }
}

static da_status parse_dict(const char *path, const char *h, size_t n, int *ndim, int64_t *shape) {
    cursor c = {h, h + n};
    int have_descr = 0, have_fo = 0, have_shape = 0;
    if (!accept(&c, '{')) return da_errorf("%s: npy header is not a dict", path);
    for (;;) {
        if (accept(&c, '}')) break;
        char key[32], val[32];
        if (parse_str(&c, key, sizeof key) != 0 || !accept(&c, ':'))
            return da_errorf("%s: npy header: cannot parse a key at byte %zu", path, (size_t)(c.s - h));
        if (strcmp(key, "descr") == 0 && !have_descr) {
            have_descr = 1;
            if (parse_str(&c, val, sizeof val) != 0)
                return da_errorf("%s: npy header: 'descr' is not a string", path);
            if (strcmp(val, "<f4") != 0)
                return da_errorf("%s: dtype '%s', expected '<f4' (little-endian float32); convert with "
                                 "a.astype('<f4')", path, val);
        } else if (strcmp(key, "fortran_order") == 0 && !have_fo) {
            have_fo = 1;
            if (parse_word(&c, "True"))
                return da_errorf("%s: fortran_order is True, expected a C-order array (np.ascontiguousarray)", path);
            if (!parse_word(&c, "False"))
                return da_errorf("%s: npy header: 'fortran_order' is not True or False", path);
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            have_shape = 1;
            int r = parse_shape(&c, ndim, shape);
            if (r == -2) return da_errorf("%s: shape has more than %d dims", path, DA_NPY_MAX_DIMS);
            if (r != 0) return da_errorf("%s: npy header: 'shape' is not a tuple of non-negative integers", path);
        } else {
            return da_errorf("%s: npy header: unexpected or repeated key '%s'", path, key);
        }
        if (accept(&c, ',')) continue;
        if (accept(&c, '}')) break;
        return da_errorf("%s: npy header: expected ',' or '}' at byte %zu", path, (size_t)(c.s - h));
    }
    skip_ws(&c);
    if (c.s != c.end) return da_errorf("%s: npy header: trailing bytes after the dict", path);
    if (!have_descr || !have_fo || !have_shape)
        return da_errorf("%s: npy header lacks '%s'", path,
                         !have_descr ? "descr" : !have_fo ? "fortran_order" : "shape");
    return da_ok();
}

/* The magic, the version and the header length, checked against the file's
 * size: *pre_len bytes precede the header of *hlen bytes. */
static da_status read_preamble(const char *path, FILE *fp, uint64_t fsize, uint64_t *pre_len, uint64_t *hlen) {
    unsigned char pre[12];
    if (fsize < 10 || fread(pre, 1, 10, fp) != 10)
        return da_errorf("%s: file is %" PRIu64 " bytes, too short for a .npy file", path, fsize);
    if (memcmp(pre, npy_magic, 6) != 0) return da_errorf("%s: bad magic, not a .npy file", path);
    if (pre[6] == 1 && pre[7] == 0) {
        *hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
        *pre_len = 10;
    } else if (pre[6] == 2 && pre[7] == 0) {
        if (fsize < 12 || fread(pre + 10, 1, 2, fp) != 2)
            return da_errorf("%s: file is too short for a .npy 2.0 header", path);
        *hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
        *pre_len = 12;
    } else {
        return da_errorf("%s: .npy version %d.%d, expected 1.0 or 2.0", path, pre[6], pre[7]);
    }
    if (*hlen > NPY_MAX_HEADER) return da_errorf("%s: npy header length is absurd (over %u bytes)", path, NPY_MAX_HEADER);
    if (*hlen > fsize - *pre_len)
        return da_errorf("%s: npy header length exceeds the file; the file may be truncated", path);
    return da_ok();
}

/* The element count of the shape, which the `have` data bytes must hold exactly. */
static da_status check_data_size(const char *path, int nd, const int64_t *shp, uint64_t have, uint64_t *out) {
    uint64_t numel = 1;
    int zero = 0;
    for (int d = 0; d < nd; d++)
        if (shp[d] == 0) zero = 1;
    for (int d = 0; d < nd && !zero; d++) {
        if ((uint64_t)shp[d] > (UINT64_MAX / 4) / numel) return da_errorf("%s: shape is too large", path);
        numel *= (uint64_t)shp[d];
    }
    if (zero) numel = 0;
    if (have != numel * 4)
        return da_errorf("%s: data is %" PRIu64 " bytes, but the shape needs %" PRIu64 "%s", path, have, numel * 4,
                         have < numel * 4 ? "; the file may be truncated" : "");
    if (numel * 4 > SIZE_MAX - 1) return da_errorf("%s: array is too large for this machine", path);
    *out = numel;
    return da_ok();
}

da_status da_npy_read_f32(const char *path, float **data, int *ndim, int64_t shape[DA_NPY_MAX_DIMS]) {
    *data = NULL;
    *ndim = 0;
    da_status open_st;
    FILE *fp = da_fopen_regular(path, &open_st);
    if (!fp) return open_st;
    da_status st = da_ok();
    char *hdr = NULL;
    float *buf = NULL;
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0) {
        st = da_errorf("%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    uint64_t hlen = 0, pre_len = 0;
    if ((st = read_preamble(path, fp, fsize, &pre_len, &hlen)).code) goto done;
    hdr = malloc((size_t)hlen + 1);
    if (!hdr) {
        st = da_errorf("%s: out of memory", path);
        goto done;
    }
    if (fread(hdr, 1, (size_t)hlen, fp) != (size_t)hlen) {
        st = da_errorf("%s: read failed in the header", path);
        goto done;
    }
    hdr[hlen] = 0;
    int64_t shp[DA_NPY_MAX_DIMS];
    int nd = 0;
    st = parse_dict(path, hdr, (size_t)hlen, &nd, shp);
    if (st.code) goto done;

    uint64_t numel = 0;
    if ((st = check_data_size(path, nd, shp, fsize - pre_len - hlen, &numel)).code) goto done;
    buf = malloc(numel ? (size_t)numel * 4 : 1);
    if (!buf) {
        st = da_errorf("%s: out of memory for %" PRIu64 " floats", path, numel);
        goto done;
    }
    if (numel && fread(buf, 4, (size_t)numel, fp) != (size_t)numel) {
        st = da_errorf("%s: read failed in the data (file changed while reading?)", path);
        goto done;
    }
    if (!little_endian_host()) {
        unsigned char *b = (unsigned char *)buf;
        for (uint64_t i = 0; i < numel; i++) {
            uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                         (uint32_t)b[4 * i + 3] << 24;
            memcpy(&buf[i], &u, 4);
        }
    }
    *data = buf;
    buf = NULL;
    *ndim = nd;
    for (int d = 0; d < nd; d++) shape[d] = shp[d];
done:
    free(buf);
    free(hdr);
    fclose(fp);
    return st;
}
