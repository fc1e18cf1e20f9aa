/* Fused causal flash attention for DIFF and softmax (see flash_attention.h).
 *
 * Forward: one (batch, head, query tile) per iteration. For each key tile up
 * to the diagonal it forms S_m = Q_m K_m^T / sqrt(d) for each map, keeps an
 * online softmax (running max and sum per row and map), and accumulates
 * P_m V with the V tile loaded once for both maps. Tiles above the diagonal
 * are never formed, nor, with a sliding window, those wholly before the
 * window of the tile's first query: the cost grows as T * window.
 *
 * DIFF2 is DIFF with both maps' keys in one K, a d-wide V and a lambda per
 * query row, so it runs the same loops with other column offsets.
 *
 * Backward: one (batch, KV group) per iteration, so the heads that share
 * dK/dV run in order on one thread: no races, a fixed summation order. For
 * each key tile, the query tiles at or below the diagonal recompute P_m =
 * exp(S_m - lse_m), then dS_m = c_m P_m (dO V^T - D_m) with D_m = rowsum(dO
 * O_m), and accumulate dQ, dK, dV. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn/flash_attention.h"
#include "ops/vexp.h"

/* Column offsets of head h / group g within q, k, v rows. */
typedef struct {
    int maps, d, dv; /* maps per head, sub-head size, value width */
    int qcol[2], kcol[2], vcol;
    int Cq; /* width of a q row */
} head_cols;

static head_cols cols_of(int h, int g, int d, int H, const attn_layout *lay) {
    head_cols c;
    c.maps = lay->maps;
    c.d = d;
    c.dv = lay->v_subheads * d;
    c.Cq = H * lay->maps * d;
    for (int m = 0; m < c.maps; m++) {
        c.qcol[m] = (c.maps * h + m) * d;
        c.kcol[m] = lay->k_per_map ? (c.maps * g + m) * d : g * d;
    }
    c.vcol = g * c.dv;
    return c;
}

/* The keys of tile k0 .. k0+nc-1 that query row r sees, as tile columns
 * [*js, *je): from its first key (attn_first_key) to r, causal. */
static inline void row_span(int r, int k0, int nc, int window, int *js, int *je) {
    const int lo = attn_first_key(r, window) - k0, hi = r - k0 + 1;
    *js = lo < 0 ? 0 : lo > nc ? nc : lo;
    *je = hi < 0 ? 0 : hi > nc ? nc : hi;
}

