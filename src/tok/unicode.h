/* UTF-8 and Unicode normalisation for the tokenizer. */
#ifndef DA_TOK_UNICODE_H
#define DA_TOK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* The length of the valid UTF-8 character at b[0..n), or 0 when b does not
 * start with one. */
size_t da_utf8_char_len(const uint8_t *b, size_t n);
/* The code point of the UTF-8 character ending at b[end - 1], or -1 when
 * those bytes are not one complete, valid character (a stray continuation
 * byte, an overlong form, a surrogate). */
long da_utf8_char_ending_at(const uint8_t *b, size_t end);
/* NFC of text[0..n) run by run: each maximal run of valid UTF-8 is normalised on its own and the invalid
 * bytes between runs are kept as they are, so an invalid byte anywhere (a trailing \xff) leaves the rest
 * normalised, and the result of a text is that of its pieces (prepare's shards give whole-text encode's
 * ids). Returns 1 when the text is used as it is (every run already NFC), 0 when *out (malloc'd) holds the
 * normalised text, -1 when out of memory. */
int da_nfc_normalize_runs(const uint8_t *text, size_t n, uint8_t **out, size_t *out_n);

#endif
