/* NSA against softmax at the attention-kernel level, alternating runs.
 * Built and run by bench/nsa_speed.sh (it links build/libdiffattn.a).
 *
 *   nsa_kernels train T REPS     forward+backward of one layer's attention, B = 1:
 *                                NSA's efficient kernels (defaults l 32, s 16, l' 64,
 *                                n 16, w 512) against the softmax flash kernel that
 *                                `diffattn bench attn --arch softmax` times
 *   nsa_kernels decode N STEPS   one token's attention at a context of N tokens:
 *                                NSA's decoding step against a softmax step over an
 *                                f32 cache of N keys written with the same loops
 *                                (keys transposed, the group's heads sharing each key)
 *
 * Shape: dim 768, --heads 6 --kv-heads 2, i.e. H = 12 query heads of d = 64 and
 * G = 4 KV heads for both. Inputs are random (q, k ~ N(0, 0.25), Wck mean
 * pooling). Prints one JSON line per measurement with the median of REPS. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attention.h"
#include "attn/flash_attention.h"
#include "attn/nsa.h"
#include "core/clock.h"
#include "diffattn/core.h"
#include "diffattn/exec.h"
#include "ops/vexp.h"

enum { H = 12, G = 4, D = 64 };

static float *randn(size_t n, float sd, unsigned long long *st) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        *st = *st * 6364136223846793005ull + 1442695040888963407ull;
        double u1 = ((*st >> 11) + 1.0) / 9007199254740993.0;
        *st = *st * 6364136223846793005ull + 1442695040888963407ull;
        double u2 = (*st >> 11) / 9007199254740992.0;
        p[i] = (float)(sd * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    return p;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *t, int n) {
    qsort(t, n, sizeof *t, cmp_d);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static nsa_shape default_shape(int T) {
    return (nsa_shape){.B = 1, .T = T, .H = H, .G = G, .d = D, .block = 32, .stride = 16, .select = 64, .topn = 16,
                       .window = 512, .n_threads = omp_get_max_threads()};
}

/* The inputs of one NSA call: (T, H*d) q, the six (T, G*d) key/value inputs, gates, Wck, Wcv (mean pooling), pe. */
static void nsa_make_inputs(float **in, const nsa_shape *s, unsigned long long *st) {
    const size_t T = s->T, nq = T * H * D, nkv = T * G * D, ld = (size_t)s->block * D;
    in[0] = randn(nq, 0.5f, st);
    for (int k = 1; k <= 6; k++) in[k] = randn(nkv, k % 2 ? 0.5f : 1.0f, st);
    in[7] = malloc(T * H * 3 * sizeof(float));
    for (size_t i = 0; i < T * H * 3; i++) in[7][i] = 1.0f / 3;
    for (int k = 8; k <= 9; k++) {
        in[k] = calloc((size_t)D * ld, sizeof(float));
        for (int c = 0; c < D; c++)
            for (int p = 0; p < s->block; p++) in[k][(size_t)c * ld + (size_t)p * D + c] = 1.0f / s->block;
    }
    in[10] = calloc(ld, sizeof(float));
    in[11] = calloc(ld, sizeof(float));
}

static int bench_train(int T, int reps) {
    unsigned long long st = 7;
    const da_exec x = da_exec_default();
    const nsa_kernels *K = nsa_kernels_of(x.isa);
    const da_attn_ops *A = da_attn_ops_of(x.isa);
    nsa_shape s = default_shape(T);
    const size_t nq = (size_t)T * H * D, nkv = (size_t)T * G * D;
    float *in[12], *g[12];
    nsa_make_inputs(in, &s, &st);
    const size_t sizes[12] = {nq, nkv, nkv, nkv, nkv, nkv, nkv, (size_t)T * H * 3, (size_t)D * s.block * D,
                              (size_t)D * s.block * D, (size_t)s.block * D, (size_t)s.block * D};
    for (int k = 0; k < 12; k++) g[k] = calloc(sizes[k], sizeof(float));
    nsa_inputs ni = {in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10], in[11]};
    nsa_grads ng = {g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11]};
    nsa_saved sv = {0};
    sv.kc = calloc(nsa_saved_floats_kv(&s) + 1, sizeof(float));
    sv.vc = calloc(nsa_saved_floats_kv(&s) + 1, sizeof(float));
    sv.o_cmp = calloc(nq, sizeof(float));
    sv.o_slc = calloc(nq, sizeof(float));
    sv.o_win = calloc(nq, sizeof(float));
    sv.sel = calloc(nsa_saved_ints_sel(&s), sizeof(int));
    sv.lse = calloc(nsa_saved_floats_lse(&s), sizeof(float));
    float *out = calloc(nq, sizeof(float)), *dout = randn(nq, 1.0f, &st);
    float *nscr = calloc(nsa_flash_scratch_floats(&s), sizeof(float));
    /* softmax: the kernel `bench attn --arch softmax` times (one map, its own K: attn/softmax.c's layout), on the
     * same q and the window branch's k, v */
    static const attn_layout softmax_layout = {1, 1, 1};
    attn_shape as = {1, T, H, G, D, H * D, G * D, omp_get_max_threads(), 0, 0};
    float *sout = calloc(nq, sizeof(float)), *lse = calloc((size_t)H * T, sizeof(float));
    float *dq = calloc(nq, sizeof(float)), *dk = calloc(nkv, sizeof(float)), *dv = calloc(nkv, sizeof(float));
    float *sscr = calloc(da_flash_scratch_size(&as, &softmax_layout), sizeof(float));
    double *tn = malloc(reps * sizeof(double)), *ts = malloc(reps * sizeof(double));
    if (!nscr || !sscr || !sout || !tn || !ts) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        double t0 = da_now_s();
        K->flash_forward(out, &ni, &sv, &s, nscr);
        K->flash_backward(&ng, dout, &ni, &sv, &s, nscr);
        double t1 = da_now_s();
        A->flash_forward(sout, NULL, NULL, lse, in[0], in[5], in[6], 0.0f, NULL, &softmax_layout, &as, sscr);
        A->flash_backward(dq, dk, dv, NULL, NULL, dout, sout, NULL, NULL, lse, in[0], in[5], in[6], 0.0f, NULL,
                          &softmax_layout, &as, sscr);
        double t2 = da_now_s();
        if (r >= 0) { tn[r] = t1 - t0; ts[r] = t2 - t1; }
    }
    const double mn = median(tn, reps), ms = median(ts, reps);
    printf("{\"bench\": \"train\", \"T\": %d, \"threads\": %d, \"isa\": %d, \"nsa_s\": %.4f, \"softmax_s\": %.4f, "
           "\"speedup\": %.2f, \"nsa_gflop\": %.1f}\n",
           T, omp_get_max_threads(), (int)x.isa, mn, ms, ms / mn, 3 * nsa_forward_flops(&s) / 1e9);
    return 0;
}

