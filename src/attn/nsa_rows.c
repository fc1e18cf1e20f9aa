/* NSA's per-query pieces: the attention of one query and one group over
 * runs of keys, whose rep = H/G heads read each loaded key once (the
 * decoding step, nsa_decode.c), and the importance of the selection blocks
 * (that step and the efficient kernels, nsa_flash.c). Compiled per level through
 * nsa_variant.c, so everything here is static. */
#include <math.h>
#include <string.h>

#include "attn/nsa_rows.h"
#include "ops/vexp.h"

/* The keys of query t in the chosen blocks sel (n slots, -1 after the last),
 * as [start, end) runs; returns the number of runs. */
static int nsa_sel_runs(int *start, int *end, const int *sel, int t, const nsa_shape *s) {
    int n = 0;
    for (int k = 0; k < s->topn && sel[k] >= 0; k++) {
        int a = sel[k] * s->select, e = a + s->select;
        if (e > t + 1) e = t + 1;
        if (n > 0 && end[n - 1] == a) end[n - 1] = e; /* adjacent blocks: one run */
        else { start[n] = a; end[n] = e; n++; }
    }
    return n;
}

/* The key `ahead` places after key u (in run r) in the runs' order, or -1 past the last: what the loops
 * below prefetch. The selected keys are scattered over the sequence, beyond the hardware prefetcher's reach. */
