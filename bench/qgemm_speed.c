/* The Q8_0 matmul kernel (ops qgemm) on one thread, for the arithmetic of
 * batched decoding (docs/serving.md, "Performance"): the weights of the
 * 220 M model's 12 layers (dim 1024, ffn 2816) and its LM head (32,000 x
 * 1024), 199 MB of q8_0, larger than any cache, multiplied by n = 1, 2, 4
 * and 8 tokens' int8 activations, as one decoding step of n slots does.
 * Also the same matrices' bytes read with plain loads (the memory bandwidth
 * floor of one thread), and the kernel on one 256 x 1024 matrix that stays in
 * L2, as many times as a step's multiply-adds (the compute floor: no memory
 * stalls). Times are the thread's CPU time, the best of REPS. Where the
 * level reads Q8_0 in packed 16-row groups (ops q8_0_r16, the layout an engine
 * loads its matrices into there), the "r16" lines repeat both with the
 * matrices packed. Built and run by bench/qgemm_speed.sh.
 *
 *   qgemm_speed [REPS]     one line per n: ms a step, GMAC/s, GB/s of weights
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diffattn/exec.h"
#include "ops/ops.h"
#include "ops/qblock.h"

enum { DIM = 1024, FFN = 2816, LAYERS = 12, VOCAB = 32000, NMAX = 8 };

typedef struct {
    int rows, cols;
    size_t rb;
    unsigned char *w;
} mat;

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 11) % 2000001) / 1000000.0f - 1.0f;
}

static mat make(int rows, int cols) {
    mat m = {rows, cols, da_qtype_row_bytes(DA_QT_Q8_0, cols), NULL};
    m.w = malloc(m.rb * rows);
    float *x = malloc(sizeof(float) * cols);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < cols; i++) x[i] = frand();
        da_quantize_row(DA_QT_Q8_0, m.w + (size_t)r * m.rb, x, cols);
    }
    free(x);
    return m;
}

/* seconds of this thread's CPU time: on a machine shared with other work, less noisy than the wall clock */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double sum_bytes(const mat *ms, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)ms[i].rb * ms[i].rows;
    return s;
}

/* One line per n (1, 2, 4, 8): the step's matrices ms from memory, then hot from L2, in qgemm's type. */
static void measure(const da_ops *op, int type, const char *label, const mat *ms, int nm, const mat *hot, da_qact *x,
                    float *out, int reps, double macs, double bytes) {
    const int ns[] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        const int n = ns[k];
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            const double t0 = cpu_s();
            for (int i = 0; i < nm; i++) {
                for (int t = 0; t < n; t++) x[t].n = ms[i].cols;
                op->qgemm(type, ms[i].w, ms[i].rb, 0, ms[i].rows, ms[i].cols, x, n, out, ms[i].rows, 0);
            }
            const double s = cpu_s() - t0;
            best = s < best ? s : best;
        }
        printf("%sn=%d %8.2f ms  %7.2f ms/token %6.1f GMAC/s %6.1f GB/s\n", label, n, best * 1e3, best * 1e3 / n,
               macs * n / best / 1e9, bytes / best / 1e9);
    }
    const int times = (int)(macs / (256.0 * DIM));
    for (int k = 0; k < 4; k++) {
        const int n = ns[k];
        for (int t = 0; t < n; t++) x[t].n = DIM;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            const double t0 = cpu_s();
            for (int i = 0; i < times; i++)
                op->qgemm(type, hot->w, hot->rb, 0, hot->rows, DIM, x, n, out, hot->rows, 0);
            const double s = cpu_s() - t0;
            best = s < best ? s : best;
        }
        printf("%sin L2 n=%d %8.2f ms  %7.2f ms/token %6.1f GMAC/s\n", label, n, best * 1e3, best * 1e3 / n, 256.0 * DIM * times * n / best / 1e9);
    }
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    const da_ops *op = da_ops_of(da_exec_default().isa);
    /* per layer: q, k, v, o (dim x dim), w1, w3 (ffn x dim), w2 (dim x ffn); then the head */
    enum { NM = LAYERS * 7 + 1 };
    static mat ms[NM];
    for (int l = 0; l < LAYERS; l++) {
        for (int j = 0; j < 4; j++) ms[7 * l + j] = make(DIM, DIM);
        ms[7 * l + 4] = make(FFN, DIM);
        ms[7 * l + 5] = make(FFN, DIM);
        ms[7 * l + 6] = make(DIM, FFN);
    }
    ms[NM - 1] = make(VOCAB, DIM);
    double macs = 0;
    for (int i = 0; i < NM; i++) macs += (double)ms[i].rows * ms[i].cols;
    const double bytes = sum_bytes(ms, NM);
    /* activations: NMAX tokens at the widest input */
    int8_t *q = malloc((size_t)NMAX * FFN);
    float *d = malloc(sizeof(float) * NMAX * FFN / 32), *xf = malloc(sizeof(float) * FFN);
    int32_t *sm = malloc(sizeof(int32_t) * NMAX * FFN / 32);
    float *out = malloc(sizeof(float) * NMAX * VOCAB);
    da_qact x[NMAX];
    for (int t = 0; t < NMAX; t++) {
        for (int i = 0; i < FFN; i++) xf[i] = frand();
        x[t] = (da_qact){FFN, q + (size_t)t * FFN, d + (size_t)t * FFN / 32, sm + (size_t)t * FFN / 32};
        op->quantize_act(&x[t], xf, FFN, DA_ACT_BLOCK, 0);
    }
    printf("# level %s, one thread, %.0f MB of q8_0 weights, %.1f M multiply-adds a token\n", da_isa_name(op->isa),
           bytes / 1e6, macs / 1e6);
    /* the read floor: every weight byte once, summed so that the loads are not dropped */
    double best_read = 1e30;
    uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        const double t0 = cpu_s();
        for (int i = 0; i < NM; i++) {
            const uint64_t *p = (const uint64_t *)(const void *)ms[i].w;
            const size_t nw = ms[i].rb * ms[i].rows / 8;
            uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            for (size_t k = 0; k + 4 <= nw; k += 4) a0 ^= p[k], a1 ^= p[k + 1], a2 ^= p[k + 2], a3 ^= p[k + 3];
            sink ^= a0 ^ a1 ^ a2 ^ a3;
        }
        const double s = cpu_s() - t0;
        best_read = s < best_read ? s : best_read;
    }
    printf("read   %8.2f ms  %27s %6.1f GB/s   (sink %llu)\n", best_read * 1e3, "", bytes / best_read / 1e9,
           (unsigned long long)(sink & 1));
    const mat hot = make(256, DIM);
    measure(op, DA_QT_Q8_0, "", ms, NM, &hot, x, out, reps, macs, bytes);
    if (op->q8_0_r16) { /* the same matrices in the packed 16-row groups an engine loads them into here */
        unsigned char *tmp = malloc(16 * da_qtype_row_bytes(DA_QT_Q8_0, FFN));
        for (int i = 0; i <= NM; i++) {
            const mat *m = i < NM ? &ms[i] : &hot;
            for (int r = 0; r < m->rows; r += 16) da_q8_0_pack16(m->w + (size_t)r * m->rb, m->cols / 32, tmp);
        }
        free(tmp);
        measure(op, DA_QT_Q8_0_R16, "r16 ", ms, NM, &hot, x, out, reps, macs, bytes);
    }
    free(hot.w);
    for (int i = 0; i < NM; i++) free(ms[i].w);
    free(q), free(d), free(xf), free(sm), free(out);
    return 0;
}
