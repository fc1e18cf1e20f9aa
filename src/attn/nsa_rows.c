/* NSA's per-query pieces that the efficient kernels (nsa_flash.c) and the
 * decoding step (nsa_decode.c) share: the selection branch of one query and
 * one group, whose rep = H/G heads read each loaded key once, and the
 * importance of the selection blocks. Compiled per level through
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

/* sc[hh*nk_max + j] = scale * q_hh . x_u for the keys u of the runs, in
 * order, from the transposed rows xT (channel c of key u at xT[c*ldT + u]):
 * an outer product per channel, vectorised over the keys, with no
 * horizontal sums. Returns the number of keys. */
static int slc_scores(float *sc, const float *q, const float *xT, int ldT, const int *start, const int *end, int nr,
                      int rep, int d, int nk_max, float scale) {
    int j0 = 0;
    for (int r = 0; r < nr; r++) {
        for (int a = start[r]; a < end[r]; a += 16) { /* 16 keys at a time, their sums in registers */
            const int len = end[r] - a < 16 ? end[r] - a : 16;
            for (int hh = 0; hh < rep; hh++) {
                const float *qh = q + (size_t)hh * d;
                float acc[16] = {0};
                if (len == 16) {
                    for (int c = 0; c < d; c++) {
                        const float *xr = xT + (size_t)c * ldT + a, qv = qh[c];
#pragma omp simd
                        for (int j = 0; j < 16; j++) acc[j] += qv * xr[j];
                    }
                } else {
                    for (int c = 0; c < d; c++) {
                        const float *xr = xT + (size_t)c * ldT + a, qv = qh[c];
                        for (int j = 0; j < len; j++) acc[j] += qv * xr[j];
                    }
                }
                float *srow = sc + (size_t)hh * nk_max + j0 + (a - start[r]);
                for (int j = 0; j < len; j++) srow[j] = acc[j] * scale;
            }
        }
        j0 += end[r] - start[r];
    }
    return j0;
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
    int j = 0;
    for (int r = 0; r < nr; r++)
        for (int u = start[r]; u < end[r]; u++, j++) {
            const float *vr = v + (size_t)u * ld;
            for (int hh = 0; hh < rep; hh++) {
                const float p = sc[(size_t)hh * nk_max + j];
                float *oh = o + (size_t)hh * d;
#pragma omp simd
                for (int c = 0; c < d; c++) oh[c] += p * vr[c];
            }
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

/* Its backward: dO (rep rows of d) the gradient of o; D (rep) = rowsum(dO * o);
 * k the key rows (stride ld, as dk and dv), kT, vT the keys and values transposed
 * (stride ldT); dq (rep rows) +=; dk, dv key rows +=. sc: scratch of 2 * rep * n * l'. */
static void nsa_slc_row_backward(float *dq, float *dk, float *dv, const float *dO, const float *D, const float *lse,
                                 int lse_stride, const float *q, const float *k, const float *kT, const float *vT,
                                 int ld, int ldT, const int *sel, int t, int rep, const nsa_shape *s,
                                 float *sc) {
    int start[NSA_MAX_TOPN], end[NSA_MAX_TOPN];
    const int d = s->d, nk_max = s->topn * s->select;
    const float scale = 1.0f / sqrtf((float)d);
    float *dP = sc + (size_t)rep * nk_max;
    const int nr = nsa_sel_runs(start, end, sel, t, s);
    const int nk = slc_scores(sc, q, kT, ldT, start, end, nr, rep, d, nk_max, scale);
    slc_scores(dP, dO, vT, ldT, start, end, nr, rep, d, nk_max, 1.0f);
    for (int hh = 0; hh < rep; hh++) {
        float *p = sc + (size_t)hh * nk_max, *dp = dP + (size_t)hh * nk_max;
        exp_shift_sum(p, nk, lse[(size_t)hh * lse_stride]);
        const float Dh = D[hh];
#pragma omp simd
        for (int j = 0; j < nk; j++) dp[j] = p[j] * (dp[j] - Dh) * scale; /* dS */
    }
    int j = 0;
    for (int r = 0; r < nr; r++)
        for (int u = start[r]; u < end[r]; u++, j++) {
            const float *kr = k + (size_t)u * ld;
            float *dkr = dk + (size_t)u * ld, *dvr = dv + (size_t)u * ld;
            for (int hh = 0; hh < rep; hh++) {
                const float *dOh = dO + (size_t)hh * d, *qh = q + (size_t)hh * d;
                float *dqh = dq + (size_t)hh * d;
                const float p = sc[(size_t)hh * nk_max + j], ds = dP[(size_t)hh * nk_max + j];
#pragma omp simd
                for (int c = 0; c < d; c++) {
                    dqh[c] += ds * kr[c];
                    dkr[c] += ds * qh[c];
                    dvr[c] += p * dOh[c];
                }
            }
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
