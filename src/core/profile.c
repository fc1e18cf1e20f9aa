/* Per-phase wall time of a training step (see profile.h). */
#include <string.h>

#include "core/profile.h"

int da_prof_on = 0;
double da_prof_s[DA_PROF_N];

const char *da_prof_name(da_prof_phase p) {
    static const char *names[DA_PROF_N] = {
        "embedding", "rmsnorm", "matmul_forward", "matmul_backward", "rope", "attention_forward",
        "attention_backward", "head_norm", "swiglu", "residual", "loss", "zero_grads", "adamw",
    };
    return p < DA_PROF_N ? names[p] : "?";
}

void da_prof_reset(void) { memset(da_prof_s, 0, sizeof da_prof_s); }
