/* The MPI process group (see dist.h). Without DA_HAVE_MPI, or when not
 * started by a launcher, this is a group of one and every collective is the
 * identity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "parallel/dist.h"

#ifdef DA_HAVE_MPI
#include <mpi.h>
#endif

static int g_rank = 0, g_size = 1;
static double g_timeout_s = 60.0;
static da_dist_stats g_stats;

int da_dist_rank(void) { return g_rank; }
int da_dist_size(void) { return g_size; }
void da_dist_set_timeout(double seconds) { g_timeout_s = seconds >= 0 ? seconds : 60.0; }
void da_dist_stats_reset(void) { memset(&g_stats, 0, sizeof g_stats); }
da_dist_stats da_dist_stats_get(void) { return g_stats; }

/* A launcher sets these in every rank's environment: Open MPI's mpirun,
 * PMIx-based launchers (srun, prterun), MPICH's hydra. */
static int launched_by_mpirun(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

#ifndef DA_HAVE_MPI

int da_dist_compiled(void) { return 0; }
const char *da_dist_library(void) { return "none"; }

da_status da_dist_init(void) {
    if (launched_by_mpirun() && (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"))) {
        const char *s = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
        if (atoi(s) > 1)
            return da_errorf("started by mpirun with %s ranks, but this diffattn was built without MPI "
                             "(install libopenmpi-dev and rebuild: make clean && make)",
                             s);
    }
    return da_ok();
}
void da_dist_finalize(void) {}
void da_dist_abort(int code) { exit(code); }

da_status da_dist_allreduce_sum_f32(float *b, size_t n, const char *w) { (void)b, (void)n, (void)w; return da_ok(); }
da_status da_dist_allreduce_sum_f64(double *b, size_t n, const char *w) { (void)b, (void)n, (void)w; return da_ok(); }
da_status da_dist_allreduce_sum_i64(int64_t *b, size_t n, const char *w) { (void)b, (void)n, (void)w; return da_ok(); }
da_status da_dist_allreduce_max_i64(int64_t *b, size_t n, const char *w) { (void)b, (void)n, (void)w; return da_ok(); }
da_status da_dist_reduce_scatter_sum_f32(float *b, const size_t *off, const size_t *cnt, const char *w) {
    (void)b, (void)off, (void)cnt, (void)w;
    return da_ok();
}
da_status da_dist_reduce_scatter_sum_i64(int64_t *b, const size_t *off, const size_t *cnt, const char *w) {
    (void)b, (void)off, (void)cnt, (void)w;
    return da_ok();
}
da_status da_dist_allgather_f32(float *b, const size_t *o, const size_t *c, const char *w) {
    (void)b, (void)o, (void)c, (void)w;
    return da_ok();
}
da_status da_dist_allgather_f64(double *b, const size_t *o, const size_t *c, const char *w) {
    (void)b, (void)o, (void)c, (void)w;
    return da_ok();
}
da_status da_dist_gather_f32(const float *mine, float *all, const size_t *o, const size_t *c, const char *w) {
    (void)w;
    if (all + o[0] != mine) memmove(all + o[0], mine, c[0] * sizeof *mine);
    return da_ok();
}
da_status da_dist_bcast(void *b, size_t n, const char *w) {
    (void)b, (void)n, (void)w;
    return da_ok();
}
da_status da_dist_agree(da_status local) { return local; }

#else /* DA_HAVE_MPI */

static int g_active = 0;
static MPI_Comm g_comm = MPI_COMM_NULL;
static int g_init_here = 0;
static char g_library[MPI_MAX_LIBRARY_VERSION_STRING];

int da_dist_compiled(void) { return 1; }

const char *da_dist_library(void) {
    if (!g_library[0]) {
        int len = 0;
        MPI_Get_library_version(g_library, &len);
        char *nl = strpbrk(g_library, ",\n"); /* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
        if (nl) *nl = 0;
    }
    return g_library;
}

da_status da_dist_init(void) {
    if (g_active || !launched_by_mpirun()) return da_ok();
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* OpenMP threads compute; only the main thread calls MPI */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return da_errorf("MPI_Init_thread failed (is mpirun from the same MPI as this build, %s?)",
                             da_dist_library());
        g_init_here = 1;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
    /* errors come back as codes, and become da_status, instead of aborting */
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_comm, &g_rank);
    MPI_Comm_size(g_comm, &g_size);
    g_active = 1;
    return da_ok();
}

void da_dist_finalize(void) {
    if (!g_active) return;
    MPI_Comm_free(&g_comm);
    if (g_init_here) MPI_Finalize();
    g_active = 0;
    g_rank = 0;
    g_size = 1;
}

void da_dist_abort(int code) {
    if (g_active) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

static da_status mpi_error(int rc, const char *op, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    da_status st = da_errorf("rank %d of %d: %s (%s) failed: %s; a peer rank has probably died", g_rank, g_size, op,
                             what, msg);
    st.code = DA_DIST_FAILED;
    return st;
}

/* Waits for one request, driving MPI's progress, until the deadline. Spins
 * for a moment (short collectives finish in microseconds), then sleeps
 * between tests so a waiting rank does not take a core from a computing one. */
static da_status wait_for(MPI_Request *req, const char *op, const char *what, double bytes) {
    const double t0 = da_now_s();
    long polls = 0;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_error(rc, op, what);
        if (done) break;
        if (++polls > 2000) {
            struct timespec ts = {0, 50000}; /* 50 us */
            nanosleep(&ts, NULL);
            if ((polls & 255) == 0 && da_now_s() - t0 > g_timeout_s) {
                da_status st = da_errorf("rank %d of %d: %s (%s) did not complete within %.0f s: a peer rank died, "
                                         "hangs, or is far slower (raise the collective timeout if a checkpoint write or "
                                         "evaluation takes longer)",
                                         g_rank, g_size, op, what, g_timeout_s);
                st.code = DA_DIST_FAILED;
                return st;
            }
        }
    }
    g_stats.comm_s += da_now_s() - t0;
    g_stats.bytes += bytes;
    g_stats.calls++;
    return da_ok();
}

/* --dist-timeout 0: Open MPI's blocking collectives (its tuned algorithms,
 * somewhat faster than the nonblocking ones), no deadline. */
static int blocking(void) { return g_timeout_s == 0; }

static da_status blocking_done(int rc, double t0, const char *op, const char *what, double bytes) {
    if (rc != MPI_SUCCESS) return mpi_error(rc, op, what);
    g_stats.comm_s += da_now_s() - t0;
    g_stats.bytes += bytes;
    g_stats.calls++;
    return da_ok();
}

/* MPI counts are ints: large buffers go in pieces of at most 2^30 elements. */
#define PIECE ((size_t)1 << 30)

static da_status allreduce(void *buf, size_t n, MPI_Datatype t, size_t esize, MPI_Op op, const char *what) {
    if (!g_active || g_size == 1) return da_ok();
    /* Buckets of 8 MB, up to 16 in flight at once so that the transport
     * pipelines them; then one wait each. */
    enum { IN_FLIGHT = 16 };
    const size_t bucket = ((size_t)8 << 20) / esize;
    if (blocking()) {
        for (size_t i = 0; i < n; i += PIECE) {
            size_t c = n - i < PIECE ? n - i : PIECE;
            double t0 = da_now_s();
            int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + i * esize, (int)c, t, op, g_comm);
            da_status st = blocking_done(rc, t0, "MPI_Allreduce", what, 2.0 * (g_size - 1) / g_size * (double)c * esize);
            if (st.code) return st;
        }
        return da_ok();
    }
    MPI_Request req[IN_FLIGHT];
    for (size_t wave = 0; wave < n; wave += IN_FLIGHT * bucket) {
        int nreq = 0;
        for (size_t i = wave; i < n && nreq < IN_FLIGHT; i += bucket) {
            size_t c = n - i < bucket ? n - i : bucket;
            int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + i * esize, (int)c, t, op, g_comm, &req[nreq]);
            if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iallreduce", what);
            nreq++;
        }
        for (int r = 0; r < nreq; r++) {
            /* a ring allreduce sends 2 (P-1)/P of the buffer per rank */
            size_t i = wave + (size_t)r * bucket, c = n - i < bucket ? n - i : bucket;
            da_status st = wait_for(&req[r], "MPI_Iallreduce", what, 2.0 * (g_size - 1) / g_size * (double)c * esize);
            if (st.code) return st;
        }
    }
    return da_ok();
}

