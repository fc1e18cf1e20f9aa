/* The loss by position and its power-of-two bins (see eval/eval.h): an observer of the one window loop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "io/json_out.h"
#include "train/window_loss.h"

/* Bin of 0-based position t: floor(log2(t + 1)). */
static int bin_of(int t) {
    int b = 0;
    for (unsigned p = (unsigned)t + 1; p > 1; p >>= 1) b++;
    return b;
}

typedef struct {
    int n_bins;
    double *sum, *window_sum; /* (n_bins) over every window; (n_windows, n_bins) per window */
    long *count, *window_count;
    double *per_position;     /* NULL, or (T) of the one window */
} bin_acc;

static void bins_observe(void *ctx, long w0, int b, int T, const int *targets, const double *nll) {
    bin_acc *a = ctx;
    for (int i = 0; i < b; i++)
        for (int t = 0; t < T; t++) {
            const size_t p = (size_t)i * T + t;
            if (a->per_position) a->per_position[p] = targets[p] >= 0 ? nll[p] : NAN;
            if (targets[p] < 0) continue;
            const int k = bin_of(t);
            const size_t wk = (size_t)(w0 + i) * a->n_bins + k;
            a->sum[k] += nll[p], a->count[k]++;
            a->window_sum[wk] += nll[p], a->window_count[wk]++;
        }
}

/* The bins' means and intervals, and the mean over every scored position. */
static void bins_finish(const bin_acc *a, long n_windows, int T, da_loss_position_result *r) {
    double total = 0.0;
    long tokens = 0;
    r->n_bins = a->n_bins;
    for (int k = 0; k < a->n_bins; k++) {
        da_loss_bin *bn = &r->bins[k];
        bn->first = 1 << k;
        bn->last = (2 << k) - 1 < T ? (2 << k) - 1 : T;
        bn->tokens = a->count[k];
        bn->loss = a->count[k] ? a->sum[k] / a->count[k] : NAN;
        double s = 0.0, s2 = 0.0;
        long n = 0;
        for (long w = 0; w < n_windows; w++) {
            const size_t wk = (size_t)w * a->n_bins + k;
            if (!a->window_count[wk]) continue;
            const double m = a->window_sum[wk] / a->window_count[wk];
            s += m, s2 += m * m, n++;
        }
        const double var = n > 1 ? (s2 - s * s / n) / (n - 1) : 0.0;
        const double half = n > 1 ? 1.96 * sqrt(var > 0 ? var : 0) / sqrt((double)n) : NAN;
        bn->lo = bn->loss - half, bn->hi = bn->loss + half;
        total += a->sum[k], tokens += a->count[k];
    }
    r->loss = tokens ? total / tokens : NAN;
    r->target_tokens = tokens;
    r->windows = n_windows;
    r->seq = T;
}

static void distract_fill(void *ctx, long w, long n, int T, int *tokens, int *targets) {
    da_distract_val_window(ctx, w, n, T, tokens, targets);
}

typedef struct {
    const int *ids;
} ids_window;

static void ids_fill(void *ctx, long w, long n, int T, int *tokens, int *targets) {
    (void)w, (void)n;
    const ids_window *x = ctx;
    for (int t = 0; t < T; t++) tokens[t] = x->ids[t], targets[t] = x->ids[t + 1];
}

/* The window loop over set with the training forward, observed into bins (and per position when per is set). */
static da_status run_bins(da_model *m, const da_window_set *set, long n, int T, int batch, double *per,
                          da_loss_position_result *r) {
    bin_acc a = {bin_of(T - 1) + 1, NULL, NULL, NULL, NULL, per};
    a.sum = calloc((size_t)a.n_bins, sizeof(double));
    a.count = calloc((size_t)a.n_bins, sizeof(long));
    a.window_sum = calloc((size_t)n * a.n_bins, sizeof(double));
    a.window_count = calloc((size_t)n * a.n_bins, sizeof(long));
    da_model_scorer ms = {m, NULL};
    da_status st = a.sum && a.count && a.window_sum && a.window_count ? da_ok() : da_errorf("out of memory");
    if (!st.code) st = da_acts_create_ex(&ms.a, &m->cfg, batch, T, DA_ATTN_FLASH, NULL);
    const da_window_scorer sc = da_model_window_scorer(&ms);
    const da_window_observer obs = {&a, bins_observe};
    double loss;
    if (!st.code && !(st = da_window_loss(set, n, T, batch, &sc, &obs, &loss)).code) bins_finish(&a, n, T, r);
    da_acts_free(ms.a);
    free(a.sum), free(a.count), free(a.window_sum), free(a.window_count);
    return st;
}

