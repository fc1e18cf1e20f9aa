/* NSA's efficient kernels (nsa.h). Cost per head ~ T * (T/s + n*l' + w)
 * multiply-adds, memory linear in T.
 *
 * Forward: one (sequence, group, tile of NSA_BR queries) per iteration. The
 * tile's queries of the group's rep heads form one matrix Q (NSA_BR*rep rows),
 * so each key the tile loads serves every head of the group:
 *   compression: S = Q Kc^T over the blocks the tile's last query sees (one
 *     GEMM), each row masked to its visible blocks and normalised, O = P Vc;
 *     the rows' probabilities give the importance and the block choice;
 *   selection: block by block (tile_block_lists): the tile's queries that
 *     chose block j, the group's heads together, meet its keys in one small
 *     GEMM (S = Q K_j^T) and its values in another (O += P V_j), so a block
 *     is fetched once per tile. A query's logits sit in slots of l' (its
 *     blocks ascending, the current one last), so its keys <= t are a prefix
 *     of its row and the softmax is exact;
 *   window: softmax attention over the last w keys, the flash kernels' sliding window (window_forward).
 * Saved: each branch's output and log-sum-exp, the choice, Kc and Vc.
 *
 * Backward: one (sequence, group) per iteration, so the rows of dK, dV (and
 * dKc, dVc) that a group owns are written by one thread: no races, a fixed
 * order. Each branch recomputes P = exp(S - lse); dS = P (dO V^T - D) with
 * D = rowsum(dO O) and dO = gate * dout (the window: the flash backward); the selection again block by block,
 * S, dP, dQ, dK_j and dV_j each one GEMM over the queries that chose the block.
 *
 * The GEMMs are small (a block's m queries x l' keys x d; a tile's queries x
 * at most w + NSA_BR keys), where a library sgemm spends most of a call in
 * set-up and packing: they run on flash_tile.c's register blocks instead.
 * The element loops over a row carry `omp simd`: -O2's cost model leaves a
 * loop whose count is unknown scalar. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn/nsa.h"
#include "attn/nsa_choose.h"
#include "attn/nsa_rows.h"
#include "ops/vexp.h"

/* Per-thread scratch layout (floats). */
typedef struct {
    float *Q, *S, *O, *dQ, *dO, *D, *imp;
    float *Ssl;                /* the selection's logits (then P), forward: M rows of nsa_slot_cols */
    float *Qg, *dOg, *Og;      /* (M, d): one block's rows gathered, and a product's output */
    float *Pg, *dSg;           /* (M, l'): one block's columns of those rows */
    float *inv;                /* (M): 1 / the selection's softmax sum */
    float *bt;                 /* a product's right operand padded to whole vectors (padded_rows) */
    /* Shared by the threads, transposed once per call (transpose_planes): each sequence's key or value
     * channels as rows, (B, G*d, ld); the keys scaled by 1/sqrt(d). */
    float *kslc_t, *vslc_t;    /* k_slc, v_slc: ld = ldT */
    float *kc_t, *vc_t;        /* Kc, Vc: ld = ldC */
    int ldT, ldC;
    int *blk_off, *blk_rows, *blk_slot; /* the tile's queries per selection block (tile_block_lists) */
    size_t per_thread;
} flash_ws;

static flash_ws ws_layout(const nsa_shape *s, float *base, int thread) {
    const int rep = s->H / s->G, M = NSA_BR * rep, d = s->d;
    flash_ws w;
    w.per_thread = nsa_flash_scratch_per_thread(s);
    float *p = base + (size_t)thread * w.per_thread;
    w.Q = p; p += (size_t)M * d;
    w.O = p; p += (size_t)M * d;
    w.dQ = p; p += (size_t)M * d;
    w.dO = p; p += (size_t)M * d;
    w.D = p; p += M;
    w.S = p; p += (size_t)M * nsa_flash_max_cols(s) * 2; /* S and, in the backward, dP */
    w.imp = p; p += (size_t)s->T / s->select + 1;
    w.Ssl = p; p += (size_t)M * nsa_slot_cols(s);
    w.Qg = p; p += (size_t)M * d;
    w.dOg = p; p += (size_t)M * d;
    w.Og = p; p += (size_t)M * d;
    w.Pg = p; p += (size_t)M * s->select;
    w.dSg = p; p += (size_t)M * s->select;
    w.inv = p; p += M;
    w.bt = p; p += nsa_flash_bt_floats(s);
    const size_t planes = nsa_flash_planes_offset(s), Gd = (size_t)s->G * d;
    w.ldT = nsa_ldT(s->T);
    w.ldC = nsa_ldT(nsa_n_compressed(s, s->T));
    w.kslc_t = base + planes;
    w.vslc_t = w.kslc_t + (size_t)s->B * Gd * w.ldT;
    w.kc_t = w.vslc_t + (size_t)s->B * Gd * w.ldT;
    w.vc_t = w.kc_t + (size_t)s->B * Gd * w.ldC;
    w.blk_off = (int *)(void *)p; /* ints in float-sized slots */
    w.blk_rows = w.blk_off + s->T / s->select + 2;
    w.blk_slot = w.blk_rows + NSA_BR * s->topn;
    return w;
}

