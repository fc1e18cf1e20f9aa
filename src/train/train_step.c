/* Training steps outside a run, for benchmarks (see diffattn/train.h). */
#include <stdlib.h>

#include "core/profile.h"
#include "diffattn/train.h"

struct da_train_stepper {
    da_model *m;
    da_adamw opt;
    da_train_config tc;
    da_exec x;
};

da_status da_train_stepper_create(da_train_stepper **out, da_model *m, const da_train_config *tc, const da_exec *x) {
    *out = NULL;
    da_status st = da_train_config_validate(tc);
    if (st.code) return st;
    da_train_stepper *s = calloc(1, sizeof *s);
    if (!s) return da_errorf("out of memory");
    s->m = m, s->tc = *tc, s->x = x ? *x : da_exec_default();
    if (!m->grads) st = da_model_alloc_grads(m);
    if (!st.code) st = da_adamw_create(&s->opt, m->n_params);
    if (st.code) {
        da_train_stepper_free(s);
        return st;
    }
    s->opt.isa = s->x.isa;
    *out = s;
    return st;
}

float da_train_step(da_train_stepper *s, da_acts *a, const int *tokens, const int *targets, int B, int T) {
    const da_train_config *tc = &s->tc;
    double *prof = s->x.prof_s;
    DA_PROF(prof, DA_PROF_ZERO_GRADS, da_model_zero_grads(s->m));
    const float loss = da_forward(s->m, a, tokens, targets, B, T);
    da_backward(s->m, a);
    if (tc->clip > 0) {
        const float norm = da_grad_norm(s->m);
        if (norm > tc->clip) da_grad_scale(s->m, tc->clip / norm);
    }
    const da_adamw_config ac = {tc->beta1, tc->beta2, tc->adam_eps, tc->weight_decay};
    const float lr = da_lr_schedule(s->opt.step, tc->warmup, tc->steps, tc->lr, tc->min_lr);
    DA_PROF(prof, DA_PROF_ADAMW, da_adamw_step(&s->opt, s->m, &ac, lr));
    return loss;
}

void da_train_stepper_free(da_train_stepper *s) {
    if (!s) return;
    da_adamw_free(&s->opt);
    free(s);
}
