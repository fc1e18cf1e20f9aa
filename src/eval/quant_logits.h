/* The paper's Figure 8: validation loss with the attention logits
 * fake-quantized (symmetric, one absmax scale per query row of each map)
 * before every softmax, through the inference engine. */
#ifndef DA_EVAL_QUANT_LOGITS_H
#define DA_EVAL_QUANT_LOGITS_H

#include "eval/eval.h"

#endif
