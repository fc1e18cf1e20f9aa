/* Multi-needle retrieval (see needle.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/needle.h"
#include "attn/attention.h"

void da_needle_config_default(da_needle_config *c) {
    memset(c, 0, sizeof *c);
    c->needles = 6;
    c->queries = 2;
    c->samples = 4;
    c->n_contexts = 1;
    c->contexts[0] = 1024;
    c->n_depths = 5;
    for (int i = 0; i < 5; i++) c->depths[i] = 25 * i;
    c->seed = 7;
}

static const char *KEYS[] = {"apple", "river", "candle", "marble", "violet", "falcon", "copper", "meadow",
                             "harbor", "pepper", "silver", "thunder", "garden", "lantern", "orchid", "saddle"};
static const char *FILLER[] = {"The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
                               "There and back again.", "The river flows to the sea.", "Birds sing in the morning.",
                               "The road is long and quiet.", "Snow falls on the hills.", "A cat sleeps by the fire."};

/* Appends s to the buffer, growing it. */
static int put(uint8_t **b, size_t *n, size_t *cap, const char *s) {
    size_t l = strlen(s);
    if (*n + l + 1 > *cap) {
        size_t nc = (*cap ? *cap : 1024);
        while (nc < *n + l + 1) nc *= 2;
        uint8_t *p = realloc(*b, nc);
        if (!p) return -1;
        *b = p, *cap = nc;
    }
    memcpy(*b + *n, s, l);
    *n += l;
    return 0;
}

/* The needle sentence of key and value, as it stands in the prompt. */
static int needle_sentence(char *out, size_t cap, const char *key, const char *value) {
    return snprintf(out, cap, "The special magic %s number is: %s.", key, value);
}

/* The haystack of one sample. fit: at most the context's bytes (filler
 * sentences dropped from the end until it fits), so that the question and
 * the answer fit in the room the callers leave after the context; otherwise
 * the filler may run past the context by about one sentence (the training
 * mix, whose documents need only be about that long). */
