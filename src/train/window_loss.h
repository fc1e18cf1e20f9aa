/* The one loss-over-windows loop: windows of T tokens from a window set, b at
 * a time through a scorer, the running loss in the scorer's own arithmetic,
 * and each batch's loss at every position handed to an optional observer.
 * eval loss (the training forward), eval quant-logits and eval ppl (the
 * inference engine) are its callers; the by-position loss is an observer. */
#ifndef DA_WINDOW_LOSS_H
#define DA_WINDOW_LOSS_H

#include "data/text_data.h"
#include "diffattn/train.h"

typedef struct {
    void *ctx;
    /* Window w of n: tokens and targets (T); a target < 0 is not scored. */
    void (*fill)(void *ctx, long w, long n, int T, int *tokens, int *targets);
} da_window_set;

typedef struct {
    void *ctx;
    /* Scores b windows (tokens, targets: (b, T)): writes nll (b, T), the loss at each position (0 where the
     * target is < 0), and adds the batch to the running *sum and *count in the scorer's units (the training
     * forward: its batch mean x windows; the engine: per token), so each caller keeps its arithmetic.
     * w0: the first window's index, for messages. */
    da_status (*score)(void *ctx, long w0, const int *tokens, const int *targets, int b, int T, double *nll,
                       double *sum, double *count);
} da_window_scorer;

typedef struct {
    void *ctx;
    /* Called after each batch with its windows' targets and losses (b, T). */
    void (*batch)(void *ctx, long w0, int b, int T, const int *targets, const double *nll);
} da_window_observer;

/* n windows of set through sc, batch at a time; *loss = sum / count. obs may be NULL. */
da_status da_window_loss(const da_window_set *set, long n, int T, int batch, const da_window_scorer *sc,
                         const da_window_observer *obs, double *loss);

/* The windows of da_eval_loss: ctx is a const da_text_data *, window w of n evenly spaced over its validation
 * split. */
da_window_set da_val_windows(const da_text_data *d);

/* The training forward as a scorer: ctx is a da_model_scorer. The batch's mean over its scored positions,
 * times b, adds to the sum and b to the count when every position is scored (da_eval_loss's arithmetic);
 * otherwise the mean times the positions scored, and their number. */
typedef struct {
    da_model *m;
    da_acts *a; /* sized for the batch */
} da_model_scorer;
da_window_scorer da_model_window_scorer(da_model_scorer *s);

/* -log softmax(row)[target] in double, row: (V). */
double da_row_nll(const float *row, int V, int target);

#endif
