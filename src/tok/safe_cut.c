/* Where a text may be cut so that its chunks encode to the ids of the whole
 * (tokenizer.h). */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "tok/tokenizer.h"
#include "tok/tokenizer_internal.h"
#include "tok/unicode.h"

/* Every code point the pre-tokeniser may take for whitespace (\s under
 * PCRE2_UCP: the Z categories and the ASCII controls), and a few more: being
 * too careful here only costs a cut. */
static int maybe_space(long cp) {
    if (cp <= 0x20 || cp == 0x7F || cp == 0x85 || cp == 0xA0 || cp == 0x1680 || cp == 0x180E) return 1;
    return (cp >= 0x2000 && cp <= 0x200B) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000 || cp == 0xFEFF;
}

/* A cut before b[c] keeps every pre-token when b[c] is a space, tab or line
 * end and b[c - 1] ends a complete character that is certainly not
 * whitespace. No alternative of the
 * GPT-2 pattern holds both a non-space character and a following whitespace
 * one (the optional space comes first, the whitespace runs hold nothing
 * else), so the pre-token of b[c - 1] ends at c whatever follows; and the
 * pattern has no look-behind, so matching from c sees the same text either
 * way. Llama 3's, Qwen's and GPT-4o's patterns keep line ends after
 * punctuation (".\n" is one pre-token): there only a space or a tab. */
static int cut_keeps_pieces(cut_rule rule, const uint8_t *b, size_t c) {
    if (rule == CUT_NONE) return 0;
    if (b[c] != ' ' && b[c] != '\t' && (rule == CUT_SPACE_TAB || (b[c] != '\n' && b[c] != '\r'))) return 0;
    long cp = da_utf8_char_ending_at(b, c);
    return cp >= 0 && !maybe_space(cp);
}

size_t da_safe_cut(const uint8_t *b, size_t n) {
    for (size_t c = n ? n - 1 : 0; c > n / 2; c--)
        if (cut_keeps_pieces(CUT_ANY_SPACE, b, c)) return c;
    return 0;
}

size_t da_tokenizer_safe_cut(const da_tokenizer *t, const uint8_t *b, size_t n) {
    if (t->cut == CUT_NONE) return 0;
    size_t longest = 0;
    for (int i = 0; i < t->n_special; i++)
        if (t->tok_len[t->special_id[i]] > longest) longest = t->tok_len[t->special_id[i]];
    /* a special token that starts before n may end after it: keep the cut
     * far enough from n that any special token across it is seen whole */
    size_t hi = n > longest ? n - longest : 0;
    for (size_t c = hi ? hi - 1 : 0; c > n / 2; c--) {
        if (!cut_keeps_pieces(t->cut, b, c)) continue;
        int across = 0;
        for (int i = 0; i < t->n_special && !across; i++) {
            const uint8_t *s = t->tok[t->special_id[i]];
            size_t len = t->tok_len[t->special_id[i]];
            if (len < 2) continue;
            size_t from = c + 1 >= len ? c + 1 - len : 0; /* occurrences starting in [from, c) cross c */
            const uint8_t *hit = memmem(b + from, c - from + len - 1, s, len);
            across = hit != NULL;
        }
        if (!across) return c;
    }
    return 0;
}
