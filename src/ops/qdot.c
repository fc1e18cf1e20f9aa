/* Integer dot products of a quantized weight row with an int8 activation row
 * (quant.h): per 32-block int8 x int8 -> int32 (or nibble x int8 -> int32),
 * then one float multiply-add with the two scales.
 *
 *   AVX-512 VNNI: vpdpbusd on two blocks (64 bytes) at a time. It takes an
 *     unsigned and a signed operand: nibbles are unsigned already; for Q8_0
 *     the activation's |x| is the unsigned side and the weight takes x's sign.
 *   AVX2: the same with vpmaddubsw + vpmaddwd, one block at a time.
 *   scalar: the reference.
 * Each variant (ops_variant.c) takes the best path its level compiles. 
 * Q4_0's "- 8" and Q4_K's mins never enter the integer loop: they are
 * d * 8 * sum(x) and dmin * m * sum(x) per block, from the row's block sums.
 * With unit scales every path returns the exact integer dot (tested). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "ops/ops.h"

/* fp16 scale -> float: the F16C instruction where there is one. */
#if defined(__F16C__)
#define H2F(h) _cvtsh_ss(h)
#else
#define H2F(h) da_fp16_to_f32(h)
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX2__) && defined(__FMA__)
#define HAVE_VNNI 1
#else
#define HAVE_VNNI 0
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define HAVE_AVX2 1
#else
#define HAVE_AVX2 0
#endif

/* ---------------------------------------------------------------- scalar */

#if !HAVE_AVX2
static int32_t idot32(const int8_t *a, const int8_t *b) {
    int32_t s = 0;
    for (int i = 0; i < 32; i++) s += (int32_t)a[i] * b[i];
    return s;
}

static float dot_q8_0_scalar(const block_q8_0 *w, const da_qact *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) sum += da_fp16_to_f32(w[b].d) * x->d[b] * (float)idot32(w[b].qs, x->q + 32 * b);
    return sum;
}

static float dot_q4_0_scalar(const block_q4_0 *w, const da_qact *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *xq = x->q + 32 * b;
        int32_t s = 0;
        for (int j = 0; j < 16; j++) s += (w[b].qs[j] & 0xF) * xq[j] + (w[b].qs[j] >> 4) * xq[j + 16];
        sum += da_fp16_to_f32(w[b].d) * x->d[b] * (float)(s - 8 * x->sum[b]);
    }
    return sum;
}

static float dot_q4_K_scalar(const block_q4_K *w, const da_qact *x, int64_t nsb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nsb; b++) {
        const float d = da_fp16_to_f32(w[b].d), dmin = da_fp16_to_f32(w[b].dmin);
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = w[b].qs + 32 * c;
            const int64_t j0 = 8 * b + 2 * c; /* activation block of the low nibbles */
            const int8_t *x0 = x->q + 32 * j0, *x1 = x0 + 32;
            int32_t s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                s0 += (q[l] & 0xF) * x0[l];
                s1 += (q[l] >> 4) * x1[l];
            }
            uint8_t sc0, m0, sc1, m1;
            da_q4k_scale_min(2 * c, w[b].scales, &sc0, &m0);
            da_q4k_scale_min(2 * c + 1, w[b].scales, &sc1, &m1);
            sum += d * x->d[j0] * (float)(sc0 * s0) + d * x->d[j0 + 1] * (float)(sc1 * s1);
            sum -= dmin * (x->d[j0] * (float)(m0 * x->sum[j0]) + x->d[j0 + 1] * (float)(m1 * x->sum[j0 + 1]));
        }
    }
    return sum;
}
#endif

/* ---------------------------------------------------------------- AVX2 */

#if HAVE_AVX2
static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The 8 six-bit scales and the 8 mins of a Q4_K block as two 64-bit words
 * (byte j = sub-block j), computed in registers: bytes written one by one
 * and read back as a vector would stall on store forwarding. With a, b, c
 * the little-endian words of bytes 0..3, 4..7, 8..11: scales 0..3 are a's
 * low 6 bits, mins 0..3 b's; scales 4..7 are c's low nibbles with a's top 2
 * bits above them, mins 4..7 c's high nibbles with b's top 2 bits. */
