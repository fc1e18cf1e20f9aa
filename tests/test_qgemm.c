/* The matmul kernels of quantized weights (ops qgemm) and the engine's
 * threaded integer matmul against the scalar level's vec_dot, one (row,
 * token) at a time. The per-block integer dots are exact on every path; only
 * the order of the float sums over blocks may differ, so each output must
 * lie within 1e-5 * sum_i |w_i x_i| (the dequantized values) of the scalar
 * dot: float reordering over a row of nb blocks moves a sum by at most about
 * nb * 2^-24 of that magnitude. Shapes have a tail of rows past the last
 * group of 8 and token counts past the kernels' tile of 4. Q8_0's kernels
 * give the same bits on every vector level, and a token's outputs do not
 * depend on the other tokens of the call (what batched decoding relies on).
 * The F16 / BF16 / F32 kernels (half_gemm, half_axpy) are checked against
 * the double dot of the same values. */
#include <stdint.h>
#include <time.h>

#include "core/pool.h"
#include "harness.h"
#include "infer/engine.h"
#include "ops/ops.h"

/* COLS: 136 blocks of 32, past one span of the prompt kernels' scale table (SCALE_SPAN, qgemm.c) */
enum { ROWS = 37, COLS = 4352, NTOK = 12 };

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 11) % 2000001) / 1000000.0f - 1.0f;
}

typedef struct {
    int type;
    size_t rb;
    unsigned char *w;
    float *wd;          /* (ROWS, COLS) dequantized weights */
    int8_t q[NTOK * COLS];
    float d[NTOK * COLS / 32], xdq[NTOK * COLS];
    int32_t sum[NTOK * COLS / 32];
    da_qact x[NTOK];
    float ref[NTOK * ROWS], mag[NTOK * ROWS];
} problem;

static void make_problem(problem *p, int type) {
    p->type = type;
    p->rb = da_qtype_row_bytes(type, COLS);
    p->w = malloc(ROWS * p->rb);
    p->wd = malloc(sizeof(float) * ROWS * COLS);
    float row[COLS];
    for (int r = 0; r < ROWS; r++) {
        for (int i = 0; i < COLS; i++) row[i] = frand() * (1 + r % 3);
        da_quantize_row(type, p->w + r * p->rb, row, COLS);
        da_dequantize_row(type, p->w + r * p->rb, p->wd + (size_t)r * COLS, COLS);
    }
    const da_ops *sc = da_ops_of(DA_ISA_SCALAR);
    for (int t = 0; t < NTOK; t++) {
        for (int i = 0; i < COLS; i++) row[i] = frand() * (t + 1);
        p->x[t] = (da_qact){COLS, p->q + t * COLS, p->d + t * COLS / 32, p->sum + t * COLS / 32};
        sc->quantize_act(&p->x[t], row, COLS, DA_ACT_BLOCK, 0);
        for (int i = 0; i < COLS; i++) p->xdq[t * COLS + i] = p->d[t * COLS / 32 + i / 32] * p->q[t * COLS + i];
        for (int r = 0; r < ROWS; r++) {
            double m = 0;
            for (int i = 0; i < COLS; i++) m += fabs((double)p->wd[(size_t)r * COLS + i] * p->xdq[t * COLS + i]);
            p->ref[t * ROWS + r] = sc->vec_dot(type, p->w + r * p->rb, &p->x[t], COLS);
            p->mag[t * ROWS + r] = (float)m;
        }
    }
}

/* got: (n, ROWS) against the scalar dots (+ base when accumulating). */
static int within(const problem *p, const char *what, const float *got, int n, float base) {
    double worst = 0;
    for (int i = 0; i < n * ROWS; i++) {
        const double e = fabs(got[i] - (p->ref[i] + base)) / p->mag[i];
        if (!(e <= worst)) worst = e;
    }
    if (worst <= 1e-5) return 0;
    fprintf(stderr, "  %s %s: error %.2e of sum |w x| (bound 1e-5)\n", da_qtype_name(p->type), what, worst);
    return 1;
}