/* One softmax decoding step at context n: o (H*d) for query q over keys kT (G*d, cap) and values v (cap, G*d). */
static void softmax_step(float *o, const float *q, const float *kT, const float *v, int cap, int n, float *p) {
    const float scale = 1.0f / sqrtf((float)D);
    const int rep = H / G;
    for (int g = 0; g < G; g++) {
        for (int hh = 0; hh < rep; hh++) {
            float *ph = p + (size_t)hh * cap;
            const float *qh = q + (size_t)(g * rep + hh) * D;
            memset(ph, 0, (size_t)n * sizeof(float));
            for (int c = 0; c < D; c++) {
                const float *kr = kT + (size_t)(g * D + c) * cap, qv = qh[c] * scale;
#pragma omp simd
                for (int j = 0; j < n; j++) ph[j] += qv * kr[j];
            }
            float mx = -INFINITY;
            for (int j = 0; j < n; j++) mx = ph[j] > mx ? ph[j] : mx;
            const float inv = 1.0f / exp_shift_sum(ph, n, mx); /* the vectorised exp NSA's kernels use */
            for (int j = 0; j < n; j++) ph[j] *= inv;
        }
        for (int hh = 0; hh < rep; hh++) memset(o + (size_t)(g * rep + hh) * D, 0, D * sizeof(float));
        for (int j = 0; j < n; j++) {
            const float *vr = v + (size_t)j * G * D + g * D;
            for (int hh = 0; hh < rep; hh++) {
                float *oh = o + (size_t)(g * rep + hh) * D, pj = p[(size_t)hh * cap + j];
#pragma omp simd
                for (int c = 0; c < D; c++) oh[c] += pj * vr[c];
            }
        }
    }
}

static int bench_decode(int N, int steps) {
    unsigned long long st = 11;
    const da_exec x = da_exec_default();
    const nsa_kernels *K = nsa_kernels_of(x.isa);
    const int cap = N + steps;
    nsa_shape s = default_shape(cap);
    s.B = 1;
    float *in[12];
    nsa_make_inputs(in, &s, &st);
    float *mem = malloc(nsa_cache_floats(&s, cap) * sizeof(float));
    float *scr = malloc(nsa_decode_scratch_floats(&s, cap) * sizeof(float)), out[H * D];
    nsa_cache cache;
    nsa_cache_init(&cache, mem, &s, cap);
    float *kT = malloc((size_t)G * D * cap * sizeof(float)), *p = malloc((size_t)(H / G) * cap * sizeof(float));
    if (!mem || !scr || !kT || !p) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < (size_t)G * D * cap; i++) kT[i] = in[5][i % ((size_t)cap * G * D)];
    double *tn = malloc(steps * sizeof(double)), *ts = malloc(steps * sizeof(double));
    for (int t = 0; t < cap; t++) {
        nsa_inputs ni = {in[0] + (size_t)t * H * D, in[1] + (size_t)t * G * D, in[2] + (size_t)t * G * D,
                         in[3] + (size_t)t * G * D, in[4] + (size_t)t * G * D, in[5] + (size_t)t * G * D,
                         in[6] + (size_t)t * G * D, in[7] + (size_t)t * H * 3, in[8], in[9], in[10], in[11]};
        double t0 = da_now_s();
        K->decode_step(out, &cache, &ni, &s, scr);
        double t1 = da_now_s();
        if (t >= N) {
            softmax_step(out, ni.q, kT, in[6], cap, t + 1, p);
            ts[t - N] = da_now_s() - t1;
            tn[t - N] = t1 - t0;
        }
    }
    const double mn = median(tn, steps), ms = median(ts, steps);
    printf("{\"bench\": \"decode\", \"context\": %d, \"isa\": %d, \"nsa_us_per_token\": %.1f, "
           "\"softmax_us_per_token\": %.1f, \"speedup\": %.2f, \"nsa_cache_mb\": %.1f, \"softmax_cache_mb\": %.1f}\n",
           N, (int)x.isa, 1e6 * mn, 1e6 * ms, ms / mn, nsa_cache_floats(&s, N) * 4.0 / 1e6,
           2.0 * N * G * D * 4 / 1e6);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "train") && strcmp(argv[1], "decode"))) {
        fprintf(stderr, "usage: nsa_kernels train T REPS | decode N STEPS\n");
        return 1;
    }
    const int n = atoi(argv[2]), reps = atoi(argv[3]);
    if (n < 1 || reps < 1) { fprintf(stderr, "T/N and REPS must be >= 1\n"); return 1; }
    return strcmp(argv[1], "train") ? bench_decode(n, reps) : bench_train(n, reps);
}
