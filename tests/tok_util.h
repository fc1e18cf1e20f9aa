/* Writes a byte-level BPE tokenizer.json by hand: the 256 byte tokens in
 * GPT-2's alphabet with id = byte value, then the merges and specials given. */
#ifndef DA_TEST_TOK_UTIL_H
#define DA_TEST_TOK_UTIL_H

#include <stdio.h>

/* extra_vocab: `"token":id,` entries (may be ""); merges: JSON array body;
 * pre_tokenizer, post_processor: JSON values, or NULL to leave the key out. */
static inline int write_tokenizer_json(const char *path, const char *pre_tokenizer, const char *post_processor,
                                const char *added_tokens, const char *extra_vocab, const char *merges) {
    FILE *fp = fopen(path, "w");
    if (!fp) return -1;
    fprintf(fp, "{\"version\":\"1.0\",\"added_tokens\":[%s],", added_tokens);
    if (pre_tokenizer) fprintf(fp, "\"pre_tokenizer\":%s,", pre_tokenizer);
    if (post_processor) fprintf(fp, "\"post_processor\":%s,", post_processor);
    fprintf(fp, "\"model\":{\"type\":\"BPE\",\"vocab\":{");
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

/* The same without pre_tokenizer (GPT-2's pattern) and post_processor. */
static inline int write_byte_tokenizer(const char *path, const char *added_tokens, const char *extra_vocab,
                                const char *merges) {
    return write_tokenizer_json(path, NULL, NULL, added_tokens, extra_vocab, merges);
}

/* A pre_tokenizer JSON value: Sequence [Split (regex, behavior, invert),
 * ByteLevel without its regex], as Llama 3's and GPT-4o's files write it.
 * regex: the pattern itself (its backslashes are escaped here). Returns buf. */
static inline const char *split_pre_tokenizer(char *buf, size_t cap, const char *regex, const char *behavior,
                                              int invert) {
    char esc[2048];
    size_t k = 0;
    for (const char *c = regex; *c && k + 2 < sizeof esc; c++) {
        if (*c == '\\' || *c == '"') esc[k++] = '\\';
        esc[k++] = *c;
    }
    esc[k] = 0;
    snprintf(buf, cap,
             "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"%s\"},"
             "\"behavior\":\"%s\",\"invert\":%s},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
             "\"trim_offsets\":true,\"use_regex\":false}]}",
             esc, behavior, invert ? "true" : "false");
    return buf;
}

#endif
