/* Token-id text files: whitespace-separated decimal ids, one sequence. */
#ifndef DA_IDS_FILE_H
#define DA_IDS_FILE_H

<<<<<<< HEAD
#include <stddef.h>

#include "diffattn/model.h"
=======
#include "diffattn/data.h"
>>>>>>> main

/* da_ids_read is in diffattn/data.h. */

/* Writes ids space-separated on one line, atomically: on any failure (a full
 * disk, a file size limit) the previous file at path is untouched. */
da_status da_ids_write(const char *path, const int *ids, size_t n);

#endif
