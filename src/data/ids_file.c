/* Reading token-id text files. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/ids_file.h"

da_status da_ids_read(const char *path, int vocab_size, int **ids, int *n) {
    *ids = NULL;
    *n = 0;
    FILE *fp = fopen(path, "r");
    if (!fp) return da_errorf("%s: cannot open: %s", path, strerror(errno));
    int cap = 0, count = 0, *buf = NULL;
    char word[64];
    da_status st = da_ok();
    for (;;) {
        int c;
        while ((c = fgetc(fp)) != EOF && isspace(c)) {}
        if (c == EOF) break;
        int len = 0;
        while (c != EOF && !isspace(c)) {
            if (len < (int)sizeof word - 1) word[len++] = (char)c;
            c = fgetc(fp);
        }
        word[len] = 0;
        char *end;
        errno = 0;
        long v = strtol(word, &end, 10);
        if (errno || end == word || *end) {
            st = da_errorf("%s: id #%d \"%s\" is not an integer", path, count + 1, word);
            break;
        }
        if (v < 0 || v >= vocab_size) {
            st = da_errorf("%s: id #%d = %ld is outside the vocabulary [0, %d)", path, count + 1, v, vocab_size);
            break;
        }
        if (count == cap) {
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
