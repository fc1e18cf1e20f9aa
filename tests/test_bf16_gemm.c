/* The AVX512-BF16 GEMM equals the exact product of the bf16-rounded inputs
 * (accumulated in double) to fp32 accuracy, for the three layouts a linear
 * layer uses (forward, input gradient, weight gradient), ragged and aligned
 * sizes (vector packing paths and the scalar edges), and beta = 0 / 1. */
#include <stdint.h>

#include "diffattn.h"
#include "harness.h"
#include "ops/ops.h"

static const da_ops *op; /* the AVX512-BF16 table */

static float round_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fffu + ((b >> 16) & 1u);
    b &= 0xffff0000u;
    memcpy(&f, &b, 4);
    return f;
}

/* Every `every`-th element of C is checked against the exact product. */
static int check_sampled(int N, int Cin, int Cout, float beta, int every) {
    da_rng r;
    da_rng_seed(&r, (uint64_t)(N * 7 + Cin * 3 + Cout));
    const size_t big = (size_t)(N > Cout ? N : Cout) * (size_t)(Cin > Cout ? Cin : Cout);
    float *x = malloc(sizeof(float) * N * Cin), *w = malloc(sizeof(float) * Cout * Cin);
    float *y = malloc(sizeof(float) * N * Cout), *c = malloc(sizeof(float) * big);
    for (size_t i = 0; i < (size_t)N * Cin; i++) x[i] = da_rng_normal(&r);
    for (size_t i = 0; i < (size_t)Cout * Cin; i++) w[i] = da_rng_normal(&r);
    for (size_t i = 0; i < (size_t)N * Cout; i++) y[i] = da_rng_normal(&r);
    int fail = 0;
    for (int which = 0; which < 3; which++) {
        int M, NN, K;
        const float *a, *b;
        long ars, acs, brs, bcs;
        if (which == 0) { M = N, NN = Cout, K = Cin, a = x, ars = Cin, acs = 1, b = w, brs = 1, bcs = Cin; }      /* x W^T */
        else if (which == 1) { M = N, NN = Cin, K = Cout, a = y, ars = Cout, acs = 1, b = w, brs = Cin, bcs = 1; } /* dy W */
        else { M = Cout, NN = Cin, K = N, a = y, ars = 1, acs = Cout, b = x, brs = Cin, bcs = 1; }               /* dy^T x */
        for (size_t i = 0; i < (size_t)M * NN; i++) c[i] = 0.5f;
        op->bf16_gemm(M, NN, K, 1.0f, a, ars, acs, b, brs, bcs, beta, c, NN);
        double worst = 0, scale = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < NN; j++) {
                if (((size_t)i * NN + j) % (size_t)every) continue;
                double s = beta * 0.5;
                for (int k = 0; k < K; k++)
                    s += (double)round_bf16(a[(long)i * ars + (long)k * acs]) * round_bf16(b[(long)k * brs + (long)j * bcs]);
                double e = fabs(s - c[(size_t)i * NN + j]);
                if (e > worst) worst = e;
                if (fabs(s) > scale) scale = fabs(s);
            }
        printf("     %-4s M %4d N %4d K %4d beta %g: rel err %.1e\n", which == 0 ? "fwd" : which == 1 ? "dinp" : "dW", M, NN,
               K, (double)beta, worst / scale);
        if (!(worst / scale < 1e-6)) fail = 1;
    }
    free(x), free(w), free(y), free(c);
    return fail;
}

static int check(int N, int Cin, int Cout, float beta) { return check_sampled(N, Cin, Cout, beta, 1); }

static int test_aligned(void) { return check(128, 128, 64, 0.0f); }
static int test_aligned_accumulate(void) { return check(64, 96, 128, 1.0f); }
static int test_ragged(void) { return check(70, 97, 45, 0.0f); }
static int test_odd_k(void) { return check(33, 31, 17, 1.0f); }
/* Longer K: 576 aligned (the transposing packs), 600 and 301 ragged, odd. */
static int test_long_k(void) { return check(300, 576, 48, 1.0f) | check(301, 600, 45, 0.0f); }
/* The E=768 model's sizes and beyond (C over 8 MB), every 97th element checked. */
static int test_large(void) { return check_sampled(2048, 1100, 1040, 1.0f, 97); }

int main(void) {
    op = da_ops_of(DA_ISA_AVX512_BF16);
    if (!op->bf16_gemm) {
        printf("this CPU has no AVX512-BF16; nothing to test\n0 passed, 0 failed\n");
        return 0;
    }
    RUN(test_aligned);
    RUN(test_aligned_accumulate);
    RUN(test_ragged);
    RUN(test_odd_k);
    RUN(test_long_k);
    RUN(test_large);
    TH_SUMMARY();
}