static inline void q4k_scales_mins(const uint8_t *q, uint64_t *sc, uint64_t *mn) {
    uint32_t a, b, c;
    memcpy(&a, q, 4);
    memcpy(&b, q + 4, 4);
    memcpy(&c, q + 8, 4);
    const uint32_t low6 = 0x3f3f3f3fu, nib = 0x0f0f0f0fu, top2 = 0x03030303u;
    *sc = (uint64_t)(a & low6) | (uint64_t)((c & nib) | (((a >> 6) & top2) << 4)) << 32;
    *mn = (uint64_t)(b & low6) | (uint64_t)(((c >> 4) & nib) | (((b >> 6) & top2) << 4)) << 32;
}

/* 8 bytes of a word -> 8 floats */
static inline __m256 u8x8_to_ps(uint64_t v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)v)));
}

/* 8 int32 partial sums of u8 a . s8 b over 32 bytes (no saturation: |a| <= 127 or a <= 15). */
static inline __m256i dot_u8s8_256(__m256i a, __m256i b) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
}

static inline __m256i nibbles_256(const uint8_t *q16) { /* 16 bytes -> low 16 nibbles, then high 16 */
    __m128i q = _mm_loadu_si128((const __m128i *)q16), m = _mm_set1_epi8(0xF);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

static float dot_q8_0_avx2(const block_q8_0 *w, const da_qact *x, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i wv = _mm256_loadu_si256((const __m256i *)w[b].qs);
        __m256i xv = _mm256_loadu_si256((const __m256i *)(x->q + 32 * b));
        __m256i p = dot_u8s8_256(_mm256_sign_epi8(xv, xv), _mm256_sign_epi8(wv, xv));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(H2F(w[b].d) * x->d[b]), acc);
    }
    return hsum256(acc);
}

static float dot_q4_0_avx2(const block_q4_0 *w, const da_qact *x, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    float corr = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const float s = H2F(w[b].d) * x->d[b];
        __m256i p = dot_u8s8_256(nibbles_256(w[b].qs), _mm256_loadu_si256((const __m256i *)(x->q + 32 * b)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(s), acc);
        corr += s * (float)(8 * x->sum[b]);
    }
    return hsum256(acc) - corr;
}

#if !HAVE_VNNI /* the VNNI path has its own whole-block loop */
static float dot_q4_K_avx2(const block_q4_K *w, const da_qact *x, int64_t nsb) {
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int64_t b = 0; b < nsb; b++) {
        uint64_t sc, mn;
        q4k_scales_mins(w[b].scales, &sc, &mn);
        const __m256 xd = _mm256_loadu_ps(x->d + 8 * b);
        const __m256 xsum = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(const void *)(x->sum + 8 * b)));
        const __m256 scale = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(H2F(w[b].d)), u8x8_to_ps(sc)), xd);
        acc_min = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(H2F(w[b].dmin)), u8x8_to_ps(mn)),
                                  _mm256_mul_ps(xd, xsum), acc_min);
        const int8_t *xq = x->q + 256 * b;
        for (int c = 0; c < 4; c++) { /* sub-blocks 2c and 2c + 1: the low and high nibbles of 32 bytes */
            __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(w[b].qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            __m256i p0 = dot_u8s8_256(lo, _mm256_loadu_si256((const __m256i *)(const void *)(xq + 64 * c)));
            __m256i p1 = dot_u8s8_256(hi, _mm256_loadu_si256((const __m256i *)(const void *)(xq + 64 * c + 32)));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_permutevar8x32_ps(scale, _mm256_set1_epi32(2 * c)),
                                  acc);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1),
                                  _mm256_permutevar8x32_ps(scale, _mm256_set1_epi32(2 * c + 1)), acc);
        }
    }
    return hsum256(acc) - hsum256(acc_min);
}
#endif
#endif

