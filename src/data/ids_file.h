/* Token-id text files: whitespace-separated decimal ids, one sequence. */
#ifndef DA_IDS_FILE_H
#define DA_IDS_FILE_H

#include <stddef.h>

#include "diffattn/model.h"

/* *ids is malloc'd. Every id must lie in [0, vocab_size); the error names
 * the file, the position and the offending text. */
da_status da_ids_read(const char *path, int vocab_size, int **ids, int *n);

/* Writes ids space-separated on one line, atomically: on any failure (a full
 * disk, a file size limit) the previous file at path is untouched. */
da_status da_ids_write(const char *path, const int *ids, size_t n);

#endif
