/* Byte-level BPE tokenizer: loading, encoding, decoding (see tokenizer.h). */
#define _GNU_SOURCE /* memmem */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <errno.h>
#include <pcre2.h>
#include <stdint.h>
#include <ctype.h>
#include <stdio.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diffattn/formats.h"
#include "tok/hash.h"
#include "tok/tokenizer.h"

/* GPT-2's pre-tokenisation pattern (tiktoken's "gpt2" spelling). */
const char *const DA_GPT2_PATTERN = "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

#define MAX_SPECIAL 1024 /* Llama 3 declares 256 */
#define MAX_ADDED_AROUND 16 /* ids a post_processor may add before, and after, the text's */

/* Where a text may be cut into chunks that encode to the ids of the whole
 * (da_tokenizer_safe_cut): before whitespace that follows a non-space
 * character, for the patterns whose pre-tokens never hold a non-space
 * character followed by that whitespace. */
typedef enum {
    CUT_NONE,      /* a pattern not known here: never cut (each document is encoded whole) */
    CUT_SPACE_TAB, /* before ' ' or '\t': Llama 3, Qwen, GPT-4o (their " ?[^\s\p{L}\p{N}]+[\r\n]*" keeps
                    * the line ends that follow punctuation) */
    CUT_ANY_SPACE, /* before ' ', '\t', '\n' or '\r': GPT-2's pattern */
} cut_rule;

/* ------------------------------------------------------------ hash maps */

/* bytes -> id, open addressing; keys point into the tokenizer's token bytes. */
typedef struct {
    int32_t *slot; /* id or -1 */
    size_t mask;
} bytes_map;

/* (left, right) -> (rank, merged) */
typedef struct {
    uint64_t *key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t *rank, *merged;
    size_t mask;
} pair_map;

struct da_tokenizer {
    char *json; /* the Hugging Face tokenizer.json text it was made from (GPT-2's pair: converted) */
    size_t json_len;
    int vocab_size;
    uint8_t **tok;     /* (vocab) raw bytes of each id; NULL for unused ids */
    uint32_t *tok_len; /* (vocab) */
    int byte_id[256];  /* the id of each single byte */
    bytes_map vocab;   /* raw bytes -> id (ordinary tokens) */
    pair_map merges;
    int n_special;
    int special_id[MAX_SPECIAL];
    int cp_to_byte[512]; /* GPT-2's byte alphabet, inverted */
    pcre2_code *re;
    char pattern[80];  /* the start of the regex, for messages */
    /* From a tokenizer.json (Hugging Face's semantics): */
    int ignore_merges; /* model.ignore_merges: a pre-token found whole in the vocabulary is one id */
    int nfc;           /* normalizer NFC: ordinary text is NFC-normalised before pre-tokenisation */
    int drop_gaps;     /* Split with invert true and behavior Removed: text the regex does not match is dropped */
    cut_rule cut;      /* where da_tokenizer_safe_cut may cut, from the pattern */
    /* post_processor: the ids Hugging Face's encode(text) puts before and
     * after the text's by default (add_special_tokens true) */
    int pre[MAX_ADDED_AROUND], n_pre, post[MAX_ADDED_AROUND], n_post;
    size_t heap_from;  /* pieces this long or longer use bpe_piece_heap */
};

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

static int bytes_map_init(bytes_map *m, size_t n) {
    size_t cap = pow2_at_least(2 * n);
    m->slot = malloc(cap * sizeof(int32_t));
    if (!m->slot) return -1;
    memset(m->slot, 0xff, cap * sizeof(int32_t));
    m->mask = cap - 1;
    return 0;
}

static int bytes_map_get(const da_tokenizer *t, const uint8_t *b, size_t n) {
    const bytes_map *m = &t->vocab;
    for (size_t i = da_fnv1a(b, n) & m->mask;; i = (i + 1) & m->mask) {
        int32_t id = m->slot[i];
        if (id < 0) return -1;
        if (t->tok_len[id] == n && !memcmp(t->tok[id], b, n)) return id;
    }
}

static void bytes_map_put(da_tokenizer *t, int id) {
    bytes_map *m = &t->vocab;
    size_t i = da_fnv1a(t->tok[id], t->tok_len[id]) & m->mask;
    while (m->slot[i] >= 0) i = (i + 1) & m->mask;
    m->slot[i] = id;
}

static int pair_map_init(pair_map *m, size_t n) {
    size_t cap = pow2_at_least(2 * n + 2);
    m->key = calloc(cap, sizeof(uint64_t));
    m->rank = malloc(cap * sizeof(int32_t));
    m->merged = malloc(cap * sizeof(int32_t));
    m->mask = cap - 1;
    return m->key && m->rank && m->merged ? 0 : -1;
}

static inline uint64_t pair_key(int a, int b) { return ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1; }

/* Returns 0 when added, 1 when the pair was already there (first rank wins). */
static int pair_map_put(pair_map *m, int a, int b, int rank, int merged) {
    uint64_t k = pair_key(a, b);
    size_t i = da_mix64(k) & m->mask;
    while (m->key[i]) {
        if (m->key[i] == k) return 1;
        i = (i + 1) & m->mask;
    }
    m->key[i] = k;
    m->rank[i] = rank;
    m->merged[i] = merged;
    return 0;
}

static inline int pair_map_get(const pair_map *m, int a, int b, int *merged) {
    uint64_t k = pair_key(a, b);
    for (size_t i = da_mix64(k) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->key[i]) return -1;
        if (m->key[i] == k) {
            *merged = m->merged[i];
            return m->rank[i];
        }
    }
}

