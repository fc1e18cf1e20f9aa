/* MoBA's kernels (moba.h): the block scores, and the attention over the
 * chosen keys, flash (probabilities recomputed from the log-sum-exp) and
 * reference (dense maps kept). Compiled once per instruction-set level
 * through moba_variant.c, so everything here is static.
 *
 * Flash: a tile is up to MOBA_BR queries of one block c and one head. Its
 * rows choose c and mostly the same earlier blocks, so the tile goes block
 * by block: the rows that chose block j are gathered and meet j's keys in
 * one small matrix product (S = Q K_j^T, then O += P V_j), and each key is
 * fetched once per tile rather than once per query. A row's logits sit in
 * k slots of Bk (its chosen blocks ascending, c last), so its keys <= t are
 * a prefix of the row and the softmax is exact, not online. The backward
 * runs per (sequence, KV group), so that the group's dk, dv rows have one
 * writer; it needs no whole row, so it takes each block's logits, dP and
 * gradients in turn. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn/moba.h"
#include "ops/vexp.h"

static float moba_dot(const float *a, const float *b, int d) {
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int e = 0; e < d; e++) acc += a[e] * b[e];
    return acc;
}

/* Every complete block's mean key (km), then each (query, head)'s scores of
 * the earlier blocks and its choice. The scores are q . mean as
 * moba_score_dot sums them (channel order, products rounded first), here
 * vectorised over the blocks from the means transposed. */
static void moba_select(int *sel, float *km, const float *q, const float *k, const moba_shape *s, float *scratch) {
    const int T = s->T, H = s->H, G = s->G, d = s->d, Bk = s->block, K = s->topk, nb = T / Bk, rep = H / G;
    const size_t Gd = (size_t)G * d, Hd = (size_t)H * d;
    float *kmT = scratch, *scores = kmT + (size_t)s->B * G * d * nb; /* kmT: (B, G, d, nb) */
    for (int b = 0; b < s->B; b++)
        for (int j = 0; j < nb; j++)
            for (int g = 0; g < G; g++) {
                float *m = km + ((size_t)b * nb + j) * Gd + (size_t)g * d;
                moba_block_mean(m, k + ((size_t)b * T + (size_t)j * Bk) * Gd + (size_t)g * d, Gd, Bk, d);
                for (int e = 0; e < d; e++) kmT[(((size_t)b * G + g) * d + e) * nb + j] = m[e];
            }
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (long r = 0; r < (long)s->B * T; r++) {
        const int b = (int)(r / T), t = (int)(r % T), c = t / Bk;
        float *score = scores + (size_t)omp_get_thread_num() * (size_t)(nb + 1);
        for (int h = 0; h < H; h++) {
            const float *qh = q + (size_t)r * Hd + (size_t)h * d, *mT = kmT + ((size_t)b * G + h / rep) * d * nb;
            for (int j = 0; j < c; j++) score[j] = 0.0f;
            for (int e = 0; e < d; e++) {
                const float qe = qh[e], *row = mT + (size_t)e * nb;
#pragma omp simd
                for (int j = 0; j < c; j++) {
                    const float p = qe * row[j]; /* as moba_score_dot: the product rounded, then summed */
                    score[j] += p;
                }
            }
            moba_choose(sel + ((size_t)r * H + h) * K, score, c, K);
        }
    }
}

/* One thread's tile buffers (sizes: moba_tile_floats). */
typedef struct {
    float *S;                /* (R, W), forward: a row's logits (then P), k slots of Bk */
    float *Qg, *dOg, *Og;    /* (R, d): the rows gathered for one block, and a product's output */
    float *Ot;               /* (R, d): the tile's output (forward) or dq (backward) */
    float *Pg, *dSg;         /* (R, Bk): one block's columns of the rows, gathered */
    float *row;              /* (R): 1 / the softmax's sum (forward), D = rowsum(dout . out) (backward) */
    int *off, *ent_row, *ent_slot; /* the tile's (row, slot) entries of block j: off[j] .. off[j+1] */
} tile_ws;

