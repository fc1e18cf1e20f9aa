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
    const size_t fwd = (size_t)FLASH_BC * FLASH_BR + maps * dv * FLASH_BR /* S^T, O^T per map */
                       + 2 * maps * FLASH_BR;                                /* running max and sum */
    const size_t bwd = (size_t)4 * FLASH_BR * FLASH_BC                      /* dP, P, dS, sum_m c_m P_m */
                       + 2 * FLASH_BC * dpad + 2 * d * FLASH_BC + dv * FLASH_BC; /* K, dK^T, dV^T of a key tile */
    return (fwd > bwd ? fwd : bwd) + maps * (size_t)s->T; /* D_m for every row of a head */
}

size_t da_flash_scratch_size(const attn_shape *s, const attn_layout *lay) {
    /* the transposes of q, k, v and dO the kernels read rows of tokens from (flash_attention.c) */
    const size_t ld = da_flash_row_floats(s->T);
    const size_t cols = (size_t)s->n_heads * lay->maps * s->d + 2 * (size_t)s->Ckv + (size_t)s->C;
    return (size_t)s->n_threads * da_flash_scratch_per_thread(s, lay) + (size_t)s->B * s->n_heads
           + (size_t)s->B * cols * ld + 16; /* + 16: they start on a cache line */
}

void da_quantize_logit_row(float *a, int n, int bits) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fabsf(a[j]) > amax ? fabsf(a[j]) : amax;
    if (amax == 0.0f) return;
    const float levels = (float)((1 << (bits - 1)) - 1), step = amax / levels;
    for (int j = 0; j < n; j++) a[j] = roundf(a[j] / step) * step;
}
