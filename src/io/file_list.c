/* Walking input paths into a sorted list of regular files. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diffattn/formats.h"
#include "io/file_list.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static da_status add_path(file_list *fl, const char *path, int depth) {
    struct stat sb;
    if (stat(path, &sb)) return da_errorf("%s: %s", path, strerror(errno));
    if (S_ISREG(sb.st_mode)) {
        if (fl->n == fl->cap) {
            fl->cap = fl->cap ? 2 * fl->cap : 64;
            char **p = realloc(fl->path, (size_t)fl->cap * sizeof *p);
            size_t *s = realloc(fl->size, (size_t)fl->cap * sizeof *s);
            if (p) fl->path = p;
            if (s) fl->size = s;
            if (!p || !s) return da_errorf("out of memory listing inputs");
        }
        fl->path[fl->n] = strdup(path);
        fl->size[fl->n++] = (size_t)sb.st_size;
        return fl->path[fl->n - 1] ? da_ok() : da_errorf("out of memory");
    }
    if (!S_ISDIR(sb.st_mode)) {
        if (depth > 0) return da_ok(); /* a folder's FIFOs, sockets, devices: not text */
        da_status st; /* named as an input: refused, saying what it is */
        const int fd = da_open_regular(path, &st);
        if (fd >= 0) close(fd); /* a regular file swapped in since the stat: skipped */
        return st;
    }
    if (depth > 32) return da_errorf("%s: folders nest too deeply", path);
    DIR *dp = opendir(path);
    if (!dp) return da_errorf("%s: cannot open folder: %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    da_status st = da_ok();
    while ((e = readdir(dp)) && !st.code) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) { st = da_errorf("out of memory"); break; }
            names = nn;
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) { st = da_errorf("out of memory"); break; }
        snprintf(names[n++], len, "%s/%s", path, e->d_name);
    }
    closedir(dp);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && !st.code; i++) st = add_path(fl, names[i], depth + 1);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

da_status da_file_list_add(file_list *fl, const char *path) { return add_path(fl, path, 0); }

void da_file_list_free(file_list *fl) {
    for (int i = 0; i < fl->n; i++) free(fl->path[i]);
    free(fl->path);
    free(fl->size);
    memset(fl, 0, sizeof *fl);
}
