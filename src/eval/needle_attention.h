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

#include "eval/needle.h"

#define DA_ATTN_MAX_LAYERS 64

typedef struct {
    double answer[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS]; /* per (context, depth) */
    double noise[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS];
    double answer_by_layer[DA_ATTN_MAX_LAYERS], noise_by_layer[DA_ATTN_MAX_LAYERS];
    double digits[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS]; /* answer digit accuracy */
    double answer_all, noise_all, digits_all;
    long prompts;
} da_needle_attention_result;

/* The answer-position rows of one prompt, averaged over layers and heads:
 * map (rows, cols) with rows = 7 answer-generating positions and cols = every
 * position before the question; span_begin/span_end bound the answer span. */
typedef struct {
    float *map; /* malloc'd, rows * cols */
    int rows, cols;
    int span_begin, span_end; /* [begin, end) */
    int needle_begin, needle_end;
    int first_row; /* the sequence position of map row 0 */
} da_needle_attention_map;

/* The byte-level model m on nc's prompts (every context, depth and sample). */
da_status da_eval_needle_attention(da_model *m, const da_needle_config *nc, da_needle_attention_result *r);
/* One prompt's map (context ci, depth di, sample s). Free map->map. */
da_status da_needle_attention_map_of(da_model *m, const da_needle_config *nc, int ci, int di, int s,
                                     da_needle_attention_map *map);

#endif
