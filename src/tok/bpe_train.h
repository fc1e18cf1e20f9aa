/* Training a byte-level BPE tokenizer on text files: GPT-2 pre-tokenisation,
 * then merges of the most frequent adjacent pair, counted over unique
 * pre-tokens, updated incrementally. Writes Hugging Face tokenizer.json. */
#ifndef DA_BPE_TRAIN_H
#define DA_BPE_TRAIN_H

#include "diffattn/tokenizer.h"

/* da_bpe_train is in diffattn/tokenizer.h. */

#endif
