/* Token shards: a 24-byte header, then n_tokens little-endian uint32 ids.
 * `diffattn prepare` writes DIR/train_NNNNNN.bin and DIR/val_NNNNNN.bin plus
 * the tokenizer's files; documents are separated by the end-of-text token. */
#ifndef DA_SHARD_H
#define DA_SHARD_H

#include <stdint.h>

#define DA_SHARD_MAGIC 0x4b544144u /* "DATK" */
#define DA_SHARD_VERSION 1u

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t vocab_size;
    uint32_t reserved; /* 0 */
    uint64_t n_tokens;
} da_shard_header;
_Static_assert(sizeof(da_shard_header) == 24, "da_shard_header layout changed");

#endif
