/* Time MPI_Allreduce (float sum, in place) of N floats between the ranks of
 * this job: the communication of one data-parallel training step without
 * the compute around it. Built and run by bench/mpi_scaling.sh:
 *
 *   mpicc -O2 -o /tmp/allreduce bench/allreduce.c
 *   mpirun -np 2 /tmp/allreduce 3350000 20 [nb]
 *
 * With "nb", as diffattn does it: MPI_Iallreduce in 8 MB buckets, all
 * started, then waited for; otherwise one blocking MPI_Allreduce.
 *
 * Prints one JSON line: floats, bytes, mean and best seconds per allreduce,
 * and the algorithm bandwidth (bytes / time) and bus bandwidth
 * (2 (P-1)/P bytes / time, what each rank sends in a ring allreduce). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = argc > 1 ? atol(argv[1]) : 3350000;
    int iters = argc > 2 ? atoi(argv[2]) : 20;
    int nb = argc > 3 && !strcmp(argv[3], "nb");
    float *buf = malloc((size_t)n * sizeof(float));
    if (!buf || n <= 0 || n > (1L << 30) || iters <= 0) {
        fprintf(stderr, "allreduce: usage: allreduce N_FLOATS ITERS (N_FLOATS <= 2^30)\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < n; i++) buf[i] = (float)(i % 1000) * 1e-3f;
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
    double total = 0, best = 1e30;
    for (int it = 0; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (nb) {
            enum { BUCKET = (8 << 20) / sizeof(float), MAXREQ = 256 };
            MPI_Request req[MAXREQ];
            int k = 0;
            for (long i = 0; i < n && k < MAXREQ; i += BUCKET, k++)
                MPI_Iallreduce(MPI_IN_PLACE, buf + i, (int)(n - i < BUCKET ? n - i : BUCKET), MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD, &req[k]);
            MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
        } else {
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        double t = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        total += t;
        if (t < best) best = t;
    }
    if (rank == 0) {
        double bytes = (double)n * sizeof(float), mean = total / iters;
        printf("{\"call\":\"%s\",\"ranks\":%d,\"floats\":%ld,\"bytes\":%.0f,\"mean_s\":%.6f,\"best_s\":%.6f,\"algbw_GBps\":%.3f,"
               "\"busbw_GBps\":%.3f}\n",
               nb ? "MPI_Iallreduce, 8 MB buckets" : "MPI_Allreduce", size, n, bytes, mean, best, bytes / mean / 1e9, 2.0 * (size - 1) / size * bytes / mean / 1e9);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
