/* The analysis hooks' view of a forward (attn/variant.h's attn_probe), for
 * the evaluations above the model; internal to the library. */
#ifndef DA_MODEL_PROBE_H
#define DA_MODEL_PROBE_H

#include "attn/variant.h"
#include "diffattn/model.h"

/* Layer `layer` of the last da_forward of a (one sequence: B = 1, and a made
 * for that many tokens, so that the saved activations are laid out for it). */
void da_acts_probe(const da_acts *a, const da_model *m, int layer, attn_probe *p);

#endif
