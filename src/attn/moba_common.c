/* MoBA's code compiled once: the block choice, a block's mean key, the
 * kernels' scratch sizes, and the pick of the per-level kernel table. */
#include "attn/moba.h"
#include "diffattn/exec.h"

extern const moba_kernels moba_kernels_scalar, moba_kernels_avx2, moba_kernels_avx512, moba_kernels_avx512_vnni,
    moba_kernels_avx512_bf16;

const moba_kernels *moba_kernels_of(da_isa isa) {
    static const moba_kernels *const tables[DA_ISA_N] = {&moba_kernels_scalar, &moba_kernels_avx2,
                                                         &moba_kernels_avx512, &moba_kernels_avx512_vnni,
                                                         &moba_kernels_avx512_bf16};
    int level = (unsigned)isa < DA_ISA_N ? (int)isa : DA_ISA_N - 1;
    while (level > 0 && !da_isa_supported((da_isa)level)) level--;
    return tables[level];
}

int moba_choose(int *sel, const float *score, int c, int k) {
    /* best: the k - 1 best earlier blocks so far, by score descending; a later
     * block enters only when strictly better, so ties keep the lower index */
    int n = 0;
    int *best = sel; /* built in place, then sorted ascending with c */
    const int want = k - 1;
    for (int j = 0; j < c && want > 0; j++) {
        if (n == want && !(score[j] > score[best[n - 1]])) continue;
        int p = n < want ? n++ : n - 1;
        while (p > 0 && score[j] > score[best[p - 1]]) {
            best[p] = best[p - 1];
            p--;
        }
        best[p] = j;
    }
    best[n++] = c;
    for (int a = 1; a < n; a++) /* insertion sort ascending: n <= k */
        for (int b = a; b > 0 && sel[b] < sel[b - 1]; b--) {
            const int t = sel[b];
            sel[b] = sel[b - 1];
            sel[b - 1] = t;
        }
    for (int r = n; r < k; r++) sel[r] = -1;
    return n;
}

void moba_block_mean(float *mean, const float *k, size_t ld, int n, int d) {
    for (int e = 0; e < d; e++) mean[e] = 0.0f;
    for (int p = 0; p < n; p++)
        for (int e = 0; e < d; e++) mean[e] += k[(size_t)p * ld + e];
    for (int e = 0; e < d; e++) mean[e] /= (float)n;
}

float moba_score_dot(const float *q, const float *mean, int d) {
    float acc = 0.0f;
    for (int e = 0; e < d; e++) {
        const float p = q[e] * mean[e]; /* its own statement: no compiler fuses it into the sum */
        acc += p;
    }
    return acc;
}

/* The block means transposed, (B, G, d, T/Bk), then each thread's scores (T/Bk + 1). */
size_t moba_select_scratch_floats(const moba_shape *s) {
    const size_t nb = (size_t)(s->T / s->block);
    return (size_t)s->B * s->G * s->d * nb + (size_t)s->n_threads * (nb + 1);
}

/* R = min(MOBA_BR, Bk) rows, W = k Bk slots a row: the logits S (R W, the
 * forward's), the gathered rows Qg, dOg, Og and the tile's output Ot (R d
 * each), the gathered probabilities Pg and dSg (R Bk each), a float per row,
 * then ints: the per-block offsets (T/Bk + 3) and the (row, slot) entries
 * (2 R k). */
size_t moba_tile_floats(const moba_shape *s) {
    const size_t R = (size_t)(s->block < MOBA_BR ? s->block : MOBA_BR), W = (size_t)s->topk * s->block;
    return R * W + 4 * R * s->d + 2 * R * s->block + R + (size_t)(s->T / s->block + 3) + 2 * R * s->topk;
}

size_t moba_kernel_scratch_floats(const moba_shape *s) { return (size_t)s->n_threads * moba_tile_floats(s); }

