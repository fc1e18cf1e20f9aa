/* Writes a byte-level BPE tokenizer.json by hand: the 256 byte tokens in
 * GPT-2's alphabet with id = byte value, then the merges and specials given. */
#ifndef DA_TEST_TOK_UTIL_H
#define DA_TEST_TOK_UTIL_H

#include <stdio.h>

/* extra_vocab: `"token":id,` entries (may be ""); merges: JSON array body. */
static int write_byte_tokenizer(const char *path, const char *added_tokens, const char *extra_vocab,
                                const char *merges) {
    FILE *fp = fopen(path, "w");
    if (!fp) return -1;
    fprintf(fp, "{\"version\":\"1.0\",\"added_tokens\":[%s],\"model\":{\"type\":\"BPE\",\"vocab\":{", added_tokens);
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        int cp = printable ? b : 256 + n++;
        char u[8];
        if (cp < 0x80) snprintf(u, sizeof u, "%c", cp);
        else snprintf(u, sizeof u, "%c%c", 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F));
        fprintf(fp, "%s\"%s%s\":%d", b ? "," : "", cp == '"' || cp == '\\' ? "\\" : "", u, b);
    }
    fprintf(fp, "%s%s},\"merges\":[%s]}}", extra_vocab[0] ? "," : "", extra_vocab, merges);
    return fclose(fp);
}

#endif
