/* The read-only block types (Q4_1, Q5_0, Q5_1, Q5_K, Q6_K): hand-built
 * blocks dequantize to the values their layout says, and every level's
 * integer dot equals the float dot of the dequantized weights with the
 * dequantized int8 activations. (Agreement with ggml's own dequantizers:
 * test_qblock_ggml.) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "diffattn/rng.h"
#include "ops/ops.h"

static const int read_types[] = {DA_QT_Q4_1, DA_QT_Q5_0, DA_QT_Q5_1, DA_QT_Q5_K, DA_QT_Q6_K};

/* Q5_0: element i's 5th bit is bit i of qh; d = 0.5 */
static int test_q5_0_layout(void) {
    block_q5_0 b;
    b.d = da_f32_to_fp16(0.5f);
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    const uint32_t qh = 0x80000001u | (1u << 17); /* elements 0, 17, 31 */
    memcpy(b.qh, &qh, 4);
    float y[32];
    da_dequantize_row(DA_QT_Q5_0, &b, y, 32);
    for (int i = 0; i < 32; i++) {
        int q = i < 16 ? i : 15 - (i - 16);
        if (i == 0 || i == 17 || i == 31) q += 16;
        const float want = 0.5f * (q - 16);
        if (y[i] != want) {
            fprintf(stderr, "  element %d: %g, expected %g\n", i, y[i], want);
            return 1;
        }
    }
    return 0;
}

/* Q6_K: element 64 + l of the first chunk is ql[l]'s high nibble with qh[l]'s bits 4..5, scale sc[4 + l/16] */
static int test_q6_K_layout(void) {
    block_q6_K b;
    memset(&b, 0, sizeof b);
    b.d = da_f32_to_fp16(0.25f);
    for (int s = 0; s < 16; s++) b.scales[s] = (int8_t)(s - 8);
    b.ql[3] = 0x5A;         /* element 3: 0xA, element 67: 0x5 */
    b.qh[3] = (2 << 4) | 1; /* element 3 gets 1 << 4, element 67 gets 2 << 4 */
    float y[256];
    da_dequantize_row(DA_QT_Q6_K, &b, y, 256);
    const float want3 = 0.25f * (float)(0 - 8) * ((0xA | 16) - 32), want67 = 0.25f * (float)(4 - 8) * ((5 | 32) - 32);
    const float want35 = 0.25f * (float)(2 - 8) * (0 - 32); /* untouched: q = 0 */
    if (y[3] != want3 || y[67] != want67 || y[35] != want35) {
        fprintf(stderr, "  y[3] %g (want %g), y[67] %g (want %g), y[35] %g (want %g)\n", y[3], want3, y[67], want67,
                y[35], want35);
        return 1;
    }
    return 0;
}

/* A random block row: random bytes with finite fp16 scales in [-1, 1] / 64. */
static void random_row(int type, unsigned char *w, int64_t n, da_rng *r) {
    const size_t bytes = da_qtype_row_bytes(type, n), bb = da_qtype_block_bytes(type);
    for (size_t i = 0; i < bytes; i++) w[i] = (unsigned char)(da_rng_next(r) >> 56);
    for (size_t o = 0; o < bytes; o += bb) {
        const da_fp16 h1 = da_f32_to_fp16((da_rng_uniform(r) * 2 - 1) / 64);
        const da_fp16 h2 = da_f32_to_fp16((da_rng_uniform(r) * 2 - 1) / 64);
        switch (type) {
        case DA_QT_Q6_K: memcpy(w + o + 208, &h1, 2); break;
        case DA_QT_Q5_0: memcpy(w + o, &h1, 2); break;
        default: memcpy(w + o, &h1, 2), memcpy(w + o + 2, &h2, 2); /* d and m / dmin */
        }
    }
}

/* Every level's vec_dot against sum(dequant(w) * dequant(x)) in double. */
static int test_dots(void) {
    enum { N = 1024 };
    da_rng r;
    da_rng_seed(&r, 21);
    static unsigned char w[N * 2];
    float x[N], wf[N], xf[N];
    int8_t q[N];
    float d[N / 32];
    int32_t sum[N / 32];
    double worst = 0;
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < N; i++) x[i] = (float)(da_rng_normal(&r) * (i % 97 == 0 ? 20.0 : 1.0));
        for (size_t ti = 0; ti < sizeof read_types / sizeof read_types[0]; ti++) {
            const int type = read_types[ti];
            random_row(type, w, N, &r);
            da_dequantize_row(type, w, wf, N);
            for (int lv = 0; lv < DA_ISA_N; lv++) {
                const da_ops *op = da_ops_of((da_isa)lv);
                if (op->isa != (da_isa)lv) continue; /* a level this CPU lacks */
                da_qact a = {N, q, d, sum};
                op->quantize_act(&a, x, N, trial % 3 == 2 ? DA_ACT_TOKEN : DA_ACT_BLOCK, 0.0f);
                double ref = 0, mag = 0;
                for (int i = 0; i < N; i++) {
                    xf[i] = d[i / 32] * q[i];
                    ref += (double)wf[i] * xf[i];
                    mag += fabs((double)wf[i] * xf[i]);
                }
                const float got = op->vec_dot(type, w, &a, N);
                const double err = fabs(got - ref) / (mag > 0 ? mag : 1);
                if (err > worst) worst = err;
                if (!(err <= 1e-5)) {
                    fprintf(stderr, "  %s at level %s: dot %.8g, reference %.8g (rel. to sum |w x| %.3g)\n",
                            da_qtype_name(type), da_isa_name((da_isa)lv), (double)got, ref, err);
                    return 1;
                }
            }
        }
    }
    printf("  worst |dot - reference| / sum|w x| over levels and types: %.2e\n", worst);
    return 0;
}

/* The names and sizes the GGUF reader checks files against. */
static int test_type_table(void) {
    CHECK(da_qtype_row_bytes(DA_QT_Q4_1, 64) == 40);
    CHECK(da_qtype_row_bytes(DA_QT_Q5_0, 64) == 44);
    CHECK(da_qtype_row_bytes(DA_QT_Q5_1, 64) == 48);
    CHECK(da_qtype_row_bytes(DA_QT_Q5_K, 512) == 352);
    CHECK(da_qtype_row_bytes(DA_QT_Q6_K, 256) == 210);
    CHECK(da_qtype_row_bytes(DA_QT_Q6_K, 128) == 0);
    CHECK(!strcmp(da_qtype_name(DA_QT_Q6_K), "q6_k"));
    CHECK(!strcmp(da_ggml_type_name(10), "q2_K") && !strcmp(da_ggml_type_name(23), "iq4_xs"));
    CHECK(!strcmp(da_ggml_type_name(1000), "unknown"));
    da_qtype t;
    CHECK(da_qtype_parse("q6_k", &t) == -1); /* read, never written */
    return 0;
}

int main(void) {
    RUN(test_q5_0_layout);
    RUN(test_q6_K_layout);
    RUN(test_dots);
    RUN(test_type_table);
    TH_SUMMARY();
}