/* ------------------------------------------------------------ GPT-2 byte alphabet */

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
static int token_bytes(const char *s, const int cp_to_byte[512], uint8_t **out, uint32_t *len) {
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

/* ------------------------------------------------------------ loading */

/* Far above any real tokenizer.json (Gemma 3's, among the largest, is 33 MB). */
#define MAX_TOKENIZER_FILE ((size_t)1 << 30)

static da_status read_file(const char *path, char **data, size_t *n) {
    return da_read_regular(path, MAX_TOKENIZER_FILE, data, n);
}

static da_status add_merge(da_tokenizer *t, const char *path, const char *line, size_t len, int rank) {
    const int *cp_to_byte = t->cp_to_byte;
    char buf[1024];
    if (len >= sizeof buf) return da_errorf("%s: merge #%d is too long", path, rank + 1);
    memcpy(buf, line, len);
    buf[len] = 0;
    char *sp = strchr(buf, ' ');
    if (!sp || strchr(sp + 1, ' ')) return da_errorf("%s: merge #%d \"%s\" is not two tokens", path, rank + 1, buf);
    *sp = 0;
    uint8_t *a = NULL, *b = NULL;
    uint32_t la, lb;
    if (token_bytes(buf, cp_to_byte, &a, &la) || token_bytes(sp + 1, cp_to_byte, &b, &lb)) {
        free(a); /* the first may have converted */
        return da_errorf("%s: merge #%d has characters outside GPT-2's byte alphabet", path, rank + 1);
    }
    uint8_t ab[2048];
    memcpy(ab, a, la);
    memcpy(ab + la, b, lb);
    int ia = bytes_map_get(t, a, la), ib = bytes_map_get(t, b, lb), iab = bytes_map_get(t, ab, la + lb);
    free(a);
    free(b);
    if (ia < 0 || ib < 0 || iab < 0)
        return da_errorf("%s: merge #%d (\"%s\" + \"%s\") refers to a token missing from the vocabulary", path,
                         rank + 1, buf, sp + 1);
    pair_map_put(&t->merges, ia, ib, rank, iab);
    return da_ok();
}

#define MAX_TOKEN_ID 16777215

/* A JSON number that is an integer id in [0, MAX_TOKEN_ID]. */
static int is_token_id(const cJSON *j) {
    return cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble <= MAX_TOKEN_ID &&
           j->valuedouble == (double)(int)j->valuedouble;
}

/* vocab: object token -> id; specials: names that are special tokens. */
static da_status build_vocab(da_tokenizer *t, const char *path, cJSON *vocab, const cJSON *added) {
    const int *cp_to_byte = t->cp_to_byte;
    int max_id = -1, count = 0, n_added = 0;
    for (cJSON *e = vocab->child; e; e = e->next) {
        if (!is_token_id(e)) return da_errorf("%s: vocabulary entry \"%.40s\" has no valid id", path, e->string);
        if ((int)e->valuedouble > max_id) max_id = (int)e->valuedouble;
        count++;
    }
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next, n_added++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!is_token_id(id) || !cJSON_IsString(c))
            return da_errorf("%s: added_tokens[%d] lacks an id in [0, %d] or a content string", path, n_added,
                             MAX_TOKEN_ID);
        if ((int)id->valuedouble > max_id) max_id = (int)id->valuedouble;
    }
    if (count == 0) return da_errorf("%s: the vocabulary is empty", path);
    /* The id arrays are sized by the largest id: bound it by the tokens the
     * file defines, so that a few bytes cannot claim gigabytes. */
    const long defined = (long)count + n_added, limit = 2 * defined + 1024;
    if (max_id >= limit)
        return da_errorf("%s: id %d is far beyond the %ld tokens the file defines (ids must stay below %ld; is an id "
                         "in model.vocab or added_tokens wrong?)",
                         path, max_id, defined, limit);
    t->vocab_size = max_id + 1;
    t->tok = calloc((size_t)t->vocab_size, sizeof(uint8_t *));
    t->tok_len = calloc((size_t)t->vocab_size, sizeof(uint32_t));
    if (!t->tok || !t->tok_len || bytes_map_init(&t->vocab, (size_t)count))
        return da_errorf("%s: out of memory", path);
    /* specials first: their text is not in the byte alphabet in general */
    n_added = 0;
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next, n_added++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "special");
        if (sp && !cJSON_IsTrue(sp)) continue;
        if (t->n_special == MAX_SPECIAL) return da_errorf("%s: more than %d special tokens", path, MAX_SPECIAL);
        int i = (int)id->valuedouble; /* checked above */
        if (t->tok[i]) /* which of the two Hugging Face keeps depends on its version */
            return da_errorf("%s: added_tokens[%d] \"%.40s\" has id %d, which an earlier added token (\"%.40s\") "
                             "holds: keep one",
                             path, n_added, c->valuestring, i, (const char *)t->tok[i]);
        t->tok_len[i] = (uint32_t)strlen(c->valuestring);
        t->tok[i] = (uint8_t *)strdup(c->valuestring);
        if (!t->tok[i] || !t->tok_len[i]) return da_errorf("%s: empty or unallocatable special token", path);
        t->special_id[t->n_special++] = i;
    }
    for (cJSON *e = vocab->child; e; e = e->next) {
        int id = (int)e->valuedouble;
        if (t->tok[id]) {
            int special = 0;
            for (int s = 0; s < t->n_special; s++) special |= t->special_id[s] == id;
            if (special) continue;
            return da_errorf("%s: id %d appears twice in the vocabulary", path, id);
        }
        /* GPT-2's encoder.json lists its one special token among the others */
        if (!added && !strcmp(e->string, "<|endoftext|>")) {
            if (t->n_special == MAX_SPECIAL) return da_errorf("%s: more than %d special tokens", path, MAX_SPECIAL);
            t->tok[id] = (uint8_t *)strdup(e->string);
            if (!t->tok[id]) return da_errorf("%s: out of memory", path);
            t->tok_len[id] = (uint32_t)strlen(e->string);
            t->special_id[t->n_special++] = id;
            continue;
        }
        if (token_bytes(e->string, cp_to_byte, &t->tok[id], &t->tok_len[id]) || t->tok_len[id] == 0)
            return da_errorf("%s: token \"%.40s\" (id %d) has characters outside GPT-2's byte alphabet "
                             "(only byte-level BPE is supported)",
                             path, e->string, id);
        if (bytes_map_get(t, t->tok[id], t->tok_len[id]) >= 0)
            return da_errorf("%s: token \"%.40s\" appears twice", path, e->string);
        bytes_map_put(t, id);
    }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = bytes_map_get(t, &c, 1);
        if (t->byte_id[b] < 0)
            return da_errorf("%s: the vocabulary lacks the single byte 0x%02x (not a byte-level BPE?)", path, b);
    }
    return da_ok();
}

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

/* pattern: the pre-tokeniser's regex (GPT-2's, or a tokenizer.json Split's). */
static da_status compile_regex(da_tokenizer *t, const char *pattern) {
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
    /* optional: falls back to the interpreter; partial matching for match_bounded's windows */
    pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
    return da_ok();
}

char *da_tok_bytelevel_json(cJSON *vocab, cJSON *merges, cJSON *added) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *pre = cJSON_CreateObject();
    int ok = root && model && pre && vocab && merges && added;
    ok = ok && cJSON_AddStringToObject(root, "version", "1.0") && cJSON_AddItemToObject(root, "added_tokens", added);
    if (ok) added = NULL;
    ok = ok && cJSON_AddNullToObject(root, "normalizer") && cJSON_AddStringToObject(pre, "type", "ByteLevel") &&
         cJSON_AddBoolToObject(pre, "add_prefix_space", 0) && cJSON_AddBoolToObject(pre, "use_regex", 1) &&
         cJSON_AddItemToObject(root, "pre_tokenizer", pre);
    if (ok) pre = NULL;
    ok = ok && cJSON_AddStringToObject(model, "type", "BPE") && cJSON_AddItemToObject(model, "vocab", vocab);
    if (ok) vocab = NULL;
    ok = ok && cJSON_AddItemToObject(model, "merges", merges);
    if (ok) merges = NULL;
    ok = ok && cJSON_AddItemToObject(root, "model", model);
    if (ok) model = NULL;
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    cJSON_Delete(model);
    cJSON_Delete(pre);
    cJSON_Delete(vocab);
    cJSON_Delete(merges);
    cJSON_Delete(added);
    return text;
}