static da_status needle_text(const da_needle_config *c, int ci, int di, int sample, int fit, uint8_t **text,
                             size_t *n, char keys[][16], char values[][16]) {
    if (c->needles < 1 || c->needles > 16 || c->queries < 1 || c->queries > c->needles)
        return da_errorf("--needles must be 1..16 and --queries 1..needles");
    da_rng r;
    da_rng_seed(&r, c->seed * 1000003u + (uint64_t)ci * 7919u + (uint64_t)di * 104729u + (uint64_t)sample);
    /* distinct keys, 7-digit values */
    int order[16];
    for (int i = 0; i < 16; i++) order[i] = i;
    for (int i = 15; i > 0; i--) {
        int j = (int)(da_rng_next(&r) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    char sentence[16][96];
    int where[16]; /* byte position (as a filler-sentence index) of each needle */
    const int target = c->contexts[ci];
    /* filler sentences until the target length, leaving room for the needles */
    int n_fill = 0;
    size_t fill_len = 0;
    int fill_idx[4096];
    while (n_fill < 4096 && fill_len + (size_t)c->needles * 50 < (size_t)target) {
        fill_idx[n_fill] = (int)(da_rng_next(&r) % (sizeof FILLER / sizeof FILLER[0]));
        fill_len += strlen(FILLER[fill_idx[n_fill]]) + 1;
        n_fill++;
    }
    if (fit) {
        /* the needle sentences and their spaces: the values always have 7 digits */
        size_t needle_len = 0;
        for (int i = 0; i < c->needles; i++) needle_len += (size_t)needle_sentence(NULL, 0, KEYS[order[i]], "0000000") + 1;
        if (needle_len > (size_t)target)
            return da_errorf("%d needle sentences take %zu bytes, more than the needle context of %d bytes: use fewer "
                             "--needles or a longer context",
                             c->needles, needle_len, target);
        while (n_fill > 0 && fill_len + needle_len > (size_t)target)
            fill_len -= strlen(FILLER[fill_idx[--n_fill]]) + 1;
    }
    for (int i = 0; i < c->needles; i++) {
        snprintf(keys[i], 16, "%s", KEYS[order[i]]);
        snprintf(values[i], 16, "%07u", (unsigned)(da_rng_next(&r) % 10000000u));
        needle_sentence(sentence[i], sizeof sentence[i], keys[i], values[i]);
        /* the asked needles (the first `queries`) at the depth; the others anywhere */
        int depth = i < c->queries ? c->depths[di] : (int)(da_rng_next(&r) % 101);
        where[i] = n_fill * depth / 100;
    }
    uint8_t *b = NULL;
    size_t len = 0, cap = 0;
    int fail = 0;
    for (int s = 0; s <= n_fill && !fail; s++) {
        for (int i = 0; i < c->needles && !fail; i++)
            if (where[i] == s) fail |= put(&b, &len, &cap, sentence[i]) | put(&b, &len, &cap, " ");
        if (s < n_fill) fail |= put(&b, &len, &cap, FILLER[fill_idx[s]]) | put(&b, &len, &cap, " ");
    }
    if (fail) {
        free(b);
        return da_errorf("out of memory");
    }
    *text = b;
    *n = len;
    return da_ok();
}

da_status da_needle_prompt(const da_needle_config *c, int ci, int di, int sample, uint8_t **text, size_t *n,
                           char keys[][16], char values[][16]) {
    return needle_text(c, ci, di, sample, 1, text, n, keys, values);
}

da_status da_needle_document(const da_needle_config *c, int ci, int di, int sample, uint8_t **text, size_t *n,
                             char keys[][16], char values[][16]) {
    return needle_text(c, ci, di, sample, 0, text, n, keys, values);
}

da_status da_needle_eval(const da_needle_config *c, da_needle_predict predict, void *ctx, da_needle_result *r) {
    memset(r, 0, sizeof *r);
    long right_all = 0;
    for (int ci = 0; ci < c->n_contexts; ci++)
        for (int di = 0; di < c->n_depths; di++) {
            long right = 0, asked = 0;
            for (int s = 0; s < c->samples; s++) {
                uint8_t *text;
                size_t n;
                char keys[16][16], values[16][16];
                da_status st = da_needle_prompt(c, ci, di, s, &text, &n, keys, values);
                if (st.code) return st;
                for (int q = 0; q < c->queries; q++) {
                    char ask[96], out[64];
                    snprintf(ask, sizeof ask, "\nThe special magic %s number is:", keys[q]);
                    size_t al = strlen(ask);
                    uint8_t *p = realloc(text, n + al);
                    if (!p) {
                        free(text);
                        return da_errorf("out of memory");
                    }
                    text = p;
                    memcpy(text + n, ask, al);
                    st = predict(ctx, text, n + al, out, sizeof out);
                    if (st.code) {
                        free(text);
                        return st;
                    }
                    /* the first run of digits of the answer must be the value */
                    const char *d = out;
                    while (*d && (*d < '0' || *d > '9')) d++;
                    size_t k = 0;
                    while (d[k] >= '0' && d[k] <= '9') k++;
                    right += k == strlen(values[q]) && !strncmp(d, values[q], k);
                    asked++;
                }
                free(text);
            }
            r->acc[ci][di] = asked ? (double)right / asked : 0;
            right_all += right;
            r->asked += asked;
        }
    r->overall = r->asked ? (double)right_all / r->asked : 0;
    return da_ok();
}

da_status da_needle_predict_model(void *ctx, const uint8_t *prompt, size_t n, char *out, size_t cap) {
    const da_needle_model *nm = ctx;
    const da_config *c = da_engine_config(nm->e);
    if ((long)n + nm->max_new > c->max_seq_len)
        return da_errorf("a needle prompt of %zu bytes + %d new tokens exceeds the model's max_seq_len %d; use a "
                         "smaller context",
                         n, nm->max_new, c->max_seq_len);
    if (c->vocab_size < 256) return da_errorf("needle evaluation needs a byte-level model (vocab_size >= 256)");
    da_session_opts so = da_session_opts_default();
    so.logit_bits = nm->logit_bits;
    so.max_T = (int)n + nm->max_new;
    da_session *s = NULL;
    da_status st = da_session_create(&s, nm->e, &so);
    int *tokens = st.code ? NULL : malloc(n * sizeof(int));
    if (!st.code && !tokens) st = da_errorf("out of memory");
    const float *logits = NULL;
    for (size_t i = 0; i < n && tokens; i++) tokens[i] = prompt[i];
    if (!st.code) st = da_session_feed(s, tokens, (int)n, 0, &logits); /* the prompt in one batch */
    free(tokens);
    size_t k = 0;
    for (int t = 0; t < nm->max_new && !st.code && k + 1 < cap; t++) {
        int best = 0;
        for (int v = 1; v < c->vocab_size; v++) best = logits[v] > logits[best] ? v : best;
        if (best >= 256 || best == '\n') break;
        out[k++] = (char)best;
        if (t + 1 < nm->max_new) st = da_session_feed(s, &best, 1, 0, &logits);
    }
    out[k] = 0;
    da_session_free(s);
    return st;
}

da_status da_needle_eval_engine(const da_engine *e, const da_needle_config *c, int logit_bits, da_needle_result *r) {
    da_needle_model nm = {e, 10, logit_bits};
    return da_needle_eval(c, da_needle_predict_model, &nm, r);
}

da_status da_needle_eval_model(const da_model *m, const da_needle_config *c, int logit_bits, da_needle_result *r) {
    da_engine *e = NULL;
    da_status st = da_engine_from_model(&e, m);
    if (!st.code) st = da_needle_eval_engine(e, c, logit_bits, r);
    da_engine_free(e);
    return st;
}
