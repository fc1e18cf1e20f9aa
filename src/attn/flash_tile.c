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
 * the level's registers, and dividing the tile (64) and the usual head sizes. */
#if TV == 16
#define TILE_MR(nv) ((nv) == 1 ? 16 : (nv) == 2 ? 8 : 4)
#else
#define TILE_MR(nv) ((nv) == 1 ? 8 : 4)
#endif

/* The register blocks, one function each: A's rows 1 (contiguous columns of
 * a row-major matrix) or FLASH_BC apart, and the single row of a remainder. */
#define TILE_FN(NV, SM)                                                                                            \
    static void tile_##NV##_##SM(float *C, long ldc, const float *A, long sk, const float *B, long ldb, int K,      \
                                 int acc) {                                                                          \
        tile_block(C, ldc, A, SM, sk, B, ldb, K, acc, TILE_MR(NV), NV);                                              \
    }                                                                                                                \
    static void tile_##NV##_row(float *C, const float *A, long sk, const float *B, long ldb, int K, int acc) {       \
        tile_block(C, 0, A, 0, sk, B, ldb, K, acc, 1, NV);                                                           \
    }
#define TILE_FN_BC(NV)                                                                                             \
    static void tile_##NV##_bc(float *C, long ldc, const float *A, long sk, const float *B, long ldb, int K,        \
                               int acc) {                                                                            \
        tile_block(C, ldc, A, FLASH_BC, sk, B, ldb, K, acc, TILE_MR(NV), NV);                                        \
    }

TILE_FN(1, 1)
TILE_FN_BC(1)
TILE_FN(2, 1)
TILE_FN_BC(2)
#if TILE_NVMAX == 4
TILE_FN(3, 1)
TILE_FN_BC(3)
TILE_FN(4, 1)
TILE_FN_BC(4)
#endif

typedef void (*tile_block_fn)(float *C, long ldc, const float *A, long sk, const float *B, long ldb, int K, int acc);
typedef void (*tile_row_fn)(float *C, const float *A, long sk, const float *B, long ldb, int K, int acc);

/* Adds (or copies) the first n columns of part (rows, ldp) into C. */
static void tile_put(float *C, long ldc, const float *part, int ldp, int rows, int n, int accumulate) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++) C[i * ldc + j] = accumulate ? C[i * ldc + j] + part[i * ldp + j] : part[i * ldp + j];
}

/* C (M, N) = A B, or += with accumulate; C's rows are ldc apart. A (M, K) is
 * read at A[m*sm + k*sk], sm 1 or FLASH_BC for the register blocks (any
 * other sm takes the one-row path). B (K, N) has rows ldb apart, each
 * readable to N rounded up to whole vectors (the flash kernels pad them);
 * only C's N columns are written. */
static void tile_gemm(float *C, long ldc, const float *A, long sm, long sk, const float *B, long ldb, int M, int N,
                      int K, int accumulate) {
#if TILE_NVMAX == 4
    static const tile_block_fn unit[4] = {tile_1_1, tile_2_1, tile_3_1, tile_4_1};
    static const tile_block_fn wide[4] = {tile_1_bc, tile_2_bc, tile_3_bc, tile_4_bc};
    static const tile_row_fn row[4] = {tile_1_row, tile_2_row, tile_3_row, tile_4_row};
#else
    static const tile_block_fn unit[2] = {tile_1_1, tile_2_1};
    static const tile_block_fn wide[2] = {tile_1_bc, tile_2_bc};
    static const tile_row_fn row[2] = {tile_1_row, tile_2_row};
#endif
    float part[16 * TILE_NVMAX * TV]; /* a block whose last vector is ragged, before its valid columns go to C */
    for (int n0 = 0; n0 < N; n0 += TILE_NVMAX * TV) {
        const int left = N - n0, nv = left >= TILE_NVMAX * TV ? TILE_NVMAX : (left + TV - 1) / TV;
        const int ragged = left < nv * TV, mr = TILE_MR(nv), w = nv * TV;
        const tile_block_fn blk = sm == 1 ? unit[nv - 1] : sm == FLASH_BC ? wide[nv - 1] : NULL;
        int m = 0;
        if (blk)
            for (; m + mr <= M; m += mr) {
                if (!ragged) {
                    blk(C + m * ldc + n0, ldc, A + m * sm, sk, B + n0, ldb, K, accumulate);
                } else {
                    blk(part, w, A + m * sm, sk, B + n0, ldb, K, 0);
                    tile_put(C + m * ldc + n0, ldc, part, w, mr, left, accumulate);
                }
            }
        for (; m < M; m++) {
            if (!ragged) {
                row[nv - 1](C + m * ldc + n0, A + m * sm, sk, B + n0, ldb, K, accumulate);
            } else {
                row[nv - 1](part, A + m * sm, sk, B + n0, ldb, K, 0);
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

/* dst (B, cols, ld) = scale * src^T per batch, src (B, T, cols); columns T .. ld-1 of dst are zeroed. */
static void tile_transpose(float *dst, const float *src, int B, int T, int cols, long ld, float scale, int n_threads) {
    const int n_blocks = (T + 15) / 16;
#pragma omp parallel for schedule(static) num_threads(n_threads)
    for (int bt = 0; bt < B * n_blocks; bt++) {
        const int b = bt / n_blocks, t0 = bt % n_blocks * 16, t1 = t0 + 16 < T ? t0 + 16 : T;
        const float *s = src + (size_t)b * T * cols;
        float *o = dst + (size_t)b * cols * ld;
        int c0 = 0;
#if TV == 16
        if (t1 - t0 == 16)
            for (; c0 + 16 <= cols; c0 += 16) transpose_16x16(o + (size_t)c0 * ld + t0, ld, s + (size_t)t0 * cols + c0, cols, scale);
#endif
        for (int c = c0; c < cols; c++)
            for (int t = t0; t < t1; t++) o[(size_t)c * ld + t] = scale * s[(size_t)t * cols + c];
        if (t1 == T)
            for (int c = 0; c < cols; c++) memset(o + (size_t)c * ld + T, 0, (size_t)(ld - T) * sizeof(float));
    }
}