/* GPT-2's encoder.json + vocab.bpe as the equivalent Hugging Face
 * tokenizer.json (ByteLevel pre-tokeniser, <|endoftext|> as an added special
 * token), kept as the tokenizer's text so that it can be embedded in a model
 * file and loaded back as the same tokenizer. */
static da_status gpt2_as_hf_json(da_tokenizer *t, const char *path, const cJSON *vocab, const char *bpe, size_t n_bpe) {
    cJSON *merges = cJSON_CreateArray(), *added = cJSON_CreateArray(), *v = cJSON_Duplicate(vocab, 1);
    int ok = merges && added && v;
    const cJSON *eot = cJSON_GetObjectItemCaseSensitive(vocab, "<|endoftext|>");
    if (ok && cJSON_IsNumber(eot)) {
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(added, e) && cJSON_AddNumberToObject(e, "id", eot->valuedouble) &&
             cJSON_AddStringToObject(e, "content", "<|endoftext|>") && cJSON_AddBoolToObject(e, "special", 1);
    }
    for (const char *p = bpe; ok && p < bpe + n_bpe;) {
        const char *e = memchr(p, '\n', (size_t)(bpe + n_bpe - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(bpe + n_bpe - p);
        if (len && p[len - 1] == '\r') len--;
        if (len && !(p == bpe && !strncmp(p, "#version", 8))) {
            char *line = malloc(len + 1);
            cJSON *item = line ? (memcpy(line, p, len), line[len] = 0, cJSON_CreateString(line)) : NULL;
            free(line);
            ok = item && cJSON_AddItemToArray(merges, item);
        }
        p = e ? e + 1 : bpe + n_bpe;
    }
    char *text = ok ? da_tok_bytelevel_json(v, merges, added) : NULL;
    if (!ok) {
        cJSON_Delete(v);
        cJSON_Delete(merges);
        cJSON_Delete(added);
    }
    if (!text) return da_errorf("%s: out of memory converting to tokenizer.json", path);
    t->json = text;
    t->json_len = strlen(text);
    return da_ok();
}

static da_status load_gpt2(da_tokenizer *t, const char *enc_path, const char *bpe_path) {
    char *js = NULL, *bpe = NULL;
    size_t n_js, n_bpe;
    cJSON *vocab = NULL;
    da_status st = read_file(enc_path, &js, &n_js);
    if (st.code) return st;
    vocab = cJSON_ParseWithLength(js, n_js);
    if (!vocab || !cJSON_IsObject(vocab)) {
        st = da_errorf("%s: not a JSON object of token -> id", enc_path);
        goto done;
    }
    if ((st = build_vocab(t, enc_path, vocab, NULL)).code) goto done;
    if ((st = read_file(bpe_path, &bpe, &n_bpe)).code) goto done;
    if ((st = gpt2_as_hf_json(t, enc_path, vocab, bpe, n_bpe)).code) goto done;
    size_t lines = 1;
    for (size_t i = 0; i < n_bpe; i++) lines += bpe[i] == '\n';
    if (pair_map_init(&t->merges, lines)) {
        st = da_errorf("%s: out of memory", bpe_path);
        goto done;
    }
    int rank = 0;
    for (char *p = bpe; p < bpe + n_bpe;) {
        char *e = memchr(p, '\n', (size_t)(bpe + n_bpe - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(bpe + n_bpe - p);
        if (len && p[len - 1] == '\r') len--;
        if (len && !(p == bpe && !strncmp(p, "#version", 8))) {
            if ((st = add_merge(t, bpe_path, p, len, rank)).code) goto done;
            rank++;
        }
        p = e ? e + 1 : bpe + n_bpe;
    }
    st = compile_regex(t, DA_GPT2_PATTERN);
done:
    cJSON_Delete(vocab);
    free(js);
    free(bpe);
    return st;
}

void da_tokenizer_free(da_tokenizer *t) {
    if (!t) return;
    for (int i = 0; t->tok && i < t->vocab_size; i++) free(t->tok[i]);
    free(t->tok);
    free(t->tok_len);
    free(t->vocab.slot);
    free(t->merges.key);
    free(t->merges.rank);
    free(t->merges.merged);
    if (t->re) pcre2_code_free(t->re);
    free(t->json);
    free(t);
}

/* ------------------------------------------------------------ tokenizer.json pipeline */

static int json_true(const cJSON *o, const char *k, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* o's "type" string; "(none)" when absent, "(not a string)" when another JSON value. */
static const char *json_type(const cJSON *o) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(v) ? v->valuestring : v ? "(not a string)" : "(none)";
}

/* A ByteLevel pre-tokeniser step: it maps bytes to GPT-2's alphabet (which
 * this tokenizer does implicitly) and, with use_regex, splits with GPT-2's
 * pattern. *uses_regex gets use_regex (default true). */
static da_status byte_level_step(const char *path, const char *field, const cJSON *p, int *uses_regex) {
    if (json_true(p, "add_prefix_space", 0))
        return da_errorf("%s: %s.add_prefix_space = true is not supported", path, field);
    *uses_regex = json_true(p, "use_regex", 1);
    return da_ok();
}

/* The pre-tokeniser as one regex (*pattern points into root, or is
 * DA_GPT2_PATTERN): ByteLevel (use_regex true), or Sequence [Split (Regex;
 * behavior Isolated with invert false, as Llama 3 and Qwen write it, or
 * Removed with invert true, as GPT-4o does), ByteLevel (use_regex false)].
 * *drop_gaps gets 1 for the second kind of Split, which keeps only the text
 * the regex matches. Anything else is refused: its ids would differ. */
static da_status parse_pre_tokenizer(const char *path, const cJSON *root, const char **pattern, int *drop_gaps) {
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    int uses_regex;
    da_status st;
    if (!pre) { /* diffattn's own hand-written files before pre_tokenizer was read */
        *pattern = DA_GPT2_PATTERN;
        return da_ok();
    }
    if (!cJSON_IsObject(pre))
        return da_errorf("%s: pre_tokenizer is null; only byte-level pre-tokenisers (ByteLevel, or Sequence of "
                         "Split and ByteLevel) are supported",
                         path);
    const char *type = json_type(pre);
    if (!strcmp(type, "ByteLevel")) {
        if ((st = byte_level_step(path, "pre_tokenizer", pre, &uses_regex)).code) return st;
        if (!uses_regex) return da_errorf("%s: pre_tokenizer ByteLevel with use_regex = false alone is not supported", path);
        *pattern = DA_GPT2_PATTERN;
        return da_ok();
    }
    if (strcmp(type, "Sequence"))
        return da_errorf("%s: pre_tokenizer.type \"%s\" is not supported (ByteLevel, or Sequence of Split and ByteLevel)",
                         path, type);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    const cJSON *split = NULL, *bl = NULL;
    int i = 0;
    for (const cJSON *p = cJSON_IsArray(list) ? list->child : NULL; p; p = p->next, i++) {
        const char *pt = json_type(p);
        if (!strcmp(pt, "Split") && !split && !bl) split = p;
        else if (!strcmp(pt, "ByteLevel") && !bl) bl = p;
        else
            return da_errorf("%s: pre_tokenizer.pretokenizers[%d].type \"%s\" is not supported here (expected Split "
                             "then ByteLevel)",
                             path, i, pt);
    }
    if (!bl) return da_errorf("%s: pre_tokenizer.pretokenizers lacks a ByteLevel step (not a byte-level BPE?)", path);
    if ((st = byte_level_step(path, "pre_tokenizer.pretokenizers[ByteLevel]", bl, &uses_regex)).code) return st;
    if (!split) {
        if (!uses_regex) return da_errorf("%s: pre_tokenizer has no Split and ByteLevel.use_regex = false", path);
        *pattern = DA_GPT2_PATTERN;
        return da_ok();
    }
    if (uses_regex)
        return da_errorf("%s: pre_tokenizer splits twice (Split, then ByteLevel with use_regex = true): not supported",
                         path);
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    if (!cJSON_IsString(re))
        return da_errorf("%s: pre_tokenizer Split.pattern must be {\"Regex\": ...} (a String pattern is not supported)",
                         path);
    const char *b = cJSON_IsString(beh) ? beh->valuestring : "(none)";
    *drop_gaps = json_true(split, "invert", 0);
    if (strcmp(b, *drop_gaps ? "Removed" : "Isolated"))
        return da_errorf("%s: pre_tokenizer Split.behavior \"%s\" is not supported with invert = %s (Isolated with "
                         "invert false, or Removed with invert true)",
                         path, b, *drop_gaps ? "true" : "false");
    *pattern = re->valuestring;
    return da_ok();
}

/* decoder: ByteLevel (what decoding does: the byte alphabet back to bytes),
 * none, or a Sequence of ByteLevel steps; Metaspace, Replace and the others
 * change the text and are refused. truncation and padding change the ids of
 * an encoding: they must be null. */
static da_status check_decoder_and_lengths(const char *path, const cJSON *root) {
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (dec && !cJSON_IsNull(dec)) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(dec, "decoders");
        int i = 0;
        for (const cJSON *d = strcmp(json_type(dec), "Sequence") ? dec : cJSON_IsArray(list) ? list->child : NULL; d;
             d = d == dec ? NULL : d->next, i++)
            if (strcmp(json_type(d), "ByteLevel")) {
                char field[48] = "decoder";
                if (d != dec) snprintf(field, sizeof field, "decoder.decoders[%d]", i);
                return da_errorf("%s: %s.type \"%.40s\" is not supported (a byte-level BPE decodes with ByteLevel); "
                                 "its text would differ from Hugging Face's",
                                 path, field, json_type(d));
            }
    }
    static const char *const lengths[] = {"truncation", "padding"};
    for (int k = 0; k < 2; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, lengths[k]);
        if (v && !cJSON_IsNull(v))
            return da_errorf("%s: %s is set; diffattn encodes whole texts without %s: set it to null", path,
                             lengths[k], k ? "padding" : "cutting them");
    }
    return da_ok();
}

/* normalizer: none or NFC; the model's options that change ids. */
static da_status parse_options(da_tokenizer *t, const char *path, const cJSON *root, const cJSON *model) {
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (norm && !cJSON_IsNull(norm)) {
        if (strcmp(json_type(norm), "NFC"))
            return da_errorf("%s: normalizer.type \"%s\" is not supported (none or NFC)", path, json_type(norm));
        t->nfc = 1;
    }
    if (json_true(model, "byte_fallback", 0)) return da_errorf("%s: model.byte_fallback = true is not supported", path);
    static const char *const empty_or_null[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, empty_or_null[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
            return da_errorf("%s: model.%s must be empty or null", path, empty_or_null[i]);
    }
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0))
        return da_errorf("%s: model.dropout must be null", path);
    t->ignore_merges = json_true(model, "ignore_merges", 0);
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        static const char *const flags[] = {"lstrip", "rstrip", "single_word"};
        for (int i = 0; i < 3; i++)
            if (json_true(e, flags[i], 0))
                return da_errorf("%s: added_tokens entry %d has %s = true, which is not supported", path,
                                 cJSON_GetObjectItemCaseSensitive(e, "id")
                                     ? cJSON_GetObjectItemCaseSensitive(e, "id")->valueint
                                     : -1,
                                 flags[i]);
    }
    return da_ok();
}

