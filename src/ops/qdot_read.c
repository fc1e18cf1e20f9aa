/* Integer dot products of the read-only block types (Q4_1, Q5_0, Q5_1,
 * Q5_K, Q6_K; qblock.h) with an int8 activation row, as qdot.c does for the
 * written ones: per 32 activations, unsigned weight values x int8 -> int32,
 * then one float multiply-add with the scales. Offsets (Q5_0's 16, Q6_K's
 * 32) and mins (Q4_1, Q5_1, Q5_K) come from activation sums: the row's
 * block sums, or (Q6_K, whose scales cover 16 values) sums taken in the loop.
 *   AVX2: vpmaddubsw + vpmaddwd per 32 values (Q6_K: vpmaddwd by the two
 *     16-value scales at once); the AVX-512 levels use it too.
 *   scalar: the reference (tests/test_qdot_read.c compares each level with
 *     the dequantized row's float dot). Included by ops_variant.c after qdot.c. */
#include <math.h>
#include <string.h>

#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "ops/ops.h"

#if defined(__AVX2__) && defined(__FMA__)
#define READ_AVX2 1
#else
#define READ_AVX2 0
#endif

/* fp16 scale -> float: the F16C instruction where there is one. */
#if defined(__F16C__)
#define RH2F(h) _cvtsh_ss(h)
#else
#define RH2F(h) da_fp16_to_f32(h)
#endif

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4), inlined here. */
static inline void rscale_min(int j, const uint8_t *q, float *sc, float *m) {
    if (j < 4) {
        *sc = (float)(q[j] & 63), *m = (float)(q[j + 4] & 63);
    } else {
        *sc = (float)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_1 / Q5_0 / Q5_1: the 5th bit of element i is bit i of qh. */
static inline uint32_t read_qh32(const uint8_t qh[4]) {
    uint32_t v;
    memcpy(&v, qh, 4);
    return v;
}

/* ---------------------------------------------------------------- scalar */

#if !READ_AVX2
/* The 32 values of a Q4_1/Q5_x block (with 5th bits from qh, 0 for Q4_1) dotted with xq. */
static int32_t rdot_block32(const uint8_t qs[16], uint32_t qh, const int8_t *xq) {
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        s += ((qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4)) * xq[j];
        s += ((qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) * xq[j + 16];
    }
    return s;
}

/* off: subtracted from each value (Q5_0: 16); has_min: add m * sum(x) (Q4_1, Q5_1). */
static float rdot_legacy(int type, const void *w, const da_qact *x, int64_t nb) {
    float sum = 0.0f;
    const unsigned char *p = w;
    const size_t bytes = da_qtype_block_bytes(type);
    for (int64_t b = 0; b < nb; b++, p += bytes) {
        da_fp16 d, m = 0;
        memcpy(&d, p, 2);
        uint32_t qh = 0;
        const uint8_t *qs;
        if (type == DA_QT_Q4_1) memcpy(&m, p + 2, 2), qs = p + 4;
        else if (type == DA_QT_Q5_0) qh = read_qh32(p + 2), qs = p + 6;
        else memcpy(&m, p + 2, 2), qh = read_qh32(p + 4), qs = p + 8;
        int32_t s = rdot_block32(qs, qh, x->q + 32 * b);
        if (type == DA_QT_Q5_0) s -= 16 * x->sum[b];
        sum += da_fp16_to_f32(d) * x->d[b] * (float)s + da_fp16_to_f32(m) * x->d[b] * (float)x->sum[b];
    }
    return sum;
}

static float rdot_q5_K(const block_q5_K *w, const da_qact *x, int64_t nsb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nsb; b++) {
        const float d = da_fp16_to_f32(w[b].d), dmin = da_fp16_to_f32(w[b].dmin);
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = w[b].qs + 32 * c;
            const int64_t j0 = 8 * b + 2 * c;
            const int8_t *x0 = x->q + 32 * j0, *x1 = x0 + 32;
            int32_t s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                s0 += ((q[l] & 0xF) | (((w[b].qh[l] >> (2 * c)) & 1) << 4)) * x0[l];
                s1 += ((q[l] >> 4) | (((w[b].qh[l] >> (2 * c + 1)) & 1) << 4)) * x1[l];
            }
            uint8_t sc0, m0, sc1, m1;
            da_q4k_scale_min(2 * c, w[b].scales, &sc0, &m0);
            da_q4k_scale_min(2 * c + 1, w[b].scales, &sc1, &m1);
            sum += x->d[j0] * (d * sc0 * (float)s0 - dmin * m0 * (float)x->sum[j0]);
            sum += x->d[j0 + 1] * (d * sc1 * (float)s1 - dmin * m1 * (float)x->sum[j0 + 1]);
        }
    }
    return sum;
}

