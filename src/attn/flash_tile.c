/* The small matrix products of the flash kernels (flash_attention.c), for
 * the shapes attention has at small head sizes: an inner dimension of 8 to
 * 128 (d, or a tile's 64 keys), and tiles of 64. A library sgemm spends most
 * of such a call in its set-up and packing; here a register block of MR rows
 * by NV vectors of C stays in registers over the whole inner dimension, A is
 * read one element at a time (a broadcast) and B a row of vectors at a time.
 *
 * Vectors are GCC vector extensions of TV floats, the width of the level
 * being compiled (attn_variant.c): 16 at AVX-512, 8 at AVX2, 4 elsewhere,
 * where the same code is plain C that the compiler lowers. */
#include <math.h>
#include <string.h>

#include "attn/flash_attention.h"
#include "ops/vexp.h"

#if defined(__AVX512F__)
#define TV 16
#define TILE_NVMAX 4 /* vectors of C per register block row */
#elif defined(__AVX2__) && defined(__FMA__)
#define TV 8
#define TILE_NVMAX 2
#else
#define TV 4
#define TILE_NVMAX 2
#endif
#define TILE_ACC 16 /* accumulators of the largest register block */

typedef float tvec __attribute__((vector_size(TV * sizeof(float))));
typedef int tvi __attribute__((vector_size(TV * sizeof(int))));

static inline tvec tv_load(const float *p) {
    tvec v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void tv_store(float *p, tvec v) { memcpy(p, &v, sizeof v); }
static inline tvec tv_set1(float x) {
#if TV == 16
    return (tvec)_mm512_set1_ps(x);
#elif TV == 8
    return (tvec)_mm256_set1_ps(x);
#else
    return (tvec){x, x, x, x};
#endif
}

/* a * b + c, fused where the level has FMA */
static inline tvec tv_fma(tvec a, tvec b, tvec c) {
#if TV == 16
    return (tvec)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif TV == 8
    return (tvec)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    return a * b + c;
#endif
}

/* where mask (all ones or zero per lane): a, else b */
static inline tvec tv_select(tvi mask, tvec a, tvec b) { return (tvec)(((tvi)a & mask) | ((tvi)b & ~mask)); }

static inline tvec tv_max(tvec a, tvec b) { return tv_select(a > b, a, b); }

/* Lane indices 0 .. TV-1 plus base. */
static inline tvi tv_iota(int base) {
    tvi v;
    for (int l = 0; l < TV; l++) v[l] = base + l;
    return v;
}

/* exp of every lane: the polynomial of ops/vexp.h, libm's expf at the scalar level */
static inline tvec tv_exp(tvec x) {
#if TV == 16
    return (tvec)exp512_ps((__m512)x);
#elif TV == 8
    return (tvec)exp256_ps((__m256)x);
#else
    tvec r;
    for (int l = 0; l < TV; l++) r[l] = expf(x[l]);
    return r;
#endif
}

/* 2^x of every lane, for the x <= 0 of the softmax: the polynomial of
 * ops/vexp.h, libm's exp2f at the scalar level. */
static inline tvec tv_exp2(tvec x) {
#if TV == 16
    return (tvec)exp2_512_ps((__m512)x);
#elif TV == 8
    return (tvec)exp2_256_ps((__m256)x);
#else
    tvec r;
    for (int l = 0; l < TV; l++) r[l] = exp2f(x[l]);
    return r;
#endif
}

/* One register block: C (MR, NV*TV) = or += sum over k < K of A[i*sm + k*sk] B[k*ldb ..].
 * MR, NV and sm are constants at every call, so that the accumulators are
 * registers and A's offsets immediates. */
static inline __attribute__((always_inline)) void tile_block(float *C, long ldc, const float *A, long sm, long sk,
                                                             const float *B, long ldb, int K, int accumulate,
                                                             const int MR, const int NV) {
    tvec c[TILE_ACC];
#pragma GCC unroll 16
    for (int x = 0; x < MR * NV; x++) c[x] = tv_set1(0.0f);
    for (int k = 0; k < K; k++) {
        const float *bk = B + k * ldb, *ak = A + k * sk;
        tvec b[TILE_NVMAX];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) b[v] = tv_load(bk + v * TV);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            const tvec a = tv_set1(ak[i * sm]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) c[i * NV + v] = tv_fma(a, b[v], c[i * NV + v]);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            float *ci = C + i * ldc + v * TV;
            tv_store(ci, accumulate ? c[i * NV + v] + tv_load(ci) : c[i * NV + v]);
        }
}