/* Added tokens with special = false (Qwen's <think>, <tool_call>, ...) are
 * still cut out of the text before pre-tokenisation, as Hugging Face does;
 * they join the matched list (and get their text when the vocabulary lacks
 * them). */
static da_status add_non_special(da_tokenizer *t, const char *path, const cJSON *added) {
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "special");
        if (!sp || cJSON_IsTrue(sp) || !cJSON_IsNumber(id) || !cJSON_IsString(c)) continue;
        int i = id->valueint;
        if (i < 0 || i >= t->vocab_size)
            return da_errorf("%s: added_tokens id %d is outside the vocabulary (0..%d)", path, i, t->vocab_size - 1);
        if (!c->valuestring[0]) return da_errorf("%s: added_tokens id %d has an empty content", path, i);
        if (!t->tok[i]) {
            t->tok[i] = (uint8_t *)strdup(c->valuestring);
            if (!t->tok[i]) return da_errorf("%s: out of memory", path);
            t->tok_len[i] = (uint32_t)strlen(c->valuestring);
        } else if (t->tok_len[i] != strlen(c->valuestring) || memcmp(t->tok[i], c->valuestring, t->tok_len[i])) {
            return da_errorf("%s: added token %d \"%.40s\" differs from the vocabulary's token of that id", path, i,
                             c->valuestring);
        }
        int known = 0;
        for (int s = 0; s < t->n_special; s++) known |= t->special_id[s] == i;
        if (known) continue;
        if (t->n_special == MAX_SPECIAL) return da_errorf("%s: more than %d added tokens", path, MAX_SPECIAL);
        t->special_id[t->n_special++] = i;
    }
    return da_ok();
}

