/* Names of the profiled phases (see profile.h). */
#include "core/profile.h"

const char *da_prof_name(da_prof_phase p) {
    static const char *names[DA_PROF_N] = {
        "embedding", "rmsnorm", "matmul_forward", "matmul_backward", "rope", "attention_forward",
        "attention_backward", "head_norm", "swiglu", "residual", "loss", "zero_grads", "adamw",
    };
    return (unsigned)p < DA_PROF_N ? names[p] : "?";
}
