/* Reading token-id text files. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/ids_file.h"
#include "io/atomic_file.h"
#include "diffattn/formats.h"

da_status da_ids_read(const char *path, int vocab_size, int **ids, int *n) {
    *ids = NULL;
    *n = 0;
    da_status open_st;
    FILE *fp = da_fopen_regular(path, &open_st);
    if (!fp) return open_st;
    int cap = 0, count = 0, *buf = NULL;
    char word[64];
    da_status st = da_ok();
    for (;;) {
        int c;
        while ((c = fgetc(fp)) != EOF && isspace(c)) {}
        if (c == EOF) break;
        int len = 0, too_long = 0;
        while (c != EOF && !isspace(c)) {
            if (len < (int)sizeof word - 1) word[len++] = (char)c;
            else too_long = 1;
            c = fgetc(fp);
        }
        word[len] = 0;
        if (too_long) { /* cutting it would read another number than the one written */
            st = da_errorf("%s: id #%d \"%.20s...\" is longer than %d characters; not a token id", path, count + 1,
                           word, (int)sizeof word - 1);
            break;
        }
        char *end;
        errno = 0;
        long v = strtol(word, &end, 10);
        if (errno || end == word || end != word + len) { /* a NUL byte ends the text strtol sees */
            char shown[sizeof word];
            for (int i = 0; i <= len; i++) shown[i] = word[i] && isprint((unsigned char)word[i]) ? word[i] : i < len ? '?' : 0;
            st = da_errorf("%s: id #%d \"%s\" is not an integer", path, count + 1, shown);
            break;
        }
        if (v < 0 || v >= vocab_size) {
            st = da_errorf("%s: id #%d = %ld is outside the vocabulary [0, %d)", path, count + 1, v, vocab_size);
            break;
        }
        if (count == cap) {
            if (cap > INT_MAX / 2) { st = da_errorf("%s: more than %d ids", path, INT_MAX / 2); break; }
            cap = cap ? 2 * cap : 256;
            int *nb = realloc(buf, (size_t)cap * sizeof *nb);
            if (!nb) { st = da_errorf("%s: out of memory", path); break; }
            buf = nb;
        }
        buf[count++] = (int)v;
    }
    if (!st.code && ferror(fp)) st = da_errorf("%s: read error", path);
    fclose(fp);
    if (!st.code && count == 0) st = da_errorf("%s: no token ids (expected whitespace-separated integers)", path);
    if (st.code) {
        free(buf);
        return st;
    }
    *ids = buf;
    *n = count;
    return da_ok();
}

da_status da_ids_write(const char *path, const int *ids, size_t n) {
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    for (size_t i = 0; i < n; i++) fprintf(af.fp, i + 1 < n ? "%d " : "%d", ids[i]);
    fputc('\n', af.fp);
    return da_atomic_commit(&af); /* reports a failed fprintf through ferror */
}

da_status da_bytes_write(const char *path, const void *bytes, size_t n) {
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    if (n && fwrite(bytes, 1, n, af.fp) != n) return da_atomic_fail(&af, errno ? errno : EIO);
    return da_atomic_commit(&af);
}
