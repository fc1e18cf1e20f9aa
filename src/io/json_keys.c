/* Duplicate keys in parsed JSON (json_keys.h). */
#include <stdlib.h>
#include <string.h>

#include "io/json_keys.h"

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

const char *da_json_duplicate_key(const cJSON *o, int *oom) {
    int n = 0;
    for (const cJSON *e = o->child; cJSON_IsObject(o) && e; e = e->next) n++;
    if (n < 2) return NULL;
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names) {
        *oom = 1;
        return NULL;
    }
    n = 0;
    for (const cJSON *e = o->child; e; e = e->next) names[n++] = e->string;
    qsort(names, (size_t)n, sizeof *names, cmp_key);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (!strcmp(names[i - 1], names[i])) dup = names[i];
    free(names);
    return dup;
}