/* Group g's rows (d of them, ld apart) in sequence b's plane of a transposed buffer (flash_ws). */
static const float *plane(const float *X, int ld, int b, int g, const nsa_shape *s) {
    return X + ((size_t)b * s->G + g) * s->d * ld;
}

/* dst (B, G*d, ld) = scale * each sequence's src (n, G*d) transposed. */
static void transpose_planes(float *dst, int ld, const float *src, int n, float scale, const nsa_shape *s) {
    const int Gd = s->G * s->d;
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (int b = 0; b < s->B; b++)
        tile_transpose(dst + (size_t)b * Gd * ld, ld, src + (size_t)b * n * Gd, Gd, n, Gd, ld, scale);
}

/* tile_gemm reads B's rows to N rounded up to whole vectors: B's K rows (stride ldb) as they are when N is
 * whole vectors, else copied into bt with the padding. Returns the rows' stride. */
static int padded_rows(const float **B, int ldb, int K, int N, float *bt) {
    if (N % TV == 0) return ldb;
    const int np = (N + TV - 1) / TV * TV;
    for (int k = 0; k < K; k++) {
        memcpy(bt + (size_t)k * np, *B + (size_t)k * ldb, (size_t)N * sizeof(float));
        memset(bt + (size_t)k * np + N, 0, (size_t)(np - N) * sizeof(float));
    }
    *B = bt;
    return np;
}

/* C (M, N) = A B, or += with acc: A (M, K), B (K, N) row-major, rows lda and ldb apart. */
static void gemm_ab(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int M, int N, int K, int acc,
                    float *bt) {
    ldb = padded_rows(&B, ldb, K, N, bt);
    tile_gemm(C, ldc, A, lda, 1, B, ldb, M, N, K, acc);
}

/* C (M, N) = A^T B, or += with acc: A (K, M), B (K, N) row-major, rows lda and ldb apart. */
static void gemm_atb(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int M, int N, int K, int acc,
                     float *bt) {
    ldb = padded_rows(&B, ldb, K, N, bt);
    tile_gemm(C, ldc, A, 1, lda, B, ldb, M, N, K, acc);
}

/* A block's gathered rows, padded with zero rows to whole register blocks of tile_gemm (8 rows at the
 * usual head sizes), so that no product falls to its one-row remainder kernel; the padded count <= M,
 * a multiple of 8. */
static int padded_count(int rows) { return (rows + 7) / 8 * 8; }
static void zero_pad_rows(float *X, int rows, int width) {
    memset(X + (size_t)rows * width, 0, (size_t)(padded_count(rows) - rows) * width * sizeof(float));
}

/* The tile's query rows of group g: Q (nr*rep, d), row r*rep + hh = head g*rep + hh of query r0 + r. */
static void gather_rows(float *Q, const float *src, int b, int g, int r0, int nr, const nsa_shape *s) {
    const int rep = s->H / s->G, Hd = s->H * s->d;
    for (int r = 0; r < nr; r++)
        memcpy(Q + (size_t)r * rep * s->d, src + ((size_t)b * s->T + r0 + r) * Hd + (size_t)g * rep * s->d,
               (size_t)rep * s->d * sizeof(float));
}

