/* Perplexity against a base model: declared in the public eval.h. */
#ifndef DA_EVAL_PPL_H
#define DA_EVAL_PPL_H

#include "eval/eval.h"

#endif
