/* Memory bandwidth of this machine, the bound that batch-1 decoding is held
 * against: STREAM-style copy (bytes read + bytes written) and a read-only
 * sum, over buffers far larger than the caches, with OMP_NUM_THREADS threads.
 * Best of 5 passes.
 *
 *   cc -O2 -fopenmp bench/membw.c -o membw && ./membw [MiB per buffer, default 1024] */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024, n = mib << 20;
    if (mib == 0) {
        fprintf(stderr, "membw: the buffer size must be a positive number of MiB\n");
        return 2;
    }
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        fprintf(stderr, "membw: cannot allocate two buffers of %zu MiB\n", mib);
        return 1;
    }
    memset(a, 1, n); /* touch every page before timing */
    memset(b, 2, n);
    double best_copy = 0, best_read = 0;
    volatile uint64_t sink = 0;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = omp_get_wtime();
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t lo = n / nt * id, hi = id == nt - 1 ? n : n / nt * (id + 1);
            memcpy(b + lo, a + lo, hi - lo);
        }
        double copy = 2.0 * n / (omp_get_wtime() - t0) / 1e9;
        t0 = omp_get_wtime();
        uint64_t total = 0; /* integer adds vectorize; a double sum would be bound by add latency */
        const uint64_t *d = (const uint64_t *)a;
#pragma omp parallel for reduction(+ : total)
        for (size_t i = 0; i < n / sizeof(uint64_t); i++) total += d[i];
        double read = n / (omp_get_wtime() - t0) / 1e9;
        sink += total;
        if (copy > best_copy) best_copy = copy;
        if (read > best_read) best_read = read;
    }
    printf("threads %d, buffers %zu MiB: copy %.1f GB/s (read + write), read %.1f GB/s\n", omp_get_max_threads(),
           mib, best_copy, best_read);
    free(a);
    free(b);
    return sink == 1; /* keeps the sum alive */
}
