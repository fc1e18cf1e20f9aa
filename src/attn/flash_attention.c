/* Fused causal flash attention for DIFF, DIFF2 and softmax (see
 * flash_attention.h), on the register-blocked tile products of
 * flash_tile.c.
 *
 * Forward: one (batch, head, query tile) per iteration, the tile's 64
 * queries as vector lanes. For each key tile up to the diagonal it forms
 * S_m^T = K_m Q_m^T / sqrt(d) for each map (keys by queries), keeps an online
 * softmax per lane (running max and sum), and accumulates O_m^T += V^T P_m^T,
 * O^T being a head's value columns by the tile's queries. Tiles above the
 * diagonal are never formed, nor, with a sliding window, those wholly before
 * the window of the tile's first query: the cost grows as T * window.
 *
 * DIFF2 is DIFF with both maps' keys in one K, a d-wide V and a lambda per
 * query row, so it runs the same loops with other column offsets.
 *
 * Backward: one (batch, KV group) per iteration, so the heads that share
 * dK/dV run in order on one thread: no races, a fixed summation order. For
 * each key tile (its 64 keys as lanes), the query tiles at or below the
 * diagonal recompute P_m = exp(S_m - lse_m), then dS_m = c_m P_m (dO V^T -
 * D_m) with D_m = rowsum(dO O_m), and accumulate dQ, and dK^T, dV^T for the
 * key tile.
 *
 * The tile products read one operand as rows of tokens (flash_tile.c), so
 * the forward transposes each query tile once (Q^T, scaled by 1/sqrt(d)),
 * and the backward each key tile (K^T, scaled, and V^T). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn/flash_attention.h"

#define LOG2E 1.44269504088896341f /* the logits in log2 units: exp(x) = 2^(x log2(e)) */
#define LN2 0.69314718055994531f
#define BR FLASH_BR
#define BC FLASH_BC

/* Column offsets of head h / group g within q, k, v rows. */
typedef struct {
    int maps, d, dv; /* maps per head, sub-head size, value width */
    int qcol[2], kcol[2], vcol;
    int kmap[2]; /* the K sub-head's index among the head's distinct ones: m, or 0 when the maps share one K */
    int Cq;      /* width of a q row */
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
        c.kmap[m] = lay->k_per_map ? m : 0;
    }
    c.vcol = g * c.dv;
    return c;
}

/* Everything one call of the kernels reads. */
typedef struct {
    const float *q, *k, *v, *dopre, *lse, *lam;
    float lambda;
    const attn_layout *lay;
    const attn_shape *s;
} flash_in;

/* The keys of tile k0 .. k0+nc-1 that query row r sees, as tile columns
 * [*js, *je): from its first key (attn_first_key) to r, causal. */
static inline void row_span(int r, int k0, int nc, int window, int *js, int *je) {
    const int lo = attn_first_key(r, window) - k0, hi = r - k0 + 1;
    *js = lo < 0 ? 0 : lo > nc ? nc : lo;
    *je = hi < 0 ? 0 : hi > nc ? nc : hi;
    if (*je < *js) *je = *js;
}

#define NL (BR / TV) /* vectors per row of query lanes */

/* The online softmax over one key tile, the queries as lanes. St: (nc, BR)
 * logits in, probabilities out (exp(S - max), zero where a query does not
 * see the key); mx, sum: (BR) the running max and sum, updated; OT: (dv, BR)
 * the accumulator, rescaled to the new max. */
