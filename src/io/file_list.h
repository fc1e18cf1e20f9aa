/* The regular files under a list of paths, each folder walked in name order. */
#ifndef DA_FILE_LIST_H
#define DA_FILE_LIST_H

#include <stddef.h>

#include "diffattn/model.h"

typedef struct {
    char **path;
    size_t *size;
    int n, cap;
} file_list;

/* Appends path (a file) or every regular file below it (a folder, sorted,
 * hidden entries skipped). */
da_status da_file_list_add(file_list *fl, const char *path);
void da_file_list_free(file_list *fl);

#endif