static void scatter_rows(float *dst, const float *Q, int b, int g, int r0, int nr, const nsa_shape *s) {
    const int rep = s->H / s->G, Hd = s->H * s->d;
    for (int r = 0; r < nr; r++)
        memcpy(dst + ((size_t)b * s->T + r0 + r) * Hd + (size_t)g * rep * s->d, Q + (size_t)r * rep * s->d,
               (size_t)rep * s->d * sizeof(float));
}

/* Row m of a branch's S (M rows of ncol; keys k0 .. k0+ncol-1) keeps keys [lo, hi): softmaxed in place,
 * others zeroed; returns the log-sum-exp (-inf when the row has none). */
static float softmax_span(float *row, int ncol, int lo, int hi) {
    for (int j = 0; j < lo; j++) row[j] = 0;
    for (int j = hi; j < ncol; j++) row[j] = 0;
    if (hi <= lo) return -INFINITY;
    const float mx = row_max(row + lo, hi - lo);
    const float sum = exp_shift_sum(row + lo, hi - lo, mx);
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = lo; j < hi; j++) row[j] *= inv;
    return mx + logf(sum);
}

/* The compression branch of one tile, over the blocks its last query sees (V: the sequence's Vc):
 * o_cmp and lse saved; S keeps P. */
static void cmp_forward(float *o_out, float *lse, const float *V, int b, int g, int r0, int nr, const nsa_shape *s,
                        flash_ws *w) {
    const int rep = s->H / s->G, d = s->d, M = nr * rep, ld = s->G * s->d;
    const int N = nsa_n_visible(s, r0 + nr - 1);
    if (N > 0) tile_gemm(w->S, N, w->Q, d, 1, plane(w->kc_t, w->ldC, b, g, s), w->ldC, M, N, d, 0);
    for (int m = 0; m < M; m++) {
        const int t = r0 + m / rep, h = g * rep + m % rep;
        lse[(((size_t)b * s->T + t) * s->H + h) * 3] = softmax_span(w->S + (size_t)m * N, N, 0, nsa_n_visible(s, t));
    }
    if (N > 0)
        gemm_ab(w->O, d, w->S, N, V + g * d, ld, M, d, N, 0, w->bt);
    else
        memset(w->O, 0, (size_t)M * d * sizeof(float));
    scatter_rows(o_out, w->O, b, g, r0, nr, s);
}

/* The tile's queries (rows r < nr of query r0 + r) by the selection block they chose: block j's rows are
 * w->blk_rows[blk_off[j] .. blk_off[j+1]), ascending, with the block's place in each row's choice in
 * blk_slot, for j < the returned count of blocks. The selection branches then go block by block, so that
 * a block's keys and values (and their gradient rows) are fetched once per tile, not once per query. */
static int tile_block_lists(flash_ws *w, const int *sel, int b, int g, int r0, int nr, const nsa_shape *s) {
    const int nbt = (r0 + nr - 1) / s->select + 1;
    int *off = w->blk_off, *rows = w->blk_rows;
    memset(off, 0, (size_t)(nbt + 1) * sizeof(int));
    for (int r = 0; r < nr; r++) {
        const int *sq = sel + (((size_t)b * s->T + r0 + r) * s->G + g) * s->topn;
        for (int k = 0; k < s->topn && sq[k] >= 0; k++) off[sq[k] + 1]++;
    }
    for (int j = 0; j < nbt; j++) off[j + 1] += off[j];
    for (int r = 0; r < nr; r++) { /* rows ascending within each block: off[j] advances as they are placed */
        const int *sq = sel + (((size_t)b * s->T + r0 + r) * s->G + g) * s->topn;
        for (int k = 0; k < s->topn && sq[k] >= 0; k++) {
            w->blk_slot[off[sq[k]]] = k;
            rows[off[sq[k]]++] = r;
        }
    }
    for (int j = nbt; j > 0; j--) off[j] = off[j - 1]; /* back to the starts */
    off[0] = 0;
    return nbt;
}

/* Keys of selection block j (the sequence's last block may be short). */
static int slc_block_keys(int j, const nsa_shape *s) {
    return s->T - j * s->select < s->select ? s->T - j * s->select : s->select;
}

/* X's slots (M rows of nsa_slot_cols) = x K_j^T / sqrt(d) for every block j the tile chose: x the tile's
 * rows (M, d: row r's rep heads at rows r*rep ..), Kt the group's transposed, scaled keys (d rows, ld apart). */