static tile_ws tile_ws_of(float *scratch, const moba_shape *s, int thread) {
    const size_t R = (size_t)(s->block < MOBA_BR ? s->block : MOBA_BR), W = (size_t)s->topk * s->block;
    tile_ws w;
    float *p = scratch + (size_t)thread * moba_tile_floats(s);
    w.S = p, p += R * W;
    w.Qg = p, p += R * s->d;
    w.dOg = p, p += R * s->d;
    w.Og = p, p += R * s->d;
    w.Ot = p, p += R * s->d;
    w.Pg = p, p += R * s->block;
    w.dSg = p, p += R * s->block;
    w.row = p, p += R;
    w.off = (int *)(void *)p; /* ints in float-sized slots */
    w.ent_row = w.off + s->T / s->block + 3;
    w.ent_slot = w.ent_row + R * s->topk;
    return w;
}

/* A tile: rows t0 .. t0+nr-1 of head h of sequence b, all in block c. */
typedef struct {
    int b, h, g, t0, nr, c;
    int n; /* blocks each row chose: min(c, k - 1) + 1, the same for every row of a block */
} moba_tile;

/* The tile's rows by the block they chose: block j's entries are
 * ent_row/ent_slot[off[j] .. off[j+1]), rows ascending, the slot being the
 * block's place in the row's choice. */
static void tile_lists(tile_ws *w, const int *sel, const moba_tile *tl, const moba_shape *s) {
    const int K = s->topk, nj = tl->c + 1;
    int *off = w->off;
    memset(off, 0, (size_t)(nj + 1) * sizeof(int));
    for (int r = 0; r < tl->nr; r++) {
        const int *sr = sel + (((size_t)tl->b * s->T + tl->t0 + r) * s->H + tl->h) * K;
        for (int a = 0; a < K && sr[a] >= 0; a++) off[sr[a] + 1]++;
    }
    for (int j = 0; j < nj; j++) off[j + 1] += off[j];
    for (int r = 0; r < tl->nr; r++) {
        const int *sr = sel + (((size_t)tl->b * s->T + tl->t0 + r) * s->H + tl->h) * K;
        for (int a = 0; a < K && sr[a] >= 0; a++) {
            const int i = off[sr[a]]++;
            w->ent_row[i] = r, w->ent_slot[i] = a;
        }
    }
    for (int j = nj; j > 0; j--) off[j] = off[j - 1]; /* back to the starts */
    off[0] = 0;
}

/* dst (m, d) = the m rows of x (row r at x + r*ld) that block j's entries name. */
static void gather_rows(float *dst, const float *x, size_t ld, const int *rows, int m, int d) {
    for (int i = 0; i < m; i++) memcpy(dst + (size_t)i * d, x + (size_t)rows[i] * ld, (size_t)d * sizeof(float));
}

/* Block j's slots of the entries' rows of X (R, W) <-> g (m, N). */
static void gather_slots(float *g, const float *X, int W, int Bk, const int *rows, const int *slots, int m, int N) {
    for (int i = 0; i < m; i++)
        memcpy(g + (size_t)i * N, X + (size_t)rows[i] * W + (size_t)slots[i] * Bk, (size_t)N * sizeof(float));
}
static void scatter_slots(float *X, const float *g, int W, int Bk, const int *rows, const int *slots, int m, int N) {
    for (int i = 0; i < m; i++)
        memcpy(X + (size_t)rows[i] * W + (size_t)slots[i] * Bk, g + (size_t)i * N, (size_t)N * sizeof(float));
}

/* Keys of block j (all Bk, but the last block of the sequence may be short). */
static int block_keys(int j, const moba_shape *s) {
    return s->T - j * s->block < s->block ? s->T - j * s->block : s->block;
}

/* X's slots (R, W) = alpha x_rows . y_j^T for every block j the tile chose:
 * the logits (x = q, y = k, alpha = 1/sqrt(d)); x's rows gathered (stride ld). */
static void tile_products(float *X, const float *x, size_t ld, const float *y, float alpha, const moba_tile *tl,
                          const moba_shape *s, tile_ws *w) {
    const int d = s->d, Bk = s->block, W = s->topk * Bk;
    const size_t Gd = (size_t)s->G * d;
    for (int j = 0; j <= tl->c; j++) {
        const int m = w->off[j + 1] - w->off[j], N = block_keys(j, s);
        if (m == 0) continue;
        const int *rows = w->ent_row + w->off[j], *slots = w->ent_slot + w->off[j];
        gather_rows(w->Qg, x, ld, rows, m, d);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, N, d, alpha, w->Qg, d, y + (size_t)j * Bk * Gd, (int)Gd,
                    0.0f, w->Pg, N);
        scatter_slots(X, w->Pg, W, Bk, rows, slots, m, N);
    }
}