/* The id of a token of the vocabulary that a post_processor adds, or -1. */
static int vocab_id(const da_tokenizer *t, const cJSON *id) {
    return is_token_id(id) && (int)id->valuedouble < t->vocab_size && t->tok[(int)id->valuedouble]
               ? (int)id->valuedouble
               : -1;
}

/* One post-processor wraps what the earlier ones made: before[] goes in
 * front of the ids so far, after[] behind them. */
static da_status wrap_ids(da_tokenizer *t, const char *path, const char *field, const int *before, int nb,
                          const int *after, int na) {
    if (t->n_pre + nb > MAX_ADDED_AROUND || t->n_post + na > MAX_ADDED_AROUND)
        return da_errorf("%s: %s adds more than %d tokens before or after the text", path, field, MAX_ADDED_AROUND);
    memmove(t->pre + nb, t->pre, (size_t)t->n_pre * sizeof(int));
    memcpy(t->pre, before, (size_t)nb * sizeof(int));
    t->n_pre += nb;
    memcpy(t->post + t->n_post, after, (size_t)na * sizeof(int));
    t->n_post += na;
    return da_ok();
}

/* TemplateProcessing: the single-sequence template; the ids of its special
 * tokens (special_tokens[name].ids) before and after sequence A. */
static da_status parse_template(da_tokenizer *t, const char *path, const char *field, const cJSON *pp) {
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    if (!cJSON_IsArray(single)) return da_errorf("%s: %s.single must be an array", path, field);
    int ids[2][MAX_ADDED_AROUND], n[2] = {0, 0}, seen_a = 0;
    for (const cJSON *it = single->child; it; it = it->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(sp ? sp : seq, "id");
        if (!cJSON_IsString(name))
            return da_errorf("%s: %s.single holds an item that is neither {\"SpecialToken\": {\"id\": ...}} nor "
                             "{\"Sequence\": {\"id\": \"A\"}}",
                             path, field);
        if (seq) {
            if (strcmp(name->valuestring, "A") || seen_a)
                return da_errorf("%s: %s.single must hold sequence \"A\" once (found \"%s\")", path, field,
                                 name->valuestring);
            seen_a = 1;
            continue;
        }
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(specials, name->valuestring);
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(tok, "ids");
        if (!cJSON_IsArray(list))
            return da_errorf("%s: %s.special_tokens lacks \"%.40s\" or its ids", path, field, name->valuestring);
        for (const cJSON *id = list->child; id; id = id->next) {
            if (n[seen_a] == MAX_ADDED_AROUND)
                return da_errorf("%s: %s adds more than %d tokens before or after the text", path, field,
                                 MAX_ADDED_AROUND);
            if ((ids[seen_a][n[seen_a]++] = vocab_id(t, id)) < 0)
                return da_errorf("%s: %s.special_tokens \"%.40s\" holds an id outside the vocabulary", path, field,
                                 name->valuestring);
        }
    }
    if (!seen_a) return da_errorf("%s: %s.single lacks sequence \"A\"", path, field);
    return wrap_ids(t, path, field, ids[0], n[0], ids[1], n[1]);
}

/* post_processor: none, ByteLevel (offsets only: no ids), TemplateProcessing,
 * BertProcessing / RobertaProcessing (cls before, sep after), or a Sequence of
 * these, each wrapping what the ones before it made. Others are refused. */
static da_status parse_post_processor(da_tokenizer *t, const char *path, const char *field, const cJSON *pp,
                                      int depth) {
    if (!pp || cJSON_IsNull(pp)) return da_ok();
    const char *type = json_type(pp);
    if (!strcmp(type, "ByteLevel")) return da_ok();
    if (!strcmp(type, "TemplateProcessing")) return parse_template(t, path, field, pp);
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(pp, "cls");
        const cJSON *sep = cJSON_GetObjectItemCaseSensitive(pp, "sep");
        int c = cJSON_GetArraySize(cls) == 2 ? vocab_id(t, cJSON_GetArrayItem(cls, 1)) : -1;
        int e = cJSON_GetArraySize(sep) == 2 ? vocab_id(t, cJSON_GetArrayItem(sep, 1)) : -1;
        if (c < 0 || e < 0) return da_errorf("%s: %s.cls and .sep must be [token, id of the vocabulary]", path, field);
        return wrap_ids(t, path, field, &c, 1, &e, 1);
    }
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pp, "processors");
    if (strcmp(type, "Sequence") || !cJSON_IsArray(list) || depth > 4)
        return da_errorf("%s: %s.type \"%s\" is not supported (ByteLevel, TemplateProcessing, BertProcessing, "
                         "RobertaProcessing, or a Sequence of these)",
                         path, field, type);
    int i = 0;
    for (const cJSON *p = list->child; p; p = p->next, i++) {
        char sub[128];
        snprintf(sub, sizeof sub, "%s.processors[%d]", field, i);
        da_status st = parse_post_processor(t, path, sub, p, depth + 1);
        if (st.code) return st;
    }
    return da_ok();
}

/* Hugging Face tokenizer.json whose model is byte-level BPE. */
static da_status load_hf(da_tokenizer *t, const char *path) {
    char *js = NULL;
    size_t n;
    /* the text: t->json when da_tokenizer_from_json gave it, else the file's (kept) */
    da_status st = t->json ? da_ok() : read_file(path, &js, &n);
    if (st.code) return st;
    if (!t->json) t->json = js, t->json_len = n;
    cJSON *root = cJSON_ParseWithLength(t->json, t->json_len);
    if (!root) return da_errorf("%s: not valid JSON", path);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(model) || !cJSON_IsString(type) || strcmp(type->valuestring, "BPE"))
        st = da_errorf("%s: model.type is %s; only byte-level BPE tokenizers are supported", path,
                       cJSON_IsString(type) ? type->valuestring : "missing");
    else if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        st = da_errorf("%s: model.vocab must be an object and model.merges an array", path);
    else if (added && !cJSON_IsArray(added))
        st = da_errorf("%s: added_tokens must be an array", path);
    const char *pattern = NULL;
    if (!st.code) st = parse_pre_tokenizer(path, root, &pattern, &t->drop_gaps);
    if (!st.code) st = parse_options(t, path, root, model);
    if (!st.code) st = check_decoder_and_lengths(path, root);
    if (!st.code) st = build_vocab(t, path, vocab, added);
    if (!st.code) st = add_non_special(t, path, added);
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if (!st.code) st = parse_post_processor(t, path, "post_processor", post, 0);
    if (!st.code && pair_map_init(&t->merges, (size_t)cJSON_GetArraySize(merges))) st = da_errorf("%s: out of memory", path);
    int rank = 0;
    for (const cJSON *m = merges ? merges->child : NULL; m && !st.code; m = m->next, rank++) {
        if (cJSON_IsString(m)) {
            st = add_merge(t, path, m->valuestring, strlen(m->valuestring), rank);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            char buf[1024];
            int len = snprintf(buf, sizeof buf, "%s %s", m->child->valuestring, m->child->next->valuestring);
            st = len < (int)sizeof buf ? add_merge(t, path, buf, (size_t)len, rank)
                                       : da_errorf("%s: merge #%d is too long", path, rank + 1);
        } else {
            st = da_errorf("%s: merge #%d is neither \"a b\" nor [\"a\", \"b\"]", path, rank + 1);
        }
    }
    if (!st.code) st = compile_regex(t, pattern); /* pattern points into root */
    cJSON_Delete(root);
    return st;
}

