/* Activation outlier statistics (see outliers.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variant.h"
#include "model/probe.h"
#include "eval/outliers.h"

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Hoare-style selection: afterwards v[k] is the k-th smallest (0-based),
 * everything before it is <= v[k] and everything after it >= v[k]. */
static float select_kth(float *v, size_t n, size_t k) {
    long lo = 0, hi = (long)n - 1, kk = (long)k;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        long i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                float t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (kk <= j) hi = j;
        else if (kk >= i) lo = i;
        else break;
    }
    return v[kk];
}

void da_outlier_stats_of(const float *x, size_t n, float *scratch, da_outlier_stats *s) {
    memset(s, 0, sizeof *s);
    s->count = n;
    if (n == 0) return;
    for (size_t i = 0; i < n; i++) scratch[i] = fabsf(x[i]);
    /* the 100 largest, sorted, then the median of everything */
    size_t m = n < 100 ? n : 100;
    if (n > m) select_kth(scratch, n, n - m); /* the top m now sit in scratch[n-m..n) */
    float top[100];
    memcpy(top, scratch + (n - m), m * sizeof(float));
    qsort(top, m, sizeof(float), cmp_desc);
    const size_t ranks[5] = {1, 2, 3, 10, 100};
    for (int r = 0; r < 5; r++) s->top[r] = ranks[r] <= m ? top[ranks[r] - 1] : 0.0;
    if (n % 2) s->median = select_kth(scratch, n, n / 2);
    else {
        float hi = select_kth(scratch, n, n / 2), lo = scratch[0];
        for (size_t i = 0; i < n / 2; i++) lo = scratch[i] > lo ? scratch[i] : lo; /* max of the lower half */
        s->median = 0.5 * ((double)lo + hi);
    }
}

/* A lambda per layer, or per token and head (an ATTN_VIEW_LAM product). */
static int has_lambda(const da_config *c) {
    return da_attn_variant_of(c->arch)->per_layer_lambda || da_attn_tensor_with_view(c, ATTN_VIEW_LAM) >= 0;
}

/* Adds layer l's lambdas of one window to acc (count, sum, sum of squares, min, max). */
static void lambda_accumulate(const da_model *m, const da_acts *a, int l, int T, double acc[5]) {
    const da_config *c = &m->cfg;
    const float *lam = da_acts_lam(a, l); /* (T, H): a lambda per token and head, or NULL */
    const float one = da_model_lambda(m, l);
    const size_t n = lam ? (size_t)T * c->n_heads : 1;
    if (!has_lambda(c)) return;
    for (size_t i = 0; i < n; i++) {
        const double v = lam ? lam[i] : one;
        if (acc[0] == 0 || v < acc[3]) acc[3] = v;
        if (acc[0] == 0 || v > acc[4]) acc[4] = v;
        acc[0] += 1, acc[1] += v, acc[2] += v * v;
    }
}

static void lambda_summary(const da_config *c, double acc[][5], da_outliers_result *r) {
    r->n_lambda = !has_lambda(c) ? 0 : c->n_layers < DA_ATTN_MAX_LAYERS ? c->n_layers : DA_ATTN_MAX_LAYERS;
    for (int l = 0; l < r->n_lambda; l++) {
        const double n = acc[l][0], mean = acc[l][1] / n, var = acc[l][2] / n - mean * mean;
        r->lambda_mean[l] = mean;
        r->lambda_std[l] = var > 0 ? sqrt(var) : 0.0;
        r->lambda_min[l] = acc[l][3];
        r->lambda_max[l] = acc[l][4];
    }
}

/* Window w of `windows` into tok (T). */
typedef void (*window_fn)(const void *ctx, long w, long windows, int T, int *tok);

static da_status outliers(da_model *m, window_fn window, const void *ctx, int T, long windows, da_outliers_result *r) {
    memset(r, 0, sizeof *r);
    const da_config *c = &m->cfg;
    if (T > c->max_seq_len) return da_errorf("--seq %d exceeds the model's max_seq_len %d", T, c->max_seq_len);
    if (windows < 1) return da_errorf("--windows must be positive");
    const attn_variant *var = da_attn_variant_of(c->arch);
    const int C = c->dim, n_q = var->logit_maps(c); /* the score maps whose logits count */
    size_t pairs = 0; /* (query, key) pairs a map scores: causal, within the window */
    for (int t = 0; t < T; t++) pairs += (size_t)(t - attn_first_key(t, c->window) + 1);
    const size_t n_logits = (size_t)windows * c->n_layers * n_q * pairs, n_hidden = (size_t)windows * c->n_layers * T * C;
    float *logits = malloc(n_logits * sizeof(float)), *hidden = malloc(n_hidden * sizeof(float));
    float *scratch = malloc((n_logits > n_hidden ? n_logits : n_hidden) * sizeof(float));
    int *tok = malloc((size_t)T * sizeof(int));
    da_acts *a = NULL;
    da_status st = da_ok();
    if (!logits || !hidden || !scratch || !tok)
        st = da_errorf("out of memory for %zu attention logits (lower --windows or --seq)", n_logits);
    if (!st.code) st = da_acts_create(&a, c, 1, T);
    size_t nl = 0, nh = 0;
    double lam_acc[DA_ATTN_MAX_LAYERS][5]; /* count, sum, sum of squares, min, max */
    memset(lam_acc, 0, sizeof lam_acc);
    for (long w = 0; w < windows && !st.code; w++) {
        window(ctx, w, windows, T, tok);
        da_forward(m, a, tok, NULL, 1, T);
        for (int l = 0; l < c->n_layers; l++) {
            attn_probe p;
            da_acts_probe(a, m, l, &p);
            for (int s = 0; s < n_q; s++)
                for (int t = 0; t < T; t++) {
                    const int j0 = attn_first_key(t, c->window);
                    nl += (size_t)var->logits(&p, s, t, j0, logits + nl);
                }
            if (l < DA_ATTN_MAX_LAYERS) lambda_accumulate(m, a, l, T, lam_acc[l]);
            memcpy(hidden + nh, da_acts_hidden(a, l), (size_t)T * C * sizeof(float));
            nh += (size_t)T * C;
        }
    }
    if (!st.code) {
        da_outlier_stats_of(logits, nl, scratch, &r->logits);
        da_outlier_stats_of(hidden, nh, scratch, &r->hidden);
        r->tokens = windows * T;
        lambda_summary(c, lam_acc, r);
    }
    da_acts_free(a);
    free(logits), free(hidden), free(scratch), free(tok);
    return st;
}

static void text_window(const void *ctx, long w, long windows, int T, int *tok) {
    int tgt[T];
    da_text_data_val_window(ctx, w, windows, T, tok, tgt);
}

da_status da_eval_outliers(da_model *m, const da_text_data *data, int T, long windows, da_outliers_result *r) {
    if (data->n_val < (size_t)T + 1) return da_errorf("the validation split is shorter than one window of %d", T);
    return outliers(m, text_window, data, T, windows, r);
}

static void seq_window(const void *ctx, long w, long windows, int T, int *tok) {
    (void)windows;
    memcpy(tok, (const int *)ctx + (size_t)w * T, (size_t)T * sizeof(int));
}

da_status da_eval_outliers_of(da_model *m, const int *tokens, long n, int T, da_outliers_result *r) {
    return outliers(m, seq_window, tokens, T, n, r);
}