/* Rows of a register block for NV vectors: as many as keep the block within
 * the level's registers, and dividing the tile (64) and the usual head sizes.
 * A block whose A rows are a run-time stride apart takes at most 4 (8 for
 * one vector), one address register each. */
#if TV == 16
#define TILE_MR(nv) ((nv) == 1 ? 16 : (nv) == 2 ? 8 : 4)
#else
#define TILE_MR(nv) ((nv) == 1 ? 8 : 4)
#endif
#define TILE_MR_STRIDED(nv) ((nv) == 1 ? 8 : 4)

typedef void (*tile_block_fn)(float *C, long ldc, const float *A, long sm, long sk, const float *B, long ldb, int K,
                              int acc);

/* The register blocks of NV vectors, one function per way of reading A:
 * rows 1 apart (the columns of a row-major matrix), FLASH_BC apart (a tile),
 * sm apart with sk = 1 (the rows of a row-major matrix), and the one row of a
 * remainder. */
#define TILE_FNS(NV)                                                                                               \
    static void tile_##NV##_cols(float *C, long ldc, const float *A, long sm, long sk, const float *B, long ldb,   \
                                 int K, int acc) {                                                                   \
        (void)sm;                                                                                                    \
        tile_block(C, ldc, A, 1, sk, B, ldb, K, acc, TILE_MR(NV), NV);                                               \
    }                                                                                                                \
    static void tile_##NV##_tile(float *C, long ldc, const float *A, long sm, long sk, const float *B, long ldb,   \
                                 int K, int acc) {                                                                   \
        (void)sm;                                                                                                    \
        tile_block(C, ldc, A, FLASH_BC, sk, B, ldb, K, acc, TILE_MR(NV), NV);                                        \
    }                                                                                                                \
    static void tile_##NV##_rows(float *C, long ldc, const float *A, long sm, long sk, const float *B, long ldb,   \
                                 int K, int acc) {                                                                   \
        (void)sk;                                                                                                    \
        tile_block(C, ldc, A, sm, 1, B, ldb, K, acc, TILE_MR_STRIDED(NV), NV);                                       \
    }                                                                                                                \
    static void tile_##NV##_one(float *C, long ldc, const float *A, long sm, long sk, const float *B, long ldb,    \
                                int K, int acc) {                                                                    \
        (void)sm;                                                                                                    \
        tile_block(C, ldc, A, 0, sk, B, ldb, K, acc, 1, NV);                                                         \
    }

TILE_FNS(1)
TILE_FNS(2)
#if TILE_NVMAX == 4
TILE_FNS(3)
TILE_FNS(4)
#endif

/* Adds (or copies) the first n columns of part (rows, ldp) into C. */
static void tile_put(float *C, long ldc, const float *part, int ldp, int rows, int n, int accumulate) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++) C[i * ldc + j] = accumulate ? C[i * ldc + j] + part[i * ldp + j] : part[i * ldp + j];
}

/* C (M, N) = A B, or += with accumulate; C's rows are ldc apart. A (M, K) is
 * read at A[m*sm + k*sk], with sm = 1, sm = FLASH_BC or sk = 1 (else one row
 * at a time). B (K, N) has rows ldb apart, each readable to N rounded up to
 * whole vectors (the flash kernels pad them); only C's N columns are written. */
