/* The per-level op tables (ops_variant.c), and the RoPE tables, which are
 * made once per shape and need no variant. */
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
