/* The exponentials of the kernels, the one place their polynomials live:
 * e^x and 2^x of a vector (exp512_ps, exp256_ps; exp2_512_ps, exp2_256_ps),
 * x[j] = exp(x[j] - shift) over a row, returning the row's sum, and a row's
 * maximum (the shift of a softmax). The AVX-512 or AVX2 path is the one of
 * the variant being compiled (ops_variant.c, attn_variant.c); the scalar
 * variant uses libm's expf and exp2f. Accuracy: a few ulp; e^x's inputs are
 * clamped to [-87.3, 88.4] (the float range of exp), 2^x's below at -126. */
#ifndef DA_VEXP_H
#define DA_VEXP_H

#include <math.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* The polynomials, highest degree first, evaluated by Horner's rule with one
 * fused multiply-add a step at every vector width.
 * e^x = 2^n e^r, n = round(x log2 e), r = x - n ln 2 (|r| <= ln2/2), and
 * e^r = 1 + r + r^2 p(r), p of degree 5 (Cephes' expf). */
static const float DA_EXP_POLY[6] = {1.9875691500E-4f, 1.3981999507E-3f, 8.3334519073E-3f,
                                     4.1665795894E-2f, 1.6666665459E-1f, 5.0000001201E-1f};
/* 2^x = 2^n 2^f, n = round(x), f = x - n (|f| <= 1/2), and 2^f = q(f), q of
 * degree 6 (Taylor's of 2^f, a few ulp). The flash kernels work in log2
 * units (the logits scaled by log2 e), which spares e^x's range reduction. */
static const float DA_EXP2_POLY[7] = {1.5403530393381609e-4f, 1.3333558146428443e-3f, 9.6181291076284772e-3f,
                                      5.5504108664821580e-2f, 2.4022650695910071e-1f, 6.9314718055994531e-1f,
                                      1.0f};
#define DA_POLY_DEGREE(c) ((int)(sizeof(c) / sizeof((c)[0])) - 1)

static inline float exp_shift_sum_scalar(float *x, int n, float shift) {
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        x[j] = expf(x[j] - shift);
        sum += x[j];
    }
    return sum;
}

/* The largest of x[0 .. n) (-inf when n is 0); NaNs are passed over, as by a
 * scalar `x > m ? x : m`. A maximum does not depend on the order it is taken
 * in, so every level returns the same value. */
static inline float row_max(const float *x, int n) {
    float m = -INFINITY;
    int j = 0;
#if defined(__AVX512F__)
    __m512 acc = _mm512_set1_ps(-INFINITY);
    for (; j + 16 <= n; j += 16) acc = _mm512_max_ps(_mm512_loadu_ps(x + j), acc); /* NaN in x: acc kept */
    m = _mm512_reduce_max_ps(acc);
#elif defined(__AVX2__)
    __m256 acc = _mm256_set1_ps(-INFINITY);
    for (; j + 8 <= n; j += 8) acc = _mm256_max_ps(_mm256_loadu_ps(x + j), acc);
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (int i = 0; i < 8; i++) m = lanes[i] > m ? lanes[i] : m;
#endif
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

#if defined(__AVX512F__)
/* c[0] x^d + ... + c[d] of every lane. */
static inline __m512 poly512_ps(__m512 x, const float *c, int d) {
    __m512 p = _mm512_set1_ps(c[0]);
#pragma GCC unroll 8
    for (int i = 1; i <= d; i++) p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(c[i]));
    return p;
}

static inline __m512 exp512_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.33654f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.37626f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = poly512_ps(r, DA_EXP_POLY, DA_POLY_DEGREE(DA_EXP_POLY));
    __m512 r2 = _mm512_mul_ps(r, r);
    __m512 y = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(y, n);
}

/* For the x <= 0 of a softmax in log2 units; x clamped at -126 as exp512_ps clamps. */
static inline __m512 exp2_512_ps(__m512 x) {
    const __m512 v = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
    const __m512 n = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 p = poly512_ps(_mm512_sub_ps(v, n), DA_EXP2_POLY, DA_POLY_DEGREE(DA_EXP2_POLY));
    return _mm512_scalef_ps(p, n);
}

static inline float exp_shift_sum(float *x, int n, float shift) {
    __m512 vs = _mm512_set1_ps(shift), acc = _mm512_setzero_ps();
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 e = exp512_ps(_mm512_sub_ps(_mm512_loadu_ps(x + j), vs));
        _mm512_storeu_ps(x + j, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (j < n) {
        __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
        __m512 e = exp512_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vs));
        _mm512_mask_storeu_ps(x + j, m, e);
        acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(m, e));
    }
    return _mm512_reduce_add_ps(acc);
}
#elif defined(__AVX2__) && defined(__FMA__)
static inline __m256 poly256_ps(__m256 x, const float *c, int d) {
    __m256 p = _mm256_set1_ps(c[0]);
#pragma GCC unroll 8
    for (int i = 1; i <= d; i++) p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(c[i]));
    return p;
}

/* 2^n of every lane of the integral n through the exponent field; n >= -126 after the callers' clamps. */
static inline __m256 pow2n256_ps(__m256 n) {
    const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
}

static inline __m256 exp256_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.37626f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = poly256_ps(r, DA_EXP_POLY, DA_POLY_DEGREE(DA_EXP_POLY));
    __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    return _mm256_mul_ps(y, pow2n256_ps(n));
}

static inline __m256 exp2_256_ps(__m256 x) {
    const __m256 v = _mm256_max_ps(x, _mm256_set1_ps(-126.0f));
    const __m256 n = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 p = poly256_ps(_mm256_sub_ps(v, n), DA_EXP2_POLY, DA_POLY_DEGREE(DA_EXP2_POLY));
    return _mm256_mul_ps(p, pow2n256_ps(n));
}

static inline float exp_shift_sum(float *x, int n, float shift) {
    __m256 vs = _mm256_set1_ps(shift), acc = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vs));
        _mm256_storeu_ps(x + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    float lanes[8], sum = 0.0f;
    _mm256_storeu_ps(lanes, acc);
    for (int i = 0; i < 8; i++) sum += lanes[i];
    for (; j < n; j++) {
        x[j] = expf(x[j] - shift);
        sum += x[j];
    }
    return sum;
}
#else
static inline float exp_shift_sum(float *x, int n, float shift) { return exp_shift_sum_scalar(x, n, shift); }
#endif

#endif