/* ---------------------------------------------------------------- AVX-512 VNNI */

#if HAVE_VNNI
/* Two 32-lane halves with their own scale: lanes 0..7 get s0, 8..15 s1. */
static inline __m512 two_scales(float s0, float s1) {
    return _mm512_mask_blend_ps((__mmask16)0xFF00, _mm512_set1_ps(s0), _mm512_set1_ps(s1));
}

static inline __m512i nibbles_512(const uint8_t *qa, const uint8_t *qb) { /* two Q4_0 blocks' 32 values each */
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(nibbles_256(qa)), nibbles_256(qb), 1);
    return v;
}

static float dot_q8_0_vnni(const block_q8_0 *w, const da_qact *x, int64_t nb) {
    __m512 acc = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)w[b].qs)),
                                        _mm256_loadu_si256((const __m256i *)w[b + 1].qs), 1);
        __m512i xv = _mm512_loadu_si512((const void *)(x->q + 32 * b));
        __m512i ws = _mm512_mask_sub_epi8(wv, _mm512_movepi8_mask(xv), zero, wv); /* w * sign(x) */
        __m512i p = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(xv), ws);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p),
                              two_scales(H2F(w[b].d) * x->d[b], H2F(w[b + 1].d) * x->d[b + 1]),
                              acc);
    }
    float sum = _mm512_reduce_add_ps(acc);
    if (b < nb) {
        da_qact tail = {32, x->q + 32 * b, x->d + b, x->sum + b};
        sum += dot_q8_0_avx2(w + b, &tail, 1);
    }
    return sum;
}

static float dot_q4_0_vnni(const block_q4_0 *w, const da_qact *x, int64_t nb) {
    __m512 acc = _mm512_setzero_ps();
    float corr = 0.0f;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const float s0 = H2F(w[b].d) * x->d[b], s1 = H2F(w[b + 1].d) * x->d[b + 1];
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles_512(w[b].qs, w[b + 1].qs),
                                        _mm512_loadu_si512((const void *)(x->q + 32 * b)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), two_scales(s0, s1), acc);
        corr += s0 * (float)(8 * x->sum[b]) + s1 * (float)(8 * x->sum[b + 1]);
    }
    float sum = _mm512_reduce_add_ps(acc) - corr;
    if (b < nb) {
        da_qact tail = {32, x->q + 32 * b, x->d + b, x->sum + b};
        sum += dot_q4_0_avx2(w + b, &tail, 1);
    }
    return sum;
}

/* Per super-block, the 8 sub-block scales (d * sc_j * x.d_j) and the min
 * correction (dmin * m_j * x.d_j * x.sum_j) are formed 8 at a time; each
 * pair of sub-blocks then takes its two scales by one lane permute. Decoding
 * a 4-bit model is bound by this loop, not by memory, so every scalar
 * operation per 64 weights counts. */
static float dot_q4_K_vnni(const block_q4_K *w, const da_qact *x, int64_t nsb) {
    __m512 acc = _mm512_setzero_ps();
    __m256 acc_min = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0xF);
    /* pair c: lanes 0..7 take scale 2c, lanes 8..15 scale 2c + 1 */
    const __m512i pair[4] = {_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                             _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),
                             _mm512_set_epi32(5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 4),
                             _mm512_set_epi32(7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6)};
    for (int64_t b = 0; b < nsb; b++) {
        uint64_t sc, mn;
        q4k_scales_mins(w[b].scales, &sc, &mn);
        const __m256 xd = _mm256_loadu_ps(x->d + 8 * b);
        const __m256 xsum = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(const void *)(x->sum + 8 * b)));
        const __m256 scale = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(H2F(w[b].d)), u8x8_to_ps(sc)), xd);
        acc_min = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(H2F(w[b].dmin)), u8x8_to_ps(mn)),
                                  _mm256_mul_ps(xd, xsum), acc_min);
        const __m512 scale16 = _mm512_castps256_ps512(scale);
        const int8_t *xq = x->q + 256 * b;
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(w[b].qs + 32 * c));
            __m512i nib = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q, m4)),
                                             _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), 1);
            __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nib, _mm512_loadu_si512((const void *)(xq + 64 * c)));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(pair[c], scale16), acc);
        }
    }
    return _mm512_reduce_add_ps(acc) - hsum256(acc_min);
}
#endif

