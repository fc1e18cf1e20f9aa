/* A whole file through a tokenizer, timed (da_tokenizer_encode_file). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "diffattn/formats.h"
#include "diffattn/tokenizer.h"

static da_status read_all(const char *path, uint8_t **data, size_t *n) {
    da_status open_st;
    FILE *fp = da_fopen_regular(path, &open_st);
    if (!fp) return open_st;
    size_t cap = 1 << 20, len = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int err = ferror(fp);
    fclose(fp);
    if (!buf) return da_errorf("%s: out of memory", path);
    if (err) {
        free(buf);
        return da_errorf("%s: read error", path);
    }
    *data = buf;
    *n = len;
    return da_ok();
}

da_status da_tokenizer_encode_file(const da_tokenizer *t, const char *path, int add_special, int **ids,
                                   size_t *n_ids, da_encode_stats *stats) {
    *ids = NULL;
    *n_ids = 0;
    uint8_t *text = NULL;
    size_t n = 0, cap = 0;
    da_status st = read_all(path, &text, &n);
    if (!st.code && n == 0) st = da_errorf("%s: the file is empty; nothing to encode", path);
    if (!st.code) {
        const double t0 = da_now_s();
        st = add_special ? da_tokenizer_encode_add_special(t, text, n, ids, n_ids, &cap)
                         : da_tokenizer_encode(t, text, n, ids, n_ids, &cap);
        if (stats) *stats = (da_encode_stats){n, da_now_s() - t0};
    }
    free(text);
    if (st.code) {
        free(*ids);
        *ids = NULL;
        *n_ids = 0;
    }
    return st;
}
