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

void rope_tables(float *cos_tab, float *sin_tab, int T, int d, float theta) {
    int half = d / 2;
    for (int j = 0; j < half; j++) {
        double inv_freq = pow((double)theta, -(double)j / (double)(half - 1));
        for (int t = 0; t < T; t++) {
            double a = (double)t * inv_freq;
            cos_tab[(size_t)t * half + j] = (float)cos(a);
            sin_tab[(size_t)t * half + j] = (float)sin(a);
        }
    }
}