static void slc_products(float *X, const float *x, const float *Kt, int ld, int nbt, const nsa_shape *s,
                         flash_ws *w) {
    const int rep = s->H / s->G, d = s->d, l = s->select, W = nsa_slot_cols(s);
    for (int j = 0; j < nbt; j++) {
        const int m = w->blk_off[j + 1] - w->blk_off[j], N = slc_block_keys(j, s);
        if (m == 0) continue;
        const int *rows = w->blk_rows + w->blk_off[j], *slots = w->blk_slot + w->blk_off[j];
        for (int i = 0; i < m; i++)
            memcpy(w->Qg + (size_t)i * rep * d, x + (size_t)rows[i] * rep * d, (size_t)rep * d * sizeof(float));
        zero_pad_rows(w->Qg, m * rep, d);
        tile_gemm(w->Pg, N, w->Qg, d, 1, Kt + (size_t)j * l, ld, padded_count(m * rep), N, d, 0);
        for (int i = 0; i < m; i++)
            for (int hh = 0; hh < rep; hh++)
                memcpy(X + ((size_t)rows[i] * rep + hh) * W + (size_t)slots[i] * l, w->Pg + ((size_t)i * rep + hh) * N,
                       (size_t)N * sizeof(float));
    }
}

/* dst (m*rep, N) = block j's slots of the rows of X that chose it. */
static void slc_gather(float *dst, const float *X, int j, const nsa_shape *s, const flash_ws *w) {
    const int rep = s->H / s->G, l = s->select, W = nsa_slot_cols(s), N = slc_block_keys(j, s);
    for (int i = w->blk_off[j]; i < w->blk_off[j + 1]; i++)
        for (int hh = 0; hh < rep; hh++)
            memcpy(dst + ((size_t)(i - w->blk_off[j]) * rep + hh) * N,
                   X + ((size_t)w->blk_rows[i] * rep + hh) * W + (size_t)w->blk_slot[i] * l, (size_t)N * sizeof(float));
}

/* Row r's keys <= t (its chosen blocks' slots ascending, the current block last, the others full), and
 * in *end the end of the current block's slot; sets the chosen count. */
static int slc_row_keys(int *end, const int *sel, int t, const nsa_shape *s) {
    int n = 0;
    while (n < s->topn && sel[n] >= 0) n++;
    const int cur = t / s->select;
    *end = (n - 1) * s->select + slc_block_keys(cur, s);
    return (n - 1) * s->select + t - cur * s->select + 1;
}

static const int *row_sel(const nsa_saved *sv, int b, int g, int t, const nsa_shape *s) {
    return sv->sel + (((size_t)b * s->T + t) * s->G + g) * s->topn;
}

/* The selection branch of one tile, block by block (tile_block_lists): o_slc and lse written. */
static void tile_selection(const nsa_inputs *in, nsa_saved *sv, int b, int g, int r0, int nr, const nsa_shape *s,
                           flash_ws *w) {
    const int T = s->T, rep = s->H / s->G, d = s->d, Hd = s->H * d, Gd = s->G * d, W = nsa_slot_cols(s);
    const int nbt = tile_block_lists(w, sv->sel, b, g, r0, nr, s);
    const size_t kv0 = (size_t)b * T * Gd + (size_t)g * d;
    slc_products(w->Ssl, w->Q, plane(w->kslc_t, w->ldT, b, g, s), w->ldT, nbt, s, w);
    for (int m = 0; m < nr * rep; m++) {
        const int t = r0 + m / rep;
        int end;
        const int nk = slc_row_keys(&end, row_sel(sv, b, g, t, s), t, s);
        float *Sr = w->Ssl + (size_t)m * W;
        const float mx = row_max(Sr, nk);
        const float sum = exp_shift_sum(Sr, nk, mx);
        for (int i = nk; i < end; i++) Sr[i] = 0.0f; /* keys after t */
        w->inv[m] = 1.0f / sum;
        sv->lse[(((size_t)b * T + t) * s->H + g * rep + m % rep) * 3 + 1] = mx + logf(sum);
    }
    memset(w->O, 0, (size_t)nr * rep * d * sizeof(float));
    for (int j = 0; j < nbt; j++) {
        const int m = w->blk_off[j + 1] - w->blk_off[j], N = slc_block_keys(j, s);
        if (m == 0) continue;
        slc_gather(w->Pg, w->Ssl, j, s, w);
        zero_pad_rows(w->Pg, m * rep, N);
        gemm_ab(w->Og, d, w->Pg, N, in->v_slc + kv0 + (size_t)j * s->select * Gd, Gd, padded_count(m * rep), d, N, 0,
                w->bt);
        for (int i = 0; i < m; i++) {
            float *o = w->O + (size_t)w->blk_rows[w->blk_off[j] + i] * rep * d;
            const float *og = w->Og + (size_t)i * rep * d;
#pragma omp simd
            for (int k = 0; k < rep * d; k++) o[k] += og[k];
        }
    }
    for (int m = 0; m < nr * rep; m++) { /* row m: query r0 + m / rep, head m % rep of the group */
        float *o = sv->o_slc + ((size_t)b * T + r0 + m / rep) * Hd + (size_t)(g * rep + m % rep) * d;
        const float *om = w->O + (size_t)m * d, inv = w->inv[m];
#pragma omp simd
        for (int k = 0; k < d; k++) o[k] = om[k] * inv;
    }
}

