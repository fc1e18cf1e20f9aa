/* Training data: token windows for the train loop, from either
 *  - text: a file or every regular file below a folder (sorted by path), read as
 *    bytes (vocabulary 256) and split into train (head) and validation (tail);
 *  - token shards: a folder written by `diffattn prepare` (train_*.bin and
 *    val_*.bin, see shard.h), mapped read-only with no copy. */
#ifndef DA_TEXT_DATA_H
#define DA_TEXT_DATA_H

#include "diffattn/data.h"
#include "diffattn/rng.h"

/* tokens, targets: (B, T), windows of the train split at offsets drawn from
 * rng; targets are the tokens shifted by one. */
void da_text_data_sample(const da_text_data *d, da_rng *rng, int B, int T, int *tokens, int *targets);
/* Draws n windows from rng exactly as da_text_data_sample(n) would, and
 * keeps the windows j with j % stride == phase, in order: rank `phase` of
 * `stride` ranks gets its disjoint share of the batch one process would draw.
 * tokens, targets: (ceil((n - phase) / stride), T). */
void da_text_data_sample_strided(const da_text_data *d, da_rng *rng, int n, int phase, int stride, int T,
                                 int *tokens, int *targets);
/* The window of the train split that starts at token off (< n_train - T). */
void da_text_data_train_window(const da_text_data *d, size_t off, int T, int *tokens, int *targets);
/* The i-th of n_windows evenly spaced windows of the validation split, a
 * fixed set, so every evaluation scores the same text. */
void da_text_data_val_window(const da_text_data *d, long i, long n_windows, int T, int *tokens, int *targets);

#endif
