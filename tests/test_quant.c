/* Block formats against hand-computed blocks, quantize -> dequantize error
 * bounds, and the SIMD dot products against the scalar ones (exact on the
 * integer parts: with unit scales every path must return the same integer). */
#include <stdint.h>

#include "harness.h"
#include "ops/ops.h"

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}
static float frand(void) { return (float)(rnd() % 2000001) / 1000000.0f - 1.0f; }

static int test_fp16(void) {
    CHECK(da_f32_to_fp16(1.0f) == 0x3C00);
    CHECK(da_f32_to_fp16(0.5f) == 0x3800);
    CHECK(da_f32_to_fp16(-2.0f) == 0xC000);
    CHECK(da_f32_to_fp16(65504.0f) == 0x7BFF);
    CHECK(da_f32_to_fp16(1e6f) == 0x7C00);
    CHECK(da_f32_to_fp16(0x1p-24f) == 0x0001);          /* smallest subnormal */
    CHECK(da_f32_to_fp16(1.0f + 0x1p-11f) == 0x3C00);   /* tie -> even */
    CHECK(da_f32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02); /* tie -> even (up) */
    for (uint32_t h = 0; h < 0x7C00; h++) /* every finite positive half round-trips */
        if (da_f32_to_fp16(da_fp16_to_f32((da_fp16)h)) != h) {
            fprintf(stderr, "  half 0x%04x does not round-trip\n", h);
            return 1;
        }
    CHECK(da_bf16_round(1.0f + 0x1p-9f) == 1.0f); /* tie -> even */
    CHECK(da_bf16_round(1.0f + 0x1p-7f) == 1.0f + 0x1p-7f);
    return 0;
}

/* amax 127 -> d = 1 exactly; amax 63.5 -> d = 0.5; rounding half away from zero. */
static int test_q8_0_hand(void) {
    float x[64];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16);
    x[5] = -127.0f;
    for (int i = 0; i < 32; i++) x[32 + i] = 0.25f * (float)(i - 16);
    x[32 + 7] = 63.5f;
    x[32 + 8] = 0.25f;  /* 0.5 q -> 1 */
    x[32 + 9] = -0.25f; /* -0.5 q -> -1 */
    block_q8_0 b[2];
    da_quantize_row_q8_0(b, x, 64);
    CHECK(b[0].d == 0x3C00);
    CHECK(b[0].qs[5] == -127 && b[0].qs[0] == -16 && b[0].qs[31] == 15);
    CHECK(b[1].d == 0x3800);
    CHECK(b[1].qs[7] == 127 && b[1].qs[8] == 1 && b[1].qs[9] == -1 && b[1].qs[0] == -8 && b[1].qs[20] == 2);
    float y[64];
    da_dequantize_row(DA_QT_Q8_0, b, y, 64);
    CHECK(y[5] == -127.0f && y[32 + 7] == 63.5f && y[32 + 8] == 0.5f && y[32 + 20] == 1.0f);
    return 0;
}

/* max |x| = 16 at a negative value: d = -16 / -8 = 2; q = (int)(x / 2 + 8.5), clamped to 15. */
static int test_q4_0_hand(void) {
    float x[32] = {0};
    x[3] = -16.0f; /* q 0 */
    x[0] = 14.0f;  /* 7 + 8.5 -> 15 */
    x[1] = 3.0f;   /* 1.5 + 8.5 -> 10 */
    x[2] = 1.0f;   /* 9 */
    x[4] = -1.0f;  /* 8 */
    x[16] = 15.9f; /* 16.45 -> clamped 15 */
    x[17] = -5.0f; /* 6 */
    block_q4_0 b;
    da_quantize_row_q4_0(&b, x, 32);
    CHECK(b.d == 0x4000);
    /* byte j: element j low, element j + 16 high */
    CHECK(b.qs[0] == (15 | (15 << 4)));
    CHECK(b.qs[1] == (10 | (6 << 4)));
    CHECK(b.qs[2] == (9 | (8 << 4)));
    CHECK(b.qs[3] == (0 | (8 << 4)));
    CHECK(b.qs[4] == (8 | (8 << 4)));
    float y[32];
    da_dequantize_row(DA_QT_Q4_0, &b, y, 32);
    CHECK(y[0] == 14.0f && y[1] == 4.0f && y[2] == 2.0f && y[3] == -16.0f && y[4] == 0.0f && y[16] == 14.0f &&
          y[17] == -4.0f);
    return 0;
}

