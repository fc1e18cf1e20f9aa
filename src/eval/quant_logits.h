/* The paper's Figure 8: validation loss with the attention logits
 * fake-quantized (symmetric, one absmax scale per query row of each map)
 * before every softmax, through the inference engine. */
#ifndef DA_EVAL_QUANT_LOGITS_H
#define DA_EVAL_QUANT_LOGITS_H

#include "data/text_data.h"
#include "diffattn/generate.h"
#include "train/eval_loss.h"

/* The mean next-token loss over the same n_windows windows of T tokens as
 * da_eval_loss, each run from an empty KV cache with the logits quantized to
 * logit_bits (0: exact). */
da_status da_eval_loss_logit_bits(const da_model *m, const da_text_data *data, int T, long n_windows, int logit_bits,
                                  da_eval_loss_result *r);

#endif