static inline int key_ahead(const int *start, const int *end, int nr, int r, int u, int ahead) {
    u += ahead;
    while (u >= end[r]) {
        const int over = u - end[r];
        if (++r >= nr) return -1;
        u = start[r] + over;
    }
    return u;
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define NSA_HB 4 /* heads whose sums stay in registers together */

/* out[h*ldo + 0..15] = scale * q_h . x_u for 16 keys u (nh <= NSA_HB heads of q, stride d), from xT's
 * channel rows (channel c of the keys at xT + c*ldT). Each loaded key vector serves the nh heads. */
static inline __attribute__((always_inline)) void scores16_nh(float *out, int ldo, const float *q, int d,
                                                              const float *xT, int ldT, float scale, const int nh) {
    __m256 acc[NSA_HB][2];
#pragma GCC unroll 4
    for (int h = 0; h < nh; h++) acc[h][0] = acc[h][1] = _mm256_setzero_ps();
    for (int c = 0; c < d; c++) {
        const float *xr = xT + (size_t)c * ldT;
        const __m256 k0 = _mm256_loadu_ps(xr), k1 = _mm256_loadu_ps(xr + 8);
#pragma GCC unroll 4
        for (int h = 0; h < nh; h++) {
            const __m256 qb = _mm256_broadcast_ss(q + (size_t)h * d + c);
            acc[h][0] = _mm256_fmadd_ps(qb, k0, acc[h][0]);
            acc[h][1] = _mm256_fmadd_ps(qb, k1, acc[h][1]);
        }
    }
    const __m256 sv = _mm256_set1_ps(scale);
#pragma GCC unroll 4
    for (int h = 0; h < nh; h++) {
        _mm256_storeu_ps(out + (size_t)h * ldo, _mm256_mul_ps(acc[h][0], sv));
        _mm256_storeu_ps(out + (size_t)h * ldo + 8, _mm256_mul_ps(acc[h][1], sv));
    }
}

static void scores16(float *out, int ldo, const float *q, int nh, int d, const float *xT, int ldT, float scale) {
    switch (nh) {
    case 1: scores16_nh(out, ldo, q, d, xT, ldT, scale, 1); break;
    case 2: scores16_nh(out, ldo, q, d, xT, ldT, scale, 2); break;
    case 3: scores16_nh(out, ldo, q, d, xT, ldT, scale, 3); break;
    default: scores16_nh(out, ldo, q, d, xT, ldT, scale, 4); break;
    }
}

/* o[h*d + c0 .. c0+15] += sum_j p[h*ldp + j] * row_j[c0 .. c0+15] for nh <= NSA_HB heads, over the keys
 * of the runs in order (row u at x + u*ld): the 16 channels of the nh heads stay in registers. */
static inline __attribute__((always_inline)) void axpy16_nh(float *o, int d, const float *p, int ldp, const float *x,
                                                            int ld, const int *start, const int *end, int nr,
                                                            const int nh) {
    __m256 acc[NSA_HB][2];
#pragma GCC unroll 4
    for (int h = 0; h < nh; h++) {
        acc[h][0] = _mm256_loadu_ps(o + (size_t)h * d);
        acc[h][1] = _mm256_loadu_ps(o + (size_t)h * d + 8);
    }
    int j = 0;
    for (int r = 0; r < nr; r++)
        for (int u = start[r]; u < end[r]; u++, j++) {
            const float *xr = x + (size_t)u * ld;
            const int ua = key_ahead(start, end, nr, r, u, 64);
            if (ua >= 0) __builtin_prefetch(x + (size_t)ua * ld);
            const __m256 x0 = _mm256_loadu_ps(xr), x1 = _mm256_loadu_ps(xr + 8);
#pragma GCC unroll 4
            for (int h = 0; h < nh; h++) {
                const __m256 pb = _mm256_broadcast_ss(p + (size_t)h * ldp + j);
                acc[h][0] = _mm256_fmadd_ps(pb, x0, acc[h][0]);
                acc[h][1] = _mm256_fmadd_ps(pb, x1, acc[h][1]);
            }
        }
#pragma GCC unroll 4
    for (int h = 0; h < nh; h++) {
        _mm256_storeu_ps(o + (size_t)h * d, acc[h][0]);
        _mm256_storeu_ps(o + (size_t)h * d + 8, acc[h][1]);
    }
}

static void axpy16(float *o, int d, const float *p, int ldp, const float *x, int ld, const int *start,
                   const int *end, int nr, int nh) {
    switch (nh) {
    case 1: axpy16_nh(o, d, p, ldp, x, ld, start, end, nr, 1); break;
    case 2: axpy16_nh(o, d, p, ldp, x, ld, start, end, nr, 2); break;
    case 3: axpy16_nh(o, d, p, ldp, x, ld, start, end, nr, 3); break;
    default: axpy16_nh(o, d, p, ldp, x, ld, start, end, nr, 4); break;
    }
}
#endif

/* sc[hh*nk_max + j] = scale * q_hh . x_u for the keys u of the runs, in
 * order, from the transposed rows xT (channel c of key u at xT[c*ldT + u]):
 * an outer product per channel, vectorised over the keys, with no
 * horizontal sums; each loaded key vector serves every head. Returns the
 * number of keys. */
static int slc_scores(float *sc, const float *q, const float *xT, int ldT, const int *start, const int *end, int nr,
                      int rep, int d, int nk_max, float scale) {
    int j0 = 0;
    for (int r = 0; r < nr; r++) {
        for (int a = start[r]; a < end[r]; a += 16) { /* 16 keys at a time, their sums in registers */
            const int len = end[r] - a < 16 ? end[r] - a : 16;
            const int col = j0 + (a - start[r]);
#ifdef NSA_HB
            if (len == 16) {
                const int an = key_ahead(start, end, nr, r, a, 32);
                if (an >= 0)
                    for (int c = 0; c < d; c++) __builtin_prefetch(xT + (size_t)c * ldT + an);
                for (int h0 = 0; h0 < rep; h0 += NSA_HB)
                    scores16(sc + (size_t)h0 * nk_max + col, nk_max, q + (size_t)h0 * d,
                             rep - h0 < NSA_HB ? rep - h0 : NSA_HB, d, xT + a, ldT, scale);
                continue;
            }
#endif
            for (int hh = 0; hh < rep; hh++) {
                const float *qh = q + (size_t)hh * d;
                float acc[16] = {0};
                for (int c = 0; c < d; c++) {
                    const float *xr = xT + (size_t)c * ldT + a, qv = qh[c];
                    for (int j = 0; j < len; j++) acc[j] += qv * xr[j];
                }
                float *srow = sc + (size_t)hh * nk_max + col;
                for (int j = 0; j < len; j++) srow[j] = acc[j] * scale;
            }
        }
        j0 += end[r] - start[r];
    }
    return j0;
}

/* o (rep rows of d) += sum_j p[hh*ldp + j] * x_u over the keys u of the runs, in
 * order (row u at x + u*ld). */
static void runs_axpy(float *o, const float *p, int ldp, const float *x, int ld, const int *start, const int *end,
                      int nr, int rep, int d) {
    int c0 = 0;
#ifdef NSA_HB
    for (; c0 + 16 <= d; c0 += 16)
        for (int h0 = 0; h0 < rep; h0 += NSA_HB)
            axpy16(o + (size_t)h0 * d + c0, d, p + (size_t)h0 * ldp, ldp, x + c0, ld, start, end, nr,
                   rep - h0 < NSA_HB ? rep - h0 : NSA_HB);
#endif
    if (c0 == d) return;
    int j = 0;
    for (int r = 0; r < nr; r++)
        for (int u = start[r]; u < end[r]; u++, j++) {
            const float *xr = x + (size_t)u * ld;
            for (int hh = 0; hh < rep; hh++) {
                const float pj = p[(size_t)hh * ldp + j];
                float *oh = o + (size_t)hh * d;
                for (int c = c0; c < d; c++) oh[c] += pj * xr[c];
            }
        }
}

/* o (rep rows of d, overwritten) = softmax(q . keys / sqrt(d)) . values over
 * the keys u of the runs [start, end): kT the keys transposed (channel c of
 * key u at kT[c*ldT + u]), v the value rows (value u at v + u*ld). lse (rep
 * values, stride lse_stride) gets each row's log-sum-exp when not NULL; the
 * probabilities stay in sc (rep rows of nk_max). No key: o = 0. */
static void attend_runs(float *o, float *lse, int lse_stride, const float *q, const float *kT, int ldT,
                        const float *v, int ld, const int *start, const int *end, int nr, int rep, int d, int nk_max,
                        float *sc) {
    const int nk = slc_scores(sc, q, kT, ldT, start, end, nr, rep, d, nk_max, 1.0f / sqrtf((float)d));
    memset(o, 0, (size_t)rep * d * sizeof(float));
    if (nk == 0) return;
    for (int hh = 0; hh < rep; hh++) {
        float *p = sc + (size_t)hh * nk_max;
        const float mx = row_max(p, nk);
        const float sum = exp_shift_sum(p, nk, mx);
        const float inv = 1.0f / sum;
        for (int j = 0; j < nk; j++) p[j] *= inv;
        if (lse) lse[(size_t)hh * lse_stride] = mx + logf(sum);
    }
    runs_axpy(o, sc, nk_max, v, ld, start, end, nr, rep, d);
}

/* Selection branch, forward, for query t and one group: attend_runs over the
 * chosen blocks' keys <= t. q: rep rows of d (the group's heads, adjacent);
 * sc: scratch of 2 * rep * n * l' floats. */
static void nsa_slc_row_forward(float *o, float *lse, int lse_stride, const float *q, const float *kT, int ldT,
                                const float *v, int ld, const int *sel, int t, int rep, const nsa_shape *s,
                                float *sc) {
    int start[NSA_MAX_TOPN], end[NSA_MAX_TOPN];
    const int nr = nsa_sel_runs(start, end, sel, t, s);
    attend_runs(o, lse, lse_stride, q, kT, ldT, v, ld, start, end, nr, rep, s->d, s->topn * s->select, sc);
}

/* imp[0 .. t/l'] = the importance of each selection block for query t: the
 * sum over the rep heads' compressed probabilities p (rep rows, stride
 * p_stride, the first nsa_n_visible(t) entries) of the blocks inside it. */
static void nsa_importance(float *imp, const float *p, int p_stride, int rep, int t, const nsa_shape *s) {
    const int nb = t / s->select + 1, nv = nsa_n_visible(s, t);
    memset(imp, 0, (size_t)nb * sizeof(float));
    for (int hh = 0; hh < rep; hh++) {
        const float *ph = p + (size_t)hh * p_stride;
        /* block j holds the compressed blocks i with j l' <= i s and i s + l <= (j + 1) l' (nsa_owner_block) */
        for (int j = 0; j < nb; j++) {
            const int lo = (j * s->select + s->stride - 1) / s->stride;
            const int hi0 = (j * s->select + s->select - s->block) / s->stride + 1;
            const int hi = hi0 < nv ? hi0 : nv;
            for (int i = lo; i < hi; i++) imp[j] += ph[i];
        }
    }
}
