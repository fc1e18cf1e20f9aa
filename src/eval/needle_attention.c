/* Attention on needle prompts (see needle_attention.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variant.h"
#include "model/probe.h"
#include "eval/needle_attention.h"

#define ANSWER_ROWS 7 /* the space after "is:" and the first six of the seven digits */

typedef struct {
    int *tokens;
    int n_ctx, T;             /* context bytes; whole sequence */
    int first_row;            /* position of the space after "is:" in the question */
    int span_begin, span_end; /* the value's digits in the context */
    int needle_begin, needle_end;
} needle_sequence;

/* The prompt (context ci, depth di, sample s), its question and the
 * teacher-forced answer, as byte tokens, with the positions that matter. */
static da_status build_sequence(const da_model *m, const da_needle_config *nc, int ci, int di, int s,
                                needle_sequence *q) {
    memset(q, 0, sizeof *q);
    if (m->cfg.vocab_size < 256) return da_errorf("eval attention needs a byte-level model (vocab_size >= 256)");
    uint8_t *text;
    size_t n;
    char keys[16][16], values[16][16];
    da_status st = da_needle_prompt(nc, ci, di, s, &text, &n, keys, values);
    if (st.code) return st;
    char qa[128], needle[96];
    const int ql = snprintf(qa, sizeof qa, "\nThe special magic %s number is: %s.", keys[0], values[0]);
    snprintf(needle, sizeof needle, "The special magic %s number is: ", keys[0]);
    const size_t T = n + (size_t)ql;
    if (T > (size_t)m->cfg.max_seq_len) {
        free(text);
        return da_errorf("a needle prompt of %zu bytes with its question and answer exceeds the model's max_seq_len "
                         "%d; use a smaller --context",
                         T, m->cfg.max_seq_len);
    }
    /* the asked needle's sentence: its key is unique within the prompt */
    const size_t nl = strlen(needle);
    long at = -1;
    for (size_t i = 0; i + nl <= n && at < 0; i++)
        if (!memcmp(text + i, needle, nl)) at = (long)i;
    if (at < 0) {
        free(text);
        return da_errorf("needle prompt %d/%d/%d lacks its asked needle (a bug in the prompt builder)", ci, di, s);
    }
    q->tokens = malloc(T * sizeof(int));
    if (!q->tokens) {
        free(text);
        return da_errorf("out of memory");
    }
    for (size_t i = 0; i < n; i++) q->tokens[i] = text[i];
    for (int i = 0; i < ql; i++) q->tokens[n + (size_t)i] = (uint8_t)qa[i];
    free(text);
    q->n_ctx = (int)n, q->T = (int)T;
    q->first_row = (int)n + ql - 9; /* the answer " dddddd d." is the last 9 bytes */
    q->needle_begin = (int)at;
    q->span_begin = (int)at + (int)nl;
    q->span_end = q->span_begin + (int)strlen(values[0]);
    q->needle_end = q->span_end + 1; /* the full stop */
    return da_ok();
}

/* The attention rows at the positions t with want[t] of the sequence a
 * holds after a forward pass. */
static da_status probe_rows(da_model *m, da_acts *a, int T, const unsigned char *want, da_attention_row_fn visit,
                            void *ctx) {
    const da_config *c = &m->cfg;
    const attn_variant *var = da_attn_variant_of(c->arch);
    float *row = malloc((size_t)T * sizeof(float)), *tmp = malloc((size_t)T * sizeof(float));
    if (row && tmp)
        for (int l = 0; l < c->n_layers; l++) {
            attn_probe p;
            da_acts_probe(a, m, l, &p);
            for (int h = 0; h < c->n_heads; h++)
                for (int t = 0; t < T; t++)
                    if (want[t]) {
                        var->attention_row(&p, h, t, row, tmp);
                        visit(ctx, l, h, t, row);
                    }
        }
    const da_status st = row && tmp ? da_ok() : da_errorf("out of memory");
    free(row), free(tmp);
    return st;
}

da_status da_eval_attention_rows(da_model *m, const int *tokens, int T, const unsigned char *want,
                                 da_attention_row_fn visit, void *ctx) {
    da_acts *a = NULL;
    da_status st = da_acts_create(&a, &m->cfg, 1, T);
    if (!st.code) da_forward(m, a, tokens, NULL, 1, T);
    if (!st.code) st = probe_rows(m, a, T, want, visit, ctx);
    da_acts_free(a);
    return st;
}

/* Runs the model on one needle sequence: the attention rows of its answer
 * rows, and how many of its digits the model predicts. */
