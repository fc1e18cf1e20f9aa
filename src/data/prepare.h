/* `diffattn prepare`: stream text files through a tokenizer into token shards
 * (shard.h) with bounded memory, on every core. */
#ifndef DA_PREPARE_H
#define DA_PREPARE_H

#include "diffattn/data.h"
#include "tok/tokenizer.h"

/* The API is in diffattn/data.h. */

#endif