/* A hand-packed Q4_K block: sub-blocks 0..3 read their 6-bit scale and min
 * from bytes j and j+4; 4..7 from the nibbles of byte j+4 plus the top two
 * bits of bytes j-4 (scale) and j (min). */
static int test_q4_K_hand(void) {
    block_q4_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00;    /* 1.0 */
    b.dmin = 0x3800; /* 0.5 */
    b.scales[0] = 5 | (2 << 6);  /* sc0 = 5; top bits of sc4 = 2 */
    b.scales[4] = 7 | (1 << 6);  /* m0 = 7;  top bits of m4 = 1 */
    b.scales[8] = 0x93;          /* sc4 low 3, m4 low 9 */
    b.scales[1] = 63;            /* sc1 = 63 */
    b.scales[5] = 0;             /* m1 = 0 */
    uint8_t sc, m;
    da_q4k_scale_min(0, b.scales, &sc, &m);
    CHECK(sc == 5 && m == 7);
    da_q4k_scale_min(4, b.scales, &sc, &m);
    CHECK(sc == (3 | (2 << 4)) && m == (9 | (1 << 4))); /* 35, 25 */
    da_q4k_scale_min(1, b.scales, &sc, &m);
    CHECK(sc == 63 && m == 0);
    /* chunk 0: low nibbles sub-block 0, high sub-block 1; chunk 2: sub-blocks 4 and 5 */
    b.qs[0] = 0x3A;      /* sub-block 0 elem 0 = 10, sub-block 1 elem 0 = 3 */
    b.qs[64 + 31] = 0x0F; /* sub-block 4 elem 31 = 15 */
    float y[256];
    da_dequantize_row(DA_QT_Q4_K, &b, y, 256);
    CHECK(y[0] == 1.0f * 5 * 10 - 0.5f * 7);   /* 46.5 */
    CHECK(y[32] == 1.0f * 63 * 3 - 0.0f);      /* 189 */
    CHECK(y[128 + 31] == 1.0f * 35 * 15 - 0.5f * 25); /* 512.5 */
    CHECK(y[1] == -3.5f);
    return 0;
}

/* Random rows: the error of each type stays within its step size. */
static int test_roundtrip_error(void) {
    enum { N = 4096 };
    static float x[N], y[N];
    static unsigned char buf[N * 2];
    for (int i = 0; i < N; i++) x[i] = frand() * (i % 97 == 0 ? 8.0f : 1.0f);
    struct { int type; double max_rel_rmse; } cases[] = {
        {DA_QT_Q8_0, 0.01}, {DA_QT_Q4_0, 0.15}, {DA_QT_Q4_K, 0.12}, {DA_QT_F16, 0.001}, {DA_QT_BF16, 0.005}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        da_quantize_row(cases[c].type, buf, x, N);
        da_dequantize_row(cases[c].type, buf, y, N);
        double e2 = 0, x2 = 0;
        for (int i = 0; i < N; i++) {
            e2 += (double)(x[i] - y[i]) * (x[i] - y[i]);
            x2 += (double)x[i] * x[i];
        }
        double rel = sqrt(e2 / x2);
        if (!(rel <= cases[c].max_rel_rmse)) {
            fprintf(stderr, "  %s: relative rms error %.4f > %.4f\n", da_qtype_name(cases[c].type), rel,
                    cases[c].max_rel_rmse);
            return 1;
        }
    }
    /* q4_K must beat q4_0 on the same data (it has finer scales and mins) */
    double e40 = 0, e4k = 0;
    da_quantize_row(DA_QT_Q4_0, buf, x, N);
    da_dequantize_row(DA_QT_Q4_0, buf, y, N);
    for (int i = 0; i < N; i++) e40 += (double)(x[i] - y[i]) * (x[i] - y[i]);
    da_quantize_row(DA_QT_Q4_K, buf, x, N);
    da_dequantize_row(DA_QT_Q4_K, buf, y, N);
    for (int i = 0; i < N; i++) e4k += (double)(x[i] - y[i]) * (x[i] - y[i]);
    if (!(e4k < e40)) {
        fprintf(stderr, "  q4_K squared error %.4f is not below q4_0's %.4f\n", e4k, e40);
        return 1;
    }
    return 0;
}

