/* The one loss-over-windows loop and its training-forward scorer (window_loss.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/window_loss.h"

da_status da_window_loss(const da_window_set *set, long n, int T, int batch, const da_window_scorer *sc,
                         const da_window_observer *obs, double *loss) {
    if (n < 1 || batch < 1) return da_errorf("windows (%ld) and batch (%d) must be positive", n, batch);
    const size_t cells = (size_t)batch * T;
    int *tok = malloc(cells * sizeof(int)), *tgt = malloc(cells * sizeof(int));
    double *nll = malloc(cells * sizeof(double));
    da_status st = tok && tgt && nll ? da_ok() : da_errorf("out of memory (windows of %d tokens, %d at a time)", T, batch);
    double sum = 0.0, count = 0.0;
    for (long done = 0; done < n && !st.code;) {
        const int b = (int)(n - done < batch ? n - done : batch);
        for (int i = 0; i < b; i++) set->fill(set->ctx, done + i, n, T, tok + (size_t)i * T, tgt + (size_t)i * T);
        if ((st = sc->score(sc->ctx, done, tok, tgt, b, T, nll, &sum, &count)).code) break;
        if (obs) obs->batch(obs->ctx, done, b, T, tgt, nll);
        done += b;
    }
    if (!st.code) *loss = count > 0 ? sum / count : NAN;
    free(tok);
    free(tgt);
    free(nll);
    return st;
}

static void val_fill(void *ctx, long w, long n, int T, int *tokens, int *targets) {
    da_text_data_val_window(ctx, w, n, T, tokens, targets);
}

da_window_set da_val_windows(const da_text_data *d) { return (da_window_set){(void *)d, val_fill}; }

static da_status model_score(void *ctx, long w0, const int *tokens, const int *targets, int b, int T, double *nll,
                             double *sum, double *count) {
    da_model_scorer *s = ctx;
    const float loss = da_forward(s->m, s->a, tokens, targets, b, T);
    if (!isfinite(loss))
        return da_errorf("eval loss: windows %ld..%ld: the loss is %g; the model's numbers are not finite", w0,
                         w0 + b - 1, (double)loss);
    const float *losses = da_acts_losses(s->a);
    long scored = 0;
    for (long p = 0; p < (long)b * T; p++) {
        nll[p] = targets[p] >= 0 ? (double)losses[p] : 0.0;
        scored += targets[p] >= 0;
    }
    if (scored == (long)b * T) *sum += (double)loss * b, *count += b;
    else *sum += (double)loss * scored, *count += (double)scored;
    return da_ok();
}

da_window_scorer da_model_window_scorer(da_model_scorer *s) { return (da_window_scorer){s, model_score}; }

double da_row_nll(const float *row, int V, int target) {
    double mx = row[0];
    for (int i = 1; i < V; i++) mx = row[i] > mx ? row[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp(row[i] - mx);
    return log(sum) + mx - row[target];
}
