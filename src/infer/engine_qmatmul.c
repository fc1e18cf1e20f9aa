/* The integer-activation matmuls of decoding and short batches: the rows of
 * a quantized weight matrix against n int8 activation rows, split over a
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
        j->ops->qgemm(j->W->type, j->W->data, j->W->row_bytes, lo, hi, j->W->cols, j->x, j->n, j->out, j->W->rows,
                      j->accumulate);
}

void da_engine_qmatmul_int(da_pool *pool, const da_ops *ops, const da_qtensor *W, const da_qact *x, int n, float *out,
                           int accumulate) {
    qmatmul_job j = {ops, W, x, n, accumulate, 0, out, 0};
    const int nth = da_pool_threads(pool);
    /* about 8 chunks per thread, each a multiple of 8 rows; one thread takes all at once */
    int chunk = nth == 1 ? W->rows : W->rows / (8 * nth);
    chunk = chunk < 8 ? 8 : (chunk + 7) / 8 * 8;
    j.chunk = chunk;
    da_pool_run(nth == 1 ? NULL : pool, qmatmul_chunks, &j);
}
