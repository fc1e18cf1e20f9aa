/* The pre-tokenisers' regexes: the patterns of GPT-2, Llama 3, Qwen and
 * GPT-4o and where text may be cut under each, the check that refuses
 * patterns whose splitting is quadratic, compiling (PCRE2), and one search
 * whose work is bounded by the bytes it settles. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "tok/tokenizer.h"
#include "tok/tokenizer_internal.h"

/* GPT-2's pre-tokenisation pattern (tiktoken's "gpt2" spelling). */
const char *const DA_GPT2_PATTERN = "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* The Split patterns of Llama 3, Qwen2/3 and GPT-4o, as their tokenizer.json files spell them. */
#define LLAMA3_RE \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define O200K_RE \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|" \
    "'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|" \
    "'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

const char *const DA_LLAMA3_PATTERN = LLAMA3_RE, *const DA_QWEN2_PATTERN = QWEN2_RE, *const DA_O200K_PATTERN = O200K_RE;

/* The Split patterns whose safe cuts are known, as tokenizer.json files spell
 * them. Each alternative that holds a non-space character holds no space or
 * tab after it, and (ANY_SPACE) no line end either; none has a look-behind,
 * so matching from a cut sees the same text as matching the whole. */
static const struct {
    const char *pattern;
    cut_rule cut;
} known_patterns[] = {
    /* GPT-2's, as Hugging Face's ByteLevel writes it */
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", CUT_ANY_SPACE},
    /* Llama 3 (and GPT-4's cl100k) */
    {LLAMA3_RE, CUT_SPACE_TAB},
    /* Qwen2 and Qwen3 */
    {QWEN2_RE, CUT_SPACE_TAB},
    /* GPT-4o's o200k */
    {O200K_RE, CUT_SPACE_TAB},
};

static cut_rule cut_rule_of(const char *pattern) {
    if (!strcmp(pattern, DA_GPT2_PATTERN)) return CUT_ANY_SPACE;
    for (size_t i = 0; i < sizeof known_patterns / sizeof known_patterns[0]; i++)
        if (!strcmp(pattern, known_patterns[i].pattern)) return known_patterns[i].cut;
    return CUT_NONE;
}

/* {n,} at p. */
static int unbounded_braces(const char *p) {
    if (*p++ != '{' || !isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
    return p[0] == ',' && p[1] == '}';
}

/* The offset of an unbounded quantifier (*, +, {n,}) inside a lookaround
 * ((?=, (?!, (?<=, (?<!) of pattern, or -1. Such a lookaround may scan to
 * the end of the text at every match, which makes splitting quadratic
 * (\w+(?=.*Z): 2.3 s on 100 KB); the pre-tokenisers of real models look
 * ahead one character class ((?!\S)). */
static long unbounded_lookaround(const char *pattern) {
    int depth = 0, look_depth = 0; /* group depth; the depth of the outermost open lookaround, 0 when none */
    int in_class = 0;
    for (const char *p = pattern; *p; p++) {
        if (*p == '\\') {
            if (p[1]) p++;
            continue;
        }
        if (in_class) {
            in_class = *p != ']';
            continue;
        }
        if (*p == '[') {
            in_class = 1;
            if (p[1] == ']' || (p[1] == '^' && p[2] == ']')) p += p[1] == '^' ? 2 : 1; /* a leading ] is literal */
            continue;
        }
        if (*p == '(') {
            depth++;
            if (!look_depth && p[1] == '?' && (p[2] == '=' || p[2] == '!' || (p[2] == '<' && (p[3] == '=' || p[3] == '!'))))
                look_depth = depth;
        } else if (*p == ')') {
            if (depth == look_depth) look_depth = 0;
            if (depth > 0) depth--;
        } else if (look_depth && (*p == '*' || *p == '+' || unbounded_braces(p))) {
            return (long)(p - pattern);
        }
    }
    return -1;
}

da_status da_tok_compile_regex(da_tokenizer *t, const char *pattern) {
    const long at = unbounded_lookaround(pattern);
    if (at >= 0)
        return da_errorf("the pre-tokeniser pattern \"%.60s\" repeats without bound inside a lookaround (offset "
                         "%ld): splitting would take time quadratic in the text; not supported",
                         pattern, at);
    t->cut = cut_rule_of(pattern);
    snprintf(t->pattern, sizeof t->pattern, "%s", pattern);
    int err;
    PCRE2_SIZE off;
    t->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, NULL);
    if (!t->re) {
        PCRE2_UCHAR why[120];
        pcre2_get_error_message(err, why, sizeof why);
        return da_errorf("PCRE2 cannot compile the pre-tokeniser pattern \"%.60s\" (%s at offset %zu)", pattern,
                         (const char *)why, (size_t)off);
    }
    /* optional: falls back to the interpreter; partial matching for da_tok_match_bounded's windows */
    pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
    return da_ok();
}

