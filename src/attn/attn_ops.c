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

size_t da_attn_scratch_size(const attn_shape *s) {
    return (size_t)s->n_threads * 4 * s->T * s->T + (size_t)s->B * s->T * s->C + (size_t)s->B * s->n_heads;
}

size_t da_flash_scratch_per_thread(const attn_shape *s, const attn_layout *lay) {
    const size_t maps = (size_t)lay->maps, d = (size_t)s->d, dv = (size_t)lay->v_subheads * s->d;
    const size_t dpad = (d + 15) / 16 * 16; /* K rows padded to whole vectors of the widest level */
    const size_t fwd = maps * d * FLASH_BR + (size_t)FLASH_BC * FLASH_BR + maps * dv * FLASH_BR /* Q^T, S^T, O^T */
                       + 2 * maps * FLASH_BR;                                                   /* running max, sum */
    const size_t bwd = (size_t)4 * FLASH_BR * FLASH_BC                       /* dP, P, dS, sum_m c_m P_m */
                       + 2 * FLASH_BC * dpad + 4 * d * FLASH_BC + 2 * dv * FLASH_BC; /* K, K^T, dK^T, V^T, dV^T */
    return (fwd > bwd ? fwd : bwd) + maps * (size_t)s->T; /* D_m for every row of a head */
}

size_t da_flash_scratch_size(const attn_shape *s, const attn_layout *lay) {
    return (size_t)s->n_threads * da_flash_scratch_per_thread(s, lay) + (size_t)s->B * s->n_heads;
}

void da_quantize_logit_row(float *a, int n, int bits) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fabsf(a[j]) > amax ? fabsf(a[j]) : amax;
    if (amax == 0.0f) return;
    const float levels = (float)((1 << (bits - 1)) - 1), step = amax / levels;
    for (int j = 0; j < n; j++) a[j] = roundf(a[j] / step) * step;
}
