/* Validation loss: the mean next-token cross-entropy over a fixed set of
 * windows spread evenly over the validation split (the same set for every
 * model, so numbers compare across runs and architectures). */
#ifndef DA_EVAL_LOSS_H
#define DA_EVAL_LOSS_H

#include "data/text_data.h"
#include "diffattn/train.h"
#include "train/window_loss.h"

/* da_eval_loss is in diffattn/train.h. */

#endif
