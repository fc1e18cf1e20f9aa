/* Token sampling from a logits vector: greedy, temperature, nucleus (top-p). */
#ifndef DA_SAMPLE_H
#define DA_SAMPLE_H

#include "diffattn/generate.h"

/* Picks a token from logits: (V), which must be finite.
 *   temperature <= 0: argmax (the lowest index among ties); rng is not used.
 *   otherwise: softmax(logits / temperature) restricted to the smallest set of
 *   top tokens whose probability mass reaches top_p (ties at the boundary
 *   resolved towards lower indices), renormalised, and drawn with one
 *   da_rng_uniform. top_p in (0, 1]; 1 = no restriction; top_p <= 0 keeps only
 *   the most likely token, top_p > 1 acts as 1.
 * Deterministic given the rng state. scratch: (2V) floats. Returns -1 when V <= 0. */
int da_sample_token(const float *logits, int V, float temperature, float top_p, da_rng *rng, float *scratch);

#endif