/* The work of one search, bounded by the bytes it settles. A search from `from` settles the bytes up to the end
 * of its match, or, finding none, those it searched. It runs on a window of the text, [0, from + W), as a hard
 * partial match (a search that reaches the window's end asks for more text), and under a PCRE2 match limit
 * of L steps (backtracking). Each starts small (MATCH_WINDOW, MATCH_STEPS) and doubles when the search needs
 * it; a result stands when the bytes it settles pay for the window and the limit it took: at least W / 8
 * bytes for a window past the first, L / (2 * MATCH_STEPS_PER_BYTE) for a limit past the first. The work of
 * one search, its retries included, is then at most a constant a settled byte: a pattern that scans far for a
 * short match (a*b|. on a run of a: each position scans to the end, quadratic in the text) or backtracks
 * without bound ((?:(a|aa)+c)|., ^(\w+\s?)*$) is refused, not run. The patterns of GPT-2, Llama 3, Qwen
 * and GPT-4o settle what they scan, in a few steps a byte. */
#define MATCH_WINDOW 4096u
#define MATCH_STEPS 20000u

int da_tok_match_bounded(const da_tokenizer *t, const uint8_t *text, size_t n, size_t from, pcre2_match_data *md,
                         pcre2_match_context *mc, size_t *searched, uint32_t *limit, size_t *window) {
    size_t W = MATCH_WINDOW;
    uint32_t L = MATCH_STEPS;
    *window = 0;
    pcre2_set_depth_limit(mc, MATCH_DEPTH_LIMIT);
    for (;;) {
        size_t end = n - from > W ? from + W : n;
        while (end < n && end > from + 1 && (text[end] & 0xC0) == 0x80) end--; /* a window ends between characters */
        const uint32_t opt = end < n ? PCRE2_PARTIAL_HARD : 0;
        pcre2_set_match_limit(mc, L);
        *limit = L;
        int rc = pcre2_match(t->re, text, end, from, opt, md, mc);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* a very long piece: the interpreter has no such limit */
            rc = pcre2_match(t->re, text, end, from, opt | PCRE2_NO_JIT, md, mc);
        if (rc == PCRE2_ERROR_PARTIAL) { /* the search reached the window's end: more text */
            W *= 2;
            continue;
        }
        if (rc == PCRE2_ERROR_MATCHLIMIT && (double)L < (double)MATCH_STEPS_PER_BYTE * (double)(end - from + 1) * 2) {
            L = L > UINT32_MAX / 2 ? UINT32_MAX : 2 * L;
            continue;
        }
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) return rc;
        const size_t settled = (rc >= 0 ? pcre2_get_ovector_pointer(md)[1] : end) - from;
        if (L > MATCH_STEPS && (double)settled * MATCH_STEPS_PER_BYTE * 2 < (double)L) return PCRE2_ERROR_MATCHLIMIT;
        if (W > MATCH_WINDOW && settled * 8 < W) {
            *window = W / 2;
            return PCRE2_ERROR_MATCHLIMIT;
        }
        *searched = end;
        return rc;
    }
}
