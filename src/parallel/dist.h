/* The process group of a data-parallel run: a thin layer over MPI that
 * compiles to single-process no-ops in a build without MPI (DA_HAVE_MPI
 * undefined) and behaves as one process of one when the binary was not
 * started by mpirun (no launcher variables in the environment).
 *
 * Every collective here is nonblocking underneath and waited for with a
 * deadline (da_dist_set_timeout): when a peer dies or hangs, the call returns
 * an error naming the operation instead of waiting forever. The caller then
 * ends the job (da_dist_abort, from the CLI). Errors come back as da_status;
 * nothing here exits. */
#ifndef DA_DIST_H
#define DA_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/parallel.h"

/* Seconds spent in collectives and bytes this rank sent to them, since the
 * last da_dist_stats_reset. */
typedef struct {
    double comm_s;
    double bytes;
    long calls;
} da_dist_stats;

void da_dist_stats_reset(void);
da_dist_stats da_dist_stats_get(void);

/* 1 when this build can run over MPI. */
int da_dist_compiled(void);
const char *da_dist_library(void); /* e.g. "Open MPI v4.1.4", or "none" */

/* Each is exact (integer or max) or a plain sum, see the function. All wait
 * with the deadline. */
da_status da_dist_allreduce_sum_f32(float *buf, size_t n, const char *what);
da_status da_dist_allreduce_sum_f64(double *buf, size_t n, const char *what);
da_status da_dist_allreduce_sum_i64(int64_t *buf, size_t n, const char *what);
da_status da_dist_allreduce_max_i64(int64_t *buf, size_t n, const char *what);
/* In place: rank r ends with the sum over ranks of buf[off[r] .. off[r] +
 * cnt[r]) in that same place; the rest of buf is left undefined. The slices
 * are contiguous from 0 in rank order. off/cnt: (size) each, in elements. */
da_status da_dist_reduce_scatter_sum_f32(float *buf, const size_t *off, const size_t *cnt, const char *what);
da_status da_dist_reduce_scatter_sum_i64(int64_t *buf, const size_t *off, const size_t *cnt, const char *what);
/* In place: rank r contributes buf[off[r] .. off[r] + cnt[r]), everyone ends
 * with the whole of buf. */
da_status da_dist_allgather_f32(float *buf, const size_t *off, const size_t *cnt, const char *what);
da_status da_dist_allgather_f64(double *buf, const size_t *off, const size_t *cnt, const char *what);
/* Rank 0 receives every rank's slice mine (cnt[rank] values) into
 * all[off[r] .. off[r] + cnt[r]); all is used on rank 0 only. */
da_status da_dist_gather_f32(const float *mine, float *all, const size_t *off, const size_t *cnt, const char *what);

/* Rank 0's bytes to every rank. */
da_status da_dist_bcast(void *buf, size_t bytes, const char *what);

/* Collective agreement on a local status: when any rank failed, every rank
 * returns an error. The lowest failing rank keeps its message (and code);
 * the others get DA_DIST_PEER_FAILED naming that rank. */
da_status da_dist_agree(da_status local);

#endif
