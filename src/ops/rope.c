/* Rotary position embedding, GPT-J interleaved, by the tables of
 * da_rope_tables_theta (ops.c: the official DIFF framework's frequencies). */
#include "ops/ops.h"

static void rope_row(float *row, const float *c, const float *s, int n_sub, int d, int inverse) {
    const int half = d / 2;
    const float sgn = inverse ? -1.0f : 1.0f;
    for (int h = 0; h < n_sub; h++) {
        float *v = row + (size_t)h * d;
#pragma omp simd
        for (int j = 0; j < half; j++) {
            float x0 = v[2 * j], x1 = v[2 * j + 1], sn = sgn * s[j];
            v[2 * j] = x0 * c[j] - x1 * sn;
            v[2 * j + 1] = x0 * sn + x1 * c[j];
        }
    }
}

static void rope_apply(float *x, const float *cos_tab, const float *sin_tab, int B, int T, int n_sub, int d,
                       int inverse) {
    const int half = d / 2;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const int t = bt % T;
        rope_row(x + (size_t)bt * n_sub * d, cos_tab + (size_t)t * half, sin_tab + (size_t)t * half, n_sub, d,
                 inverse);
    }
}