static float rdot_q6_K(const block_q6_K *w, const da_qact *x, int64_t nsb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nsb; b++) {
        const float d = da_fp16_to_f32(w[b].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[b].ql + 64 * h, *qh = w[b].qh + 32 * h;
            for (int k = 0; k < 4; k++) { /* activation block 8b + 4h + k: ql half k&1, nibble k>>1, qh bits 2k */
                const int64_t j = 8 * b + 4 * h + k;
                const int8_t *xq = x->q + 32 * j;
                const int8_t *sc = w[b].scales + 8 * h + 2 * k;
                int32_t s[2] = {0, 0};
                for (int l = 0; l < 32; l++) {
                    const uint8_t lo = ql[l + 32 * (k & 1)];
                    const int q = ((k >> 1 ? lo >> 4 : lo & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
                    s[l / 16] += q * xq[l];
                }
                sum += d * x->d[j] * (float)(sc[0] * s[0] + sc[1] * s[1]);
            }
        }
    }
    return sum;
}
#endif

/* ---------------------------------------------------------------- AVX2 */

#if READ_AVX2
static inline float rhsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* unsigned bytes u . signed bytes s, 8 int32 sums of 4 products each */
static inline __m256i rdot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* 16 bytes of nibbles -> 32 bytes: the low nibbles (elements 0..15), then the high ones (16..31) */
static inline __m256i rnibbles(const uint8_t *q16) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q16);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* byte i = 0x10 when bit i of qh is set, else 0 */
static inline __m256i rbits_x16(uint32_t qh) {
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, /* bytes 0..15 */
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), pick), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, bit), _mm256_set1_epi8(0x10));
}

/* always inlined into one caller per type, so the type's branches fold away */
static inline __attribute__((always_inline)) float rdot_legacy_t(int type, const void *w, const da_qact *x,
                                                                 int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    float extra = 0.0f; /* the mins and Q5_0's offset, from the block sums */
    const unsigned char *p = w;
    const size_t bytes = type == DA_QT_Q4_1 ? sizeof(block_q4_1) : type == DA_QT_Q5_0 ? sizeof(block_q5_0)
                                                                                      : sizeof(block_q5_1);
    for (int64_t b = 0; b < nb; b++, p += bytes) {
        da_fp16 d, m = 0;
        memcpy(&d, p, 2);
        __m256i q;
        if (type == DA_QT_Q4_1) {
            memcpy(&m, p + 2, 2);
            q = rnibbles(p + 4);
        } else if (type == DA_QT_Q5_0) {
            q = _mm256_or_si256(rnibbles(p + 6), rbits_x16(read_qh32(p + 2)));
        } else {
            memcpy(&m, p + 2, 2);
            q = _mm256_or_si256(rnibbles(p + 8), rbits_x16(read_qh32(p + 4)));
        }
        const float dd = RH2F(d) * x->d[b];
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x->q + 32 * b));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(rdot_u8s8(q, xv)), acc);
        extra += (type == DA_QT_Q5_0 ? -16.0f * dd : RH2F(m) * x->d[b]) * (float)x->sum[b];
    }
    return rhsum256(acc) + extra;
}

static float rdot_legacy(int type, const void *w, const da_qact *x, int64_t nb) {
    switch (type) {
    case DA_QT_Q4_1: return rdot_legacy_t(DA_QT_Q4_1, w, x, nb);
    case DA_QT_Q5_0: return rdot_legacy_t(DA_QT_Q5_0, w, x, nb);
    default: return rdot_legacy_t(DA_QT_Q5_1, w, x, nb);
    }
}

static float rdot_q5_K(const block_q5_K *w, const da_qact *x, int64_t nsb) {
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nsb; b++) {
        const float d = RH2F(w[b].d), dmin = RH2F(w[b].dmin);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)w[b].qh);
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(w[b].qs + 32 * c));
            /* 16-bit shifts leak the next byte's bits into bits 1..7 only; the mask keeps bit 0 */
            const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
            const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(h0, 4));
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_slli_epi16(h1, 4));
            const int64_t j0 = 8 * b + 2 * c;
            const int8_t *x0 = x->q + 32 * j0;
            float sc0, m0, sc1, m1;
            rscale_min(2 * c, w[b].scales, &sc0, &m0);
            rscale_min(2 * c + 1, w[b].scales, &sc1, &m1);
            const __m256i s0 = rdot_u8s8(q0, _mm256_loadu_si256((const __m256i *)(const void *)x0));
            const __m256i s1 = rdot_u8s8(q1, _mm256_loadu_si256((const __m256i *)(const void *)(x0 + 32)));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc0 * x->d[j0]), _mm256_cvtepi32_ps(s0), acc);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * sc1 * x->d[j0 + 1]), _mm256_cvtepi32_ps(s1), acc);
            mins += dmin * (m0 * x->d[j0] * (float)x->sum[j0] + m1 * x->d[j0 + 1] * (float)x->sum[j0 + 1]);
        }
    }
    return rhsum256(acc) - mins;
}

