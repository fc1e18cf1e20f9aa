/* RMSNorm: x * rsqrt(mean(x^2) + eps) * w. */
#include <math.h>

#include "ops/ops.h"

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float ss = 0.0f;
        for (int i = 0; i < C; i++) ss += xr[i] * xr[i];
        float r = 1.0f / sqrtf(ss / C + eps);
        rstd[n] = r;
        for (int i = 0; i < C; i++) o[i] = xr[i] * r * w[i];
    }
}

void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int N, int C) {
    /* dx = rstd * (g - xhat * mean(g * xhat)), g = dout * w, xhat = x * rstd */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dxr = dx + (size_t)n * C;
        float r = rstd[n], dot = 0.0f;
        for (int i = 0; i < C; i++) dot += dy[i] * w[i] * xr[i] * r;
        dot /= C;
        for (int i = 0; i < C; i++) dxr[i] += r * (dy[i] * w[i] - xr[i] * r * dot);
    }
    /* Serial over rows so the sum order, and so the result, is fixed. */
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *dy = dout + (size_t)n * C;
        float r = rstd[n];
        for (int i = 0; i < C; i++) dw[i] += dy[i] * xr[i] * r;
    }
}