static void tile_forward(const nsa_inputs *in, nsa_saved *sv, int b, int g, int r0, const nsa_shape *s,
                         flash_ws *w) {
    const int T = s->T, rep = s->H / s->G, d = s->d, Gd = s->G * d, Nc = nsa_n_compressed(s, T);
    const int nr = T - r0 < NSA_BR ? T - r0 : NSA_BR;
    gather_rows(w->Q, in->q, b, g, r0, nr, s);
    /* compression, then each query's choice from its probabilities (still in S) */
    cmp_forward(sv->o_cmp, sv->lse, sv->vc + (size_t)b * Nc * Gd, b, g, r0, nr, s, w);
    const int N = nsa_n_visible(s, r0 + nr - 1);
    for (int r = 0; r < nr; r++) {
        const int t = r0 + r;
        int *sel = sv->sel + (((size_t)b * T + t) * s->G + g) * s->topn;
        nsa_importance(w->imp, w->S + (size_t)r * rep * N, N, rep, t, s);
        nsa_choose(sel, w->imp, t, s);
    }
    tile_selection(in, sv, b, g, r0, nr, s, w);
}

/* The window branch is causal softmax attention over the last w keys: the flash kernels' sliding window
 * (flash_attention.c), its log-sum-exp moved to lse's slot 2. ws: nsa_flash_window_floats. */
static void window_forward(const nsa_inputs *in, nsa_saved *sv, const nsa_shape *s, float *ws) {
    const attn_shape as = nsa_window_shape(s);
    const int B = s->B, T = s->T, H = s->H;
    float *lse_w = ws + da_flash_scratch_size(&as, &NSA_WINDOW_LAYOUT); /* (B, H, T) */
    da_attn_ops_of(DA_VARIANT_ISA)->flash_forward(sv->o_win, NULL, NULL, lse_w, in->q, in->k_win, in->v_win, 0.0f, NULL,
                                                  &NSA_WINDOW_LAYOUT, &as, ws);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                sv->lse[(((size_t)b * T + t) * H + h) * 3 + 2] = lse_w[((size_t)b * H + h) * T + t];
}

/* The window branch's backward (flash_attention.c): dk_win, dv_win overwritten, and the branch's dq
 * (B, T, H*d) returned in ws, to be added. */
static float *window_backward(const nsa_grads *gr, const float *dout, const nsa_inputs *in, const nsa_saved *sv,
                              const nsa_shape *s, float *ws) {
    const attn_shape as = nsa_window_shape(s);
    const int B = s->B, T = s->T, H = s->H, d = s->d;
    float *lse_w = ws + da_flash_scratch_size(&as, &NSA_WINDOW_LAYOUT); /* (B, H, T) */
    float *dopre = lse_w + (size_t)B * H * T, *dq = dopre + (size_t)B * T * H * d; /* (B, T, H*d) each */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const size_t r = ((size_t)b * T + t) * H + h;
                lse_w[((size_t)b * H + h) * T + t] = sv->lse[r * 3 + 2];
                for (int c = 0; c < d; c++) dopre[r * d + c] = in->gate[r * 3 + 2] * dout[r * d + c];
            }
    da_attn_ops_of(DA_VARIANT_ISA)->flash_backward(dq, gr->dk_win, gr->dv_win, NULL, NULL, dopre, sv->o_win, NULL,
                                                   NULL, lse_w, in->q, in->k_win, in->v_win, 0.0f, NULL,
                                                   &NSA_WINDOW_LAYOUT, &as, ws);
    return dq;
}