static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

da_status da_tokenizer_load(da_tokenizer **out, const char *path) {
    *out = NULL;
    da_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return da_errorf("out of memory");
    int byte_to_cp[256];
    da_gpt2_byte_alphabet(byte_to_cp, t->cp_to_byte);
    t->heap_from = 257; /* above the scratch of da_tokenizer_encode: short pieces scan, faster */
    char a[4096], b[4096];
    struct stat sb;
    da_status st;
    if (stat(path, &sb)) {
        st = da_errorf("%s: %s", path, strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        snprintf(a, sizeof a, "%s/tokenizer.json", path);
        snprintf(b, sizeof b, "%s/encoder.json", path);
        if (exists(a)) st = load_hf(t, a);
        else if (exists(b)) {
            snprintf(a, sizeof a, "%s/vocab.bpe", path);
            st = load_gpt2(t, b, a);
        } else st = da_errorf("%s: holds neither tokenizer.json nor encoder.json + vocab.bpe", path);
    } else {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (!strcmp(base, "encoder.json")) {
            snprintf(a, sizeof a, "%.*svocab.bpe", (int)(base - path), path);
            st = load_gpt2(t, path, a);
        } else {
            st = load_hf(t, path);
        }
    }
    if (st.code) {
        da_tokenizer_free(t);
        return st;
    }
    *out = t;
    return da_ok();
}

int da_tokenizer_vocab_size(const da_tokenizer *t) { return t->vocab_size; }

void da_tokenizer_set_heap_from(da_tokenizer *t, size_t n) { t->heap_from = n; }

int da_tokenizer_special_id(const da_tokenizer *t, const char *text) {
    size_t n = strlen(text);
    for (int i = 0; i < t->n_special; i++) {
        int id = t->special_id[i];
        if (t->tok_len[id] == n && !memcmp(t->tok[id], text, n)) return id;
    }
    return -1;
}

/* ------------------------------------------------------------ encoding */

static int push(int **ids, size_t *n, size_t *cap, int v) {
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 1024;
        int *p = realloc(*ids, nc * sizeof(int));
        if (!p) return -1;
        *ids = p;
        *cap = nc;
    }
    (*ids)[(*n)++] = v;
    return 0;
}

/* BPE over one pre-token: repeatedly merge the adjacent pair of lowest rank
 * (leftmost on ties), as tiktoken does. sym, rank: scratch of n entries. */
static int bpe_piece(const da_tokenizer *t, const uint8_t *p, size_t n, int *sym, int *rank, int *merged_at,
                     int **ids, size_t *n_ids, size_t *cap) {
    if (n == 1) return push(ids, n_ids, cap, t->byte_id[p[0]]);
    size_t m = n;
    for (size_t i = 0; i < n; i++) sym[i] = t->byte_id[p[i]];
    for (size_t i = 0; i + 1 < m; i++) rank[i] = pair_map_get(&t->merges, sym[i], sym[i + 1], &merged_at[i]);
    for (;;) {
        int best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rank[i] >= 0 && (best < 0 || rank[i] < best)) best = rank[i], bi = i;
        if (best < 0) break;
        sym[bi] = merged_at[bi];
        memmove(sym + bi + 1, sym + bi + 2, (m - bi - 2) * sizeof(int));
        const size_t pairs_after = m >= bi + 3 ? m - bi - 3 : 0; /* pairs right of the merged one */
        memmove(rank + bi + 1, rank + bi + 2, pairs_after * sizeof(int));
        memmove(merged_at + bi + 1, merged_at + bi + 2, pairs_after * sizeof(int));
        m--;
        if (bi > 0) rank[bi - 1] = pair_map_get(&t->merges, sym[bi - 1], sym[bi], &merged_at[bi - 1]);
        if (bi + 1 < m) rank[bi] = pair_map_get(&t->merges, sym[bi], sym[bi + 1], &merged_at[bi]);
    }
    for (size_t i = 0; i < m; i++)
        if (push(ids, n_ids, cap, sym[i])) return -1;
    return 0;
}

/* The same merges in O(n log n), for long pieces, where the scan above is
 * quadratic: 100 KB of one letter took 12 s, 10 MB would take hours. The
 * symbols form a linked list; a min-heap holds (rank, left position) of
 * every pair made, stale entries included, and an entry is used only when
 * the pair now at its position still has its rank. Every current pair has
 * an entry, so the first valid one popped is the lowest rank, leftmost on
 * ties: the order of the scan, hence the same ids. */
typedef struct {
    int rank;
    int pos;
} heap_ent;

static int heap_less(heap_ent a, heap_ent b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

static void heap_push(heap_ent *h, size_t *n, heap_ent e) {
    size_t i = (*n)++;
    while (i > 0 && heap_less(e, h[(i - 1) / 2])) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = e;
}

static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(h[c + 1], h[c])) c++;
        if (!heap_less(h[c], last)) break;
        h[i] = h[c], i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static int bpe_piece_heap(const da_tokenizer *t, const uint8_t *p, size_t n, int **ids, size_t *n_ids,
                          size_t *cap) {
    /* sym, next, prev: n each; the heap: at most n - 1 first pairs and 2 per merge */
    int *sym = malloc(3 * n * sizeof(int));
    heap_ent *h = malloc(3 * n * sizeof(heap_ent));
    if (!sym || !h) {
        free(sym);
        free(h);
        return -1;
    }
    int *next = sym + n, *prev = sym + 2 * n;
    size_t hn = 0;
    int merged = 0;
    for (size_t i = 0; i < n; i++) {
        sym[i] = t->byte_id[p[i]];
        next[i] = i + 1 < n ? (int)i + 1 : -1;
        prev[i] = (int)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int r = pair_map_get(&t->merges, sym[i], sym[i + 1], &merged);
        if (r >= 0) heap_push(h, &hn, (heap_ent){r, (int)i});
    }
    while (hn) {
        heap_ent e = heap_pop(h, &hn);
        int L = e.pos, R = next[L];
        if (sym[L] < 0 || R < 0 || pair_map_get(&t->merges, sym[L], sym[R], &merged) != e.rank) continue; /* stale */
        sym[L] = merged;
        sym[R] = -1;
        next[L] = next[R];
        if (next[R] >= 0) prev[next[R]] = L;
        int r;
        if (prev[L] >= 0 && (r = pair_map_get(&t->merges, sym[prev[L]], sym[L], &merged)) >= 0)
            heap_push(h, &hn, (heap_ent){r, prev[L]});
        if (next[L] >= 0 && (r = pair_map_get(&t->merges, sym[L], sym[next[L]], &merged)) >= 0)
            heap_push(h, &hn, (heap_ent){r, L});
    }
    int rc = 0;
    for (int i = 0; i >= 0 && !rc; i = next[i]) rc = push(ids, n_ids, cap, sym[i]);
    free(sym);
    free(h);
    return rc;
}