/* Q6_K's AVX2 pieces, shared with qgemm.c's 4-row kernel (bit-identical by
 * construction). Per 32 activations (block j = 8b + 4h + k of super-block b,
 * half h): the 6-bit weights q from ql and qh, (q - 32) . x as q . x - 32 . x
 * in int16 pairs, then vpmaddwd by the two 16-value scales, taken from the
 * half's 8 scales (sign-extended to int16 once per half) by one byte shuffle;
 * one float multiply-add by d * x.d[j]. */

/* The half's 8 scales as int16, in both 128-bit lanes. */
static inline __m256i q6_K_scales16(const block_q6_K *B, int h) {
    const __m128i sc8 = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(B->scales + 8 * h)));
    return _mm256_set_m128i(sc8, sc8);
}

/* The weights (0..63) of block k of the half whose 128 low-bit bytes are l0, l1 and 32 high-bit bytes qh. */
static inline __attribute__((always_inline)) __m256i q6_K_weights(__m256i l0, __m256i l1, __m256i qh, int k) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i lo = _mm256_and_si256(k < 2 ? (k ? l1 : l0) : _mm256_srli_epi16(k == 2 ? l0 : l1, 4), m4);
    /* bits 2k, 2k + 1 of each qh byte to bits 4, 5 (16-bit shifts: the bits they carry across bytes fall
     * outside the mask) */
    const __m256i hs = k < 2 ? _mm256_slli_epi16(qh, 4 - 2 * k) : k == 2 ? qh : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hs, m30));
}

/* The int32 sums, in 8 lanes, of scale * (q - 32) * x over block k's 32 values: x32 = 32 . x in int16
 * pairs (vpmaddubsw of 32s and x). Pairs stay within int16: 63*127*2 + 32*127*2 < 32767. */
static inline __attribute__((always_inline)) __m256i q6_K_block_dot(__m256i q, __m256i xv, __m256i x32,
                                                                     __m256i sc16, int k) {
    /* block k: the low 128 bits take int16 scale 2k, the high ones 2k + 1 */
    static const int8_t pick[4][32] = {
        {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
        {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
        {8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
        {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15,
         14, 15, 14, 15}};
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, xv), x32);
    return _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc16, _mm256_loadu_si256((const __m256i *)(const void *)pick[k])));
}

/* The LM head of the 4-bit files is Q6_K, so decoding runs this (or
 * qgemm.c's 4-row form) over 32 M weights a token. */
static float rdot_q6_K(const block_q6_K *w, const da_qact *x, int64_t nsb) {
    __m256 acc = _mm256_setzero_ps();
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < nsb; b++) {
        float dx[8]; /* d * x.d of the super-block's 8 blocks, each broadcast from memory (a load, no shuffle) */
        _mm256_storeu_ps(dx, _mm256_mul_ps(_mm256_set1_ps(RH2F(w[b].d)), _mm256_loadu_ps(x->d + 8 * b)));
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(w[b].ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(w[b].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(w[b].qh + 32 * h));
            const __m256i sc16 = q6_K_scales16(&w[b], h);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x->q + 32 * (8 * b + 4 * h + k)));
                const __m256i s = q6_K_block_dot(q6_K_weights(l0, l1, qh, k), xv, _mm256_maddubs_epi16(k32, xv), sc16, k);
                acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&dx[4 * h + k]), _mm256_cvtepi32_ps(s), acc);
            }
        }
    }
    return rhsum256(acc);
}
#endif

/* The dot of one weight row of a read-only type, NAN for another type. */
static float vec_dot_read_only(int type, const void *wrow, const da_qact *x, int64_t n) {
    switch (type) {
    case DA_QT_Q4_1: case DA_QT_Q5_0: case DA_QT_Q5_1: return rdot_legacy(type, wrow, x, n / 32);
    case DA_QT_Q5_K: return rdot_q5_K(wrow, x, n / QK_K);
    case DA_QT_Q6_K: return rdot_q6_K(wrow, x, n / QK_K);
    default: return NAN;
    }
}