static void nsa_flash_forward(float *out, const nsa_inputs *in, nsa_saved *sv, const nsa_shape *s, float *scratch) {
    const int T = s->T, H = s->H, d = s->d, tiles = (T + NSA_BR - 1) / NSA_BR;
    nsa_compress_forward(sv->kc, in->k_cmp, in->wck, in->pe_k, s);
    nsa_compress_forward(sv->vc, in->v_cmp, in->wcv, in->pe_v, s);
    const flash_ws w0 = ws_layout(s, scratch, 0);
    const float scale = 1.0f / sqrtf((float)d);
    transpose_planes(w0.kslc_t, w0.ldT, in->k_slc, T, scale, s);
    transpose_planes(w0.kc_t, w0.ldC, sv->kc, nsa_n_compressed(s, T), scale, s);
    const long n_items = (long)s->B * s->G * tiles;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (long it = 0; it < n_items; it++) {
        flash_ws w = ws_layout(s, scratch, omp_get_thread_num());
        const int tile = (int)(it % tiles), g = (int)(it / tiles % s->G), b = (int)(it / tiles / s->G);
        tile_forward(in, sv, b, g, tile * NSA_BR, s, &w);
    }
    window_forward(in, sv, s, scratch + nsa_flash_window_offset(s));
    const size_t rows = (size_t)s->B * T * H;
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (size_t r = 0; r < rows; r++) {
        const float *gt = in->gate + r * 3;
        const size_t o = r * d;
#pragma omp simd
        for (int c = 0; c < d; c++)
            out[o + c] = gt[0] * sv->o_cmp[o + c] + gt[1] * sv->o_slc[o + c] + gt[2] * sv->o_win[o + c];
    }
}

/* dO of branch c for the tile's rows: gate_c * dout, as Q is laid out; D (M) = rowsum(dO o_c) = gate_c dgate_c. */
static void branch_dout(float *dO, float *D, const float *dout, const float *gate, const float *dgate, int c, int b,
                        int g, int r0, int nr, const nsa_shape *s) {
    const int rep = s->H / s->G, d = s->d;
    gather_rows(dO, dout, b, g, r0, nr, s);
    for (int m = 0; m < nr * rep; m++) {
        const size_t gi = (((size_t)b * s->T + r0 + m / rep) * s->H + g * rep + m % rep) * 3 + c;
        const float gm = gate[gi];
#pragma omp simd
        for (int k = 0; k < d; k++) dO[(size_t)m * d + k] *= gm;
        D[m] = gm * dgate[gi];
    }
}

/* The compression branch's backward over one tile: dQ (w->dQ) +=, dKc, dVc rows +=. K: the sequence's Kc. */
static void cmp_backward(float *dK, float *dV, const float *K, const float *lse, const float *D, int b, int g, int r0,
                         int nr, const nsa_shape *s, flash_ws *w) {
    const int rep = s->H / s->G, d = s->d, M = nr * rep, ld = s->G * s->d;
    const int N = nsa_n_visible(s, r0 + nr - 1);
    if (N == 0) return;
    const float scale = 1.0f / sqrtf((float)d);
    float *S = w->S, *dP = w->S + (size_t)M * N;
    const size_t koff = (size_t)g * d;
    tile_gemm(S, N, w->Q, d, 1, plane(w->kc_t, w->ldC, b, g, s), w->ldC, M, N, d, 0);
    tile_gemm(dP, N, w->dO, d, 1, plane(w->vc_t, w->ldC, b, g, s), w->ldC, M, N, d, 0);
    for (int m = 0; m < M; m++) {
        const int t = r0 + m / rep, h = g * rep + m % rep;
        const int hi = nsa_n_visible(s, t);
        const float l = lse[(((size_t)b * s->T + t) * s->H + h) * 3];
        float *Sr = S + (size_t)m * N, *dPr = dP + (size_t)m * N;
        for (int j = hi; j < N; j++) Sr[j] = 0.0f;
        const float Dm = D[m];
        if (hi > 0) exp_shift_sum(Sr, hi, l);
#pragma omp simd
        for (int j = 0; j < N; j++) dPr[j] = Sr[j] * (dPr[j] - Dm) * scale; /* dS */
    }
    gemm_ab(w->dQ, d, dP, N, K + koff, ld, M, d, N, 1, w->bt);
    gemm_atb(dK + koff, ld, dP, N, w->Q, d, N, d, M, 1, w->bt);
    gemm_atb(dV + koff, ld, S, N, w->dO, d, N, d, M, 1, w->bt);
}

