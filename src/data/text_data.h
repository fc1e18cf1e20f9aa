/* Training data: token windows for the train loop, from either
 *  - text: a file or every regular file below a folder (sorted by path), read as
 *    bytes (vocabulary 256) and split into train (head) and validation (tail);
 *  - token shards: a folder written by `diffattn prepare` (train_*.bin and
 *    val_*.bin, see shard.h), mapped read-only with no copy. */
#ifndef DA_TEXT_DATA_H
#define DA_TEXT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/model.h"

typedef struct {
    const uint32_t *tok;
    size_t n;
} da_token_span;

typedef struct {
    da_token_span *spans; /* train spans, then validation spans */
    int n_train_spans, n_val_spans;
    size_t n_train, n_val; /* tokens in each split */
    int vocab_size;        /* 256 for text; the shards' vocabulary otherwise */
    int from_shards;
    uint32_t *owned;       /* text: the tokens */
    void **maps;           /* shards: the mappings */
    size_t *map_sizes;
    int n_maps;
    int n_files;
} da_text_data;

/* Both splits must hold a window of seq_len + 1 tokens; the error says how
 * much is needed otherwise. val_fraction applies to text only (shards carry
 * their own split). */
da_status da_text_data_load(da_text_data *d, const char *path, float val_fraction, int seq_len);
void da_text_data_free(da_text_data *d);
/* 1 when path is a folder of token shards. */
int da_data_is_shards(const char *path);
/* The vocabulary the data needs: its shards' vocab_size, or 256 for text
 * (also when the shard header cannot be read: loading reports that). */
int da_data_vocab_size(const char *path);

/* tokens, targets: (B, T), windows of the train split at offsets drawn from
 * rng; targets are the tokens shifted by one. */
void da_text_data_sample(const da_text_data *d, da_rng *rng, int B, int T, int *tokens, int *targets);
/* Draws n windows from rng exactly as da_text_data_sample(n) would, and
 * keeps the windows j with j % stride == phase, in order: rank `phase` of
 * `stride` ranks gets its disjoint share of the batch one process would draw.
 * tokens, targets: (ceil((n - phase) / stride), T). */
void da_text_data_sample_strided(const da_text_data *d, da_rng *rng, int n, int phase, int stride, int T,
                                 int *tokens, int *targets);
/* The i-th of n_windows evenly spaced windows of the validation split, a
 * fixed set, so every evaluation scores the same text. */
void da_text_data_val_window(const da_text_data *d, long i, long n_windows, int T, int *tokens, int *targets);

#endif
