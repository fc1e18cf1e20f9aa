/* NSA's per-query pieces that the efficient kernels (nsa_flash.c) and the
 * decoding step (nsa_decode.c) share: the selection branch of one query and
 * one group, whose rep = H/G heads read each loaded key once, and the
 * importance of the selection blocks. Compiled per level through
 * nsa_variant.c, so everything here is static. */
#include <math.h>
#include <string.h>

#include "attn/nsa_rows.h"
#include "ops/prefetch.h"
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
        float *p = sc + (size_t)hh * nk_max, mx = -INFINITY;
        for (int j = 0; j < nk; j++) mx = p[j] > mx ? p[j] : mx;
        const float sum = exp_shift_sum(p, nk, mx);
        const float inv = 1.0f / sum;
        for (int j = 0; j < nk; j++) p[j] *= inv;
        if (lse) lse[(size_t)hh * lse_stride] = mx + logf(sum);
    }
    runs_axpy(o, sc, nk_max, v, ld, start, end, nr, rep, d);
}

#define NSA_KB 4 /* heads per pass over a key row's gradients */

/* dk (d) += sum_h ds[h*ldp] q_h, dv (d) += sum_h p[h*ldp] dO_h over nh <= NSA_KB heads (q, dO: rows of d). */
static inline void key_grads(float *dk, float *dv, const float *q, const float *dO, const float *p, const float *ds, int ldp,
                      int nh, int d) {
    float pv[NSA_KB], dsv[NSA_KB];
    for (int h = 0; h < nh; h++) pv[h] = p[(size_t)h * ldp], dsv[h] = ds[(size_t)h * ldp];
    int c0 = 0;
#ifdef NSA_HB
    __m256 pb[NSA_KB], db[NSA_KB];
    for (int h = 0; h < nh; h++) pb[h] = _mm256_set1_ps(pv[h]), db[h] = _mm256_set1_ps(dsv[h]);
    for (; c0 + 8 <= d; c0 += 8) {
        __m256 a = _mm256_loadu_ps(dk + c0), b = _mm256_loadu_ps(dv + c0);
        for (int h = 0; h < nh; h++) {
            a = _mm256_fmadd_ps(db[h], _mm256_loadu_ps(q + (size_t)h * d + c0), a);
            b = _mm256_fmadd_ps(pb[h], _mm256_loadu_ps(dO + (size_t)h * d + c0), b);
        }
        _mm256_storeu_ps(dk + c0, a);
        _mm256_storeu_ps(dv + c0, b);
    }
#endif
    for (int c = c0; c < d; c++) {
        float a = dk[c], b = dv[c];
        for (int h = 0; h < nh; h++) a += dsv[h] * q[(size_t)h * d + c], b += pv[h] * dO[(size_t)h * d + c];
        dk[c] = a, dv[c] = b;
    }
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

/* One run of keys [k0, k1) of a query's chosen blocks, merged into its
 * online softmax: o (rep rows of d, unnormalised), run_max and run_sum (rep)
 * rescaled to the new maximum, then o += exp(s - max) . values. Once every
 * chosen block has been merged, o / run_sum is the selection's output and
 * run_max + log(run_sum) its log-sum-exp. sc: rep * n * l' floats. */
static void nsa_slc_merge_run(float *o, float *run_max, float *run_sum, const float *q, const float *kT, int ldT,
                              const float *v, int ld, int k0, int k1, int rep, const nsa_shape *s, float *sc) {
    const int d = s->d, nk_max = s->topn * s->select;
    const int nk = slc_scores(sc, q, kT, ldT, &k0, &k1, 1, rep, d, nk_max, 1.0f / sqrtf((float)d));
    if (nk == 0) return;
    for (int hh = 0; hh < rep; hh++) {
        float *p = sc + (size_t)hh * nk_max, mx = run_max[hh];
        for (int j = 0; j < nk; j++) mx = p[j] > mx ? p[j] : mx;
        const float alpha = expf(run_max[hh] - mx); /* 0 at the first run (run_max -inf) */
        run_sum[hh] = run_sum[hh] * alpha + exp_shift_sum(p, nk, mx);
        run_max[hh] = mx;
        if (alpha != 1.0f)
            for (int c = 0; c < d; c++) o[(size_t)hh * d + c] *= alpha;
    }
    runs_axpy(o, sc, nk_max, v, ld, &k0, &k1, 1, rep, d);
}

/* Its backward over the keys of the runs [start, end) (all of a query's
 * chosen keys, or a part: the terms are per key): dO (rep rows of d) the
 * gradient of o; D (rep) = rowsum(dO * o); lse the forward's (over all the
 * query's keys); k the key rows (stride ld, as dk and dv), kT, vT the keys and
 * values transposed (stride ldT); dq (rep rows) +=; dk, dv key rows +=.
 * sc: scratch of 2 * rep * n * l'. */
static void nsa_slc_runs_backward(float *dq, float *dk, float *dv, const float *dO, const float *D, const float *lse,
                                  int lse_stride, const float *q, const float *k, const float *kT, const float *vT,
                                  int ld, int ldT, const int *start, const int *end, int nr, int rep,
                                  const nsa_shape *s, float *sc) {
    const int d = s->d, nk_max = s->topn * s->select;
    const float scale = 1.0f / sqrtf((float)d);
    float *dP = sc + (size_t)rep * nk_max;
    const int nk = slc_scores(sc, q, kT, ldT, start, end, nr, rep, d, nk_max, scale);
    slc_scores(dP, dO, vT, ldT, start, end, nr, rep, d, nk_max, 1.0f);
    for (int hh = 0; hh < rep; hh++) {
        float *p = sc + (size_t)hh * nk_max, *dp = dP + (size_t)hh * nk_max;
        exp_shift_sum(p, nk, lse[(size_t)hh * lse_stride]);
        const float Dh = D[hh];
#pragma omp simd
        for (int j = 0; j < nk; j++) dp[j] = p[j] * (dp[j] - Dh) * scale; /* dS */
    }
    runs_axpy(dq, dP, nk_max, k, ld, start, end, nr, rep, d); /* dq_h += sum_u dS_hu k_u */
    /* dk_u += sum_h dS_hu q_h, dv_u += sum_h P_hu dO_h: each key row read and written once per NSA_KB heads */
    int j = 0;
    for (int r = 0; r < nr; r++)
        for (int u = start[r]; u < end[r]; u++, j++) {
            const int ua = key_ahead(start, end, nr, r, u, 16);
            if (ua >= 0) {
                prefetch_bytes(dk + (size_t)ua * ld, (size_t)d * sizeof(float));
                prefetch_bytes(dv + (size_t)ua * ld, (size_t)d * sizeof(float));
            }
            for (int h0 = 0; h0 < rep; h0 += NSA_KB)
                key_grads(dk + (size_t)u * ld, dv + (size_t)u * ld, q + (size_t)h0 * d, dO + (size_t)h0 * d,
                          sc + (size_t)h0 * nk_max + j, dP + (size_t)h0 * nk_max + j, nk_max,
                          rep - h0 < NSA_KB ? rep - h0 : NSA_KB, d);
        }
}

/* xT (d, ldT) = x (n rows of d, stride ld) transposed: column u of xT is row u of x. */
static void nsa_transpose(float *xT, int ldT, const float *x, int ld, int n, int d) {
    for (int u0 = 0; u0 < n; u0 += 16) {
        const int ue = u0 + 16 < n ? u0 + 16 : n;
        for (int c = 0; c < d; c++)
            for (int u = u0; u < ue; u++) xT[(size_t)c * ldT + u] = x[(size_t)u * ld + c];
    }
}

/* imp[0 .. t/l'] = the importance of each selection block for query t: the
 * sum over the rep heads' compressed probabilities p (rep rows, stride
 * p_stride, the first nsa_n_visible(t) entries) of the blocks inside it. */
static void nsa_importance(float *imp, const float *p, int p_stride, int rep, int t, const nsa_shape *s) {
    const int nb = t / s->select + 1, nv = nsa_n_visible(s, t);
    memset(imp, 0, (size_t)nb * sizeof(float));
    for (int hh = 0; hh < rep; hh++) {
        const float *ph = p + (size_t)hh * p_stride;
        for (int i = 0; i < nv; i++) {
            const int j = nsa_owner_block(s, i);
            if (j >= 0) imp[j] += ph[i];
        }
    }
}