static int test_qgemm_every_level(void) {
    const int types[] = {DA_QT_Q8_0, DA_QT_Q4_0, DA_QT_Q4_K, DA_QT_Q6_K};
    int fail = 0;
    for (int c = 0; c < 4; c++) {
        problem *p = calloc(1, sizeof *p);
        make_problem(p, types[c]);
        for (int isa = 0; isa < DA_ISA_N; isa++) {
            if (!da_isa_supported((da_isa)isa)) continue;
            const da_ops *op = da_ops_of((da_isa)isa);
            float out[NTOK * ROWS];
            for (int n = 1; n <= NTOK; n++) {
                op->qgemm(p->type, p->w, p->rb, 0, ROWS, COLS, p->x, n, out, ROWS, 0);
                fail |= within(p, da_isa_name(op->isa), out, n, 0);
            }
            /* two row ranges that split a group of 8, accumulating onto 1 */
            for (int i = 0; i < NTOK * ROWS; i++) out[i] = 1.0f;
            op->qgemm(p->type, p->w, p->rb, 0, 13, COLS, p->x, NTOK, out, ROWS, 1);
            op->qgemm(p->type, p->w, p->rb, 13, ROWS, COLS, p->x, NTOK, out, ROWS, 1);
            fail |= within(p, "accumulate", out, NTOK, 1.0f);
        }
        free(p->w);
        free(p->wd);
        free(p);
    }
    return fail;
}

/* w (rows, C): random Q8_0 rows of growing scale; x (NTOK): int8 activations of growing scale in q, d and sum
 * (NTOK * C, and NTOK * C / 32 each); scratch (C). */
static void random_q8_0(unsigned char *w, int rows, int C, da_qact *x, int8_t *q, float *d, int32_t *sum,
                        float *scratch) {
    const size_t rb = da_qtype_row_bytes(DA_QT_Q8_0, C);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < C; i++) scratch[i] = frand() * (1 + r % 3);
        da_quantize_row(DA_QT_Q8_0, w + r * rb, scratch, C);
    }
    for (int t = 0; t < NTOK; t++) {
        for (int i = 0; i < C; i++) scratch[i] = frand() * (t + 1);
        x[t] = (da_qact){C, q + t * C, d + t * C / 32, sum + t * C / 32};
        da_ops_of(DA_ISA_SCALAR)->quantize_act(&x[t], scratch, C, DA_ACT_BLOCK, 0);
    }
}

/* Q8_0 over 32 blocks (one span of the prompt kernels' scale table, so that the 8-row kernel's sums run in
 * block order for any token count): each level with vectors gives the scalar-order kernels' bits, the same for
 * a token whether it comes alone or with up to NTOK - 1 others, and whichever group of rows takes a row (16,
 * 8, as the calls' row ranges split them); rows 32..36 are the vec_dot tail, in the level's own order. */
static int test_q8_0_bits(void) {
    enum { C = 1024 };
    const size_t rb = da_qtype_row_bytes(DA_QT_Q8_0, C);
    unsigned char *w = malloc(ROWS * rb);
    int8_t *q = malloc(NTOK * C);
    float *d = malloc(sizeof(float) * NTOK * C / 32), row[C];
    int32_t *sum = malloc(sizeof(int32_t) * NTOK * C / 32);
    da_qact x[NTOK];
    random_q8_0(w, ROWS, C, x, q, d, sum, row);
    float first[ROWS * NTOK];
    int fail = 0, have_first = 0;
    for (int isa = DA_ISA_AVX2; isa < DA_ISA_N; isa++) {
        if (!da_isa_supported((da_isa)isa)) continue;
        const da_ops *op = da_ops_of((da_isa)isa);
        float alone[NTOK * ROWS], all[NTOK * ROWS];
        for (int t = 0; t < NTOK; t++) op->qgemm(DA_QT_Q8_0, w, rb, 0, ROWS, C, &x[t], 1, alone + t * ROWS, ROWS, 0);
        for (int n = 2; n <= NTOK; n++) {
            op->qgemm(DA_QT_Q8_0, w, rb, 0, 24, C, x, n, all, ROWS, 0); /* rows 16..23: a group of 8 */
            op->qgemm(DA_QT_Q8_0, w, rb, 24, ROWS, C, x, n, all, ROWS, 0);
            if (memcmp(all, alone, sizeof(float) * n * ROWS)) {
                fprintf(stderr, "  %s: %d tokens in one call change a token's outputs\n", da_isa_name(op->isa), n);
                fail = 1;
            }
        }
        /* the tail rows take vec_dot, whose order is the level's own: compare the kernels' rows */
        if (have_first) {
            for (int t = 0; t < NTOK; t++)
                if (memcmp(first + t * ROWS, alone + t * ROWS, sizeof(float) * 32)) {
                    fprintf(stderr, "  %s: other bits than the first vector level, token %d\n", da_isa_name(op->isa), t);
                    fail = 1;
                }
        } else {
            memcpy(first, alone, sizeof first);
            have_first = 1;
        }
    }
    free(w), free(q), free(d), free(sum);
    return fail;
}