static void softmax_update(float *St, int nc, int k0, int r0, int W, int masked, float *mx, float *sum, float *OT,
                           int dv) {
    const tvec ninf = tv_set1(-INFINITY);
    tvec mnew[NL], shift[NL], rs[NL];
    for (int v = 0; v < NL; v++) mnew[v] = tv_load(mx + v * TV);
    for (int j = 0; j < nc; j++) {
        float *row = St + (size_t)j * BR;
        /* lanes i see key k0+j when k0+j <= r0+i < k0+j+W */
        const int lo = k0 + j - r0, hi = W > 0 ? lo + W : BR;
        for (int v = 0; v < NL; v++) {
            tvec x = tv_load(row + v * TV);
            if (masked) {
                const tvi i = tv_iota(v * TV);
                x = tv_select((i >= lo) & (i < hi), x, ninf);
                tv_store(row + v * TV, x);
            }
            mnew[v] = tv_max(mnew[v], x);
        }
    }
    for (int v = 0; v < NL; v++) {
        shift[v] = tv_select(mnew[v] == ninf, tv_set1(0.0f), mnew[v]); /* a lane that has seen no key yet */
        rs[v] = tv_set1(0.0f);
    }
    for (int j = 0; j < nc; j++) {
        float *row = St + (size_t)j * BR;
        for (int v = 0; v < NL; v++) {
            const tvec x = tv_load(row + v * TV);
            tvec p = tv_exp2(x - shift[v]);
            if (masked) p = tv_select(x == ninf, tv_set1(0.0f), p);
            tv_store(row + v * TV, p);
            rs[v] += p;
        }
    }
    for (int v = 0; v < NL; v++) {
        const tvec corr = tv_exp2(tv_load(mx + v * TV) - shift[v]); /* ~0 on the first tile, where sum and OT are 0 */
        tv_store(sum + v * TV, tv_fma(tv_load(sum + v * TV), corr, rs[v]));
        tv_store(mx + v * TV, mnew[v]);
        for (int c = 0; c < dv; c++) tv_store(OT + (size_t)c * BR + v * TV, tv_load(OT + (size_t)c * BR + v * TV) * corr);
    }
}

/* Writes the tile's outputs: o_m = O_m^T / sum_m transposed, lse, and for two
 * maps opre = o1 - lambda o2 with o1, o2 kept. */
static void forward_finish(float *opre, float *o1, float *o2, float *lse, const flash_in *in, const head_cols *hc,
                           int b, int h, int r0, int nr, float *OT, const float *mx, const float *sum) {
    const attn_shape *s = in->s;
    const int T = s->T, C = s->C, H = s->n_heads, dv = hc->dv, maps = hc->maps;
    for (int m = 0; m < maps; m++) {
        float *o = maps == 2 ? (m ? o2 : o1) : opre, *ot = OT + (size_t)m * dv * BR;
        for (int v = 0; v < NL; v++) {
            const tvec inv = tv_set1(1.0f) / tv_load(sum + m * BR + v * TV);
            for (int c = 0; c < dv; c++) tv_store(ot + (size_t)c * BR + v * TV, tv_load(ot + (size_t)c * BR + v * TV) * inv);
        }
        tile_transpose(o + ((size_t)b * T + r0) * C + (size_t)h * dv, C, ot, BR, dv, nr, dv, 1.0f);
        for (int i = 0; i < nr; i++)
            lse[(((size_t)b * H + h) * maps + m) * T + r0 + i] = LN2 * mx[m * BR + i] + logf(sum[m * BR + i]);
    }
    if (maps == 2)
        for (int i = 0; i < nr; i++) {
            const size_t off = ((size_t)b * T + r0 + i) * C + (size_t)h * dv;
            const float l = in->lam ? in->lam[((size_t)b * T + r0 + i) * H + h] : in->lambda;
            for (int c = 0; c < dv; c++) opre[off + c] = o1[off + c] - l * o2[off + c];
        }
}