/* Row r of the tile: its keys <= t are the prefix of its slots (earlier blocks full, c last). */
static int row_keys(const moba_tile *tl, int r, const moba_shape *s) {
    return (tl->n - 1) * s->block + (tl->t0 + r - tl->c * s->block) + 1;
}

static void tile_forward(float *out, float *lse, const float *q, const float *k, const float *v, const int *sel,
                         const moba_tile *tl, const moba_shape *s, tile_ws *w) {
    const int T = s->T, H = s->H, d = s->d, Bk = s->block, W = s->topk * Bk;
    const size_t Gd = (size_t)s->G * d, Hd = (size_t)H * d, r0 = (size_t)tl->b * T + tl->t0;
    const float *qt = q + r0 * Hd + (size_t)tl->h * d;
    const size_t kv0 = (size_t)tl->b * T * Gd + (size_t)tl->g * d;
    const float *kb = k + kv0, *vb = v + kv0;
    tile_lists(w, sel, tl, s);
    tile_products(w->S, qt, Hd, kb, 1.0f / sqrtf((float)d), tl, s, w);
    const int Nc = block_keys(tl->c, s);
    for (int r = 0; r < tl->nr; r++) {
        float *Sr = w->S + (size_t)r * W;
        const int nk = row_keys(tl, r, s);
        const float mx = row_max(Sr, nk);
        const float sum = exp_shift_sum(Sr, nk, mx);
        for (int i = nk; i < (tl->n - 1) * Bk + Nc; i++) Sr[i] = 0.0f; /* keys after t */
        w->row[r] = 1.0f / sum;
        lse[(r0 + r) * H + tl->h] = mx + logf(sum);
    }
    memset(w->Ot, 0, (size_t)tl->nr * d * sizeof(float));
    for (int j = 0; j <= tl->c; j++) {
        const int m = w->off[j + 1] - w->off[j], N = block_keys(j, s);
        if (m == 0) continue;
        const int *rows = w->ent_row + w->off[j];
        gather_slots(w->Pg, w->S, W, Bk, rows, w->ent_slot + w->off[j], m, N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, d, N, 1.0f, w->Pg, N, vb + (size_t)j * Bk * Gd,
                    (int)Gd, 0.0f, w->Og, d);
        for (int i = 0; i < m; i++) {
            float *o = w->Ot + (size_t)rows[i] * d;
            const float *og = w->Og + (size_t)i * d;
            for (int e = 0; e < d; e++) o[e] += og[e];
        }
    }
    for (int r = 0; r < tl->nr; r++) {
        float *o = out + (r0 + r) * Hd + (size_t)tl->h * d;
        for (int e = 0; e < d; e++) o[e] = w->Ot[(size_t)r * d + e] * w->row[r];
    }
}

/* Tiles of a sequence: ceil(T / Bk) blocks of ceil(Bk / R) tiles each (a short last block has fewer). */
static int tiles_per_block(const moba_shape *s) {
    const int R = s->block < MOBA_BR ? s->block : MOBA_BR;
    return (s->block + R - 1) / R;
}

/* Tile i of (b, h), or 0 when i lies past the end of a short last block. */
static int tile_of(moba_tile *tl, int b, int h, int i, const moba_shape *s) {
    const int R = s->block < MOBA_BR ? s->block : MOBA_BR, tpb = tiles_per_block(s), K = s->topk;
    tl->b = b, tl->h = h, tl->g = h / (s->H / s->G);
    tl->c = i / tpb;
    tl->t0 = tl->c * s->block + (i % tpb) * R;
    if (tl->t0 >= s->T) return 0;
    const int end = tl->c * s->block + s->block < s->T ? tl->c * s->block + s->block : s->T;
    tl->nr = end - tl->t0 < R ? end - tl->t0 : R;
    tl->n = (tl->c < K - 1 ? tl->c : K - 1) + 1;
    return 1;
}

static void moba_flash_forward(float *out, float *lse, const float *q, const float *k, const float *v, const int *sel,
                               const moba_shape *s, float *scratch) {
    const int tiles = (s->T + s->block - 1) / s->block * tiles_per_block(s);
    const long n_items = (long)s->B * s->H * tiles;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (long it = 0; it < n_items; it++) {
        tile_ws w = tile_ws_of(scratch, s, omp_get_thread_num());
        moba_tile tl;
        if (tile_of(&tl, (int)(it / tiles / s->H), (int)(it / tiles % s->H), (int)(it % tiles), s))
            tile_forward(out, lse, q, k, v, sel, &tl, s, &w);
    }
}

