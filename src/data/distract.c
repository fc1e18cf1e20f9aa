/* Target text with distractor spans inserted (see diffattn/data.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/text_data.h"

struct da_distract {
    const da_text_data *target;
    uint32_t *tok; /* every distractor token, files and splits in order */
    size_t n;
    da_distract_config c;
};

da_status da_distract_parse_rates(da_distract_config *c, const char *list) {
    c->n_rates = 0;
    const char *p = list;
    while (*p) {
        char *end;
        const double v = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !(v >= 0 && v <= 0.9))
            return da_errorf("distract-rate \"%s\": expected shares in [0, 0.9], comma-separated, like 0,0.3,0.6",
                             list);
        if (c->n_rates == DA_DISTRACT_MAX_RATES)
            return da_errorf("distract-rate \"%s\": at most %d rates", list, DA_DISTRACT_MAX_RATES);
        c->rates[c->n_rates++] = (float)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) return da_errorf("distract-rate \"%s\": a rate is missing after the last comma", list);
    }
    return c->n_rates ? da_ok() : da_errorf("distract-rate is empty: expected shares like 0,0.3,0.6");
}

da_status da_distract_open(da_distract **out, const da_text_data *target, const char *path, const da_tokenizer *tok,
                           const da_distract_config *c) {
    *out = NULL;
    if (c->span < 1) return da_errorf("distract-span: %d must be positive", c->span);
    if (c->n_rates < 1) return da_errorf("distract-rate: no rate given");
    da_text_data d;
    da_status st = da_text_data_load_tok(&d, path, 0.5f, c->span, tok);
    if (st.code) return da_errorf("--distract %s", st.msg);
    if (d.vocab_size != target->vocab_size) {
        da_text_data_free(&d);
        return da_errorf("%s: the distractors' vocabulary (%d) is not the target data's (%d): give both as text, or "
                         "as shards of one tokenizer",
                         path, d.vocab_size, target->vocab_size);
    }
    da_distract *x = calloc(1, sizeof *x);
    if (x) x->tok = malloc((d.n_train + d.n_val) * sizeof(uint32_t));
    if (!x || !x->tok) {
        if (x) free(x);
        da_text_data_free(&d);
        return da_errorf("%s: out of memory for the distractor tokens", path);
    }
    for (int s = 0; s < d.n_train_spans + d.n_val_spans; s++) {
        memcpy(x->tok + x->n, d.spans[s].tok, d.spans[s].n * sizeof(uint32_t));
        x->n += d.spans[s].n;
    }
    da_text_data_free(&d);
    x->target = target;
    x->c = *c;
    *out = x;
    return da_ok();
}

void da_distract_free(da_distract *d) {
    if (!d) return;
    free(d->tok);
    free(d);
}

static int compare_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* s: (T + 1) the window's tokens, is_d: (T + 1) 1 where the token is a distractor; gap: (T + 1) scratch. The
 * draws: k insertion points among the n_t + 1 gaps of the target tokens, then k span starts. */
static void insert_spans(const da_distract *d, da_rng *rng, float rate, const int *text, int T, int *s, int *is_d,
                         int *gap, int *n_distract) {
    const int n_all = T + 1, span = d->c.span;
    int n_d = (int)lround((double)rate * n_all);
    if (n_d > n_all - 2) n_d = n_all - 2; /* at least one scored position */
    if (n_d < 0) n_d = 0;
    const int n_t = n_all - n_d, k = (n_d + span - 1) / span;
    for (int j = 0; j < k; j++) gap[j] = (int)(da_rng_next(rng) % (uint64_t)(n_t + 1));
    qsort(gap, (size_t)k, sizeof *gap, compare_int);
    int p = 0, i = 0;
    for (int j = 0; j <= k; j++) {
        const int upto = j < k ? gap[j] : n_t; /* target tokens before span j */
        for (; i < upto; i++) s[p] = text[i], is_d[p++] = 0;
        if (j == k) break;
        const int len = j < k - 1 ? span : n_d - (k - 1) * span;
        const size_t start = d->n > (size_t)len ? da_rng_next(rng) % (d->n - (size_t)len + 1) : 0;
        for (int q = 0; q < len; q++) s[p] = (int)d->tok[(start + (size_t)q) % d->n], is_d[p++] = 1;
    }
    if (n_distract) *n_distract = n_d;
}

void da_distract_fill(const da_distract *d, da_rng *rng, float rate, const int *text, int T, int *tokens,
                      int *targets, int *n_distract) {
    int *buf = malloc(3 * (size_t)(T + 1) * sizeof(int));
    if (!buf) { /* no insertions rather than no window: the loss stays defined */
        for (int t = 0; t < T; t++) tokens[t] = text[t], targets[t] = text[t + 1];
        if (n_distract) *n_distract = 0;
        return;
    }
    int *s = buf, *is_d = buf + T + 1, *gap = buf + 2 * (T + 1);
    insert_spans(d, rng, rate, text, T, s, is_d, gap, n_distract);
    for (int t = 0; t < T; t++) tokens[t] = s[t], targets[t] = is_d[t + 1] ? -1 : s[t + 1];
    free(buf);
}

/* text (T + 1) from a window's tokens and targets (T each), in place in tokens' buffer of T + 1. */
static void window_text(int *text, const int *targets, int T) { text[T] = targets[T - 1]; }

void da_distract_val_window(const da_distract *d, long i, long n, int T, int *tokens, int *targets) {
    int *text = malloc((size_t)(T + 1) * sizeof(int));
    if (!text) {
        da_text_data_val_window(d->target, i, n, T, tokens, targets);
        return;
    }
    da_text_data_val_window(d->target, i, n, T, text, targets);
    window_text(text, targets, T);
    da_rng rng;
    da_rng_seed(&rng, d->c.seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1)));
    da_distract_fill(d, &rng, d->c.rates[i % d->c.n_rates], text, T, tokens, targets, NULL);
    free(text);
}

/* Window j of a step: its offset, its rate, its insertions, all from rng, whether or not this rank keeps it
 * (a window of another rank is built into scratch, so every rank draws the same numbers). */
static void distract_next(void *self, da_rng *rng, int B, int phase, int stride, int T, int *tokens, int *targets) {
    const da_distract *d = self;
    const uint64_t starts = d->target->n_train - (size_t)T;
    int *text = malloc((3 * (size_t)T + 1) * sizeof(int));
    if (!text) { /* the plain windows keep the step defined */
        da_text_data_sample_strided(d->target, rng, B, phase, stride, T, tokens, targets);
        return;
    }
    int *other_tok = text + T + 1, *other_tgt = other_tok + T, k = 0;
    for (int j = 0; j < B; j++) {
        const uint64_t off = da_rng_next(rng) % starts;
        const float rate = d->c.rates[da_rng_next(rng) % (uint64_t)d->c.n_rates];
        const int keep = j % stride == phase;
        int *tk = keep ? tokens + (size_t)k * T : other_tok, *tg = keep ? targets + (size_t)k * T : other_tgt;
        da_text_data_train_window(d->target, (size_t)off, T, text, tg);
        window_text(text, tg, T);
        da_distract_fill(d, rng, rate, text, T, tk, tg, NULL);
        k += keep;
    }
    free(text);
}

static void distract_held_out(void *self, long i, long n, int T, int *tokens, int *targets) {
    da_distract_val_window(self, i, n, T, tokens, targets);
}

da_data_source da_distract_source(const da_distract *d) {
    return (da_data_source){(void *)d, d->target->vocab_size, 0, 0, NULL, distract_next, distract_held_out, NULL};
}
