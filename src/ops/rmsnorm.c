/* RMSNorm: x * rsqrt(mean(x^2) + eps) * w. The row sums are `omp simd`
 * reductions: vectorised, in an order fixed by the build, so a run repeats
 * bit for bit. */
#include <math.h>
#include <omp.h>

#include "ops/ops.h"

static float rmsnorm_row(float *o, const float *xr, const float *w, int C, float eps) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < C; i++) ss += xr[i] * xr[i];
    const float r = 1.0f / sqrtf(ss / C + eps);
#pragma omp simd
    for (int i = 0; i < C; i++) o[i] = xr[i] * r * w[i];
    return r;
}

static void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) rstd[n] = rmsnorm_row(out + (size_t)n * C, x + (size_t)n * C, w, C, eps);
}

static void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                             const float *rstd, int N, int C) {
#pragma omp parallel
    {
        /* dx = rstd * (g - xhat * mean(g * xhat)), g = dout * w, xhat = x * rstd */
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            const float *xr = x + (size_t)n * C, *dy = dout + (size_t)n * C;
            float *dxr = dx + (size_t)n * C;
            float r = rstd[n], dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int i = 0; i < C; i++) dot += dy[i] * w[i] * xr[i];
            dot *= r / C;
#pragma omp simd
            for (int i = 0; i < C; i++) dxr[i] += r * (dy[i] * w[i] - xr[i] * r * dot);
        }
        /* dw: each thread owns a band of columns and sums over the rows in
         * order, so the result does not depend on the thread count. */
        const int nt = omp_get_num_threads(), band = ((C + nt - 1) / nt + 15) / 16 * 16;
        const int i0 = band * omp_get_thread_num(), i1 = i0 + band < C ? i0 + band : C;
        for (int n = 0; n < N; n++) {
            const float *xr = x + (size_t)n * C, *dy = dout + (size_t)n * C;
            const float r = rstd[n];
#pragma omp simd
            for (int i = i0; i < i1; i++) dw[i] += dy[i] * xr[i] * r;
        }
    }
}
