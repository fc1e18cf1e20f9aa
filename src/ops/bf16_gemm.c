/* C = alpha * op(A) op(B) + beta * C with bfloat16 inputs and fp32
 * accumulation, through AVX512-BF16's vdpbf16ps (two multiply-adds per lane
 * per instruction: twice the fp32 FMA rate). A and B are fp32 in memory with
 * any strides; they are rounded to bf16 while being packed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Only the AVX512-BF16 variant has the kernel; the other tables hold NULL. */
#if defined(__AVX512BF16__) && defined(__AVX512F__)
#define HAVE_BF16_GEMM 1
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>

#define MR 8
#define NR 32

static inline uint16_t to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fffu + ((b >> 16) & 1u); /* round to nearest even (NaN-free inputs) */
    return (uint16_t)(b >> 16);
}

/* Words (bf16(x) | bf16(y) << 16) of 16 (x, y) pairs, rounded to nearest even. */
static inline __m512i pair_words(__m512 x, __m512 y) {
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
    __m512i xi = _mm512_castps_si512(x), yi = _mm512_castps_si512(y);
    xi = _mm512_add_epi32(xi, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(xi, 16), one)));
    yi = _mm512_add_epi32(yi, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(yi, 16), one)));
    return _mm512_or_si512(_mm512_srli_epi32(xi, 16), _mm512_and_si512(yi, _mm512_set1_epi32((int)0xffff0000u)));
}

/* 16 words of consecutive pairs from 32 contiguous floats p[0..31]. */
static inline __m512i contiguous_words(const float *p) {
    return _mm512_castps_si512((__m512)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p)));
}

/* In place: r[i] element j becomes r[j] element i (16 x 16 words). */
static inline void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* u[4i + c], 128-bit lane L: rows 4i..4i+3 of column 4L + c */
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), v2 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
        __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88), w2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(v2, w2, 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
        r[12 + c] = _mm512_shuffle_i32x4(v2, w2, 0xDD);
    }
}

/* A panel: MR rows, each K2 words (k, k+1) in k order: word (i, kp) at i*K2 + kp. */
static void pack_a(uint32_t *dst, const float *a, long rs, long cs, int m0, int mr, int K, int K2) {
    if (cs == 1 && K % 32 == 0) { /* rows contiguous along k: a straight conversion */
        for (int i = 0; i < mr; i++)
            for (int k = 0; k < K; k += 32)
                _mm512_storeu_si512(dst + (size_t)i * K2 + k / 2, contiguous_words(a + (long)(m0 + i) * rs + k));
    } else if (mr == MR && rs == 1) { /* columns contiguous along i: 8 rows of a k pair at once */
        for (int kp = 0; kp < K2; kp++) {
            const float *p0 = a + (long)m0 + (long)(2 * kp) * cs;
            __m512 x = _mm512_castps256_ps512(_mm256_loadu_ps(p0));
            __m512 y = 2 * kp + 1 < K ? _mm512_castps256_ps512(_mm256_loadu_ps(p0 + cs)) : _mm512_setzero_ps();
            uint32_t w[16];
            _mm512_storeu_si512(w, pair_words(x, y));
            for (int i = 0; i < MR; i++) dst[(size_t)i * K2 + kp] = w[i];
        }
        return;
    } else {
        for (int i = 0; i < mr; i++)
            for (int kp = 0; kp < K2; kp++) {
                const float *p = a + (long)(m0 + i) * rs + (long)(2 * kp) * cs;
                uint32_t lo = to_bf16(p[0]), hi = 2 * kp + 1 < K ? to_bf16(p[cs]) : 0;
                dst[(size_t)i * K2 + kp] = lo | hi << 16;
            }
    }
    for (int i = mr; i < MR; i++) memset(dst + (size_t)i * K2, 0, (size_t)K2 * 4);
}

static void pack_b(uint16_t *dst, const float *b, long rs, long cs, int n0, int nr, int K, int K2) {
    if (nr == NR && cs == 1 && K % 2 == 0) { /* rows contiguous along j: pair two rows */
        for (int kp = 0; kp < K2; kp++) {
            const float *p0 = b + (long)(2 * kp) * rs + n0;
            for (int h = 0; h < NR; h += 16)
                _mm512_storeu_si512(dst + ((size_t)kp * NR + h) * 2,
                                    pair_words(_mm512_loadu_ps(p0 + h), _mm512_loadu_ps(p0 + rs + h)));
        }
        return;
    }
    if (nr == NR && rs == 1 && K % 32 == 0) { /* columns contiguous along k: convert 16 x 16 words, transpose */
        for (int k = 0; k < K; k += 32)
            for (int j0 = 0; j0 < NR; j0 += 16) {
                __m512i r[16];
                for (int j = 0; j < 16; j++) r[j] = contiguous_words(b + (long)(n0 + j0 + j) * cs + k);
                transpose16(r);
                uint32_t *w = (uint32_t *)dst + (size_t)(k / 2) * NR + j0;
                for (int kp = 0; kp < 16; kp++) _mm512_storeu_si512(w + (size_t)kp * NR, r[kp]);
            }
        return;
    }
    for (int kp = 0; kp < K2; kp++) {
        uint16_t *w = dst + (size_t)kp * NR * 2;
        const int k = 2 * kp;
        for (int j = 0; j < NR; j++) {
            if (j < nr) {
                const float *p = b + (long)k * rs + (long)(n0 + j) * cs;
                w[2 * j] = to_bf16(p[0]);
                w[2 * j + 1] = k + 1 < K ? to_bf16(p[rs]) : 0;
            } else {
                w[2 * j] = w[2 * j + 1] = 0;
            }
        }
    }
}

