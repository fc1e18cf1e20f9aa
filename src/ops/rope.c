/* Rotary position embedding, GPT-J interleaved pairs. Frequencies: the
 * official DIFF framework's theta^(-j/(d/2-1)) (a linspace over [0, 1]), or
 * Llama's theta^(-2j/d) with Hugging Face's linear and llama3 scaling. */
#include <math.h>

#include "ops/ops.h"

void rope_inv_freq(double *inv_freq, int d, const rope_freq_spec *f) {
    const int half = d / 2;
    const double two_pi = 6.283185307179586;
    for (int j = 0; j < half; j++) {
        double e = f->rule == 1 ? 2.0 * j / d : (double)j / (double)(half - 1);
        double w = pow(f->theta, -e);
        if (f->scaling == 1) {
            w /= f->factor;
        } else if (f->scaling == 2) {
            /* wavelengths above original/low_freq_factor are slowed by factor,
             * those below original/high_freq_factor kept, a linear blend of
             * the two in between (in 1/wavelength). */
            double wavelen = two_pi / w;
            double low_wl = f->original_max_pos / f->low_freq_factor;
            double high_wl = f->original_max_pos / f->high_freq_factor;
            if (wavelen > low_wl) {
                w /= f->factor;
            } else if (!(wavelen < high_wl)) {
                double s = (f->original_max_pos / wavelen - f->low_freq_factor) /
                           (f->high_freq_factor - f->low_freq_factor);
                w = (1 - s) * w / f->factor + s * w;
            }
        }
        inv_freq[j] = w;
    }
}

void rope_tables_freq(float *cos_tab, float *sin_tab, int T, int d, const double *inv_freq) {
    int half = d / 2;
    for (int j = 0; j < half; j++) {
        for (int t = 0; t < T; t++) {
            double a = (double)t * inv_freq[j];
            cos_tab[(size_t)t * half + j] = (float)cos(a);
            sin_tab[(size_t)t * half + j] = (float)sin(a);
        }
    }
}

void rope_tables(float *cos_tab, float *sin_tab, int T, int d, float theta) {
    double inv_freq[512]; /* d <= 1024 (da_config_validate) */
    rope_freq_spec f = {.rule = 0, .scaling = 0, .theta = theta};
    rope_inv_freq(inv_freq, d, &f);
    rope_tables_freq(cos_tab, sin_tab, T, d, inv_freq);
}

void rope_apply(float *x, const float *cos_tab, const float *sin_tab, int B, int T, int n_sub, int d,
                int inverse) {
    const int half = d / 2;
    const float sgn = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        const float *c = cos_tab + (size_t)t * half, *s = sin_tab + (size_t)t * half;
        float *row = x + (size_t)bt * n_sub * d;
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
}
