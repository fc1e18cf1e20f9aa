/* Training a byte-level BPE tokenizer on text files: GPT-2 pre-tokenisation,
 * then merges of the most frequent adjacent pair, counted over unique
 * pre-tokens, updated incrementally. Writes Hugging Face tokenizer.json. */
#ifndef DA_BPE_TRAIN_H
#define DA_BPE_TRAIN_H

#include "diffattn/model.h"

typedef struct {
    int vocab_size;    /* including the 256 byte tokens and <|endoftext|> */
    int min_frequency; /* stop when the best pair is rarer */
    int quiet;
} da_bpe_train_config;

typedef struct {
    double bytes, seconds;
    long unique_words;
    int merges;
} da_bpe_train_stats;

da_status da_bpe_train(const char *const *inputs, int n_inputs, const char *out_path, const da_bpe_train_config *c,
                       da_bpe_train_stats *stats);

#endif
