/* Every block type diffattn reads from llama.cpp's files dequantizes to the
 * same floats as ggml's own dequantize_row_*, from libggml-base.so of the
 * pinned node-llama-cpp package (loaded with dlopen, so the build never
 * needs it). Rows come from ggml's reference quantizers (real data) and from
 * random bytes (every bit pattern of the quants and scales).
 * Skips (exit 77) loudly where the library is missing: install it with
 * tools/install-deps.sh, or point DIFFATTN_LLAMACPP_LIBS at its folder. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "diffattn/rng.h"
#include "ops/qblock.h"

#define BINS "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"

typedef void (*ggml_dequant_fn)(const void *x, float *y, int64_t k);
typedef void (*ggml_quant_fn)(const float *x, void *y, int64_t k);

static void *ggml;

static const struct {
    int type;
    const char *name; /* ggml's suffix */
} types[] = {{DA_QT_Q8_0, "q8_0"}, {DA_QT_Q4_0, "q4_0"}, {DA_QT_Q4_1, "q4_1"}, {DA_QT_Q5_0, "q5_0"},
             {DA_QT_Q5_1, "q5_1"}, {DA_QT_Q4_K, "q4_K"}, {DA_QT_Q5_K, "q5_K"}, {DA_QT_Q6_K, "q6_K"}};

static void *open_ggml(void) {
    char path[4096];
    const char *dir = getenv("DIFFATTN_LLAMACPP_LIBS");
    if (dir) snprintf(path, sizeof path, "%s/libggml-base.so", dir);
    else snprintf(path, sizeof path, "tools/llamacpp/" BINS "/libggml-base.so");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("SKIP: llama.cpp's libggml-base.so not found at %s (%s): run tools/install-deps.sh or set "
               "DIFFATTN_LLAMACPP_LIBS\n",
               path, dlerror());
    }
    return h;
}

static int compare_row(int ti, const unsigned char *blocks, int64_t n, const char *what) {
    char sym[64];
    snprintf(sym, sizeof sym, "dequantize_row_%s", types[ti].name);
    ggml_dequant_fn deq = (ggml_dequant_fn)dlsym(ggml, sym);
    if (!deq) {
        fprintf(stderr, "  %s is not exported by libggml-base.so\n", sym);
        return 1;
    }
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    deq(blocks, a, n);
    da_dequantize_row(types[ti].type, blocks, b, n);
    int bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&a[i], &b[i], 4) && !(isnan(a[i]) && isnan(b[i]))) bad = (int)i;
    if (bad >= 0)
        fprintf(stderr, "  %s (%s): element %d: ggml %.9g, diffattn %.9g\n", types[ti].name, what, bad, a[bad], b[bad]);
    free(a);
    free(b);
    return bad >= 0;
}

/* ggml's reference quantizer on Gaussian rows with outliers, then both dequantizers: bit-identical. */
static int test_quantized_rows(void) {
    enum { N = 4096 };
    da_rng r;
    da_rng_seed(&r, 7);
    float x[N];
    static unsigned char blocks[N * 2];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (int i = 0; i < N; i++) x[i] = da_rng_normal(&r) * (i % 211 == 0 ? 12.0f : 0.02f);
        char sym[64];
        snprintf(sym, sizeof sym, "quantize_row_%s_ref", types[ti].name);
        ggml_quant_fn q = (ggml_quant_fn)dlsym(ggml, sym);
        if (!q) {
            fprintf(stderr, "  %s is not exported by libggml-base.so\n", sym);
            return 1;
        }
        q(x, blocks, N);
        if (compare_row((int)ti, blocks, N, "ggml-quantized")) return 1;
    }
    return 0;
}

/* Random bytes, scales random finite fp16 values: every quant pattern, negative scales and mins too. */
static int test_random_blocks(void) {
    enum { N = 4096 };
    da_rng r;
    da_rng_seed(&r, 8);
    static unsigned char blocks[N * 2];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int t = types[ti].type;
        const size_t bytes = da_qtype_row_bytes(t, N), bb = da_qtype_block_bytes(t);
        for (size_t i = 0; i < bytes; i++) blocks[i] = (unsigned char)(da_rng_next(&r) >> 56);
        for (size_t o = 0; o < bytes; o += bb) { /* the fp16 fields: finite, of either sign */
            const size_t at = t == DA_QT_Q6_K ? 208 : 0;
            const int n16 = (t == DA_QT_Q4_1 || t == DA_QT_Q5_1 || t == DA_QT_Q4_K || t == DA_QT_Q5_K) ? 2 : 1;
            for (int k = 0; k < n16; k++) {
                da_fp16 h = da_f32_to_fp16((da_rng_uniform(&r) * 2 - 1) * 4.0f);
                memcpy(blocks + o + at + 2 * k, &h, 2);
            }
        }
        if (compare_row((int)ti, blocks, N, "random bytes")) return 1;
    }
    return 0;
}

/* diffattn's Q6_K quantizer (the LM head of its 4-bit files) against ggml's
 * quantize_row_q6_K_ref on the same rows: both dequantized, the squared
 * error of diffattn's is within 1% of ggml's, and (the same search) at
 * least 90% of the blocks are byte-identical (all of them, measured). */
static int test_q6_K_quantizer(void) {
    enum { N = 256 * 64 };
    da_rng r;
    da_rng_seed(&r, 9);
    static float x[N], a[N], b[N];
    static block_q6_K mine[N / 256], ref[N / 256];
    ggml_quant_fn q = (ggml_quant_fn)dlsym(ggml, "quantize_row_q6_K_ref");
    CHECK(q);
    for (int shape = 0; shape < 3; shape++) {
        for (int i = 0; i < N; i++) {
            const float g = da_rng_normal(&r);
            x[i] = shape == 0 ? g * 0.02f : shape == 1 ? g * (i % 211 == 0 ? 12.0f : 0.02f) : (i % 512 < 16 ? 0.0f : g);
        }
        q(x, ref, N);
        da_quantize_row_q6_K(mine, x, N);
        da_dequantize_row(DA_QT_Q6_K, ref, a, N);
        da_dequantize_row(DA_QT_Q6_K, mine, b, N);
        double ea = 0, eb = 0;
        for (int i = 0; i < N; i++) {
            ea += (double)(a[i] - x[i]) * (a[i] - x[i]);
            eb += (double)(b[i] - x[i]) * (b[i] - x[i]);
        }
        int same = 0;
        for (int k = 0; k < N / 256; k++) same += !memcmp(&mine[k], &ref[k], sizeof mine[k]);
        printf("     q6_K rows, shape %d: squared error diffattn %.4g, ggml %.4g; %d of %d blocks byte-identical\n", shape,
               eb, ea, same, N / 256);
        CHECK(eb <= ea * 1.01 + 1e-30);
        CHECK(same >= N / 256 * 9 / 10);
    }
    return 0;
}

int main(void) {
    if (!(ggml = open_ggml())) return 77;
    RUN(test_quantized_rows);
    RUN(test_random_blocks);
    RUN(test_q6_K_quantizer);
    dlclose(ggml);
    TH_SUMMARY();
}
