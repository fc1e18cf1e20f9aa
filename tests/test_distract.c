/* Distractor windows on hand-made texts: the target is lowercase letters, the
 * distractors the digits 0..9 in order, so every token says where it came from. */
#include <stdint.h>

#include "data/text_data.h"
#include "harness.h"

#include <unistd.h>

static char TARGET[64], NOISE[64];
enum { T = 128, SPAN = 8 };

static int write_files(void) {
    snprintf(TARGET, sizeof TARGET, "/tmp/da_test_distract_%d_target.txt", (int)getpid());
    snprintf(NOISE, sizeof NOISE, "/tmp/da_test_distract_%d_noise.txt", (int)getpid());
    FILE *a = fopen(TARGET, "wb"), *b = fopen(NOISE, "wb");
    if (!a || !b) return 1;
    for (int i = 0; i < 20000; i++) fputc('a' + (i * 7 + i / 26) % 26, a);
    for (int i = 0; i < 5000; i++) fputc('0' + i % 10, b);
    fclose(a), fclose(b);
    return 0;
}

typedef struct {
    da_text_data text;
    da_distract *d;
} fixture;

static int open_fixture(fixture *f, const float *rates, int n_rates, uint64_t seed) {
    da_distract_config c = {{0}, n_rates, SPAN, seed};
    for (int i = 0; i < n_rates; i++) c.rates[i] = rates[i];
    if (da_text_data_load(&f->text, TARGET, 0.5f, T).code) return 1;
    return da_distract_open(&f->d, &f->text, NOISE, NULL, &c).code != 0;
}

static void close_fixture(fixture *f) {
    da_distract_free(f->d);
    da_text_data_free(&f->text);
}

static int is_digit(int v) { return v >= '0' && v <= '9'; }
static int is_letter(int v) { return v >= 'a' && v <= 'z'; }

/* One window (tokens, targets: (T)) against the rules; *n_d: its distractor tokens among the T + 1. */
static int check_window(const int *tok, const int *tgt, int *n_d) {
    int digits = 0, scored = 0, runs = 0, breaks = 0;
    for (int t = 0; t < T; t++) {
        const int next = t + 1 < T ? tok[t + 1] : (tgt[t] >= 0 ? tgt[t] : '0');
        CHECK(is_digit(tok[t]) || is_letter(tok[t]));
        digits += is_digit(tok[t]);
        if (is_digit(next)) CHECK(tgt[t] == -1); /* predicting a distractor is not scored */
        else {
            CHECK(tgt[t] == next && is_letter(next));
            scored++;
        }
        if (is_digit(tok[t]) && (t == 0 || !is_digit(tok[t - 1]))) runs++;
        if (is_digit(tok[t]) && t + 1 < T && is_digit(next) && next != '0' + (tok[t] - '0' + 1) % 10) breaks++;
    }
    *n_d = digits + (tgt[T - 1] < 0);
    /* spans are contiguous pieces of the distractor file: every span start is a run start or a break */
    const int spans = (*n_d + SPAN - 1) / SPAN;
    if (runs + breaks > spans) {
        fprintf(stderr, "  %d runs and %d order breaks for %d spans\n", runs, breaks, spans);
        return 1;
    }
    CHECK(scored == T + 1 - *n_d - is_letter(tok[0]));
    return 0;
}

/* Only target tokens are scored, and the share of distractors is round(P (T + 1)) in every window. */
static int test_scored_and_share(void) {
    const float rates[] = {0.0f, 0.3f, 0.6f};
    for (int r = 0; r < 3; r++) {
        fixture f;
        CHECK(!open_fixture(&f, rates + r, 1, 42));
        for (long w = 0; w < 16; w++) {
            int tok[T], tgt[T], n_d;
            da_distract_val_window(f.d, w, 16, T, tok, tgt);
            int bad = check_window(tok, tgt, &n_d);
            const int want = (int)lround(rates[r] * (T + 1));
            if (!bad && n_d != want) {
                fprintf(stderr, "  rate %.1f window %ld: %d distractor tokens, expected %d\n", rates[r], w, n_d, want);
                bad = 1;
            }
            if (bad) {
                close_fixture(&f);
                return 1;
            }
        }
        close_fixture(&f);
    }
    return 0;
}