static void tile_gemm(float *C, long ldc, const float *A, long sm, long sk, const float *B, long ldb, int M, int N,
                      int K, int accumulate) {
#if TILE_NVMAX == 4
    static const tile_block_fn cols[4] = {tile_1_cols, tile_2_cols, tile_3_cols, tile_4_cols};
    static const tile_block_fn tile[4] = {tile_1_tile, tile_2_tile, tile_3_tile, tile_4_tile};
    static const tile_block_fn rows[4] = {tile_1_rows, tile_2_rows, tile_3_rows, tile_4_rows};
    static const tile_block_fn one[4] = {tile_1_one, tile_2_one, tile_3_one, tile_4_one};
#else
    static const tile_block_fn cols[2] = {tile_1_cols, tile_2_cols};
    static const tile_block_fn tile[2] = {tile_1_tile, tile_2_tile};
    static const tile_block_fn rows[2] = {tile_1_rows, tile_2_rows};
    static const tile_block_fn one[2] = {tile_1_one, tile_2_one};
#endif
    float part[16 * TILE_NVMAX * TV]; /* a block whose last vector is ragged, before its valid columns go to C */
    for (int n0 = 0; n0 < N; n0 += TILE_NVMAX * TV) {
        const int left = N - n0, nv = left >= TILE_NVMAX * TV ? TILE_NVMAX : (left + TV - 1) / TV;
        const int ragged = left < nv * TV, w = nv * TV;
        const tile_block_fn blk = sm == 1 ? cols[nv - 1] : sm == FLASH_BC ? tile[nv - 1] : sk == 1 ? rows[nv - 1] : NULL;
        const int mr = sm == 1 || sm == FLASH_BC ? TILE_MR(nv) : TILE_MR_STRIDED(nv);
        int m = 0;
        if (blk)
            for (; m + mr <= M; m += mr) {
                if (!ragged) {
                    blk(C + m * ldc + n0, ldc, A + m * sm, sm, sk, B + n0, ldb, K, accumulate);
                } else {
                    blk(part, w, A + m * sm, sm, sk, B + n0, ldb, K, 0);
                    tile_put(C + m * ldc + n0, ldc, part, w, mr, left, accumulate);
                }
            }
        for (; m < M; m++) {
            if (!ragged) {
                one[nv - 1](C + m * ldc + n0, ldc, A + m * sm, sm, sk, B + n0, ldb, K, accumulate);
            } else {
                one[nv - 1](part, w, A + m * sm, sm, sk, B + n0, ldb, K, 0);
                tile_put(C + m * ldc + n0, ldc, part, w, 1, left, accumulate);
            }
        }
    }
}

#if TV == 16
/* o[c*ld + t] = scale * s[t*cols + c] for a 16 x 16 block: each of four
 * stages swaps the off-diagonal blocks of size b within blocks of size 2b. */
static void transpose_16x16(float *o, long ld, const float *s, long cols, float scale) {
    __m512 r[16];
    const __m512 vs = _mm512_set1_ps(scale);
    for (int i = 0; i < 16; i++) r[i] = _mm512_mul_ps(_mm512_loadu_ps(s + i * cols), vs);
#pragma GCC unroll 4
    for (int b = 8; b >= 1; b /= 2) {
        int lo_i[16], hi_i[16];
        for (int l = 0; l < 16; l++) {
            lo_i[l] = l & b ? 16 + l - b : l;
            hi_i[l] = l & b ? 16 + l : l + b;
        }
        const __m512i lo = _mm512_loadu_si512(lo_i), hi = _mm512_loadu_si512(hi_i);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            if (!(i & b)) {
                const __m512 x = r[i], y = r[i + b];
                r[i] = _mm512_permutex2var_ps(x, lo, y);
                r[i + b] = _mm512_permutex2var_ps(x, hi, y);
            }
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(o + i * ld, r[i]);
}
#endif

/* dst (cols, ldd) = scale * src^T for src (rows, lds); dst's columns rows .. width-1 are zeroed. */
static void tile_transpose(float *dst, long ldd, const float *src, long lds, int rows, int cols, int width,
                           float scale) {
    int t0 = 0;
#if TV == 16
    for (; t0 + 16 <= rows; t0 += 16) {
        int c0 = 0;
        for (; c0 + 16 <= cols; c0 += 16) transpose_16x16(dst + c0 * ldd + t0, ldd, src + t0 * lds + c0, lds, scale);
        for (int c = c0; c < cols; c++)
            for (int t = t0; t < t0 + 16; t++) dst[c * ldd + t] = scale * src[t * lds + c];
    }
#endif
    for (int c = 0; c < cols; c++) {
        for (int t = t0; t < rows; t++) dst[c * ldd + t] = scale * src[t * lds + c];
        for (int t = rows; t < width; t++) dst[c * ldd + t] = 0.0f;
    }
}