#if HAVE_VNNI
#define DOT(type) dot_##type##_vnni
#elif HAVE_AVX2
#define DOT(type) dot_##type##_avx2
#else
#define DOT(type) dot_##type##_scalar
#endif

static float vec_dot(int type, const void *wrow, const da_qact *x, int64_t n) {
    switch (type) {
    case DA_QT_Q8_0: return DOT(q8_0)(wrow, x, n / QK8_0);
    case DA_QT_Q4_0: return DOT(q4_0)(wrow, x, n / QK4_0);
    case DA_QT_Q4_K: return DOT(q4_K)(wrow, x, n / QK_K);
    default: return vec_dot_read_only(type, wrow, x, n); /* qdot_read.c */
    }
}
#undef DOT

/* ---------------------------------------------------------------- int8 activation rows */

#if HAVE_AVX2
/* max |x[i]| over 32 values, NaNs skipped (as fmaxf(acc, NaN) = acc) */
static inline float absmax32(const float *x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 32; i += 8) /* maxps returns its second operand when either is NaN */
        m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* 32 values times id, rounded as roundf (half away from zero: trunc, then
 * one step out where the dropped fraction is >= 0.5, exact below 2^23),
 * NaN -> 0, clamped to +-127, into q; returns their sum. */
static inline int32_t round_block32(const float *x, float id, int8_t *q) {
    const __m256 vid = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f), sign = _mm256_set1_ps(-0.0f);
    const __m256 lim = _mm256_set1_ps(127.0f), one = _mm256_set1_ps(1.0f);
    __m256i v[4];
    for (int k = 0; k < 4; k++) {
        const __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid);
        __m256 r = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(t, r));
        const __m256 step = _mm256_or_ps(_mm256_and_ps(t, sign), one); /* +-1 with t's sign */
        r = _mm256_add_ps(r, _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), step));
        r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q)); /* NaN -> 0 */
        r = _mm256_max_ps(_mm256_min_ps(r, lim), _mm256_sub_ps(_mm256_setzero_ps(), lim));
        v[k] = _mm256_cvtps_epi32(r);
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
    /* int32 x 32 -> int8 x 32: the packs interleave 128-bit lanes; one permute restores the order */
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    _mm256_storeu_si256((__m256i *)(void *)q, _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return _mm_cvtsi128_si32(h);
}
#endif

static void quantize_act(da_qact *a, const float *x, int64_t n, da_act_scale_mode mode, float static_absmax) {
    const int64_t nb = n / 32;
    a->n = n;
    float row_d = 0.0f;
    if (mode == DA_ACT_TOKEN) {
        float amax = 0.0f;
        for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
        row_d = amax / 127.0f;
    } else if (mode == DA_ACT_STATIC) {
        row_d = static_absmax / 127.0f;
    }
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        float d = row_d;
#if HAVE_AVX2
        if (mode == DA_ACT_BLOCK) d = absmax32(xb) / 127.0f;
        a->sum[b] = round_block32(xb, d > 0 ? 1.0f / d : 0.0f, a->q + 32 * b);
#else
        if (mode == DA_ACT_BLOCK) {
            float amax = 0.0f;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(xb[i]));
            d = amax / 127.0f;
        }
        const float id = d > 0 ? 1.0f / d : 0.0f;
        int32_t s = 0;
        for (int i = 0; i < 32; i++) {
            float v = roundf(xb[i] * id);
            if (!(v == v)) v = 0.0f; /* nan */
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            a->q[32 * b + i] = (int8_t)v;
            s += (int32_t)v;
        }
        a->sum[b] = s;
#endif
        a->d[b] = d;
    }
}
