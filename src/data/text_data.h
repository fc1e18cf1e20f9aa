/* Byte-level text data: a file, or every regular file of a folder (sorted by
 * name), read as bytes (vocabulary 256) and split into train and validation. */
#ifndef DA_TEXT_DATA_H
#define DA_TEXT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn.h"

typedef struct {
    uint8_t *bytes;
    size_t n;       /* total bytes */
    size_t n_train; /* train = [0, n_train), validation = [n_train, n) */
    int n_files;
} da_text_data;

enum { DA_SPLIT_TRAIN = 0, DA_SPLIT_VAL = 1 };

/* Both splits must hold at least seq_len + 1 bytes; the error says how much
 * text is needed otherwise. */
da_status da_text_data_load(da_text_data *d, const char *path, float val_fraction, int seq_len);
void da_text_data_free(da_text_data *d);

/* tokens, targets: (B, T), windows of the train split at offsets drawn from
 * rng; targets are the tokens shifted by one. */
void da_text_data_sample(const da_text_data *d, da_rng *rng, int B, int T, int *tokens, int *targets);
/* The i-th of n_windows evenly spaced windows of the validation split, a
 * fixed set, so every evaluation scores the same text. */
void da_text_data_val_window(const da_text_data *d, long i, long n_windows, int T, int *tokens, int *targets);

#endif
