/* Vectorised exp for the attention kernels: x[j] = exp(x[j] - shift) over a
 * row, returning the row's sum, and a row's maximum (the shift of a softmax).
 * The AVX-512 or AVX2 path is the one of the variant being compiled
 * (ops_variant.c); the scalar variant uses libm's expf. Accuracy: a few
 * ulp, inputs clamped to [-87.3, 88.4] (the float range of exp). */
#ifndef DA_VEXP_H
#define DA_VEXP_H

#include <math.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

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
/* Cephes-style: exp(x) = 2^n * p(r), r = x - n ln2, |r| <= ln2/2. */
static inline __m512 exp512_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.33654f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.37626f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    __m512 y = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(y, n);
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
static inline __m256 exp256_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.37626f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n through the exponent field; n >= -126 after the clamp */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
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
