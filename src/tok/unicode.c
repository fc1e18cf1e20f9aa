/* UTF-8 and NFC for the tokenizer (unicode.h); NFC through ICU. */
#include <stdlib.h>
#include <string.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "tok/unicode.h"

size_t da_utf8_char_len(const uint8_t *b, size_t n) {
    unsigned c = b[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len <= 1 || len > n) return len == 1;
    long cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((b[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (b[i] & 0x3F);
    }
    static const long min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    return cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ? 0 : len;
}

long da_utf8_char_ending_at(const uint8_t *b, size_t end) {
    size_t s = end - 1, k = 1;
    while (k < 4 && s > 0 && (b[s] & 0xC0) == 0x80) s--, k++;
    unsigned c = b[s];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len != k) return -1;
    if (len == 1) return c;
    long cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) cp = cp << 6 | (b[s + i] & 0x3F);
    static const long min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    return cp;
}

/* NFC of text[0..n) into *out (malloc'd). Returns 1 when the text is used
 * as it is: already NFC (ASCII always is), or not valid UTF-8 (whose bytes
 * then encode losslessly, unnormalised); 0 when *out holds the NFC form;
 * -1 when out of memory. */
static int nfc_normalize(const uint8_t *text, size_t n, uint8_t **out, size_t *out_n) {
    size_t i = 0;
    while (i < n && text[i] < 0x80) i++;
    if (i == n || n > INT32_MAX / 2) return 1;
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2 *nfc = unorm2_getNFCInstance(&err);
    if (U_FAILURE(err)) return 1;
    int32_t n16 = 0;
    u_strFromUTF8(NULL, 0, &n16, (const char *)text, (int32_t)n, &err);
    if (err != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(err)) return 1; /* invalid UTF-8 */
    err = U_ZERO_ERROR;
    UChar *src = malloc(((size_t)n16 + 1) * sizeof(UChar));
    if (!src) return -1;
    u_strFromUTF8(src, n16 + 1, NULL, (const char *)text, (int32_t)n, &err);
    int rc = 1;
    UChar *dst = NULL;
    if (U_SUCCESS(err) && unorm2_quickCheck(nfc, src, n16, &err) != UNORM_YES && U_SUCCESS(err)) {
        int32_t nd = unorm2_normalize(nfc, src, n16, NULL, 0, &err);
        err = U_ZERO_ERROR;
        dst = malloc(((size_t)nd + 1) * sizeof(UChar));
        if (!dst) rc = -1;
        else {
            unorm2_normalize(nfc, src, n16, dst, nd + 1, &err);
            int32_t n8 = 0;
            if (U_SUCCESS(err)) u_strToUTF8(NULL, 0, &n8, dst, nd, &err);
            if (err == U_BUFFER_OVERFLOW_ERROR || U_SUCCESS(err)) {
                err = U_ZERO_ERROR;
                *out = malloc((size_t)n8 + 1);
                if (!*out) rc = -1;
                else {
                    u_strToUTF8((char *)*out, n8 + 1, NULL, dst, nd, &err);
                    if (U_SUCCESS(err)) *out_n = (size_t)n8, rc = 0;
                    else free(*out);
                }
            }
        }
    }
    free(src);
    free(dst);
    return rc;
}

int da_nfc_normalize_runs(const uint8_t *text, size_t n, uint8_t **out, size_t *out_n) {
    size_t i = 0;
    while (i < n && text[i] < 0x80) i++;
    if (i == n) return 1;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, done = 0; /* text[0..done) is in buf (once buf exists) */
    for (size_t r = 0; r < n;) {
        size_t e = r, w;
        while (e < n && (w = da_utf8_char_len(text + e, n - e))) e += w; /* the valid run [r, e) */
        uint8_t *norm = NULL;
        size_t nn = 0;
        const int rc = e > r ? nfc_normalize(text + r, e - r, &norm, &nn) : 1;
        if (rc < 0) {
            free(buf);
            return -1;
        }
        if (rc == 0) { /* the run changes: buf takes the text up to it, then its NFC */
            const size_t need = len + (r - done) + nn + (n - e);
            if (need > cap) {
                uint8_t *b2 = realloc(buf, need + 1);
                if (!b2) {
                    free(norm);
                    free(buf);
                    return -1;
                }
                buf = b2, cap = need;
            }
            memcpy(buf + len, text + done, r - done);
            len += r - done;
            memcpy(buf + len, norm, nn);
            len += nn;
            done = e;
            free(norm);
        }
        r = e < n ? e + 1 : n; /* past one invalid byte */
    }
    if (!buf) return 1;
    memcpy(buf + len, text + done, n - done);
    *out = buf;
    *out_n = len + (n - done);
    return 0;
}
