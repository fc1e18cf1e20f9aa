/* The matmuls of decoding and short batches: the rows of a quantized weight
 * matrix against n int8 activation rows (or of an F16 / BF16 matrix against
 * float rows), split over a thread team (core/pool.h) in chunks of whole
 * 16-row groups (the kernels' unit, ops/qgemm.c), taken dynamically so that a
 * descheduled thread holds up at most one chunk. Several matrices of one
 * input (a layer's q, k and v; w1 and w3) go as one team step: one wake-up
 * and one join instead of one per matrix, and no thread idles at the end of
 * each. */
#include <stdatomic.h>

#include "core/pool.h"
#include "infer/engine.h"
#include "ops/ops.h"

/* Matrices one step takes. */
#define MANY_MAX 8

typedef struct {
    const da_ops *ops;
    const da_qtensor *const *W;
    float *const *out;
    int m;                       /* matrices */
    int chunk[MANY_MAX];         /* rows a chunk of matrix i takes */
    int first[MANY_MAX + 1];     /* matrix i's chunks are items first[i] .. first[i + 1] - 1 */
    const da_qact *x;
    const float *xf; /* float activations (F16, BF16), or NULL */
    int n, accumulate;
    _Atomic int next;
} qmatmul_job;

/* Rows lo .. hi - 1 of W: those of its packed 16-row groups in their layout, the rest in ggml's. */
static void qgemm_rows(const qmatmul_job *j, const da_qtensor *W, float *out, int lo, int hi) {
    const int packed = da_qtensor_packed_rows(W), mid = hi < packed ? hi : packed > lo ? packed : lo;
    if (lo < mid)
        j->ops->qgemm(DA_QT_Q8_0_R16, W->data, W->row_bytes, lo, mid, W->cols, j->x, j->n, out, W->rows, j->accumulate);
    if (mid < hi)
        j->ops->qgemm(W->type, W->data, W->row_bytes, mid, hi, W->cols, j->x, j->n, out, W->rows, j->accumulate);
}

static void qmatmul_chunks(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    qmatmul_job *j = arg;
    int item, end, i = 0;
    while (da_pool_chunk(&j->next, j->first[j->m], 1, &item, &end)) {
        while (item >= j->first[i + 1]) i++; /* items are taken in increasing order */
        const da_qtensor *W = j->W[i];
        const int lo = (item - j->first[i]) * j->chunk[i], hi = lo + j->chunk[i] < W->rows ? lo + j->chunk[i] : W->rows;
        if (j->xf)
            j->ops->half_gemm(W->type, W->data, W->row_bytes, lo, hi, W->cols, j->xf, W->cols, j->n, j->out[i],
                              W->rows, j->accumulate);
        else
            qgemm_rows(j, W, j->out[i], lo, hi);
    }
}

static void run(da_pool *pool, qmatmul_job *j) {
    const int nth = da_pool_threads(pool);
    j->first[0] = 0;
    for (int i = 0; i < j->m; i++) {
        const int rows = j->W[i]->rows;
        /* about 8 chunks per thread, each a multiple of 16 rows, so that which rows a kernel takes as a group
         * depends on the matrix alone (a token's result then does not depend on the others'); one thread takes
         * all at once */
        int chunk = nth == 1 ? rows : rows / (8 * nth);
        chunk = chunk < 16 ? 16 : (chunk + 15) / 16 * 16;
        j->chunk[i] = chunk;
        j->first[i + 1] = j->first[i] + (rows + chunk - 1) / chunk;
    }
    da_pool_run(nth == 1 ? NULL : pool, qmatmul_chunks, j);
}

/* Tokens per pass over the matrix in a prompt: their int8 rows (64 x up to
 * a few KB) stay in L2 while every group of 16 weight rows, loaded once into
 * L1, meets all of them. */
#define TOKEN_BLOCK 64

void da_engine_qmatmul_many(da_pool *pool, const da_ops *ops, int m, const da_qtensor *const *W, float *const *out,
                            const da_qact *x, int n, int accumulate) {
    for (int i0 = 0; i0 < m; i0 += MANY_MAX) {
        const int mm = m - i0 < MANY_MAX ? m - i0 : MANY_MAX;
        for (int t = 0; t < n; t += TOKEN_BLOCK) {
            float *o[MANY_MAX];
            for (int i = 0; i < mm; i++) o[i] = out[i0 + i] + (size_t)t * W[i0 + i]->rows;
            qmatmul_job j = {.ops = ops, .W = W + i0, .out = o, .m = mm, .x = x + t,
                             .n = n - t < TOKEN_BLOCK ? n - t : TOKEN_BLOCK, .accumulate = accumulate};
            run(pool, &j);
        }
    }
}

void da_engine_qmatmul_int(da_pool *pool, const da_ops *ops, const da_qtensor *W, const da_qact *x, int n, float *out,
                           int accumulate) {
    da_engine_qmatmul_many(pool, ops, 1, &W, &out, x, n, accumulate);
}

void da_engine_matmul_half(da_pool *pool, const da_ops *ops, const da_qtensor *W, const float *x, int n, float *out,
                           int accumulate) {
    qmatmul_job j = {.ops = ops, .W = &W, .out = &out, .m = 1, .xf = x, .n = n, .accumulate = accumulate};
    run(pool, &j);
}