/* The selection branch's backward over one tile (w->Q, w->dO = gate dout, D ready), block by block: the
 * rows that chose block j recompute their logits and dP against it (P = exp(S - lse), dS = P (dP - D)),
 * then w->dQ +=, and block j's dk_slc, dv_slc rows +=, one GEMM each. */
static void slc_backward(const nsa_grads *gr, const nsa_inputs *in, const nsa_saved *sv, const float *D, int b, int g,
                         int r0, int nr, const nsa_shape *s, flash_ws *w) {
    const int T = s->T, rep = s->H / s->G, d = s->d, Gd = s->G * d;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t kv0 = (size_t)b * T * Gd + (size_t)g * d;
    const int nbt = tile_block_lists(w, sv->sel, b, g, r0, nr, s);
    for (int j = 0; j < nbt; j++) {
        const int m = w->blk_off[j + 1] - w->blk_off[j], N = slc_block_keys(j, s), M = m * rep;
        if (m == 0) continue;
        const int *rows = w->blk_rows + w->blk_off[j];
        const size_t kj = kv0 + (size_t)j * s->select * Gd;
        for (int i = 0; i < m; i++) {
            memcpy(w->Qg + (size_t)i * rep * d, w->Q + (size_t)rows[i] * rep * d, (size_t)rep * d * sizeof(float));
            memcpy(w->dOg + (size_t)i * rep * d, w->dO + (size_t)rows[i] * rep * d, (size_t)rep * d * sizeof(float));
        }
        zero_pad_rows(w->Qg, M, d);
        zero_pad_rows(w->dOg, M, d);
        /* the padding rows of P and dS come out zero */
        const size_t jt = (size_t)j * s->select;
        tile_gemm(w->Pg, N, w->Qg, d, 1, plane(w->kslc_t, w->ldT, b, g, s) + jt, w->ldT, padded_count(M), N, d, 0);
        tile_gemm(w->dSg, N, w->dOg, d, 1, plane(w->vslc_t, w->ldT, b, g, s) + jt, w->ldT, padded_count(M), N, d, 0);
        for (int i = 0; i < M; i++) {
            const int r = rows[i / rep], t = r0 + r, m_row = r * rep + i % rep;
            const int nv = t + 1 - j * s->select < N ? t + 1 - j * s->select : N; /* keys <= t */
            float *P = w->Pg + (size_t)i * N, *dS = w->dSg + (size_t)i * N;
            const float Dm = D[m_row];
            exp_shift_sum(P, nv, sv->lse[(((size_t)b * T + t) * s->H + g * rep + i % rep) * 3 + 1]);
#pragma omp simd
            for (int u = 0; u < nv; u++) dS[u] = P[u] * (dS[u] - Dm) * scale;
            for (int u = nv; u < N; u++) P[u] = dS[u] = 0.0f;
        }
        /* dQ += dS K_j; dK_j += dS^T Q; dV_j += P^T dO */
        gemm_ab(w->Og, d, w->dSg, N, in->k_slc + kj, Gd, padded_count(M), d, N, 0, w->bt);
        for (int i = 0; i < m; i++) {
            float *dq = w->dQ + (size_t)rows[i] * rep * d;
            const float *og = w->Og + (size_t)i * rep * d;
#pragma omp simd
            for (int k = 0; k < rep * d; k++) dq[k] += og[k];
        }
        gemm_atb(gr->dk_slc + kj, Gd, w->dSg, N, w->Qg, d, N, d, M, 1, w->bt);
        gemm_atb(gr->dv_slc + kj, Gd, w->Pg, N, w->dOg, d, N, d, M, 1, w->bt);
    }
}