/* The same seed gives the same windows; another seed other places. */
static int test_same_seed_same_windows(void) {
    const float rate = 0.3f;
    fixture a, b, c;
    CHECK(!open_fixture(&a, &rate, 1, 7) && !open_fixture(&b, &rate, 1, 7) && !open_fixture(&c, &rate, 1, 8));
    int same = 1, other = 0;
    for (long w = 0; w < 8; w++) {
        int ta[T], ga[T], tb[T], gb[T], tc[T], gc[T];
        da_distract_val_window(a.d, w, 8, T, ta, ga);
        da_distract_val_window(b.d, w, 8, T, tb, gb);
        da_distract_val_window(c.d, w, 8, T, tc, gc);
        same &= !memcmp(ta, tb, sizeof ta) && !memcmp(ga, gb, sizeof ga);
        other |= memcmp(ta, tc, sizeof ta) != 0;
    }
    close_fixture(&a), close_fixture(&b), close_fixture(&c);
    CHECK(same);
    CHECK(other);
    return 0;
}

/* The training source: P drawn per window from the list; two ranks (stride 2) get the one process's windows,
 * interleaved, and leave the sampler where one process leaves it. */
static int test_training_source(void) {
    const float rates[] = {0.0f, 0.6f};
    enum { B = 32 };
    fixture f;
    CHECK(!open_fixture(&f, rates, 2, 1));
    const da_data_source src = da_distract_source(f.d);
    static int tok[B * T], tgt[B * T], tok2[B * T], tgt2[B * T];
    da_rng one, r0, r1;
    da_rng_seed(&one, 5), da_rng_seed(&r0, 5), da_rng_seed(&r1, 5);
    src.next(src.self, &one, B, 0, 1, T, tok, tgt);
    src.next(src.self, &r0, B, 0, 2, T, tok2, tgt2);
    src.next(src.self, &r1, B, 1, 2, T, tok2 + (size_t)B / 2 * T, tgt2 + (size_t)B / 2 * T);
    int seen[2] = {0, 0}, bad = 0;
    for (int j = 0; j < B && !bad; j++) {
        const size_t k = (size_t)(j % 2 ? B / 2 + j / 2 : j / 2) * T;
        bad |= memcmp(tok + (size_t)j * T, tok2 + k, T * sizeof(int)) || memcmp(tgt + (size_t)j * T, tgt2 + k, T * sizeof(int));
        int n_d;
        bad |= check_window(tok + (size_t)j * T, tgt + (size_t)j * T, &n_d);
        if (n_d == 0) seen[0]++;
        else if (n_d == (int)lround(0.6 * (T + 1))) seen[1]++;
        else bad = 1;
    }
    close_fixture(&f);
    CHECK(!bad);
    CHECK(!memcmp(&one, &r0, sizeof one) && !memcmp(&one, &r1, sizeof one));
    CHECK(seen[0] > 0 && seen[1] > 0);
    return 0;
}

/* The rate list: shares in [0, 0.9], comma-separated. */
static int test_parse_rates(void) {
    da_distract_config c = {{0}, 0, 8, 1};
    CHECK(!da_distract_parse_rates(&c, "0,0.3,0.6").code && c.n_rates == 3 && fabsf(c.rates[1] - 0.3f) < 1e-7f);
    CHECK(da_distract_parse_rates(&c, "0.95").code);
    CHECK(da_distract_parse_rates(&c, "0.3,").code);
    CHECK(da_distract_parse_rates(&c, "x").code);
    CHECK(da_distract_parse_rates(&c, "").code);
    return 0;
}

int main(void) {
    if (write_files()) {
        fprintf(stderr, "cannot write the test texts in /tmp\n");
        return 1;
    }
    RUN(test_scored_and_share);
    RUN(test_same_seed_same_windows);
    RUN(test_training_source);
    RUN(test_parse_rates);
    remove(TARGET), remove(NOISE);
    TH_SUMMARY();
}
