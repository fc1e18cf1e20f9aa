/* The AdamW update, elementwise over a tensor's parameters (train/optim.c
 * walks the tensors and the schedule). Each lane does the same arithmetic in
 * any variant (no FMA contraction: -std=c11), so every level gives the same
 * bits; only the speed differs. */
#include <math.h>

#include "ops/ops.h"

static void adamw_update(float *p, const float *g, float *m, float *v, long n, float lr, float beta1, float beta2,
                         float eps, float wd, float bc1, float bc2) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        float gi = g[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
        v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        float mhat = m[i] / bc1, vhat = v[i] / bc2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
}
