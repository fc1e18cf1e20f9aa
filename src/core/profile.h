/* Wall time per phase of a training step, for `bench train --profile`: where
 * a step goes, so that the next optimisation is chosen by measurement. The
 * seconds go to the caller's array (da_exec.prof_s, DA_PROF_N of them); with
 * none (NULL) each probe costs one branch. */
#ifndef DA_PROFILE_H
#define DA_PROFILE_H

#include "core/clock.h"
#include "diffattn/core.h"
#include "diffattn/exec.h"

/* DA_PROF(prof_s, phase, statement;): runs the statement, adding its wall
 * time to prof_s[phase] when prof_s is not NULL. */
#define DA_PROF(prof_s, phase, ...)                                \
    do {                                                           \
        double *da_prof_p_ = (prof_s);                             \
        double da_prof_t0_ = da_prof_p_ ? da_now_s() : 0.0;        \
        __VA_ARGS__;                                               \
        if (da_prof_p_) da_prof_p_[phase] += da_now_s() - da_prof_t0_; \
    } while (0)

#endif
