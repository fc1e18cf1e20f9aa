/* Replays files through a fuzz harness's LLVMFuzzerTestOneInput without
 * libFuzzer, so that `make test` (any compiler, with or without sanitizers)
 * runs the committed corpus and every past crash input. Arguments are files
 * or folders (their regular files, not recursively); a missing folder is
 * skipped, since a target may have no regressions yet. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(fp);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 1;
    }
    /* a copy of exactly n bytes, so that ASan sees a read past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) return 1;
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb)) continue;
        if (!S_ISDIR(sb.st_mode)) {
            bad |= run_file(argv[i]);
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) continue;
        char **names = NULL;
        int n = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                char **nn = realloc(names, (size_t)cap * sizeof *nn);
                if (!nn) return 1;
                names = nn;
            }
            size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[n] = malloc(len);
            if (!names[n]) return 1;
            snprintf(names[n++], len, "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        qsort(names, (size_t)n, sizeof *names, cmp_str);
        for (int k = 0; k < n; k++) {
            if (!stat(names[k], &sb) && S_ISREG(sb.st_mode)) {
                bad |= run_file(names[k]);
                files++;
            }
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %d file(s)\n", files);
    if (files == 0) {
        fprintf(stderr, "no input files: the corpus is missing\n");
        return 1;
    }
    return bad;
}
