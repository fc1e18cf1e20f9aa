/* Byte-level BPE (GPT-2 style): GPT-2's pre-tokenisation regex (PCRE2, UTF +
 * Unicode properties, invalid UTF-8 left to a byte fallback), rank-ordered
 * merges, special tokens matched before the regex. Loads GPT-2's
 * encoder.json + vocab.bpe pair and Hugging Face byte-level BPE
 * tokenizer.json files. */
#ifndef DA_TOKENIZER_H
#define DA_TOKENIZER_H

/* GPT-2's pre-tokenisation pattern (tiktoken's "gpt2" spelling), for PCRE2 with UTF and UCP. */
extern const char *const DA_GPT2_PATTERN;

#include <stddef.h>
#include <stdint.h>

#include "diffattn/tokenizer.h"

/* The tokenizer API is in diffattn/tokenizer.h; these are its internals,
 * shared with BPE training and prepare. */

/* GPT-2 writes every byte as one printable code point: these bytes stand for
 * themselves, the other 68 map to U+0100 onwards, in byte order. Fills both
 * directions (cp_to_byte is -1 outside the alphabet). */
void da_gpt2_byte_alphabet(int byte_to_cp[256], int cp_to_byte[512]);

/* Where to cut a buffer of n bytes so that encoding the two parts gives the
 * same ids as the whole (no pre-token spans the cut): after a lone line end
 * between two ASCII non-space bytes, searched backwards from the end; else after
 * the last line end; else before a UTF-8 lead byte. Returns n when nothing
 * fits in the second half. */
size_t da_safe_cut(const uint8_t *b, size_t n);

#endif
