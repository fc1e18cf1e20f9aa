/* The matmuls of decoding and short batches: the rows of a quantized weight
 * matrix against n int8 activation rows (or of an F16 / BF16 matrix against
 * float rows), split over a
 * thread team (core/pool.h) in chunks of whole 8-row groups (the kernels'
 * unit, ops/qgemm.c), taken dynamically so that a descheduled thread holds
 * up at most one chunk. */
#include <stdatomic.h>

#include "core/pool.h"
#include "infer/engine.h"
#include "ops/ops.h"

typedef struct {
    const da_ops *ops;
    const da_qtensor *W;
    const da_qact *x;
    const float *xf; /* float activations (F16, BF16), or NULL */
    int n, accumulate, chunk;
    float *out;
    _Atomic int next;
} qmatmul_job;

static void qmatmul_chunks(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    qmatmul_job *j = arg;
    int lo, hi;
    while (da_pool_chunk(&j->next, j->W->rows, j->chunk, &lo, &hi))
        if (j->xf)
            j->ops->half_gemm(j->W->type, j->W->data, j->W->row_bytes, lo, hi, j->W->cols, j->xf, j->W->cols, j->n,
                              j->out, j->W->rows, j->accumulate);
        else
            j->ops->qgemm(j->W->type, j->W->data, j->W->row_bytes, lo, hi, j->W->cols, j->x, j->n, j->out,
                          j->W->rows, j->accumulate);
}

static void run(da_pool *pool, qmatmul_job *j) {
    const da_qtensor *W = j->W;
    const int nth = da_pool_threads(pool);
    /* about 8 chunks per thread, each a multiple of 8 rows; one thread takes all at once */
    int chunk = nth == 1 ? W->rows : W->rows / (8 * nth);
    chunk = chunk < 8 ? 8 : (chunk + 7) / 8 * 8;
    j->chunk = chunk;
    da_pool_run(nth == 1 ? NULL : pool, qmatmul_chunks, j);
}

/* Tokens per pass over the matrix in a prompt: their int8 rows (64 x up to
 * a few KB) stay in L2 while every group of 8 weight rows, loaded once into
 * L1, meets all of them. */
#define TOKEN_BLOCK 64

void da_engine_qmatmul_int(da_pool *pool, const da_ops *ops, const da_qtensor *W, const da_qact *x, int n, float *out,
                           int accumulate) {
    for (int t = 0; t < n; t += TOKEN_BLOCK) {
        qmatmul_job j = {ops, W, x + t, NULL, n - t < TOKEN_BLOCK ? n - t : TOKEN_BLOCK, accumulate, 0,
                         out + (size_t)t * W->rows, 0};
        run(pool, &j);
    }
}

void da_engine_matmul_half(da_pool *pool, const da_ops *ops, const da_qtensor *W, const float *x, int n, float *out,
                           int accumulate) {
    qmatmul_job j = {ops, W, NULL, x, n, accumulate, 0, out, 0};
    run(pool, &j);
}