/* The backward of one tile, block by block: the rows that chose block j
 * recompute their logits and dP against it (P = exp(S - lse), dS = P (dP -
 * D)); then dq rows += dS K_j, and the group's dk_j += dS^T Q, dv_j += P^T dO.
 * dq rows overwritten. */
static void tile_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                          const float *q, const float *k, const float *v, const int *sel, const moba_tile *tl,
                          const moba_shape *s, tile_ws *w) {
    const int T = s->T, H = s->H, d = s->d, Bk = s->block;
    const size_t Gd = (size_t)s->G * d, Hd = (size_t)H * d, r0 = (size_t)tl->b * T + tl->t0;
    const size_t kv0 = (size_t)tl->b * T * Gd + (size_t)tl->g * d, q0 = r0 * Hd + (size_t)tl->h * d;
    const float scale = 1.0f / sqrtf((float)d);
    tile_lists(w, sel, tl, s);
    for (int r = 0; r < tl->nr; r++) { /* D = rowsum(dout . out) */
        const float *o = out + q0 + (size_t)r * Hd, *dO = dout + q0 + (size_t)r * Hd;
        float D = 0.0f;
        for (int e = 0; e < d; e++) D += dO[e] * o[e];
        w->row[r] = D;
    }
    memset(w->Ot, 0, (size_t)tl->nr * d * sizeof(float));
    for (int j = 0; j <= tl->c; j++) {
        const int m = w->off[j + 1] - w->off[j], N = block_keys(j, s);
        if (m == 0) continue;
        const int *rows = w->ent_row + w->off[j];
        const size_t kj = kv0 + (size_t)j * Bk * Gd;
        gather_rows(w->Qg, q + q0, Hd, rows, m, d);
        gather_rows(w->dOg, dout + q0, Hd, rows, m, d);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, N, d, scale, w->Qg, d, k + kj, (int)Gd, 0.0f, w->Pg, N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, N, d, 1.0f, w->dOg, d, v + kj, (int)Gd, 0.0f, w->dSg,
                    N);
        for (int i = 0; i < m; i++) {
            const int t = tl->t0 + rows[i], nv = t + 1 - j * Bk < N ? t + 1 - j * Bk : N; /* keys <= t */
            const float D = w->row[rows[i]];
            float *P = w->Pg + (size_t)i * N, *dS = w->dSg + (size_t)i * N;
            exp_shift_sum(P, nv, lse[(r0 + rows[i]) * H + tl->h]);
            for (int u = 0; u < nv; u++) dS[u] = P[u] * (dS[u] - D) * scale;
            for (int u = nv; u < N; u++) P[u] = dS[u] = 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, d, N, 1.0f, w->dSg, N, k + kj, (int)Gd, 0.0f, w->Og,
                    d);
        for (int i = 0; i < m; i++) {
            float *a = w->Ot + (size_t)rows[i] * d;
            const float *og = w->Og + (size_t)i * d;
            for (int e = 0; e < d; e++) a[e] += og[e];
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, d, m, 1.0f, w->dSg, N, w->Qg, d, 1.0f, dk + kj,
                    (int)Gd);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, d, m, 1.0f, w->Pg, N, w->dOg, d, 1.0f, dv + kj,
                    (int)Gd);
    }
    for (int r = 0; r < tl->nr; r++) memcpy(dq + q0 + (size_t)r * Hd, w->Ot + (size_t)r * d, (size_t)d * sizeof(float));
}

static void moba_flash_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                                const float *q, const float *k, const float *v, const int *sel, const moba_shape *s,
                                float *scratch) {
    const int T = s->T, G = s->G, d = s->d, rep = s->H / G;
    const int tiles = (T + s->block - 1) / s->block * tiles_per_block(s);
    const size_t Gd = (size_t)G * d;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (long bg = 0; bg < (long)s->B * G; bg++) {
        const int b = (int)(bg / G), g = (int)(bg % G);
        tile_ws w = tile_ws_of(scratch, s, omp_get_thread_num());
        for (int t = 0; t < T; t++) {
            memset(dk + ((size_t)b * T + t) * Gd + (size_t)g * d, 0, (size_t)d * sizeof(float));
            memset(dv + ((size_t)b * T + t) * Gd + (size_t)g * d, 0, (size_t)d * sizeof(float));
        }
        for (int h = g * rep; h < (g + 1) * rep; h++)
            for (int i = 0; i < tiles; i++) {
                moba_tile tl;
                if (tile_of(&tl, b, h, i, s))
                    tile_backward(dq, dk, dv, dout, out, lse, q, k, v, sel, &tl, s, &w);
            }
    }
}