da_status da_dist_allreduce_sum_f32(float *b, size_t n, const char *w) {
    return allreduce(b, n, MPI_FLOAT, sizeof *b, MPI_SUM, w);
}
da_status da_dist_allreduce_sum_f64(double *b, size_t n, const char *w) {
    return allreduce(b, n, MPI_DOUBLE, sizeof *b, MPI_SUM, w);
}
da_status da_dist_allreduce_sum_i64(int64_t *b, size_t n, const char *w) {
    return allreduce(b, n, MPI_INT64_T, sizeof *b, MPI_SUM, w);
}
da_status da_dist_allreduce_max_i64(int64_t *b, size_t n, const char *w) {
    return allreduce(b, n, MPI_INT64_T, sizeof *b, MPI_MAX, w);
}

/* counts and displacements as MPI's ints; the sizes were checked against
 * INT_MAX when the shards were planned */
static void to_int(const size_t *a, int *out) {
    for (int r = 0; r < g_size; r++) out[r] = (int)a[r];
}

static da_status reduce_scatter(void *buf, const size_t *off, const size_t *cnt, MPI_Datatype t, size_t esize,
                                const char *what) {
    if (!g_active || g_size == 1) return da_ok();
    /* MPI_Ireduce_scatter takes the buffer in rank order from 0 (the shards
     * are contiguous from 0, as the planner makes them); in place, the own
     * slice's sum lands at the start of buf, and moves to its place after. */
    int *counts = malloc((size_t)g_size * sizeof(int));
    if (!counts) return da_errorf("out of memory");
    to_int(cnt, counts);
    size_t total = 0;
    for (int r = 0; r < g_size; r++) total += cnt[r];
    MPI_Request req;
    const double bytes = (double)(g_size - 1) / g_size * (double)total * esize, t0 = da_now_s();
    da_status st;
    if (blocking()) {
        int rc = MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts, t, MPI_SUM, g_comm);
        free(counts);
        st = blocking_done(rc, t0, "MPI_Reduce_scatter", what, bytes);
    } else {
        int rc = MPI_Ireduce_scatter(MPI_IN_PLACE, buf, counts, t, MPI_SUM, g_comm, &req);
        free(counts);
        if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ireduce_scatter", what);
        st = wait_for(&req, "MPI_Ireduce_scatter", what, bytes);
    }
    if (!st.code) memmove((char *)buf + off[g_rank] * esize, buf, cnt[g_rank] * esize);
    return st;
}