da_status da_eval_loss_by_position(da_model *m, const da_text_data *d, const da_loss_position_config *c,
                                   da_loss_position_result *r) {
    memset(r, 0, sizeof *r);
    const int T = c->seq;
    if (c->windows < 1 || c->batch < 1) return da_errorf("--windows and --batch must be positive");
    if (T < 1 || T > m->cfg.max_seq_len)
        return da_errorf("--seq %d is out of range (1..the model's max_seq_len %d)", T, m->cfg.max_seq_len);
    if (d->vocab_size > m->cfg.vocab_size)
        return da_errorf("the data's vocabulary (%d) is larger than the model's (%d)", d->vocab_size,
                         m->cfg.vocab_size);
    if (d->n_val < (size_t)T + 1)
        return da_errorf("the validation split holds %zu tokens, too few for windows of %d", d->n_val, T);
    const da_window_set set =
        c->distract ? (da_window_set){(void *)c->distract, distract_fill} : da_val_windows(d);
    return run_bins(m, &set, c->windows, T, c->batch, NULL, r);
}

da_status da_eval_loss_ids(da_model *m, const int *ids, int n, da_loss_position_result *r) {
    memset(r, 0, sizeof *r);
    const int T = n - 1;
    if (T < 1) return da_errorf("--ids: %d ids, at least 2 needed (a position and its next token)", n);
    if (T > m->cfg.max_seq_len)
        return da_errorf("--ids: %d positions exceed the model's max_seq_len %d", T, m->cfg.max_seq_len);
    if (!(r->per_position = malloc((size_t)T * sizeof(double)))) return da_errorf("out of memory");
    ids_window x = {ids};
    const da_window_set set = {&x, ids_fill};
    da_status st = run_bins(m, &set, 1, T, 1, r->per_position, r);
    if (st.code) da_loss_position_free(r);
    return st;
}

void da_loss_position_free(da_loss_position_result *r) {
    free(r->per_position);
    r->per_position = NULL;
}

char *da_loss_position_json(const char *model, da_arch arch, const da_loss_position_result *r, int with_bins) {
    cJSON *o = cJSON_CreateObject();
    da_json_str(o, "model", model);
    da_json_str(o, "arch", da_arch_name(arch));
    da_json_fixed(o, "loss", r->loss, 6);
    da_json_int(o, "target_tokens", r->target_tokens);
    da_json_int(o, "windows", r->windows);
    da_json_int(o, "seq", r->seq);
    if (r->per_position) {
        cJSON *a = cJSON_AddArrayToObject(o, "loss_by_position");
        char num[32];
        for (int t = 0; t < r->seq; t++) { /* six decimals, as da_json_fixed writes a field */
            if (isfinite(r->per_position[t])) snprintf(num, sizeof num, "%.6f", r->per_position[t]);
            else snprintf(num, sizeof num, "null");
            cJSON_AddItemToArray(a, cJSON_CreateRaw(num));
        }
    }
    if (with_bins) {
        cJSON *a = cJSON_AddArrayToObject(o, "bins");
        for (int k = 0; k < r->n_bins; k++) {
            cJSON *b = da_json_push(a);
            da_json_int(b, "first", r->bins[k].first);
            da_json_int(b, "last", r->bins[k].last);
            da_json_int(b, "tokens", r->bins[k].tokens);
            da_json_fixed(b, "loss", r->bins[k].loss, 6);
            da_json_fixed(b, "lo", r->bins[k].lo, 6);
            da_json_fixed(b, "hi", r->bins[k].hi, 6);
        }
    }
    return da_json_finish(o);
}
