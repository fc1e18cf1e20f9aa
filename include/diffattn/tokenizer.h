/* diffattn tokenizers: byte-level BPE (GPT-2 style) loading, encoding,
 * decoding, and training a new one on text files.
 * Implemented in src/tok/tokenizer.c, src/tok/bpe_encode.c, src/tok/tokenizer_embed.c, src/tok/tokenizer_match.c,
 * src/tok/encode_file.c, src/tok/bpe_train.c. */
#ifndef DIFFATTN_TOKENIZER_H
#define DIFFATTN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/core.h"
#include "diffattn/model.h"

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
 * track it). Special tokens in the text become their ids; nothing is added
 * around them (Hugging Face's add_special_tokens=False). */
da_status da_tokenizer_encode(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids, size_t *n_ids,
                              size_t *cap);
/* What Hugging Face's encode(text) gives by default (add_special_tokens
 * true): the ids of da_tokenizer_encode between the tokens that the
 * tokenizer.json's post_processor adds (a TemplateProcessing such as Meta's
 * Llama 3 file puts <|begin_of_text|> first; GPT-2's, Qwen's and GPT-4o's
 * files add none). da_tokenizer_encode never adds them (prepare, training). */
da_status da_tokenizer_encode_add_special(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids,
                                          size_t *n_ids, size_t *cap);
/* What encoding a file took: its bytes and the seconds the encoding itself took (reading aside). */
typedef struct {
    size_t bytes;
    double seconds;
} da_encode_stats;
/* The ids of a whole file (*ids allocated, the caller frees): with the
 * post_processor's tokens when add_special (da_tokenizer_encode_add_special),
 * else without (da_tokenizer_encode). An empty file is an error. stats may be NULL. */
da_status da_tokenizer_encode_file(const da_tokenizer *t, const char *path, int add_special, int **ids,
                                   size_t *n_ids, da_encode_stats *stats);
/* Appends the bytes of ids to *out (grown with realloc). An id outside the
 * vocabulary is an error naming its position. */
da_status da_tokenizer_decode(const da_tokenizer *t, const int *ids, size_t n, uint8_t **out, size_t *n_out,
                              size_t *cap);

/* ---------------------------------------------------------------- the tokenizer of a model */

/* A model file carries the tokenizer of its ids (docs/formats.md): the
 * Hugging Face tokenizer.json text, in safetensors __metadata__ and in GGUF.
 * This is that text: the file it was loaded from, or, for GPT-2's
 * encoder.json + vocab.bpe, the equivalent tokenizer.json. *n gets its
 * length (n may be NULL). */
const char *da_tokenizer_json(const da_tokenizer *t, size_t *n);
/* llama.cpp's name (its tokenizer.ggml.pre) for the pre-tokeniser of tokenizer.json text: "gpt-2", "llama-bpe",
 * "qwen2" or "gpt-4o", the four diffattn and llama.cpp split alike; NULL for another, which a GGUF then carries
 * without a name, so that llama.cpp splits text with its default and gives other ids than diffattn. */
const char *da_tokenizer_llama_pre(const char *json, size_t n);
/* A tokenizer from tokenizer.json text; name is used in messages. */
da_status da_tokenizer_from_json(da_tokenizer **out, const char *json, size_t n, const char *name);
/* 1 when a and b give every id the same bytes and have the same special
 * tokens and merges (so the same ids for any text under one pre-tokeniser). */
int da_tokenizer_same(const da_tokenizer *a, const da_tokenizer *b);
/* The rule that a model and the ids given to it share one tokenizer: ok when
 * either is NULL (bytes, or a file from before tokenizers were embedded) or
 * when da_tokenizer_same holds; otherwise an error
 * "<given_name> (N tokens) differs from <own_name> (M tokens)[: <hint>]". Every
 * place where a model meets data, a tokenizer file or shards checks this. */
da_status da_tokenizer_match(const da_tokenizer *given, const char *given_name, const da_tokenizer *own,
                             const char *own_name, const char *hint);
/* The tokenizer a model carries (m->tokenizer_json), or *out = NULL when it
 * carries none (a byte-level model, or a file from before tokenizers were
 * embedded). An embedded tokenizer whose vocabulary differs from the model's
 * is an error naming both sizes. */
da_status da_model_tokenizer(const da_model *m, da_tokenizer **out);

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
