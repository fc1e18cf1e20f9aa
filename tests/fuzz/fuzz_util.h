/* Shared by the fuzz harnesses. Readers that take a path get the fuzz input
 * as a file in a private temporary folder, made once per process and removed
 * at exit. */
#ifndef DA_FUZZ_UTIL_H
#define DA_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FZ_MAX_FILES 8

static char fz_dir_path[512];
static char fz_files[FZ_MAX_FILES][600];
static int fz_n_files;

static inline void fz_cleanup(void) {
    for (int i = 0; i < fz_n_files; i++) unlink(fz_files[i]);
    if (fz_dir_path[0]) rmdir(fz_dir_path);
}

/* The private folder; a harness that cannot make it has nothing to test. */
static inline const char *fz_dir(void) {
    if (!fz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fz_dir_path, sizeof fz_dir_path, "%s/dafuzz.XXXXXX", t && t[0] ? t : "/tmp");
        if (!mkdtemp(fz_dir_path)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fz_cleanup);
    }
    return fz_dir_path;
}

/* Writes n bytes to fz_dir()/name (replacing it) and returns its path. */
static inline const char *fz_write(const char *name, const uint8_t *data, size_t n) {
    static char path[600];
    snprintf(path, sizeof path, "%s/%s", fz_dir(), name);
    int known = 0;
    for (int i = 0; i < fz_n_files; i++) known |= !strcmp(fz_files[i], path);
    if (!known && fz_n_files < FZ_MAX_FILES) snprintf(fz_files[fz_n_files++], sizeof fz_files[0], "%s", path);
    FILE *fp = fopen(path, "wb");
    if (!fp || (n && fwrite(data, 1, n, fp) != n) || fclose(fp)) {
        perror(path);
        abort();
    }
    return path;
}

#endif
