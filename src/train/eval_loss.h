/* Validation loss: the mean next-token cross-entropy over a fixed set of
 * windows spread evenly over the validation split (the same set for every
 * model, so numbers compare across runs and architectures). */
#ifndef DA_EVAL_LOSS_H
#define DA_EVAL_LOSS_H

#include "data/text_data.h"
#include "diffattn/train.h"

/* n_windows windows of T tokens, run micro at a time through acts (sized for
 * at least micro x T); tokens, targets: scratch of micro * T. Returns the mean
 * loss in nats per token. */
float da_eval_val_loss(da_model *m, da_acts *a, const da_text_data *data, long n_windows, int T, int micro,
                       int *tokens, int *targets);

/* da_eval_loss is in diffattn/train.h. */

#endif