static void forward_tile(float *opre, float *o1, float *o2, float *lse, const flash_in *in, int b, int h, int r0,
                         float *ws) {
    const attn_shape *s = in->s;
    const int T = s->T, Ckv = s->Ckv, H = s->n_heads, g = h / (H / s->n_kv_heads), W = s->window;
    const head_cols hc = cols_of(h, g, s->d, H, in->lay);
    const int maps = hc.maps, d = hc.d, dv = hc.dv, Cq = hc.Cq;
    const int nr = T - r0 < BR ? T - r0 : BR;
    float *Qt = ws, *St = Qt + (size_t)maps * d * BR, *OT = St + BC * BR, *mx = OT + (size_t)maps * dv * BR;
    float *sum = mx + maps * BR;
    memset(OT, 0, (size_t)maps * dv * BR * sizeof(float));
    for (int m = 0; m < maps; m++) /* Q_m^T (d, BR), scaled; the lanes past nr zero */
        tile_transpose(Qt + (size_t)m * d * BR, BR, in->q + ((size_t)b * T + r0) * Cq + hc.qcol[m], Cq, nr, d, BR,
                       LOG2E / sqrtf((float)d));
    for (int i = 0; i < maps * BR; i++) mx[i] = -INFINITY, sum[i] = 0.0f;
    const int r_end = r0 + nr; /* keys < r_end are visible to some row */
    /* with a window, the key tiles wholly before the first row's window are never formed */
    for (int k0 = attn_first_key(r0, W) / BC * BC; k0 < r_end; k0 += BC) {
        const int nc = r_end - k0 < BC ? r_end - k0 : BC;
        /* some keys lie above some rows' diagonal, or before some rows' window (the last row's starts latest) */
        const int masked = k0 + nc - 1 > r0 || (W > 0 && k0 < r_end - W);
        for (int m = 0; m < maps; m++) {
            float *ot = OT + (size_t)m * dv * BR;
            /* St (nc, BR) = K_m (scale Q_m)^T, in log2 units */
            tile_gemm(St, BR, in->k + ((size_t)b * T + k0) * Ckv + hc.kcol[m], Ckv, 1, Qt + (size_t)m * d * BR, BR, nc,
                      BR, d, 0);
            softmax_update(St, nc, k0, r0, W, masked, mx + m * BR, sum + m * BR, ot, dv);
            /* O_m^T (dv, BR) += V^T P_m^T */
            tile_gemm(ot, BR, in->v + ((size_t)b * T + k0) * Ckv + hc.vcol, 1, Ckv, St, BR, dv, BR, nc, 1);
        }
    }
    forward_finish(opre, o1, o2, lse, in, &hc, b, h, r0, nr, OT, mx, sum);
}

