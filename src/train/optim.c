/* AdamW with decoupled weight decay, global-norm clipping, and the
 * warmup + cosine learning-rate schedule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "train/optim.h"

da_status da_adamw_create(da_adamw *opt, size_t n_params) {
    memset(opt, 0, sizeof *opt);
    opt->n = n_params;
    opt->isa = da_exec_default().isa;
    opt->m = calloc(n_params, sizeof(float));
    opt->v = calloc(n_params, sizeof(float));
    if (!opt->m || !opt->v) {
        da_adamw_free(opt);
        return da_errorf("out of memory allocating AdamW moments (%.1f MB)", (double)n_params * 8 / 1e6);
    }
    return da_ok();
}

void da_adamw_free(da_adamw *opt) {
    free(opt->m);
    free(opt->v);
    memset(opt, 0, sizeof *opt);
}

void da_adamw_step(da_adamw *opt, da_model *m, const da_adamw_config *cfg, float lr) {
    da_adamw_step_range(opt, m, cfg, lr, 0, m->n_params);
}

void da_adamw_step_range(da_adamw *opt, da_model *m, const da_adamw_config *cfg, float lr, size_t lo, size_t hi) {
    opt->step++;
    const da_ops *op = da_ops_of(opt->isa);
    const float b1 = cfg->beta1, b2 = cfg->beta2;
    const float bc1 = 1.0f - powf(b1, (float)opt->step), bc2 = 1.0f - powf(b2, (float)opt->step);
    for (int t = 0; t < m->n_tensors; t++) {
        const da_tensor *tt = &m->tensors[t];
        /* the part of this tensor inside [lo, hi) */
        size_t t0 = tt->offset > lo ? tt->offset : lo, t1 = tt->offset + tt->numel < hi ? tt->offset + tt->numel : hi;
        if (t0 >= t1) continue;
        const float wd = tt->decay ? cfg->weight_decay : 0.0f;
        float *p = m->params + t0, *g = m->grads + t0;
        float *mm = opt->m + (t0 - lo), *vv = opt->v + (t0 - lo);
        op->adamw_update(p, g, mm, vv, (long)(t1 - t0), lr, b1, b2, cfg->eps, wd, bc1, bc2);
    }
}

float da_grad_norm(const da_model *m) {
    double s = 0.0; /* serial: the same sum on every run */
    for (size_t i = 0; i < m->n_params; i++) s += (double)m->grads[i] * m->grads[i];
    return (float)sqrt(s);
}

void da_grad_scale(da_model *m, float s) {
    for (size_t i = 0; i < m->n_params; i++) m->grads[i] *= s;
}

float da_lr_schedule(long step, long warmup, long total, float lr_max, float lr_min) {
    if (warmup > 0 && step < warmup) return lr_max * (float)(step + 1) / (float)warmup;
    if (step >= total) return lr_min;
    long span = total - warmup;
    if (span <= 0) return lr_max;
    double progress = (double)(step - warmup) / (double)span;
    return lr_min + 0.5f * (lr_max - lr_min) * (float)(1.0 + cos(3.141592653589793 * progress));
}