/* sum_i |w_i x_i| of a Q8_0 row of c weights and an int8 row: the scale of a dot's rounding */
static float dot_magnitude(const unsigned char *wrow, const da_qact *x, int c) {
    float f[4096], mag = 0.0f;
    da_dequantize_row(DA_QT_Q8_0, wrow, f, c);
    for (int i = 0; i < c; i++) mag += fabsf(f[i] * x->d[i / 32] * x->q[i]);
    return mag;
}

/* Q8_0 in packed 16-row groups (qblock.h's r16 layout): rows unpack to their bytes and dequantize to their
 * floats; on every level qgemm gives the unpacked matrix's bits, whole groups at once or from a row inside
 * one; and the engine's threaded matmul of a packed tensor (its tail rows unpacked) gives the same. */
static int test_q8_0_packed(void) {
    enum { C = 256, R = 37 }; /* two groups of 16 and a tail of 5 */
    const size_t rb = da_qtype_row_bytes(DA_QT_Q8_0, C);
    unsigned char *w = malloc(R * rb), *pk = malloc(R * rb), *tmp = malloc(16 * rb), *row = malloc(rb);
    int8_t q[NTOK * C];
    float d[NTOK * C / 32], xr[C], f1[C], f2[C];
    int32_t sum[NTOK * C / 32];
    da_qact x[NTOK];
    const da_ops *sc = da_ops_of(DA_ISA_SCALAR);
    random_q8_0(w, R, C, x, q, d, sum, xr);
    memcpy(pk, w, R * rb);
    for (int g = 0; g + 16 <= R; g += 16) da_q8_0_pack16(pk + g * rb, C / 32, tmp);
    CHECK(memcmp(pk, w, 32 * rb) != 0 && memcmp(pk + 32 * rb, w + 32 * rb, 5 * rb) == 0);
    for (int r = 0; r < 32; r++) {
        da_q8_0_unpack16_row(pk + (r / 16) * 16 * rb, C / 32, r % 16, row);
        CHECK(memcmp(row, w + r * rb, rb) == 0);
        da_q8_0_dequant16_row(pk + (r / 16) * 16 * rb, C / 32, r % 16, f1);
        da_dequantize_row(DA_QT_Q8_0, w + r * rb, f2, C);
        CHECK(memcmp(f1, f2, sizeof f1) == 0);
    }
    int fail = 0;
    for (int isa = DA_ISA_SCALAR; isa < DA_ISA_N; isa++) {
        if (!da_isa_supported((da_isa)isa)) continue;
        const da_ops *op = da_ops_of((da_isa)isa);
        for (int n = 1; n <= NTOK && !fail; n += 4) {
            float want[NTOK * R], got[NTOK * R];
            op->qgemm(DA_QT_Q8_0, w, rb, 0, 32, C, x, n, want, R, 0);
            op->qgemm(DA_QT_Q8_0_R16, pk, rb, 0, 32, C, x, n, got, R, 0);
            for (int t = 0; t < n; t++) /* the kernel's bits where the level packs; vec_dot's order elsewhere */
                for (int r = 0; r < 32; r++)
                    if (op->q8_0_r16 ? want[t * R + r] != got[t * R + r]
                                     : fabsf(want[t * R + r] - got[t * R + r]) > 1e-5f * dot_magnitude(w + r * rb, &x[t], C))
                        fail = 1;
            for (int t = 0; t < n; t++) /* from inside a group: row by row, vec_dot's own bits */
                for (int r = 5; r < 32; r++) want[t * R + r] = sc->vec_dot(DA_QT_Q8_0, w + r * rb, &x[t], C) + 1.0f;
            for (int t = 0; t < n; t++)
                for (int r = 5; r < 32; r++) got[t * R + r] = 1.0f;
            op->qgemm(DA_QT_Q8_0_R16, pk, rb, 5, 32, C, x, n, got, R, 1);
            for (int t = 0; t < n; t++)
                for (int r = 5; r < 32; r++)
                    if (fabsf(got[t * R + r] - want[t * R + r]) > 1e-5f * (1.0f + dot_magnitude(w + r * rb, &x[t], C)))
                        fail = 1;
            if (fail) fprintf(stderr, "  %s, %d tokens: packed rows differ from their matrix's\n", da_isa_name(op->isa), n);
        }
        /* the engine's matmul over the packed tensor (groups and tail) against the unpacked one */
        da_qtensor Wp = {"w", DA_QT_Q8_0, R, C, rb, pk, .packed = 1}, Wu = {"w", DA_QT_Q8_0, R, C, rb, w, .packed = 0};
        CHECK(da_qtensor_packed_rows(&Wp) == 32 && da_qtensor_packed_rows(&Wu) == 0);
        float a[NTOK * R], b[NTOK * R];
        da_engine_qmatmul_int(NULL, op, &Wu, x, NTOK, a, 0);
        da_engine_qmatmul_int(NULL, op, &Wp, x, NTOK, b, 0);
        /* where the level packs, the same kernel's bits; elsewhere vec_dot's, in its own order */
        int differ = op->q8_0_r16 ? memcmp(a, b, sizeof a) != 0 : 0;
        for (int t = 0; t < NTOK; t++)
            for (int r = 0; r < R; r++) /* within 1e-5 sum |w x|, as the file's other checks */
                differ |= fabsf(a[t * R + r] - b[t * R + r]) > 1e-5f * dot_magnitude(w + r * rb, &x[t], C);
        if (differ) {
            fprintf(stderr, "  %s: the engine's matmul of the packed tensor differs\n", da_isa_name(op->isa));
            fail = 1;
        }
        for (int r = 0; r < R; r++) {
            da_qtensor_dequantize_row(&Wp, r, f1);
            da_qtensor_dequantize_row(&Wu, r, f2);
            CHECK(memcmp(f1, f2, sizeof f1) == 0);
            CHECK(memcmp(da_qtensor_row(&Wp, r, row), w + r * rb, rb) == 0);
        }
    }
    free(w), free(pk), free(tmp), free(row);
    return fail;
}

