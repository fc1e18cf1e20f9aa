/* Pre-tokeniser regexes run under a bound on their work per byte of text
 * (tok/pretokenizer.c da_tok_match_bounded): a pattern that scans far for a short match
 * or backtracks without bound is refused with its pattern and the limit named,
 * in time linear in the text, and the patterns that stay linear are untouched.
 * Before: a*b|. took 25-32 s on 400 KB of "a" (quadratic), (?:(a|aa)+c)|.
 * up to 10 M steps a byte, and ^(\w+\s?)*$ failed with "PCRE2 error -47". */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "diffattn/tokenizer.h"
#include "harness.h"
#include "tok_util.h"

static da_tokenizer *with_split(const char *regex) {
    char pre[4096], path[64], dir[] = "/tmp/da_re_XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    da_tokenizer *t = NULL;
    if (!write_tokenizer_json(path, split_pre_tokenizer(pre, sizeof pre, regex, "Isolated", 0), NULL, "", "", "")) {
        da_status st = da_tokenizer_load(&t, path);
        if (st.code) fprintf(stderr, "  %s\n", st.msg);
    }
    unlink(path);
    rmdir(dir);
    return t;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Encodes text with regex; 0 when refused within max_s seconds with a message holding the pattern and want. */
static int expect_refused(const char *regex, const uint8_t *text, size_t n, const char *want, double max_s) {
    da_tokenizer *t = with_split(regex);
    CHECK(t);
    int *ids = NULL;
    size_t n_ids = 0, cap = 0;
    const double t0 = now();
    da_status st = da_tokenizer_encode(t, text, n, &ids, &n_ids, &cap);
    const double dt = now() - t0;
    free(ids);
    da_tokenizer_free(t);
    printf("     %s on %zu bytes: %.3f s: %s\n", regex, n, dt, st.code ? st.msg : "(encoded)");
    CHECK(st.code);
    CHECK(strstr(st.msg, regex) != NULL);
    CHECK(strstr(st.msg, want) != NULL);
    CHECK(strstr(st.msg, "PCRE2 error -47") == NULL);
    CHECK(dt < max_s);
    return 0;
}

static uint8_t *repeat(const char *unit, size_t times, size_t *n) {
    const size_t u = strlen(unit);
    uint8_t *b = malloc(u * times + 1);
    if (!b) return NULL;
    for (size_t i = 0; i < times; i++) memcpy(b + i * u, unit, u);
    *n = u * times;
    return b;
}

/* a*b|. on 400 KB of "a": each position scans to the end for one byte (quadratic) */
static int test_scan_ahead_refused(void) {
    size_t n;
    uint8_t *a = repeat("a", 400000, &n);
    CHECK(a);
    int rc = expect_refused("a*b|.", a, n, "scanned", 2.0);
    free(a);
    return rc;
}

/* (?:(a|aa)+c)|. on runs of 24 "a": exponential backtracking at each position */
static int test_backtracking_refused(void) {
    size_t n;
    uint8_t *a = repeat("aaaaaaaaaaaaaaaaaaaaaaaab", 400, &n);
    CHECK(a);
    int rc = expect_refused("(?:(a|aa)+c)|.", a, n, "limit", 2.0);
    free(a);
    return rc;
}

/* ^(\w+\s?)*$: a nested repeat, refused naming its limit (was a bare "PCRE2 error -47") */
static int test_nested_repeat_named(void) {
    size_t n;
    uint8_t *a = repeat("hello world ", 30, &n);
    CHECK(a);
    a[n - 1] = '!';
    int rc = expect_refused("^(\\w+\\s?)*$", a, n, "limit", 2.0);
    free(a);
    return rc;
}

/* Linear patterns with long pieces, which search far ahead for a long match: a 1 MB word, a 1 MB run of
 * spaces before a letter (\s+(?!\S) backs off one), and a letterless gap of 1 MB: encoded, every byte kept. */
static int test_long_pieces_encode(void) {
    const char *units[3] = {"x", " ", "1"};
    const char *regex[3] = {"\\p{L}+|\\s+", "\\s+(?!\\S)|\\s+|\\p{L}+", "\\p{L}+"};
    for (int k = 0; k < 3; k++) {
        size_t n;
        uint8_t *a = repeat(units[k], 1 << 20, &n);
        CHECK(a);
        a[n - 1] = 'y';
        da_tokenizer *t = with_split(regex[k]);
        CHECK(t);
        int *ids = NULL;
        size_t n_ids = 0, cap = 0;
        const double t0 = now();
        da_status st = da_tokenizer_encode(t, a, n, &ids, &n_ids, &cap);
        const double dt = now() - t0;
        if (st.code) fprintf(stderr, "  %s\n", st.msg);
        printf("     %s on 1 MB of \"%s\": %.3f s, %zu ids\n", regex[k], units[k], dt, n_ids);
        CHECK(!st.code);
        CHECK(n_ids == n); /* no merges: one id a byte */
        CHECK(dt < 5.0);
        free(ids);
        da_tokenizer_free(t);
        free(a);
    }
    return 0;
}

int main(void) {
    RUN(test_scan_ahead_refused);
    RUN(test_backtracking_refused);
    RUN(test_nested_repeat_named);
    RUN(test_long_pieces_encode);
    TH_SUMMARY();
}
