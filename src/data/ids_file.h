/* Token-id text files: whitespace-separated decimal ids, one sequence. */
#ifndef DA_IDS_FILE_H
#define DA_IDS_FILE_H

#include "diffattn/data.h"

/* da_ids_read and da_ids_write are in diffattn/data.h. */

#endif
