/* Multi-needle retrieval (the paper's protocol): N sentences "The special
 * magic {key} number is: {value}." hidden in filler text; R of them are asked
 * for at the end, each as "The special magic {key} number is:", and the
 * answer is the exact match of the value generated greedily. The R asked
 * needles sit at the given depth; the others at random depths. */
#ifndef DA_NEEDLE_H
#define DA_NEEDLE_H

#include <stddef.h>
#include <stdint.h>

#include "eval/eval.h"

/* Answers one prompt: writes the continuation (at most cap-1 bytes, NUL-
 * terminated). A model, or a test's oracle. */
typedef da_status (*da_needle_predict)(void *ctx, const uint8_t *prompt, size_t n, char *out, size_t cap);

/* Builds the prompt of one sample: text (malloc'd, at most contexts[ctx_i]
 * bytes, the question not included) and the asked keys and values,
 * deterministic in (config, context, depth, sample). An error when the
 * needle sentences alone do not fit the context. */
da_status da_needle_prompt(const da_needle_config *c, int ctx_i, int depth_i, int sample, uint8_t **text, size_t *n,
                           char keys[][16], char values[][16]);
/* The same text for a training document: the filler may run past the
 * context by up to one sentence, and the needles alone may too. */
da_status da_needle_document(const da_needle_config *c, int ctx_i, int depth_i, int sample, uint8_t **text,
                             size_t *n, char keys[][16], char values[][16]);
da_status da_needle_eval(const da_needle_config *c, da_needle_predict predict, void *ctx, da_needle_result *r);

/* The predictor for a model: the prompt in one batched forward into the KV
 * cache, then greedy decoding, bytes as tokens (byte-level models). */
typedef struct {
    const da_engine *e;
    int max_new;
    int logit_bits; /* attention logits fake-quantized to this many bits; 0: exact */
} da_needle_model;
da_status da_needle_predict_model(void *ctx, const uint8_t *prompt, size_t n, char *out, size_t cap);
#endif
