/* Where attention goes on needle prompts (the paper's Table 3 and Figure 1).
 *
 * Each prompt is a needle haystack (needle.h) followed by the question for
 * the first asked needle and, teacher-forced, its answer:
 *   "...context...\nThe special magic {key} number is: {value}."
 * The answer-generating positions are the ones whose next token is a digit of
 * the value: the space after "is:" and the first six digits. From each, per
 * layer and head, we take the attention row P over positions 0..t:
 *   softmax: P = A;  DIFF: P = A1 - lambda * A2 (the combined map).
 * A share is sum(P over a set) / sum(|P| over the row). For softmax the
 * denominator is 1; for DIFF, negative weights count negatively in the
 * numerator (they take attention away) and by magnitude in the denominator,
 * so the shares of a row still lie in [-1, 1] and their absolute values sum
 * to at most 1.
 *   answer share: the value's digits in the context (the answer span);
 *   noise share:  the context outside the asked needle's sentence.
 * The question and answer themselves belong to neither. Shares are averaged
 * over answer positions, heads, layers and prompts.
 *
 * The same teacher-forced pass gives the answer digit accuracy: the share of
 * the seven digits that the model's top prediction gets right (chance 0.1),
 * a graded view of retrieval where exact match of all seven is still 0. */
#ifndef DA_NEEDLE_ATTENTION_H
#define DA_NEEDLE_ATTENTION_H

#include "eval/eval.h"
#include "eval/needle.h"

/* The types and functions are in eval/eval.h. */
#endif
