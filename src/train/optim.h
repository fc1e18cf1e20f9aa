/* AdamW internals shared by the training loop's data-parallel step. */
#ifndef DA_OPTIM_H
#define DA_OPTIM_H

#include <stddef.h>

#include "diffattn/train.h"

/* The same step on the parameters [lo, hi) of the flat buffer only, whose
 * moments opt->m, opt->v hold (index 0 is parameter lo): ZeRO-1's shard.
 * Each parameter gets the same arithmetic as in da_adamw_step. */
void da_adamw_step_range(da_adamw *opt, da_model *m, const da_adamw_config *cfg, float lr, size_t lo, size_t hi);

#endif
