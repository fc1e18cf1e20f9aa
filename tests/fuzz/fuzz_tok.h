/* Shared by the tokenizer-file harnesses: what every tokenizer that loads
 * must do. */
#ifndef DA_FUZZ_TOK_H
#define DA_FUZZ_TOK_H

#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer.h"

/* Encodes and decodes a fixed text (scripts, whitespace runs, a special
 * token, invalid UTF-8) and aborts unless it comes back byte for byte, as
 * byte-level BPE promises; then frees t. */
static inline void fz_check_roundtrip_and_free(da_tokenizer *t) {
    static const char text[] = "Hello, world!\n\n  caf\xc3\xa9 <|endoftext|> 123\xff\xfe x";
    int *ids = NULL;
    size_t n_ids = 0, cap = 0, n_out = 0, out_cap = 0;
    uint8_t *out = NULL;
    if (da_tokenizer_encode(t, (const uint8_t *)text, sizeof text - 1, &ids, &n_ids, &cap).code) abort();
    if (da_tokenizer_decode(t, ids, n_ids, &out, &n_out, &out_cap).code) abort();
    if (n_out != sizeof text - 1 || memcmp(out, text, n_out)) abort();
    free(ids);
    free(out);
    da_tokenizer_free(t);
}

#endif