static void moba_reference_forward(float *out, float *att, const float *q, const float *k, const float *v, const int *sel,
                            const moba_shape *s, float *scratch) {
    (void)scratch;
    const int T = s->T, H = s->H, G = s->G, d = s->d, rep = H / G;
    const size_t Gd = (size_t)G * d, Hd = (size_t)H * d;
    const float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (long bh = 0; bh < (long)s->B * H; bh++) {
        const int b = (int)(bh / H), h = (int)(bh % H), g = h / rep;
        for (int t = 0; t < T; t++) {
            const size_t r = (size_t)b * T + t;
            float *a = att + ((size_t)bh * T + t) * T;
            const int *sl = sel + (r * H + h) * s->topk;
            /* every causal key's logit, then the mask of the chosen ones */
            memset(a, 0, (size_t)T * sizeof(float));
            float mx = -INFINITY;
            for (int x = 0; x < s->topk && sl[x] >= 0; x++)
                for (int j = sl[x] * s->block; j < (sl[x] + 1) * s->block && j <= t; j++) {
                    a[j] = scale * moba_dot(q + r * Hd + (size_t)h * d, k + ((size_t)b * T + j) * Gd + (size_t)g * d, d);
                    mx = a[j] > mx ? a[j] : mx;
                }
            double sum = 0.0;
            for (int x = 0; x < s->topk && sl[x] >= 0; x++)
                for (int j = sl[x] * s->block; j < (sl[x] + 1) * s->block && j <= t; j++) sum += a[j] = expf(a[j] - mx);
            float *o = out + r * Hd + (size_t)h * d;
            memset(o, 0, (size_t)d * sizeof(float));
            for (int j = 0; j <= t; j++) {
                if (a[j] == 0.0f) continue;
                a[j] = (float)(a[j] / sum);
                const float *vj = v + ((size_t)b * T + j) * Gd + (size_t)g * d;
                for (int e = 0; e < d; e++) o[e] += a[j] * vj[e];
            }
        }
    }
}

static void moba_reference_backward(float *dq, float *dk, float *dv, const float *dout, const float *att, const float *q,
                             const float *k, const float *v, const moba_shape *s, float *scratch) {
    const int T = s->T, H = s->H, G = s->G, d = s->d, rep = H / G;
    const size_t Gd = (size_t)G * d, Hd = (size_t)H * d;
    const float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (long bg = 0; bg < (long)s->B * G; bg++) {
        const int b = (int)(bg / G), g = (int)(bg % G);
        const size_t base = (size_t)b * T;
        float *dp = scratch + (size_t)omp_get_thread_num() * T;
        for (int t = 0; t < T; t++) {
            memset(dk + (base + t) * Gd + (size_t)g * d, 0, (size_t)d * sizeof(float));
            memset(dv + (base + t) * Gd + (size_t)g * d, 0, (size_t)d * sizeof(float));
        }
        for (int h = g * rep; h < (g + 1) * rep; h++)
            for (int t = 0; t < T; t++) {
                const size_t r = base + t, qo = r * Hd + (size_t)h * d;
                const float *a = att + (((size_t)b * H + h) * T + t) * T, *doh = dout + qo, *qh = q + qo;
                float *dqh = dq + qo;
                /* D from the map itself (the flash kernel takes dout . out): two routes to one value */
                double D = 0.0;
                for (int j = 0; j <= t; j++) {
                    dp[j] = a[j] != 0.0f ? moba_dot(doh, v + (base + j) * Gd + (size_t)g * d, d) : 0.0f;
                    D += (double)a[j] * dp[j];
                }
                memset(dqh, 0, (size_t)d * sizeof(float));
                for (int j = 0; j <= t; j++) {
                    if (a[j] == 0.0f) continue;
                    const size_t ko = (base + j) * Gd + (size_t)g * d;
                    const float ds = a[j] * (dp[j] - (float)D) * scale;
                    for (int e = 0; e < d; e++) {
                        dqh[e] += ds * k[ko + e];
                        dk[ko + e] += ds * qh[e];
                        dv[ko + e] += a[j] * doh[e];
                    }
                }
            }
    }
}