static void forward_tile(float *opre, float *o1, float *o2, float *lse, const float *q, const float *k,
                         const float *v, float lambda, const float *lam, const attn_layout *lay, const attn_shape *s, int b,
                         int h, int r0, float *ws) {
    const int T = s->T, C = s->C, Ckv = s->Ckv, H = s->n_heads, g = h / (H / s->n_kv_heads);
    const head_cols hc = cols_of(h, g, s->d, H, lay);
    const int Cq = hc.Cq;
    const int maps = hc.maps, d = hc.d, dv = hc.dv;
    const int nr = T - r0 < FLASH_BR ? T - r0 : FLASH_BR;
    const float scale = 1.0f / sqrtf((float)d);
    /* The maps' probability tiles and accumulators are stacked by rows, so
     * one GEMM multiplies both by the V tile: [P1; P2] V -> [acc1; acc2]. */
    float *S[2], *acc[2], *mx[2], *sum[2];
    float *p = ws, *acc_base = ws + (size_t)maps * FLASH_BR * FLASH_BC;
    for (int m = 0; m < maps; m++) {
        S[m] = ws + (size_t)m * nr * FLASH_BC;
        acc[m] = acc_base + (size_t)m * nr * dv;
    }
    p = acc_base + (size_t)maps * FLASH_BR * dv;
    for (int m = 0; m < maps; m++) {
        mx[m] = p;
        p += FLASH_BR;
        sum[m] = p;
        p += FLASH_BR;
        memset(acc[m], 0, (size_t)nr * dv * sizeof(float));
        for (int i = 0; i < nr; i++) {
            mx[m][i] = -INFINITY;
            sum[m][i] = 0.0f;
        }
    }
    const float *qrow = q + ((size_t)b * T + r0) * Cq, *kb = k + (size_t)b * T * Ckv, *vb = v + (size_t)b * T * Ckv;
    const int r_end = r0 + nr, W = s->window; /* keys < r_end are visible to some row */
    /* with a window, the key tiles wholly before the first row's window are never formed */
    for (int k0 = attn_first_key(r0, W) / FLASH_BC * FLASH_BC; k0 < r_end; k0 += FLASH_BC) {
        const int nc = r_end - k0 < FLASH_BC ? r_end - k0 : FLASH_BC;
        /* some keys lie above some rows' diagonal, or before some rows' window (the last row's starts latest) */
        const int masked = k0 + nc - 1 > r0 || (W > 0 && k0 < r_end - W);
        for (int m = 0; m < maps; m++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, d, scale, qrow + hc.qcol[m], Cq,
                        kb + (size_t)k0 * Ckv + hc.kcol[m], Ckv, 0.0f, S[m], FLASH_BC);
            for (int i = 0; i < nr; i++) {
                float *row = S[m] + (size_t)i * FLASH_BC;
                int js = 0, je = nc;
                if (masked) row_span(r0 + i, k0, nc, W, &js, &je);
                float *a = acc[m] + (size_t)i * dv;
                if (je <= js) {
                    memset(row, 0, (size_t)nc * sizeof(float));
                    continue;
                }
                float rmax = row[js];
#pragma omp simd reduction(max : rmax)
                for (int j = js + 1; j < je; j++) rmax = row[j] > rmax ? row[j] : rmax;
                const float mnew = rmax > mx[m][i] ? rmax : mx[m][i];
                const float corr = expf(mx[m][i] - mnew); /* 0 on the first tile */
                const float rs = exp_shift_sum(row + js, je - js, mnew);
                for (int j = 0; j < js; j++) row[j] = 0.0f;
                for (int j = je; j < nc; j++) row[j] = 0.0f;
                sum[m][i] = sum[m][i] * corr + rs;
                mx[m][i] = mnew;
                if (corr != 1.0f)
#pragma omp simd
                    for (int c = 0; c < dv; c++) a[c] *= corr;
            }
        }
        /* [acc1; acc2] += [P1; P2] V: the V tile is loaded once for both maps */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, maps * nr, dv, nc, 1.0f, S[0], FLASH_BC,
                    vb + (size_t)k0 * Ckv + hc.vcol, Ckv, 1.0f, acc[0], dv);
    }
    for (int i = 0; i < nr; i++) {
        const size_t orow = ((size_t)b * T + r0 + i) * C + (size_t)h * dv;
        for (int m = 0; m < maps; m++) {
            const float inv = 1.0f / sum[m][i];
            float *a = acc[m] + (size_t)i * dv;
#pragma omp simd
            for (int c = 0; c < dv; c++) a[c] *= inv;
            lse[(((size_t)b * H + h) * maps + m) * T + r0 + i] = mx[m][i] + logf(sum[m][i]);
        }
        float *out = opre + orow;
        if (maps == 2) {
            memcpy(o1 + orow, acc[0] + (size_t)i * dv, (size_t)dv * sizeof(float));
            memcpy(o2 + orow, acc[1] + (size_t)i * dv, (size_t)dv * sizeof(float));
            const float *a1 = acc[0] + (size_t)i * dv, *a2 = acc[1] + (size_t)i * dv;
            const float l = lam ? lam[((size_t)b * T + r0 + i) * H + h] : lambda;
#pragma omp simd
            for (int c = 0; c < dv; c++) out[c] = a1[c] - l * a2[c];
        } else {
            memcpy(out, acc[0] + (size_t)i * dv, (size_t)dv * sizeof(float));
        }
    }
}

