/* diffattn inference: KV-cache decoding. */
#ifndef DIFFATTN_GENERATE_H
#define DIFFATTN_GENERATE_H

#include "diffattn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- generation */

typedef struct da_kv_cache da_kv_cache;

da_status da_kv_create(da_kv_cache **out, const da_config *cfg, int max_T);
void da_kv_free(da_kv_cache *kv);
void da_kv_reset(da_kv_cache *kv);
/* Feeds one token at position kv's length; returns the (V) logits, owned by kv. */
da_status da_decode_step(const da_model *m, da_kv_cache *kv, int token, const float **logits);
/* Fills an empty cache with a whole prompt in one batched forward (through a,
 * created for at least 1 x n), much faster than n decode steps; returns the
 * last position's (V) logits, owned by kv. The reference kernel in a honours
 * m->attn_logit_bits, as decoding does. */
da_status da_kv_prefill(da_model *m, da_kv_cache *kv, da_acts *a, const int *tokens, int n, const float **logits);

#ifdef __cplusplus
}
#endif
#endif
