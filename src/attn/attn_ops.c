/* The per-level attention tables (attn_variant.c), and what needs no
 * variant: scratch sizes and the logit fake quantization. */
#include <math.h>

#include "attn/attention.h"
#include "attn/flash_attention.h"

extern const da_attn_ops da_attn_ops_scalar, da_attn_ops_avx2, da_attn_ops_avx512, da_attn_ops_avx512_vnni,
    da_attn_ops_avx512_bf16;

const da_attn_ops *da_attn_ops_of(da_isa isa) {
    static const da_attn_ops *const tables[DA_ISA_N] = {&da_attn_ops_scalar, &da_attn_ops_avx2, &da_attn_ops_avx512,
                                                        &da_attn_ops_avx512_vnni, &da_attn_ops_avx512_bf16};
    int level = (unsigned)isa < DA_ISA_N ? (int)isa : DA_ISA_N - 1;
    while (level > 0 && !da_isa_supported((da_isa)level)) level--;
    return tables[level];
}

size_t attn_scratch_size(const attn_shape *s) {
    return (size_t)s->n_threads * 4 * s->T * s->T + (size_t)s->B * s->T * s->C + (size_t)s->B * s->n_heads;
}

size_t flash_scratch_per_thread(const attn_shape *s, const attn_layout *lay) {
    const int maps = lay->maps, dv = lay->v_subheads * s->d;
    return (size_t)FLASH_BR * FLASH_BC * (maps + 3) /* S/P per map, dPv, Pc, dS */
           + (size_t)FLASH_BR * dv * maps            /* output accumulators */
           + (size_t)4 * FLASH_BR                    /* running max and sum per map */
           + (size_t)maps * s->T;                    /* D_m for every row of a head */
}

size_t flash_scratch_size(const attn_shape *s, const attn_layout *lay) {
    return (size_t)s->n_threads * flash_scratch_per_thread(s, lay) + (size_t)s->B * s->n_heads;
}

void da_quantize_logit_row(float *a, int n, int bits) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fabsf(a[j]) > amax ? fabsf(a[j]) : amax;
    if (amax == 0.0f) return;
    const float levels = (float)((1 << (bits - 1)) - 1), step = amax / levels;
    for (int j = 0; j < n; j++) a[j] = roundf(a[j] / step) * step;
}