/* The activation quantizers: block, per-token and static (saturating) scales,
 * at every kernel level this CPU runs. */
static int act_quant_at(da_isa isa) {
    const da_ops *op = da_ops_of(isa);
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(i - 32) / 8.0f;
    int8_t q[64];
    float d[2];
    int32_t s[2];
    da_qact a = {64, q, d, s};
    op->quantize_act(&a, x, 64, DA_ACT_BLOCK, 0);
    CHECK(d[0] == 4.0f / 127.0f && q[0] == -127);
    CHECK(fabsf(d[1] - (31.0f / 8.0f) / 127.0f) < 1e-9f && q[63] == 127);
    int32_t sum = 0;
    for (int i = 0; i < 32; i++) sum += q[i];
    CHECK(s[0] == sum);
    op->quantize_act(&a, x, 64, DA_ACT_TOKEN, 0);
    CHECK(d[0] == d[1] && d[0] == 4.0f / 127.0f);
    op->quantize_act(&a, x, 64, DA_ACT_STATIC, 2.0f); /* |x| up to 4 saturates at 2 */
    CHECK(q[0] == -127 && q[63] == 127 && q[32 + 8] == 64 && d[0] == 2.0f / 127.0f);
    return 0;
}

static int test_act_quant(void) {
    for (int isa = 0; isa < DA_ISA_N; isa++)
        if (da_isa_supported((da_isa)isa) && act_quant_at((da_isa)isa)) {
            fprintf(stderr, "  at level %s\n", da_isa_name((da_isa)isa));
            return 1;
        }
    return 0;
}

