/* Token-id text files: whitespace-separated decimal ids, one sequence. */
#ifndef DA_IDS_FILE_H
#define DA_IDS_FILE_H

#include "diffattn/model.h"

/* *ids is malloc'd. Every id must lie in [0, vocab_size); the error names
 * the file, the position and the offending text. */
da_status da_ids_read(const char *path, int vocab_size, int **ids, int *n);

#endif