static void group_backward(const nsa_grads *gr, const float *dout, const nsa_inputs *in, const nsa_saved *sv,
                           float *dkc, float *dvc, int b, int g, const nsa_shape *s, flash_ws *w) {
    const int T = s->T, rep = s->H / s->G, d = s->d, Gd = s->G * d, Nc = nsa_n_compressed(s, T);
    float *D = w->D;
    const size_t kc0 = (size_t)b * Nc * Gd;
    for (int r0 = 0; r0 < T; r0 += NSA_BR) {
        const int nr = T - r0 < NSA_BR ? T - r0 : NSA_BR;
        gather_rows(w->Q, in->q, b, g, r0, nr, s);
        memset(w->dQ, 0, (size_t)nr * rep * d * sizeof(float));
        branch_dout(w->dO, D, dout, in->gate, gr->dgate, 0, b, g, r0, nr, s);
        cmp_backward(dkc + kc0, dvc + kc0, sv->kc + kc0, sv->lse, D, b, g, r0, nr, s, w);
        branch_dout(w->dO, D, dout, in->gate, gr->dgate, 1, b, g, r0, nr, s);
        slc_backward(gr, in, sv, D, b, g, r0, nr, s, w);
        scatter_rows(gr->dq, w->dQ, b, g, r0, nr, s);
    }
}

static void nsa_flash_backward(const nsa_grads *gr, const float *dout, const nsa_inputs *in, const nsa_saved *sv,
                        const nsa_shape *s, float *scratch) {
    const int T = s->T, H = s->H, d = s->d;
    const size_t rows = (size_t)s->B * T * H, nkv = (size_t)s->B * T * s->G * d, nc = nsa_saved_floats_kv(s);
    float *dkc = scratch + (size_t)s->n_threads * nsa_flash_scratch_per_thread(s), *dvc = dkc + nc;
    const flash_ws w0 = ws_layout(s, scratch, 0);
    const int Nc = nsa_n_compressed(s, T);
    const float scale = 1.0f / sqrtf((float)d);
    transpose_planes(w0.kslc_t, w0.ldT, in->k_slc, T, scale, s);
    transpose_planes(w0.vslc_t, w0.ldT, in->v_slc, T, 1.0f, s);
    transpose_planes(w0.kc_t, w0.ldC, sv->kc, Nc, scale, s);
    transpose_planes(w0.vc_t, w0.ldC, sv->vc, Nc, 1.0f, s);
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (size_t r = 0; r < rows; r++) {
        const float *o[3] = {sv->o_cmp + r * d, sv->o_slc + r * d, sv->o_win + r * d};
        for (int c = 0; c < 3; c++) {
            float acc = 0;
            for (int k = 0; k < d; k++) acc += dout[r * d + k] * o[c][k];
            gr->dgate[r * 3 + c] = acc;
        }
    }
    memset(dkc, 0, 2 * nc * sizeof(float));
    float *zero[4] = {gr->dk_cmp, gr->dv_cmp, gr->dk_slc, gr->dv_slc};
    for (int k = 0; k < 4; k++) memset(zero[k], 0, nkv * sizeof(float));
    const float *dq_win = window_backward(gr, dout, in, sv, s, scratch + nsa_flash_window_offset(s));
    const int n_items = s->B * s->G;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
    for (int it = 0; it < n_items; it++) {
        flash_ws w = ws_layout(s, scratch, omp_get_thread_num());
        const int b = it / s->G, g = it % s->G;
        group_backward(gr, dout, in, sv, dkc, dvc, b, g, s, &w);
    }
    for (size_t i = 0; i < rows * d; i++) gr->dq[i] += dq_win[i];
    nsa_compress_backward(gr->dk_cmp, gr->dwck, gr->dpe_k, dkc, in->k_cmp, in->wck, in->pe_k, s);
    nsa_compress_backward(gr->dv_cmp, gr->dwcv, gr->dpe_v, dvc, in->v_cmp, in->wcv, in->pe_v, s);
}
