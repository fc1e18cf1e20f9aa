/* Reading a byte corpus from a file or folder. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/text_data.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static da_status append_file(da_text_data *d, size_t *cap, const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return da_errorf("%s: cannot open: %s", path, strerror(errno));
    char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, fp)) > 0) {
        if (d->n + got > *cap) {
            size_t nc = *cap ? *cap * 2 : 1 << 20;
            while (nc < d->n + got) nc *= 2;
            uint8_t *nb = realloc(d->bytes, nc);
            if (!nb) {
                fclose(fp);
                return da_errorf("%s: out of memory reading the corpus (%zu bytes so far)", path, d->n);
            }
            d->bytes = nb;
            *cap = nc;
        }
        memcpy(d->bytes + d->n, buf, got);
        d->n += got;
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) return da_errorf("%s: read error", path);
    d->n_files++;
    return da_ok();
}

static da_status read_dir(da_text_data *d, size_t *cap, const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return da_errorf("%s: cannot open folder: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, ncap = 0;
    struct dirent *e;
    da_status st = da_ok();
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        if (n == ncap) {
            ncap = ncap ? 2 * ncap : 64;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn) { st = da_errorf("%s: out of memory listing files", dir); break; }
            names = nn;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n]) { st = da_errorf("%s: out of memory listing files", dir); break; }
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(dp);
    if (!st.code && n > 1) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && !st.code; i++) {
        struct stat sb;
        if (stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) st = append_file(d, cap, names[i]);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

da_status da_text_data_load(da_text_data *d, const char *path, float val_fraction, int seq_len) {
    memset(d, 0, sizeof *d);
    if (!(val_fraction > 0 && val_fraction < 1))
        return da_errorf("--val-fraction %g must be in (0, 1)", (double)val_fraction);
    struct stat sb;
    if (stat(path, &sb)) return da_errorf("%s: %s", path, strerror(errno));
    size_t cap = 0;
    da_status st = S_ISDIR(sb.st_mode) ? read_dir(d, &cap, path) : append_file(d, &cap, path);
    if (st.code) {
        da_text_data_free(d);
        return st;
    }
    if (d->n == 0) {
        da_text_data_free(d);
        return da_errorf("%s: no text (%s)", path, S_ISDIR(sb.st_mode) ? "the folder has no non-empty regular files" : "the file is empty");
    }
    size_t n_val = (size_t)((double)d->n * val_fraction);
    d->n_train = d->n - n_val;
    size_t need = (size_t)seq_len + 1;
    if (d->n_train < need || n_val < need) {
        size_t total_needed = (size_t)((double)need / (val_fraction < 0.5 ? val_fraction : 1 - val_fraction)) + 1;
        size_t have = d->n;
        da_text_data_free(d);
        return da_errorf("%s: %zu bytes of text is too little for windows of %d tokens with validation fraction %g "
                         "(need at least %zu bytes; use more text or a smaller --seq)",
                         path, have, seq_len, (double)val_fraction, total_needed);
    }
    return da_ok();
}

void da_text_data_free(da_text_data *d) {
    free(d->bytes);
    memset(d, 0, sizeof *d);
}

static void fill_window(const uint8_t *src, int T, int *tokens, int *targets) {
    for (int t = 0; t < T; t++) {
        tokens[t] = src[t];
        targets[t] = src[t + 1];
    }
}

void da_text_data_sample(const da_text_data *d, da_rng *rng, int B, int T, int *tokens, int *targets) {
    uint64_t span = d->n_train - (size_t)T; /* start offsets 0 .. n_train - T - 1 */
    for (int b = 0; b < B; b++) {
        uint64_t off = da_rng_next(rng) % span;
        fill_window(d->bytes + off, T, tokens + (size_t)b * T, targets + (size_t)b * T);
    }
}

void da_text_data_val_window(const da_text_data *d, long i, long n_windows, int T, int *tokens, int *targets) {
    size_t n_val = d->n - d->n_train;
    size_t span = n_val - (size_t)T - 1; /* last valid start offset */
    size_t off = n_windows > 1 ? (size_t)((double)span * (double)i / (double)(n_windows - 1)) : 0;
    fill_window(d->bytes + d->n_train + off, T, tokens, targets);
}