da_status da_dist_reduce_scatter_sum_f32(float *b, const size_t *off, const size_t *cnt, const char *w) {
    return reduce_scatter(b, off, cnt, MPI_FLOAT, sizeof *b, w);
}
da_status da_dist_reduce_scatter_sum_i64(int64_t *b, const size_t *off, const size_t *cnt, const char *w) {
    return reduce_scatter(b, off, cnt, MPI_INT64_T, sizeof *b, w);
}

static da_status allgather(void *buf, const size_t *off, const size_t *cnt, MPI_Datatype t, size_t esize,
                           const char *what) {
    if (!g_active || g_size == 1) return da_ok();
    int *counts = malloc(2 * (size_t)g_size * sizeof(int));
    if (!counts) return da_errorf("out of memory");
    int *displs = counts + g_size;
    to_int(cnt, counts);
    to_int(off, displs);
    size_t total = 0;
    for (int r = 0; r < g_size; r++) total += cnt[r];
    MPI_Request req;
    const double bytes = (double)(g_size - 1) / g_size * (double)total * esize, t0 = da_now_s();
    if (blocking()) {
        int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, t, buf, counts, displs, t, g_comm);
        free(counts);
        return blocking_done(rc, t0, "MPI_Allgatherv", what, bytes);
    }
    int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, t, buf, counts, displs, t, g_comm, &req);
    free(counts);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iallgatherv", what);
    return wait_for(&req, "MPI_Iallgatherv", what, bytes);
}

