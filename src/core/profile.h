/* Wall time per phase of a training step, for `bench train --profile`: where
 * a step goes, so that the next optimisation is chosen by measurement. Off by
 * default; when off each probe costs one branch. */
#ifndef DA_PROFILE_H
#define DA_PROFILE_H

#include "core/clock.h"

typedef enum {
    DA_PROF_EMBEDDING,
    DA_PROF_RMSNORM,
    DA_PROF_MATMUL_FWD,
    DA_PROF_MATMUL_BWD,
    DA_PROF_ROPE,
    DA_PROF_ATTN_FWD,
    DA_PROF_ATTN_BWD,
    DA_PROF_HEAD_NORM,
    DA_PROF_SWIGLU,
    DA_PROF_RESIDUAL,
    DA_PROF_LOSS,
    DA_PROF_ZERO_GRADS,
    DA_PROF_ADAMW,
    DA_PROF_N
} da_prof_phase;

extern int da_prof_on;                /* set by the caller that wants a breakdown */
extern double da_prof_s[DA_PROF_N];   /* seconds accumulated per phase */

const char *da_prof_name(da_prof_phase p);
void da_prof_reset(void);

/* DA_PROF(phase, statement;): runs the statement, charging its wall time to phase. */
#define DA_PROF(phase, ...)                                    \
    do {                                                       \
        double da_prof_t0_ = da_prof_on ? da_now_s() : 0.0;    \
        __VA_ARGS__;                                           \
        if (da_prof_on) da_prof_s[phase] += da_now_s() - da_prof_t0_; \
    } while (0)

#endif
