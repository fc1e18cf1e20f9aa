/* Byte-level BPE (GPT-2 style): GPT-2's pre-tokenisation regex (PCRE2, UTF +
 * Unicode properties, invalid UTF-8 left to a byte fallback), rank-ordered
 * merges, special tokens matched before the regex. Loads GPT-2's
 * encoder.json + vocab.bpe pair and Hugging Face byte-level BPE
 * tokenizer.json files. */
#ifndef DA_TOKENIZER_H
#define DA_TOKENIZER_H

/* GPT-2's pre-tokenisation pattern (tiktoken's "gpt2" spelling), for PCRE2 with UTF and UCP. */
extern const char *const DA_GPT2_PATTERN;
/* The Split patterns of Llama 3's, Qwen2/3's and GPT-4o's tokenizer.json files. */
extern const char *const DA_LLAMA3_PATTERN, *const DA_QWEN2_PATTERN, *const DA_O200K_PATTERN;

#include <stddef.h>
#include <stdint.h>

#include "diffattn/tokenizer.h"

/* The tokenizer API is in diffattn/tokenizer.h; these are its internals,
 * shared with BPE training and prepare. */

/* Pieces of n bytes or more are merged with a heap (O(n log n)) rather than
 * by scanning (O(n^2), faster when short); both give the same ids. For tests,
 * which compare the two; the default is 257. */
void da_tokenizer_set_heap_from(da_tokenizer *t, size_t n);

/* GPT-2 writes every byte as one printable code point: these bytes stand for
 * themselves, the other 68 map to U+0100 onwards, in byte order. Fills both
 * directions (cp_to_byte is -1 outside the alphabet). */
void da_gpt2_byte_alphabet(int byte_to_cp[256], int cp_to_byte[512]);

/* A byte-level BPE tokenizer.json with GPT-2's pre-tokeniser, printed: the
 * vocabulary (an object of token -> id), the merges (an array of "a b") and
 * the added_tokens array. Takes the three (NULL ones included) and frees
 * them; returns NULL when out of memory. */
struct cJSON;
char *da_tok_bytelevel_json(struct cJSON *vocab, struct cJSON *merges, struct cJSON *added);

/* Where to cut the first n bytes of a longer text so that encoding the text
 * before the cut and the text after it (to the end, whatever follows b[n])
 * gives the ids of the whole: a place in the second half, b[n/2+1 .. n-1],
 * where whitespace follows a non-space character, searched backwards from
 * the end. Returns 0 when there is none (a caller reads more text and tries
 * again). da_safe_cut knows GPT-2's pattern only; da_tokenizer_safe_cut
 * knows t's (GPT-2's, Llama 3's, Qwen's, GPT-4o's; for any other pattern it
 * returns 0, so a caller encodes the text whole) and keeps t's special
 * tokens whole. */
size_t da_safe_cut(const uint8_t *b, size_t n);
size_t da_tokenizer_safe_cut(const da_tokenizer *t, const uint8_t *b, size_t n);

#endif