/* With every scale 1, a dot is an integer; all paths must agree exactly. */
static int test_simd_exact(void) {
    enum { N = 512 };
    static int8_t xq[N];
    static float xd[N / 32];
    static int32_t xs[N / 32];
    static block_q8_0 w8[N / 32];
    static block_q4_0 w4[N / 32];
    static block_q4_K wk[N / QK_K];
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < N; i++) xq[i] = (int8_t)((int)(rnd() % 255) - 127);
        for (int b = 0; b < N / 32; b++) {
            xd[b] = 1.0f;
            xs[b] = 0;
            for (int i = 0; i < 32; i++) xs[b] += xq[32 * b + i];
            w8[b].d = 0x3C00;
            w4[b].d = 0x3C00;
            for (int i = 0; i < 32; i++) w8[b].qs[i] = (int8_t)((int)(rnd() % 255) - 127);
            for (int i = 0; i < 16; i++) w4[b].qs[i] = (uint8_t)rnd();
        }
        for (int b = 0; b < N / QK_K; b++) {
            wk[b].d = 0x3C00;
            wk[b].dmin = 0x3C00;
            for (int i = 0; i < 12; i++) wk[b].scales[i] = (uint8_t)rnd() & 0x0F; /* scales, mins < 16 keep every sum < 2^24 */
            for (int i = 0; i < 128; i++) wk[b].qs[i] = (uint8_t)rnd();
        }
        da_qact x = {N, xq, xd, xs};
        /* exact integer references */
        int64_t r8 = 0, r4 = 0, rk = 0;
        for (int b = 0; b < N / 32; b++)
            for (int i = 0; i < 32; i++) {
                r8 += (int64_t)w8[b].qs[i] * xq[32 * b + i];
                int nib = i < 16 ? (w4[b].qs[i] & 0xF) : (w4[b].qs[i - 16] >> 4);
                r4 += (int64_t)(nib - 8) * xq[32 * b + i];
            }
        float yk[N];
        da_dequantize_row(DA_QT_Q4_K, wk, yk, N); /* integers, as d = dmin = 1 */
        for (int i = 0; i < N; i++) rk += (int64_t)yk[i] * xq[i];
        for (int isa = 0; isa < DA_ISA_N; isa++) {
            if (!da_isa_supported((da_isa)isa)) continue;
            const da_ops *op = da_ops_of((da_isa)isa);
            float g8 = op->vec_dot(DA_QT_Q8_0, w8, &x, N), g4 = op->vec_dot(DA_QT_Q4_0, w4, &x, N);
            float gk = op->vec_dot(DA_QT_Q4_K, wk, &x, N);
            if (g8 != (float)r8 || g4 != (float)r4 || gk != (float)rk) {
                fprintf(stderr, "  %s: q8_0 %.1f vs %lld, q4_0 %.1f vs %lld, q4_K %.1f vs %lld\n",
                        da_isa_name((da_isa)isa), g8, (long long)r8, g4, (long long)r4, gk, (long long)rk);
                return 1;
            }
        }
    }
    printf("     dot paths checked:");
    for (int isa = 0; isa < DA_ISA_N; isa++)
        if (da_isa_supported((da_isa)isa)) printf(" %s", da_isa_name((da_isa)isa));
    printf("\n");
    return 0;
}

/* Real-valued rows: each dot matches the dequantized float dot closely. */
static int test_dot_matches_dequantized(void) {
    enum { N = 1024 };
    static float w[N], x[N], wd[N], xdq[N];
    static unsigned char buf[N * 2];
    static int8_t xq[N];
    static float xd[N / 32];
    static int32_t xs[N / 32];
    for (int i = 0; i < N; i++) {
        w[i] = frand();
        x[i] = frand();
    }
    da_qact a = {N, xq, xd, xs};
    da_ops_of(DA_ISA_SCALAR)->quantize_act(&a, x, N, DA_ACT_BLOCK, 0);
    for (int i = 0; i < N; i++) xdq[i] = xd[i / 32] * xq[i];
    const int types[] = {DA_QT_Q8_0, DA_QT_Q4_0, DA_QT_Q4_K};
    for (int c = 0; c < 3; c++) {
        da_quantize_row(types[c], buf, w, N);
        da_dequantize_row(types[c], buf, wd, N);
        double ref = 0, mag = 0;
        for (int i = 0; i < N; i++) {
            ref += (double)wd[i] * xdq[i];
            mag += fabs((double)wd[i] * xdq[i]);
        }
        for (int isa = 0; isa < DA_ISA_N; isa++) {
            if (!da_isa_supported((da_isa)isa)) continue;
            float got = da_ops_of((da_isa)isa)->vec_dot(types[c], buf, &a, N);
            if (!(fabs(got - ref) <= 1e-5 * mag)) {
                fprintf(stderr, "  %s %s: %.6f vs dequantized %.6f\n", da_qtype_name(types[c]),
                        da_isa_name((da_isa)isa), got, ref);
                return 1;
            }
        }
    }
    return 0;
}

int main(void) {
    RUN(test_fp16);
    RUN(test_q8_0_hand);
    RUN(test_q4_0_hand);
    RUN(test_q4_K_hand);
    RUN(test_roundtrip_error);
    RUN(test_act_quant);
    RUN(test_simd_exact);
    RUN(test_dot_matches_dequantized);
    TH_SUMMARY();
}