/* The engine's integer matmul on a team of 3 threads (dynamic chunks of 8
 * rows), repeated so that steps follow each other while the team spins and
 * after it has fallen asleep. */
static int test_threaded_qmatmul(void) {
    problem *p = calloc(1, sizeof *p);
    make_problem(p, DA_QT_Q4_0);
    da_qtensor W = {"w", DA_QT_Q4_0, ROWS, COLS, p->rb, p->w, 0};
    da_pool *pool = da_pool_create(3, 50);
    CHECK(pool && da_pool_threads(pool) == 3);
    const da_ops *op = da_ops_of(da_exec_default().isa);
    int fail = 0;
    for (int rep = 0; rep < 200 && !fail; rep++) {
        float out[NTOK * ROWS];
        const int n = 1 + rep % NTOK;
        da_engine_qmatmul_int(pool, op, &W, p->x, n, out, 0);
        fail |= within(p, "threaded", out, n, 0);
        if (rep % 50 == 49) {
            struct timespec ts = {0, 2000000}; /* 2 ms: the team sleeps */
            nanosleep(&ts, NULL);
        }
    }
    da_pool_free(pool);
    free(p->w);
    free(p->wd);
    free(p);
    return fail;
}

/* F16, BF16 and F32 rows against float activations: each level's half_gemm
 * against the double dot of the same values, within 1e-5 * sum |w x|. */