static void flash_attention_forward(float *opre, float *o1, float *o2, float *lse, const float *q, const float *k,
                             const float *v, float lambda, const float *lam, const attn_layout *lay, const attn_shape *s,
                             float *scratch) {
    const int n_tiles = (s->T + FLASH_BR - 1) / FLASH_BR, H = s->n_heads;
    const int items = s->B * H * n_tiles;
    const size_t pt = flash_scratch_per_thread(s, lay);
    /* Longest tiles (nearest the end of the sequence) first, for balance. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int it = 0; it < items; it++) {
        const int tile = n_tiles - 1 - it / (s->B * H), bh = it % (s->B * H);
        forward_tile(opre, o1, o2, lse, q, k, v, lambda, lam, lay, s, bh / H, bh % H, tile * FLASH_BR,
                     scratch + (size_t)omp_get_thread_num() * pt);
    }
}

/* All query tiles against key tile k0 for head h: dQ, dK, dV accumulate. */
static void backward_head(float *dq, float *dk, float *dv, const float *dopre, const float *lse, const float *q,
                          const float *k, const float *v, const float *D, float lambda, const float *lam, const attn_layout *lay,
                          const attn_shape *s, int b, int h, float *ws) {
    const int T = s->T, C = s->C, Ckv = s->Ckv, H = s->n_heads, g = h / (H / s->n_kv_heads);
    const head_cols hc = cols_of(h, g, s->d, H, lay);
    const int maps = hc.maps, d = hc.d, dv_w = hc.dv, Cq = hc.Cq;
    const float *lam_h = lam ? lam + (size_t)b * T * H + h : NULL; /* row t at lam_h[t * H] */
    const float scale = 1.0f / sqrtf((float)d);
    const float coef[2] = {1.0f, -lambda};
    float *P[2] = {ws, ws + FLASH_BR * FLASH_BC};
    float *dPv = ws + (size_t)maps * FLASH_BR * FLASH_BC, *Pc = dPv + FLASH_BR * FLASH_BC, *dS = Pc + FLASH_BR * FLASH_BC;
    const float *qb = q + (size_t)b * T * Cq, *kb = k + (size_t)b * T * Ckv, *vb = v + (size_t)b * T * Ckv;
    const float *dob = dopre + (size_t)b * T * C + (size_t)h * dv_w;
    float *dqb = dq + (size_t)b * T * Cq, *dkb = dk + (size_t)b * T * Ckv, *dvb = dv + (size_t)b * T * Ckv;
    const float *lse_h = lse + ((size_t)b * H + h) * maps * T;

    const int W = s->window;
    for (int k0 = 0; k0 < T; k0 += FLASH_BC) {
        const int nc = T - k0 < FLASH_BC ? T - k0 : FLASH_BC;
        /* with a window, only the query tiles up to the last row that sees this tile's last key */
        const int r_last = W > 0 ? k0 + nc - 1 + W - 1 : T - 1;
        for (int r0 = k0 / FLASH_BR * FLASH_BR; r0 < T && r0 <= r_last; r0 += FLASH_BR) {
            const int nr = T - r0 < FLASH_BR ? T - r0 : FLASH_BR;
            const int masked = k0 + nc - 1 > r0 || (W > 0 && k0 < r0 + nr - W);
            /* dPv: (nr, nc) = dO V^T, shared by both maps */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, dv_w, 1.0f, dob + (size_t)r0 * C, C,
                        vb + (size_t)k0 * Ckv + hc.vcol, Ckv, 0.0f, dPv, FLASH_BC);
            for (int m = 0; m < maps; m++) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, d, scale,
                            qb + (size_t)r0 * Cq + hc.qcol[m], Cq, kb + (size_t)k0 * Ckv + hc.kcol[m], Ckv, 0.0f,
                            P[m], FLASH_BC);
                const float *lse_m = lse_h + (size_t)m * T + r0;
                const float *D_m = D + (size_t)m * T + r0;
                for (int i = 0; i < nr; i++) {
                    float *prow = P[m] + (size_t)i * FLASH_BC, *ds = dS + (size_t)i * FLASH_BC;
                    float *pc = Pc + (size_t)i * FLASH_BC;
                    const float *dp = dPv + (size_t)i * FLASH_BC;
                    int js = 0, je = nc;
                    if (masked) row_span(r0 + i, k0, nc, W, &js, &je);
                    if (je < js) je = js;
                    exp_shift_sum(prow + js, je - js, lse_m[i]);
                    const float c = m && lam_h ? -lam_h[(size_t)(r0 + i) * H] : coef[m], Di = D_m[i];
#pragma omp simd
                    for (int j = js; j < je; j++) ds[j] = c * prow[j] * (dp[j] - Di);
                    for (int j = 0; j < js; j++) ds[j] = prow[j] = 0.0f;
                    for (int j = je; j < nc; j++) ds[j] = prow[j] = 0.0f;
                    if (m == 0) {
#pragma omp simd
                        for (int j = 0; j < nc; j++) pc[j] = c * prow[j];
                    } else {
#pragma omp simd
                        for (int j = 0; j < nc; j++) pc[j] += c * prow[j];
                    }
                }
                /* dQ_m += scale dS K_m;  dK_m += scale dS^T Q_m */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, d, nc, scale, dS, FLASH_BC,
                            kb + (size_t)k0 * Ckv + hc.kcol[m], Ckv, 1.0f, dqb + (size_t)r0 * Cq + hc.qcol[m], Cq);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, d, nr, scale, dS, FLASH_BC,
                            qb + (size_t)r0 * Cq + hc.qcol[m], Cq, 1.0f, dkb + (size_t)k0 * Ckv + hc.kcol[m], Ckv);
            }
            /* dV += (sum_m c_m P_m)^T dO */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, dv_w, nr, 1.0f, Pc, FLASH_BC,
                        dob + (size_t)r0 * C, C, 1.0f, dvb + (size_t)k0 * Ckv + hc.vcol, Ckv);
        }
    }
}