static void flash_attention_forward(float *opre, float *o1, float *o2, float *lse, const float *q, const float *k,
                                    const float *v, float lambda, const float *lam, const attn_layout *lay,
                                    const attn_shape *s, float *scratch) {
    const int n_tiles = (s->T + BR - 1) / BR, H = s->n_heads;
    const int items = s->B * H * n_tiles;
    const size_t pt = da_flash_scratch_per_thread(s, lay);
    const flash_in in = {q, k, v, NULL, NULL, lam, lambda, lay, s};
    /* Longest tiles (nearest the end of the sequence) first, for balance. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int it = 0; it < items; it++) {
        const int tile = n_tiles - 1 - it / (s->B * H), bh = it % (s->B * H);
        forward_tile(opre, o1, o2, lse, &in, bh / H, bh % H, tile * BR, scratch + (size_t)omp_get_thread_num() * pt);
    }
}

/* One row of the recomputed probabilities and their gradient, the keys as
 * lanes: p = exp(s - lse) (zero outside [js, je)), ds = c p (dp - D), and
 * pc = c p (first map) or pc + c p. */
static inline void backward_row(float *p, float *ds, float *pc, const float *dp, float lse, float c, float D,
                                int js, int je, int masked, int first) {
    const tvec vl = tv_set1(LOG2E * lse), vc = tv_set1(c), vD = tv_set1(D), zero = tv_set1(0.0f);
    for (int v = 0; v < BC / TV; v++) {
        tvec x = tv_exp2(tv_load(p + v * TV) - vl);
        if (masked) {
            const tvi j = tv_iota(v * TV);
            x = tv_select((j >= js) & (j < je), x, zero);
        }
        const tvec cx = vc * x;
        tv_store(p + v * TV, x);
        tv_store(ds + v * TV, cx * (tv_load(dp + v * TV) - vD));
        if (pc) tv_store(pc + v * TV, first ? cx : tv_load(pc + v * TV) + cx);
    }
}

/* Per-thread buffers of the backward. */
typedef struct {
    float *dP, *P, *dS, *Pc; /* (BR, BC) each */
    float *Kp;               /* (2, BC, dpad): a key tile's K sub-heads, scaled, rows padded to whole vectors */
    float *Kt;               /* (2, d, BC): the same transposed */
    float *dKt;              /* (2, d, BC): their gradients, transposed */
    float *Vt, *dVt;         /* (dv, BC) each: the key tile's V transposed, its gradient */
    int dpad;
} bwd_bufs;

static bwd_bufs bwd_bufs_of(float *ws, int d, int dv) {
    bwd_bufs w;
    w.dpad = (d + TV - 1) / TV * TV;
    w.dP = ws;
    w.P = w.dP + BR * BC;
    w.dS = w.P + BR * BC;
    w.Pc = w.dS + BR * BC;
    w.Kp = w.Pc + BR * BC;
    w.Kt = w.Kp + (size_t)2 * BC * w.dpad;
    w.dKt = w.Kt + (size_t)2 * d * BC;
    w.Vt = w.dKt + (size_t)2 * d * BC;
    w.dVt = w.Vt + (size_t)dv * BC;
    return w;
}

/* Query tile r0 against the key tile held in w: dQ accumulates; w's dK^T, dV^T too. */
static void backward_pair(float *dq, const flash_in *in, const head_cols *hc, const float *D, const bwd_bufs *w,
                          int b, int h, int k0, int nc, int r0) {
    const attn_shape *s = in->s;
    const int T = s->T, C = s->C, H = s->n_heads, W = s->window;
    const int maps = hc->maps, d = hc->d, dv = hc->dv, Cq = hc->Cq;
    const int nr = T - r0 < BR ? T - r0 : BR;
    const int masked = k0 + nc - 1 > r0 || (W > 0 && k0 < r0 + nr - W) || nc < BC;
    const float *lse_h = in->lse + ((size_t)b * H + h) * maps * T, *lam = in->lam;
    /* dP (nr, BC) = dO V^T, shared by both maps */
    tile_gemm(w->dP, BC, in->dopre + ((size_t)b * T + r0) * C + (size_t)h * dv, C, 1, w->Vt, BC, nr, BC, dv, 0);
    for (int m = 0; m < maps; m++) {
        const int km = hc->kmap[m];
        /* P (nr, BC) = Q_m (scale K_m)^T, in log2 units */
        tile_gemm(w->P, BC, in->q + ((size_t)b * T + r0) * Cq + hc->qcol[m], Cq, 1, w->Kt + (size_t)km * d * BC, BC,
                  nr, BC, d, 0);
        for (int i = 0; i < nr; i++) {
            int js = 0, je = nc;
            if (masked) row_span(r0 + i, k0, nc, W, &js, &je);
            const float c = m == 0 ? 1.0f : lam ? -lam[((size_t)b * T + r0 + i) * H + h] : -in->lambda;
            backward_row(w->P + (size_t)i * BC, w->dS + (size_t)i * BC, maps == 2 ? w->Pc + (size_t)i * BC : NULL,
                         w->dP + (size_t)i * BC, lse_h[(size_t)m * T + r0 + i], c, D[(size_t)m * T + r0 + i], js,
                         je, masked, m == 0);
        }
        /* dK_m^T (d, BC) += Q_m^T dS (scaled at the flush); dQ_m (nr, d) += dS (scale K_m) */
        tile_gemm(w->dKt + (size_t)km * d * BC, BC, in->q + ((size_t)b * T + r0) * Cq + hc->qcol[m], 1, Cq, w->dS, BC,
                  d, BC, nr, 1);
        tile_gemm(dq + ((size_t)b * T + r0) * Cq + hc->qcol[m], Cq, w->dS, BC, 1, w->Kp + (size_t)km * BC * w->dpad,
                  w->dpad, nr, d, nc, 1);
    }
    /* dV^T (dv, BC) += dO^T (sum_m c_m P_m) */
    tile_gemm(w->dVt, BC, in->dopre + ((size_t)b * T + r0) * C + (size_t)h * dv, 1, C, maps == 2 ? w->Pc : w->P, BC,
              dv, BC, nr, 1);
}

/* All query tiles against each key tile for head h: dQ, dK, dV accumulate. */
static void backward_head(float *dq, float *dk, float *dv, const flash_in *in, const float *D, int b, int h,
                          float *ws) {
    const attn_shape *s = in->s;
    const int T = s->T, Ckv = s->Ckv, H = s->n_heads, g = h / (H / s->n_kv_heads), W = s->window;
    const head_cols hc = cols_of(h, g, s->d, H, in->lay);
    const int d = hc.d, dv_w = hc.dv, n_k = in->lay->k_per_map ? hc.maps : 1;
    const float scale = 1.0f / sqrtf((float)d);
    const bwd_bufs w = bwd_bufs_of(ws, d, dv_w);
    for (int k0 = 0; k0 < T; k0 += BC) {
        const int nc = T - k0 < BC ? T - k0 : BC;
        memset(w.dKt, 0, (size_t)n_k * d * BC * sizeof(float));
        memset(w.dVt, 0, (size_t)dv_w * BC * sizeof(float));
        const float *kb = in->k + ((size_t)b * T + k0) * Ckv;
        for (int km = 0; km < n_k; km++)
            tile_transpose(w.Kt + (size_t)km * d * BC, BC, kb + hc.kcol[km], Ckv, nc, d, BC, LOG2E * scale);
        tile_transpose(w.Vt, BC, in->v + ((size_t)b * T + k0) * Ckv + hc.vcol, Ckv, nc, dv_w, BC, 1.0f);
        for (int km = 0; km < n_k; km++)
            for (int j = 0; j < nc; j++) {
                float *kp = w.Kp + ((size_t)km * BC + j) * w.dpad;
                const float *kr = in->k + ((size_t)b * T + k0 + j) * Ckv + hc.kcol[km];
                for (int p = 0; p < d; p++) kp[p] = scale * kr[p];
                for (int p = d; p < w.dpad; p++) kp[p] = 0.0f;
            }
        /* with a window, only the query tiles up to the last row that sees this tile's last key */
        const int r_last = W > 0 ? k0 + nc - 1 + W - 1 : T - 1;
        for (int r0 = k0 / BR * BR; r0 < T && r0 <= r_last; r0 += BR)
            backward_pair(dq, in, &hc, D, &w, b, h, k0, nc, r0);
        /* the group's first head writes its rows of dK, dV; the others add */
        const int first = h % (H / s->n_kv_heads) == 0;
        for (int j = 0; j < nc; j++) {
            const size_t row = ((size_t)b * T + k0 + j) * Ckv;
            for (int km = 0; km < n_k; km++) {
                float *o = dk + row + hc.kcol[km];
                const float *g_t = w.dKt + (size_t)km * d * BC + j;
                for (int p = 0; p < d; p++) o[p] = (first ? 0.0f : o[p]) + scale * g_t[(size_t)p * BC];
            }
            float *o = dv + row + hc.vcol;
            for (int c = 0; c < dv_w; c++) o[c] = (first ? 0.0f : o[c]) + w.dVt[(size_t)c * BC + j];
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
    const size_t pt = da_flash_scratch_per_thread(s, lay);
    float *dlam_part = scratch + (size_t)s->n_threads * pt; /* (B, H) */
    const flash_in in = {q, k, v, dopre, lse, lam, lambda, lay, s};
    memset(dq, 0, (size_t)B * T * Cq * sizeof(float)); /* dK, dV: each group's first head writes them */
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
            backward_head(dq, dk, dv, &in, D, b, h, ws);
        }
    }
    if (dlambda) {
        double total = 0.0;
        for (int i = 0; i < B * H; i++) total += dlam_part[i];
        *dlambda = (float)total;
    }
}
