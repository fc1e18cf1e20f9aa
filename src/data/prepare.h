/* `diffattn prepare`: stream text files through a tokenizer into token shards
 * (shard.h) with bounded memory, on every core. */
#ifndef DA_PREPARE_H
#define DA_PREPARE_H

#include "diffattn/model.h"
#include "tok/tokenizer.h"

typedef struct {
    float val_fraction;  /* the tail of the input, by bytes, goes to val_*.bin; in (0, 1) */
    long shard_tokens;   /* tokens per shard at most */
    int chunk_bytes;     /* text encoded per task (cut at a line end) */
    int quiet;           /* no progress display */
} da_prepare_config;

typedef struct {
    long files, empty_files;
    double bytes, seconds;
    long long train_tokens, val_tokens;
    int train_shards, val_shards;
} da_prepare_stats;

void da_prepare_config_default(da_prepare_config *pc);
/* tokenizer_path is copied into out_dir next to the shards. */
da_status da_prepare(const char *tokenizer_path, const char *const *inputs, int n_inputs, const char *out_dir,
                     const da_prepare_config *pc, da_prepare_stats *stats);

#endif
