/* The DIFF per-head RMSNorm (subln) and its (1 - lambda_init) scale. */
#include <math.h>

#include "attn/attention.h"

void head_norm_forward(float *y, float *rstd, const float *x, const float *w, float post, int rows, int d2) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < rows; row++) {
        const float *xr = x + (size_t)row * d2;
        float *yr = y + (size_t)row * d2;
        float ss = 0.0f;
        for (int i = 0; i < d2; i++) ss += xr[i] * xr[i];
        float r = 1.0f / sqrtf(ss / d2 + DA_SUBLN_EPS);
        rstd[row] = r;
        for (int i = 0; i < d2; i++) yr[i] = xr[i] * r * w[i] * post;
    }
}

void head_norm_backward(float *dx, float *dw, const float *dy, const float *x, const float *rstd, const float *w,
                        float post, int rows, int d2) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < rows; row++) {
        const float *xr = x + (size_t)row * d2, *g = dy + (size_t)row * d2;
        float *dxr = dx + (size_t)row * d2;
        float r = rstd[row], dot = 0.0f;
        for (int i = 0; i < d2; i++) dot += g[i] * w[i] * post * xr[i] * r;
        dot /= d2;
        for (int i = 0; i < d2; i++) dxr[i] = r * (g[i] * w[i] * post - xr[i] * r * dot);
    }
    /* Serial over rows: a fixed summation order. */
    for (int row = 0; row < rows; row++) {
        const float *xr = x + (size_t)row * d2, *g = dy + (size_t)row * d2;
        float r = rstd[row] * post;
        for (int i = 0; i < d2; i++) dw[i] += g[i] * xr[i] * r;
    }
}
