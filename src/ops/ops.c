/* The per-level op tables (ops_variant.c), the report of what they run,
 * and the RoPE tables, which are made once per shape and need no variant. */
#include <cblas.h>
#include <math.h>

#include "ops/ops.h"

extern const da_ops da_ops_scalar, da_ops_avx2, da_ops_avx512, da_ops_avx512_vnni, da_ops_avx512_bf16;

const da_ops *da_ops_of(da_isa isa) {
    static const da_ops *const tables[DA_ISA_N] = {&da_ops_scalar, &da_ops_avx2, &da_ops_avx512,
                                                   &da_ops_avx512_vnni, &da_ops_avx512_bf16};
    int level = (unsigned)isa < DA_ISA_N ? (int)isa : DA_ISA_N - 1;
    while (level > 0 && !da_isa_supported((da_isa)level)) level--;
    return tables[level];
}

int da_kernel_paths(da_isa isa, const char **family, const char **path, int max) {
    const da_ops *op = da_ops_of(isa);
    const char *rows[][2] = {
        {"rmsnorm, rope, swiglu, adamw loops", op->vector_path},
        {"flash attention row loops", op->vector_path},
        {"exp (attention, swiglu)", op->exp_path},
        {"int8 dots (q8_0, q4_0, q4_k)", op->dot_path},
        {"bf16 matmuls (--bf16)", op->bf16_gemm ? "avx512-bf16 vdpbf16ps" : "unavailable: fp32"},
        {"fp32 matmuls: OpenBLAS core", openblas_get_corename()},
    };
    const int n = (int)(sizeof rows / sizeof rows[0]);
    for (int i = 0; i < n && i < max; i++) {
        family[i] = rows[i][0];
        path[i] = rows[i][1];
    }
    return n;
}

/* Frequencies: the official DIFF framework's theta^(-j/(d/2-1)) (a linspace
 * over [0, 1]), or Llama's theta^(-2j/d) with Hugging Face's linear and
 * llama3 scaling. */
void da_rope_inv_freq(double *inv_freq, int d, const rope_freq_spec *f) {
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

void da_rope_tables_freq(float *cos_tab, float *sin_tab, int T, int d, const double *inv_freq) {
    int half = d / 2;
    for (int j = 0; j < half; j++) {
        for (int t = 0; t < T; t++) {
            double a = (double)t * inv_freq[j];
            cos_tab[(size_t)t * half + j] = (float)cos(a);
            sin_tab[(size_t)t * half + j] = (float)sin(a);
        }
    }
}

void da_rope_tables_theta(float *cos_tab, float *sin_tab, int T, int d, float theta) {
    double inv_freq[512]; /* d <= 1024 (da_config_validate) */
    rope_freq_spec f = {.rule = 0, .scaling = 0, .theta = theta};
    da_rope_inv_freq(inv_freq, d, &f);
    da_rope_tables_freq(cos_tab, sin_tab, T, d, inv_freq);
}
