/* diffattn process groups: data-parallel training over MPI. In a build
 * without MPI, or a process not started by mpirun, the process is rank 0 of 1.
 * Implemented in src/parallel/dist.c. */
#ifndef DIFFATTN_PARALLEL_H
#define DIFFATTN_PARALLEL_H

#include "diffattn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Under mpirun: a collective did not complete (a rank died or hangs), so the
 * job cannot continue: the CLI ends it (da_dist_abort). */
#define DA_DIST_FAILED 40
/* Under mpirun: another rank failed first and reports it; this one stays quiet. */
#define DA_DIST_PEER_FAILED 41

/* ---------------------------------------------------------------- data parallel (MPI) */

/* Joins the MPI job when this process was started by mpirun (or another MPI
 * launcher); otherwise, and in a build without MPI, the process is rank 0 of
 * 1 and training runs exactly as in a single process. Once per process. */
da_status da_dist_init(void);
void da_dist_finalize(void);
int da_dist_rank(void);
int da_dist_size(void);
/* Seconds a collective may wait for the other ranks before it fails (60);
 * 0: blocking MPI collectives without a deadline. */
void da_dist_set_timeout(double seconds);
/* Ends every rank of the job (MPI_Abort) with this code. For the CLI, after
 * an error that leaves peers waiting; the library itself never calls it. */
void da_dist_abort(int code);

#ifdef __cplusplus
}
#endif
#endif