da_status da_dist_allgather_f32(float *b, const size_t *o, const size_t *c, const char *w) {
    return allgather(b, o, c, MPI_FLOAT, sizeof *b, w);
}
da_status da_dist_allgather_f64(double *b, const size_t *o, const size_t *c, const char *w) {
    return allgather(b, o, c, MPI_DOUBLE, sizeof *b, w);
}

da_status da_dist_gather_f32(const float *mine, float *all, const size_t *off, const size_t *cnt, const char *what) {
    if (!g_active || g_size == 1) {
        if (all + off[0] != mine) memmove(all + off[0], mine, cnt[0] * sizeof *mine);
        return da_ok();
    }
    int *counts = malloc(2 * (size_t)g_size * sizeof(int));
    if (!counts) return da_errorf("out of memory");
    int *displs = counts + g_size;
    to_int(cnt, counts);
    to_int(off, displs);
    MPI_Request req;
    double bytes = g_rank == 0 ? 0 : (double)cnt[g_rank] * sizeof(float), t0 = da_now_s();
    if (blocking()) {
        int rc = MPI_Gatherv(mine, counts[g_rank], MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0, g_comm);
        free(counts);
        return blocking_done(rc, t0, "MPI_Gatherv", what, bytes);
    }
    int rc = MPI_Igatherv(mine, counts[g_rank], MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0, g_comm, &req);
    free(counts);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Igatherv", what);
    return wait_for(&req, "MPI_Igatherv", what, bytes);
}

da_status da_dist_bcast(void *buf, size_t bytes, const char *what) {
    if (!g_active || g_size == 1) return da_ok();
    for (size_t i = 0; i < bytes; i += PIECE) {
        size_t c = bytes - i < PIECE ? bytes - i : PIECE;
        if (blocking()) {
            double t0 = da_now_s();
            int rc = MPI_Bcast((char *)buf + i, (int)c, MPI_BYTE, 0, g_comm);
            da_status st = blocking_done(rc, t0, "MPI_Bcast", what, g_rank == 0 ? (double)c : 0);
            if (st.code) return st;
            continue;
        }
        MPI_Request req;
        int rc = MPI_Ibcast((char *)buf + i, (int)c, MPI_BYTE, 0, g_comm, &req);
        if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ibcast", what);
        da_status st = wait_for(&req, "MPI_Ibcast", what, g_rank == 0 ? (double)c : 0);
        if (st.code) return st;
    }
    return da_ok();
}

da_status da_dist_agree(da_status local) {
    if (!g_active || g_size == 1) return local;
    /* the lowest failing rank: max over (size - rank) of the failing ones */
    int64_t v = local.code ? g_size - g_rank : 0;
    da_status st = da_dist_allreduce_max_i64(&v, 1, "agreeing on errors");
    if (st.code) return local.code ? local : st;
    if (v == 0) return local;
    int first = g_size - (int)v;
    if (first == g_rank) return local;
    st = da_errorf("rank %d failed (its message is above)", first);
    st.code = DA_DIST_PEER_FAILED;
    return st;
}

#endif /* DA_HAVE_MPI */