/* One pre-token's ids. scratch: 3 * scratch_n ints for the scan. */
static da_status encode_piece(const da_tokenizer *t, const uint8_t *p, size_t n, int **ids, size_t *n_ids,
                              size_t *cap, int *scratch, size_t scratch_n) {
    int whole, rc;
    if (t->ignore_merges && (whole = bytes_map_get(t, p, n)) >= 0) rc = push(ids, n_ids, cap, whole);
    else if (n >= t->heap_from) rc = bpe_piece_heap(t, p, n, ids, n_ids, cap);
    else if (n > scratch_n) {
        int *big = malloc(3 * n * sizeof(int));
        rc = big ? bpe_piece(t, p, n, big, big + n, big + 2 * n, ids, n_ids, cap) : -1;
        free(big);
    } else {
        rc = bpe_piece(t, p, n, scratch, scratch + scratch_n, scratch + 2 * scratch_n, ids, n_ids, cap);
    }
    return rc ? da_errorf("out of memory") : da_ok();
}

/* The length of the valid UTF-8 character at b[0..n), or 0 when b does not
 * start with one. */
static size_t utf8_char_len(const uint8_t *b, size_t n) {
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

/* Text between two matches of the pattern, g[0..n). Hugging Face's Split
 * makes each such gap a pre-token of its own (behavior Isolated) or drops it
 * (invert true, behavior Removed). It never sees invalid UTF-8, which PCRE2
 * skips: those bytes become single-byte tokens, so that any bytes encode
 * losslessly. The patterns of GPT-2, Llama 3, Qwen and GPT-4o match every
 * character, so only invalid bytes fall between their matches. */
static da_status encode_gap(const da_tokenizer *t, const uint8_t *g, size_t n, int **ids, size_t *n_ids, size_t *cap,
                            int *scratch, size_t scratch_n) {
    for (size_t i = 0; i < n;) {
        size_t j = i, w;
        while (j < n && (w = utf8_char_len(g + j, n - j))) j += w;
        if (j > i && !t->drop_gaps) {
            da_status st = encode_piece(t, g + i, j - i, ids, n_ids, cap, scratch, scratch_n);
            if (st.code) return st;
        }
        if (j < n && push(ids, n_ids, cap, t->byte_id[g[j++]])) return da_errorf("out of memory");
        i = j;
    }
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
#define MATCH_STEPS_PER_BYTE 1000u
#define MATCH_DEPTH_LIMIT 10000u

/* rc >= 0: a match, in md's ovector; PCRE2_ERROR_NOMATCH: none starts before *searched (n: none at all);
 * PCRE2_ERROR_MATCHLIMIT with *limit the steps it passed, or *window (> 0) the bytes it scanned for a short
 * result; another PCRE2 error. */
static int match_bounded(const da_tokenizer *t, const uint8_t *text, size_t n, size_t from, pcre2_match_data *md,
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

/* Ordinary text (no special tokens): regex pieces, BPE each, and the gaps
 * between them (encode_gap). An empty match is no pre-token but ends a gap,
 * as in Hugging Face's Split. */
static da_status encode_ordinary(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids, size_t *n_ids,
                                 size_t *cap, pcre2_match_data *md, pcre2_match_context *mc, int *scratch,
                                 size_t scratch_n) {
    size_t pos = 0, from = 0; /* where the gap starts; where the search starts */
    while (pos < n) {
        uint32_t limit;
        size_t searched = n, window;
        int rc = match_bounded(t, text, n, from, md, mc, &searched, &limit, &window);
        size_t s = n, e = n;
        if (rc >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            s = ov[0];
            e = ov[1];
        } else if (rc == PCRE2_ERROR_NOMATCH && searched < n) { /* no match starts before searched: still a gap */
            from = searched;
            continue;
        } else if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) {
            char what[160];
            if (window)
                snprintf(what, sizeof what, "it scanned %zu bytes ahead for a shorter match (at most 8 bytes "
                         "scanned a byte matched)", window);
            else
                snprintf(what, sizeof what, "it passed PCRE2's %s limit of %u (%u steps a byte matched)",
                         rc == PCRE2_ERROR_MATCHLIMIT ? "match" : "depth",
                         rc == PCRE2_ERROR_MATCHLIMIT ? limit : MATCH_DEPTH_LIMIT, MATCH_STEPS_PER_BYTE);
            return da_errorf("the pre-tokeniser pattern \"%s\" does too much work at byte %zu: %s, so splitting "
                             "would take time growing faster than the text; not supported",
                             t->pattern, from, what);
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR why[120];
            pcre2_get_error_message(rc, why, sizeof why);
            return da_errorf("the pre-tokeniser pattern \"%s\" failed at byte %zu (PCRE2 error %d: %s)", t->pattern,
                             from, rc, (const char *)why);
        }
        da_status st = encode_gap(t, text + pos, s - pos, ids, n_ids, cap, scratch, scratch_n);
        if (!st.code && e > s) st = encode_piece(t, text + s, e - s, ids, n_ids, cap, scratch, scratch_n);
        if (st.code) return st;
        if (s == n) break;
        size_t w = e > s ? 0 : utf8_char_len(text + s, n - s);
        pos = e;
        from = e > s ? e : s + (w ? w : 1);
    }
    return da_ok();
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

/* NFC of text[0..n) run by run: each maximal run of valid UTF-8 is normalised on its own and the invalid
 * bytes between runs are kept as they are, so an invalid byte anywhere (a trailing \xff) leaves the rest
 * normalised, and the result of a text is that of its pieces (prepare's shards give whole-text encode's
 * ids). Returns 1 when the text is used as it is (every run already NFC), 0 when *out (malloc'd) holds the
 * normalised text, -1 when out of memory. */
static int nfc_normalize_runs(const uint8_t *text, size_t n, uint8_t **out, size_t *out_n) {
    size_t i = 0;
    while (i < n && text[i] < 0x80) i++;
    if (i == n) return 1;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, done = 0; /* text[0..done) is in buf (once buf exists) */
    for (size_t r = 0; r < n;) {
        size_t e = r, w;
        while (e < n && (w = utf8_char_len(text + e, n - e))) e += w; /* the valid run [r, e) */
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

/* Ordinary text, NFC-normalised first when the tokenizer says so. */
static da_status encode_normalized(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids, size_t *n_ids,
                                   size_t *cap, pcre2_match_data *md, pcre2_match_context *mc, int *scratch,
                                   size_t scratch_n) {
    uint8_t *norm = NULL;
    size_t nn = 0;
    int rc = t->nfc ? nfc_normalize_runs(text, n, &norm, &nn) : 1;
    if (rc < 0) return da_errorf("out of memory");
    if (rc == 1) return encode_ordinary(t, text, n, ids, n_ids, cap, md, mc, scratch, scratch_n);
    da_status st = encode_ordinary(t, norm, nn, ids, n_ids, cap, md, mc, scratch, scratch_n);
    free(norm);
    return st;
}

da_status da_tokenizer_encode(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids, size_t *n_ids,
                              size_t *cap) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL); /* the call's own limits (match_bounded) */
    enum { SCRATCH = 256 };
    int scratch[3 * SCRATCH];
    if (!md || !mc) {
        pcre2_match_data_free(md);
        pcre2_match_context_free(mc);
        return da_errorf("out of memory");
    }
    /* each added token's next occurrence at or after pos (n: none), searched
     * again only once pos passes it: one scan of the text per token, however
     * many there are (Llama 3 declares 256) */
    size_t *hit_at = malloc((size_t)(t->n_special ? t->n_special : 1) * sizeof *hit_at);
    if (!hit_at) {
        pcre2_match_data_free(md);
        pcre2_match_context_free(mc);
        return da_errorf("out of memory");
    }
    for (int i = 0; i < t->n_special; i++) hit_at[i] = SIZE_MAX;
    da_status st = da_ok();
    size_t pos = 0;
    while (pos < n && !st.code) {
        /* the next added token, the longest of those starting there (Hugging
         * Face's leftmost-longest match) */
        size_t next = n;
        int sid = -1;
        for (int i = 0; i < t->n_special; i++) {
            int id = t->special_id[i];
            if (hit_at[i] == SIZE_MAX || (hit_at[i] < pos && hit_at[i] != n)) {
                const uint8_t *hit = memmem(text + pos, n - pos, t->tok[id], t->tok_len[id]);
                hit_at[i] = hit ? (size_t)(hit - text) : n;
            }
            if (hit_at[i] < next || (hit_at[i] == next && next < n && t->tok_len[id] > t->tok_len[sid]))
                next = hit_at[i], sid = id;
        }
        st = encode_normalized(t, text + pos, next - pos, ids, n_ids, cap, md, mc, scratch, SCRATCH);
        if (!st.code && sid >= 0) {
            if (push(ids, n_ids, cap, sid)) st = da_errorf("out of memory");
            next += t->tok_len[sid];
        }
        pos = next;
    }
    free(hit_at);
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    return st;
}

da_status da_tokenizer_encode_add_special(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids,
                                          size_t *n_ids, size_t *cap) {
    for (int i = 0; i < t->n_pre; i++)
        if (push(ids, n_ids, cap, t->pre[i])) return da_errorf("out of memory");
    da_status st = da_tokenizer_encode(t, text, n, ids, n_ids, cap);
    for (int i = 0; !st.code && i < t->n_post; i++)
        if (push(ids, n_ids, cap, t->post[i])) st = da_errorf("out of memory");
    return st;
}

da_status da_tokenizer_decode(const da_tokenizer *t, const int *ids, size_t n, uint8_t **out, size_t *n_out,
                              size_t *cap) {
    for (size_t i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= t->vocab_size || !t->tok[id])
            return da_errorf("id #%zu = %d is not in the vocabulary (0..%d)", i + 1, id, t->vocab_size - 1);
        size_t len = t->tok_len[id];
        if (*n_out + len > *cap) {
            size_t nc = *cap ? *cap : 4096;
            while (nc < *n_out + len) nc *= 2;
            uint8_t *p = realloc(*out, nc);
            if (!p) return da_errorf("out of memory");
            *out = p;
            *cap = nc;
        }
        memcpy(*out + *n_out, t->tok[id], len);
        *n_out += len;
    }
    return da_ok();
}

/* The code point of the UTF-8 character ending at b[end - 1], or -1 when
 * those bytes are not one complete, valid character (a stray continuation
 * byte, an overlong form, a surrogate). */
static long char_ending_at(const uint8_t *b, size_t end) {
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
    long cp = char_ending_at(b, c);
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

/* ------------------------------------------------------------ the tokenizer as text */

da_status da_tokenizer_from_json(da_tokenizer **out, const char *json, size_t n, const char *name) {
    *out = NULL;
    da_tokenizer *t = calloc(1, sizeof *t);
    char *copy = malloc(n + 1);
    if (!t || !copy) {
        free(t);
        free(copy);
        return da_errorf("%s: out of memory", name);
    }
    memcpy(copy, json, n);
    copy[n] = 0;
    int byte_to_cp[256];
    da_gpt2_byte_alphabet(byte_to_cp, t->cp_to_byte);
    t->json = copy;
    t->json_len = n;
    da_status st = load_hf(t, name);
    if (st.code) {
        da_tokenizer_free(t);
        return st;
    }
    *out = t;
    return da_ok();
}

const char *da_tokenizer_json(const da_tokenizer *t, size_t *n) {
    if (n) *n = t->json_len;
    return t->json;
}

int da_tokenizer_same(const da_tokenizer *a, const da_tokenizer *b) {
    if (a->vocab_size != b->vocab_size || a->n_special != b->n_special) return 0;
    for (int i = 0; i < a->vocab_size; i++) {
        if (!a->tok[i] != !b->tok[i] || a->tok_len[i] != b->tok_len[i]) return 0;
        if (a->tok[i] && memcmp(a->tok[i], b->tok[i], a->tok_len[i])) return 0;
    }
    for (int s = 0; s < a->n_special; s++)
        if (da_tokenizer_special_id(b, (const char *)a->tok[a->special_id[s]]) != a->special_id[s]) return 0;
    size_t na = 0, nb = 0;
    for (size_t i = 0; i <= b->merges.mask; i++) nb += b->merges.key[i] != 0;
    for (size_t i = 0; i <= a->merges.mask; i++) {
        if (!a->merges.key[i]) continue;
        na++;
        const uint64_t k = a->merges.key[i] - 1;
        int merged = -1;
        if (pair_map_get(&b->merges, (int)(k >> 32), (int)(uint32_t)k, &merged) != a->merges.rank[i] ||
            merged != a->merges.merged[i])
            return 0;
    }
    return na == nb;
}