static void flash_attention_backward(float *dq, float *dk, float *dv, float *dlambda, float *dlam, const float *dopre,
                              const float *opre, const float *o1, const float *o2, const float *lse,
                              const float *q, const float *k, const float *v, float lambda, const float *lam,
                              const attn_layout *lay, const attn_shape *s, float *scratch) {
    const int B = s->B, T = s->T, C = s->C, H = s->n_heads, n_kv = s->n_kv_heads, n_rep = H / n_kv;
    const int maps = lay->maps, dv_w = lay->v_subheads * s->d;
    const int Cq = H * maps * s->d;
    const size_t pt = flash_scratch_per_thread(s, lay);
    float *dlam_part = scratch + (size_t)s->n_threads * pt; /* (B, H) */
    memset(dq, 0, (size_t)B * T * Cq * sizeof(float));
    memset(dk, 0, (size_t)B * T * s->Ckv * sizeof(float));
    memset(dv, 0, (size_t)B * T * s->Ckv * sizeof(float));
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int bg = 0; bg < B * n_kv; bg++) {
        const int b = bg / n_kv, g = bg % n_kv;
        float *ws = scratch + (size_t)omp_get_thread_num() * pt;
        float *D = ws + pt - (size_t)maps * T;
        for (int h = g * n_rep; h < (g + 1) * n_rep; h++) {
            /* D_m[t] = dO_t . O_m,t */
            double dl = 0.0;
            for (int m = 0; m < maps; m++) {
                const float *O = maps == 2 ? (m ? o2 : o1) : opre;
                for (int t = 0; t < T; t++) {
                    const size_t off = ((size_t)b * T + t) * C + (size_t)h * dv_w;
                    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
                    for (int c = 0; c < dv_w; c++) acc += dopre[off + c] * O[off + c];
                    D[(size_t)m * T + t] = acc;
                    if (m == 1) dl -= acc; /* d lambda = -sum dO . (A2 V) */
                    if (m == 1 && dlam) dlam[((size_t)b * T + t) * H + h] = -acc; /* DIFF2: per row */
                }
            }
            dlam_part[(size_t)b * H + h] = (float)dl;
            backward_head(dq, dk, dv, dopre, lse, q, k, v, D, lambda, lam, lay, s, b, h, ws);
        }
    }
    if (dlambda) {
        double total = 0.0;
        for (int i = 0; i < B * H; i++) total += dlam_part[i];
        *dlambda = (float)total;
    }
}