static void kernel(const uint32_t *ap, const uint16_t *bp, int K2, float *c, long ldc, int mr, int nr, float alpha,
                   float beta) {
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int kp = 0; kp < K2; kp++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + (size_t)kp * NR * 2);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + (size_t)kp * NR * 2 + 32);
#define ROW(i)                                                              \
    {                                                                       \
        __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[(size_t)(i) * K2 + kp]); \
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);                    \
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);                    \
    }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int i = 0; i < mr; i++) {
        float *row = c + (long)i * ldc;
        for (int h = 0; h < 2; h++) {
            int n = nr - 16 * h;
            if (n <= 0) break;
            __mmask16 m = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
            __m512 r = _mm512_mul_ps(acc[i][h], va);
            if (beta != 0.0f) r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, row + 16 * h), vb, r);
            _mm512_mask_storeu_ps(row + 16 * h, m, r);
        }
    }
}

/* The packing buffers persist (per calling thread) and only grow: a fresh
 * multi-megabyte allocation per call costs page faults and zeroing on every
 * matmul (11% of a training step). A thread's buffer is freed when the thread
 * ends (the key's destructor), so threads that come and go leak nothing. */
typedef struct {
    void *buf;
    size_t cap;
} pack_buffer;

static pthread_key_t pack_key;
static pthread_once_t pack_key_once = PTHREAD_ONCE_INIT;

static void pack_buffer_free(void *p) {
    pack_buffer *pb = p;
    free(pb->buf);
    free(pb);
}

static void pack_key_make(void) { pthread_key_create(&pack_key, pack_buffer_free); }

static void *pack_space(size_t bytes) {
    pthread_once(&pack_key_once, pack_key_make);
    pack_buffer *pb = pthread_getspecific(pack_key);
    if (!pb) {
        if (!(pb = calloc(1, sizeof *pb))) return NULL;
        if (pthread_setspecific(pack_key, pb)) {
            free(pb);
            return NULL;
        }
    }
    if (bytes > pb->cap) {
        free(pb->buf);
        pb->cap = (bytes + 4095) / 4096 * 4096;
        pb->buf = aligned_alloc(64, pb->cap);
        if (!pb->buf) pb->cap = 0;
    }
    return pb->buf;
}

static int bf16_gemm(int M, int N, int K, float alpha, const float *a, long a_rs, long a_cs, const float *b,
                     long b_rs, long b_cs, float beta, float *c, long ldc) {
    const int K2 = (K + 1) / 2, mp = (M + MR - 1) / MR, np = (N + NR - 1) / NR;
    const size_t a_bytes = ((size_t)mp * K2 * MR * sizeof(uint32_t) + 63) / 64 * 64;
    const size_t b_bytes = (size_t)np * K2 * NR * 2 * sizeof(uint16_t);
    unsigned char *space = pack_space(a_bytes + b_bytes);
    if (!space) return -1;
    uint32_t *ap = (uint32_t *)space;
    uint16_t *bp = (uint16_t *)(space + a_bytes);
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int p = 0; p < mp; p++)
            pack_a(ap + (size_t)p * K2 * MR, a, a_rs, a_cs, p * MR, M - p * MR < MR ? M - p * MR : MR, K, K2);
#pragma omp for schedule(static)
        for (int p = 0; p < np; p++)
            pack_b(bp + (size_t)p * K2 * NR * 2, b, b_rs, b_cs, p * NR, N - p * NR < NR ? N - p * NR : NR, K, K2);
        /* Column panels outermost: each thread keeps its B panels in L2. */
#pragma omp for schedule(static) collapse(2)
        for (int q = 0; q < np; q++)
            for (int p = 0; p < mp; p++)
                kernel(ap + (size_t)p * K2 * MR, bp + (size_t)q * K2 * NR * 2, K2, c + (long)p * MR * ldc + q * NR,
                       ldc, M - p * MR < MR ? M - p * MR : MR, N - q * NR < NR ? N - q * NR : NR, alpha, beta);
    }
    return 0;
}
#undef MR
#undef NR
#else
#define HAVE_BF16_GEMM 0
#endif
