/* The tokenizer's insides, shared by the files of src/tok/ that build it
 * (tokenizer.c, vocab.c, tokenizer_json_read.c, gpt2_files.c) and use it
 * (bpe_encode.c, safe_cut.c). */
#ifndef DA_TOK_TOKENIZER_INTERNAL_H
#define DA_TOK_TOKENIZER_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <cjson/cJSON.h>
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "diffattn/tokenizer.h"
#include "tok/token_maps.h"

#define MAX_SPECIAL 1024 /* Llama 3 declares 256 */
#define MAX_ADDED_AROUND 16 /* ids a post_processor may add before, and after, the text's */

/* Where a text may be cut into chunks that encode to the ids of the whole
 * (da_tokenizer_safe_cut): before whitespace that follows a non-space
 * character, for the patterns whose pre-tokens never hold a non-space
 * character followed by that whitespace. */
typedef enum {
    CUT_NONE,      /* a pattern not known here: never cut (each document is encoded whole) */
    CUT_SPACE_TAB, /* before ' ' or '\t': Llama 3, Qwen, GPT-4o (their " ?[^\s\p{L}\p{N}]+[\r\n]*" keeps
                    * the line ends that follow punctuation) */
    CUT_ANY_SPACE, /* before ' ', '\t', '\n' or '\r': GPT-2's pattern */
} cut_rule;

struct da_tokenizer {
    char *json; /* the Hugging Face tokenizer.json text it was made from (GPT-2's pair: converted) */
    size_t json_len;
    int vocab_size;
    uint8_t **tok;     /* (vocab) raw bytes of each id; NULL for unused ids */
    uint32_t *tok_len; /* (vocab) */
    int byte_id[256];  /* the id of each single byte */
    bytes_map vocab;   /* raw bytes -> id (ordinary tokens) */
    pair_map merges;
    int n_special;
    int special_id[MAX_SPECIAL];
    int cp_to_byte[512]; /* GPT-2's byte alphabet, inverted */
    pcre2_code *re;
    char pattern[80];  /* the start of the regex, for messages */
    /* From a tokenizer.json (Hugging Face's semantics): */
    int ignore_merges; /* model.ignore_merges: a pre-token found whole in the vocabulary is one id */
    int nfc;           /* normalizer NFC: ordinary text is NFC-normalised before pre-tokenisation */
    int drop_gaps;     /* Split with invert true and behavior Removed: text the regex does not match is dropped */
    cut_rule cut;      /* where da_tokenizer_safe_cut may cut, from the pattern */
    /* post_processor: the ids Hugging Face's encode(text) puts before and
     * after the text's by default (add_special_tokens true) */
    int pre[MAX_ADDED_AROUND], n_pre, post[MAX_ADDED_AROUND], n_post;
    size_t heap_from;  /* pieces this long or longer use bpe_piece_heap */
};

/* The id of the ordinary token whose bytes are b[0..n), or -1. */
static inline int da_tok_bytes_id(const da_tokenizer *t, const uint8_t *b, size_t n) {
    return da_bytes_map_get(&t->vocab, t->tok, t->tok_len, b, n);
}

/* ---------------------------------------------------------------- byte_alphabet.c */

/* UTF-8 of a token string in GPT-2's alphabet -> raw bytes (malloc'd); -1
 * when s holds a character outside the alphabet or memory runs out. */
int da_gpt2_token_bytes(const char *s, const int cp_to_byte[512], uint8_t **out, uint32_t *len);

/* ---------------------------------------------------------------- vocab.c */

#define MAX_TOKEN_ID 16777215

/* The whole file at path, NUL-terminated (malloc'd). */
da_status da_tok_read_file(const char *path, char **data, size_t *n);
/* A JSON number that is an integer id in [0, MAX_TOKEN_ID]. */
int da_tok_is_token_id(const cJSON *j);
/* t's tokens from vocab (an object token -> id) and added (added_tokens, or
 * NULL for GPT-2's encoder.json); errors name path. */
da_status da_tok_build_vocab(da_tokenizer *t, const char *path, cJSON *vocab, const cJSON *added);
/* The merge line[0..len) ("a b", GPT-2's alphabet) of rank `rank` into t->merges. */
da_status da_tok_add_merge(da_tokenizer *t, const char *path, const char *line, size_t len, int rank);

/* ---------------------------------------------------------------- pretokenizer.c */

/* Compiles the pre-tokeniser's regex (GPT-2's, or a tokenizer.json Split's)
 * into t->re, and sets t->cut from it; refuses a pattern whose splitting
 * would be quadratic. */
da_status da_tok_compile_regex(da_tokenizer *t, const char *pattern);

/* The limits of a search (pretokenizer.c says how they bound its work), which errors report. */
#define MATCH_STEPS_PER_BYTE 1000u
#define MATCH_DEPTH_LIMIT 10000u

/* rc >= 0: a match, in md's ovector; PCRE2_ERROR_NOMATCH: none starts before *searched (n: none at all);
 * PCRE2_ERROR_MATCHLIMIT with *limit the steps it passed, or *window (> 0) the bytes it scanned for a short
 * result; another PCRE2 error. */
int da_tok_match_bounded(const da_tokenizer *t, const uint8_t *text, size_t n, size_t from, pcre2_match_data *md,
                         pcre2_match_context *mc, size_t *searched, uint32_t *limit, size_t *window);

/* ---------------------------------------------------------------- tokenizer_json_read.c, gpt2_files.c */

/* Fills t (its byte alphabet set) from the tokenizer.json text t->json, or,
 * when t->json is NULL, from the file at path, whose text t then keeps. */
da_status da_tok_read_hf(da_tokenizer *t, const char *path);
/* Fills t (its byte alphabet set) from GPT-2's encoder.json and vocab.bpe;
 * t->json gets the equivalent tokenizer.json. */
da_status da_tok_read_gpt2(da_tokenizer *t, const char *enc_path, const char *bpe_path);

#endif
