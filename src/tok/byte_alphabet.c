/* GPT-2's byte alphabet: every byte written as one printable code point. */
#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer.h"
#include "tok/tokenizer_internal.h"

/* GPT-2 writes every byte as one printable code point: these bytes stand for
 * themselves, the other 68 map to U+0100 onwards, in byte order. */
void da_gpt2_byte_alphabet(int byte_to_cp[256], int cp_to_byte[512]) {
    int n = 0;
    for (int i = 0; i < 512; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_cp[b] = printable ? b : 256 + n++;
        cp_to_byte[byte_to_cp[b]] = b;
    }
}

/* UTF-8 of a token string in GPT-2's alphabet -> raw bytes (malloc'd). */
int da_gpt2_token_bytes(const char *s, const int cp_to_byte[512], uint8_t **out, uint32_t *len) {
    size_t n = strlen(s);
    uint8_t *b = malloc(n + 1);
    if (!b) return -1;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = (uint8_t)s[i];
        int cp, w;
        if (c < 0x80) cp = (int)c, w = 1;
        else if ((c & 0xE0) == 0xC0 && i + 1 < n) cp = (int)((c & 0x1F) << 6 | ((uint8_t)s[i + 1] & 0x3F)), w = 2;
        else {
            free(b);
            return -1;
        }
        if (cp >= 512 || cp_to_byte[cp] < 0) {
            free(b);
            return -1;
        }
        b[k++] = (uint8_t)cp_to_byte[cp];
        i += (size_t)w;
    }
    *out = b;
    *len = (uint32_t)k;
    return 0;
}
