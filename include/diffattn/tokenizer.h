/* diffattn tokenizers: byte-level BPE (GPT-2 style) loading, encoding,
 * decoding, and training a new one on text files. */
#ifndef DIFFATTN_TOKENIZER_H
#define DIFFATTN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- tokenizer */

/* GPT-2's pre-tokenisation regex, rank-ordered merges, special tokens
 * matched before the regex; any bytes (also invalid UTF-8) encode losslessly. */
typedef struct da_tokenizer da_tokenizer;

/* path: a tokenizer.json (Hugging Face byte-level BPE), an encoder.json
 * (GPT-2's, vocab.bpe beside it), or a folder holding either. */
da_status da_tokenizer_load(da_tokenizer **out, const char *path);
void da_tokenizer_free(da_tokenizer *t);
int da_tokenizer_vocab_size(const da_tokenizer *t);
/* The id of a special token such as "<|endoftext|>", or -1. */
int da_tokenizer_special_id(const da_tokenizer *t, const char *text);
/* Appends the ids of text[0..n) to *ids (grown with realloc; *n_ids and *cap
 * track it). Special tokens in the text become their ids. */
da_status da_tokenizer_encode(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids, size_t *n_ids,
                              size_t *cap);
/* Appends the bytes of ids to *out (grown with realloc). An id outside the
 * vocabulary is an error naming its position. */
da_status da_tokenizer_decode(const da_tokenizer *t, const int *ids, size_t n, uint8_t **out, size_t *n_out,
                              size_t *cap);

/* ---------------------------------------------------------------- training a tokenizer */

/* GPT-2 pre-tokenisation, then merges of the most frequent adjacent pair,
 * counted over unique pre-tokens; writes Hugging Face tokenizer.json. */
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

#ifdef __cplusplus
}
#endif
#endif
