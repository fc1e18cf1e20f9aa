/* NSA's per-query selection branch and block importance (nsa_rows.h). */
#include <math.h>
#include <string.h>

#include "attn/nsa_rows.h"

int nsa_sel_runs(int *start, int *end, const int *sel, int t, const nsa_shape *s) {
    int n = 0;
    for (int k = 0; k < s->topn && sel[k] >= 0; k++) {
        int a = sel[k] * s->select, e = a + s->select;
        if (e > t + 1) e = t + 1;
        if (n > 0 && end[n - 1] == a) end[n - 1] = e; /* adjacent blocks: one run */
        else { start[n] = a; end[n] = e; n++; }
    }
    return n;
}

/* sc[hh*nk + j] = q_hh . k_u / sqrt(d) for the keys of the runs, in order. Returns nk. */
static int slc_logits(float *sc, const float *q, const float *k, int ld, const int *start, const int *end, int nr,
                      int rep, int d, int nk_max) {
    const float scale = 1.0f / sqrtf((float)d);
    int j = 0;
    for (int r = 0; r < nr; r++)
        for (int u = start[r]; u < end[r]; u++, j++) {
            const float *kr = k + (size_t)u * ld;
            for (int hh = 0; hh < rep; hh++) {
                const float *qh = q + (size_t)hh * d;
                float acc = 0;
#pragma omp simd reduction(+ : acc)
                for (int c = 0; c < d; c++) acc += qh[c] * kr[c];
                sc[(size_t)hh * nk_max + j] = acc * scale;
            }
        }
    return j;
}

void nsa_slc_row_forward(float *o, float *lse, int lse_stride, const float *q, const float *k, const float *v, int ld,
                         const int *sel, int t, int rep, const nsa_shape *s, float *sc) {
    int start[NSA_MAX_TOPN], end[NSA_MAX_TOPN]; /* runs <= n */
    const int d = s->d, nk_max = s->topn * s->select;
    const int nr = nsa_sel_runs(start, end, sel, t, s);
    const int nk = slc_logits(sc, q, k, ld, start, end, nr, rep, d, nk_max);
    memset(o, 0, (size_t)rep * d * sizeof(float));
    for (int hh = 0; hh < rep; hh++) {
        float *p = sc + (size_t)hh * nk_max, mx = -INFINITY, sum = 0;
        for (int j = 0; j < nk; j++) mx = p[j] > mx ? p[j] : mx;
        for (int j = 0; j < nk; j++) {
            p[j] = expf(p[j] - mx);
            sum += p[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < nk; j++) p[j] *= inv;
        lse[(size_t)hh * lse_stride] = mx + logf(sum);
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

void nsa_slc_row_backward(float *dq, float *dk, float *dv, const float *dO, const float *D, const float *lse,
                          int lse_stride, const float *q, const float *k, const float *v, int ld, const int *sel,
                          int t, int rep, const nsa_shape *s, float *sc) {
    int start[NSA_MAX_TOPN], end[NSA_MAX_TOPN];
    const int d = s->d, nk_max = s->topn * s->select;
    const float scale = 1.0f / sqrtf((float)d);
    const int nr = nsa_sel_runs(start, end, sel, t, s);
    const int nk = slc_logits(sc, q, k, ld, start, end, nr, rep, d, nk_max);
    for (int hh = 0; hh < rep; hh++) {
        float *p = sc + (size_t)hh * nk_max;
        const float l = lse[(size_t)hh * lse_stride];
        for (int j = 0; j < nk; j++) p[j] = expf(p[j] - l);
    }
    int j = 0;
    for (int r = 0; r < nr; r++)
        for (int u = start[r]; u < end[r]; u++, j++) {
            const float *kr = k + (size_t)u * ld, *vr = v + (size_t)u * ld;
            float *dkr = dk + (size_t)u * ld, *dvr = dv + (size_t)u * ld;
            for (int hh = 0; hh < rep; hh++) {
                const float *dOh = dO + (size_t)hh * d, *qh = q + (size_t)hh * d;
                float *dqh = dq + (size_t)hh * d;
                const float p = sc[(size_t)hh * nk_max + j];
                float dp = 0;
#pragma omp simd reduction(+ : dp)
                for (int c = 0; c < d; c++) dp += dOh[c] * vr[c];
                const float ds = p * (dp - D[hh]) * scale;
#pragma omp simd
                for (int c = 0; c < d; c++) {
                    dqh[c] += ds * kr[c];
                    dkr[c] += ds * qh[c];
                    dvr[c] += p * dOh[c];
                }
            }
        }
}

void nsa_importance(float *imp, const float *p, int p_stride, int rep, int t, const nsa_shape *s) {
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