static da_status visit_rows(da_model *m, const needle_sequence *q, da_attention_row_fn visit, void *ctx,
                            double *digits_right) {
    const da_config *c = &m->cfg;
    da_acts *a = NULL;
    da_status st = da_acts_create(&a, c, 1, q->T);
    unsigned char *want = calloc((size_t)q->T, 1);
    if (!st.code && !want) st = da_errorf("out of memory");
    if (!st.code) {
        da_forward(m, a, q->tokens, NULL, 1, q->T);
        if (digits_right) { /* teacher-forced: does each answer row's argmax give the next digit? */
            const int V = c->vocab_size;
            *digits_right = 0;
            for (int r = 0; r < ANSWER_ROWS; r++) {
                const int t = q->first_row + r;
                const float *lg = da_acts_logits(a) + (size_t)t * V;
                int best = 0;
                for (int v = 1; v < V; v++) best = lg[v] > lg[best] ? v : best;
                *digits_right += best == q->tokens[t + 1];
            }
        }
        for (int r = 0; r < ANSWER_ROWS; r++) want[q->first_row + r] = 1;
        st = probe_rows(m, a, q->T, want, visit, ctx);
    }
    da_acts_free(a);
    free(want);
    return st;
}

typedef struct {
    const needle_sequence *q;
    double answer[DA_ATTN_MAX_LAYERS], noise[DA_ATTN_MAX_LAYERS]; /* sums over heads and rows */
} share_sums;

static void add_shares(void *ctx, int layer, int head, int t, const float *row) {
    (void)head, (void)t;
    share_sums *s = ctx;
    const needle_sequence *q = s->q;
    double ans = 0, noise = 0;
    for (int j = q->span_begin; j < q->span_end; j++) ans += row[j];
    for (int j = 0; j < q->n_ctx; j++)
        if (j < q->needle_begin || j >= q->needle_end) noise += row[j];
    s->answer[layer] += ans;
    s->noise[layer] += noise;
}

da_status da_eval_needle_attention(da_model *m, const da_needle_config *nc, da_needle_attention_result *r) {
    memset(r, 0, sizeof *r);
    const da_config *c = &m->cfg;
    if (c->n_layers > DA_ATTN_MAX_LAYERS) return da_errorf("eval attention handles up to %d layers", DA_ATTN_MAX_LAYERS);
    const double per_layer = (double)c->n_heads * ANSWER_ROWS;
    for (int ci = 0; ci < nc->n_contexts; ci++)
        for (int di = 0; di < nc->n_depths; di++) {
            for (int s = 0; s < nc->samples; s++) {
                needle_sequence q;
                da_status st = build_sequence(m, nc, ci, di, s, &q);
                if (st.code) return st;
                share_sums sums = {.q = &q};
                double right;
                st = visit_rows(m, &q, add_shares, &sums, &right);
                r->digits[ci][di] += right / ANSWER_ROWS / nc->samples;
                free(q.tokens);
                if (st.code) return st;
                for (int l = 0; l < c->n_layers; l++) {
                    const double a = sums.answer[l] / per_layer, z = sums.noise[l] / per_layer;
                    r->answer[ci][di] += a / (c->n_layers * nc->samples);
                    r->noise[ci][di] += z / (c->n_layers * nc->samples);
                    r->answer_by_layer[l] += a, r->noise_by_layer[l] += z;
                }
                r->prompts++;
            }
            r->answer_all += r->answer[ci][di] / (nc->n_contexts * nc->n_depths);
            r->noise_all += r->noise[ci][di] / (nc->n_contexts * nc->n_depths);
            r->digits_all += r->digits[ci][di] / (nc->n_contexts * nc->n_depths);
        }
    for (int l = 0; l < c->n_layers && r->prompts; l++) r->answer_by_layer[l] /= r->prompts, r->noise_by_layer[l] /= r->prompts;
    return da_ok();
}

typedef struct {
    const needle_sequence *q;
    float *map;
    float weight; /* 1 / (layers * heads) */
} map_sums;

static void add_map(void *ctx, int layer, int head, int t, const float *row) {
    (void)layer, (void)head;
    map_sums *s = ctx;
    float *out = s->map + (size_t)(t - s->q->first_row) * s->q->n_ctx;
    for (int j = 0; j < s->q->n_ctx; j++) out[j] += s->weight * row[j];
}

da_status da_needle_attention_map_of(da_model *m, const da_needle_config *nc, int ci, int di, int s,
                                     da_needle_attention_map *map) {
    memset(map, 0, sizeof *map);
    needle_sequence q;
    da_status st = build_sequence(m, nc, ci, di, s, &q);
    if (st.code) return st;
    map->map = calloc((size_t)ANSWER_ROWS * q.n_ctx, sizeof(float));
    if (!map->map) st = da_errorf("out of memory");
    map_sums sums = {&q, map->map, 1.0f / (float)(m->cfg.n_layers * m->cfg.n_heads)};
    if (!st.code) st = visit_rows(m, &q, add_map, &sums, NULL);
    map->rows = ANSWER_ROWS, map->cols = q.n_ctx;
    map->span_begin = q.span_begin, map->span_end = q.span_end;
    map->needle_begin = q.needle_begin, map->needle_end = q.needle_end;
    map->first_row = q.first_row;
    free(q.tokens);
    if (st.code) {
        free(map->map);
        map->map = NULL;
    }
    return st;
}