static int test_half_gemm_every_level(void) {
    const int types[] = {DA_QT_F16, DA_QT_BF16, DA_QT_F32};
    enum { HC = 200 }; /* a tail past the 8-wide vectors: 200 = 25 * 8, and rows past groups of 4 */
    int fail = 0;
    for (int c = 0; c < 3; c++) {
        const size_t rb = da_qtype_row_bytes(types[c], HC);
        unsigned char *w = malloc(ROWS * rb);
        float *wd = malloc(sizeof(float) * ROWS * HC), *x = malloc(sizeof(float) * NTOK * HC), row[HC];
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < HC; i++) row[i] = frand();
            da_quantize_row(types[c], w + r * rb, row, HC);
            da_dequantize_row(types[c], w + r * rb, wd + (size_t)r * HC, HC);
        }
        for (int i = 0; i < NTOK * HC; i++) x[i] = frand();
        for (int isa = 0; isa < DA_ISA_N; isa++) {
            if (!da_isa_supported((da_isa)isa)) continue;
            float out[NTOK * ROWS];
            for (int i = 0; i < NTOK * ROWS; i++) out[i] = 0.5f;
            da_ops_of((da_isa)isa)->half_gemm(types[c], w, rb, 0, ROWS, HC, x, HC, NTOK, out, ROWS, 1);
            for (int t = 0; t < NTOK; t++)
                for (int r = 0; r < ROWS; r++) {
                    double ref = 0.5, mag = 0;
                    for (int i = 0; i < HC; i++) {
                        ref += (double)wd[(size_t)r * HC + i] * x[t * HC + i];
                        mag += fabs((double)wd[(size_t)r * HC + i] * x[t * HC + i]);
                    }
                    if (!(fabs(out[t * ROWS + r] - ref) <= 1e-5 * mag)) {
                        fprintf(stderr, "  %s %s row %d token %d: %.7f vs %.7f\n", da_qtype_name(types[c]),
                                da_isa_name((da_isa)isa), r, t, out[t * ROWS + r], ref);
                        fail = 1;
                    }
                }
        }
        free(w);
        free(wd);
        free(x);
    }
    return fail;
}

/* half_axpy, attention's value mix: o += sum_t p[t] * row t for F16, BF16 and F32 rows at a stride wider than
 * the row (a head's columns of a cache row), 1..ROWS rows (past groups of 4), against the double sum. */
static int test_half_axpy_every_level(void) {
    const int types[] = {DA_QT_F16, DA_QT_BF16, DA_QT_F32};
    enum { HC = 136, STRIDE = 3 * HC }; /* 136 = 17 * 8 */
    int fail = 0;
    for (int c = 0; c < 3; c++) {
        const size_t es = da_qtype_row_bytes(types[c], HC) / HC;
        unsigned char *w = malloc(ROWS * STRIDE * es);
        float *wd = malloc(sizeof(float) * ROWS * HC), p[ROWS], row[HC];
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < HC; i++) row[i] = frand();
            da_quantize_row(types[c], w + (size_t)r * STRIDE * es, row, HC);
            da_dequantize_row(types[c], w + (size_t)r * STRIDE * es, wd + (size_t)r * HC, HC);
            p[r] = frand();
        }
        for (int isa = 0; isa < DA_ISA_N; isa++) {
            if (!da_isa_supported((da_isa)isa)) continue;
            for (int n = 1; n <= ROWS; n += 6) {
                float o[HC];
                for (int i = 0; i < HC; i++) o[i] = 0.25f;
                da_ops_of((da_isa)isa)->half_axpy(types[c], w, STRIDE * es, n, p, HC, o);
                for (int i = 0; i < HC; i++) {
                    double ref = 0.25, mag = 0.25;
                    for (int t = 0; t < n; t++) {
                        ref += (double)p[t] * wd[(size_t)t * HC + i];
                        mag += fabs((double)p[t] * wd[(size_t)t * HC + i]);
                    }
                    if (!(fabs(o[i] - ref) <= 1e-5 * mag)) {
                        fprintf(stderr, "  %s %s n %d column %d: %.7f vs %.7f\n", da_qtype_name(types[c]),
                                da_isa_name((da_isa)isa), n, i, o[i], ref);
                        fail = 1;
                        break;
                    }
                }
            }
        }
        free(w);
        free(wd);
    }
    return fail;
}

int main(void) {
    RUN(test_qgemm_every_level);
    RUN(test_q8_0_bits);
    RUN(test_q8_0_packed);
    RUN(test_threaded_qmatmul);
    RUN(test_half_gemm_every_level);
    RUN(test_half_axpy_every_level);
    TH_SUMMARY();
}
