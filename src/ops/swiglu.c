/* The SwiGLU gate silu(h1) * h3, between w1/w3 and w2. Both passes are
 * elementwise over (N, F) and memory-light, so the cost is the sigmoid's exp:
 * AVX-512 or AVX2 through the attention kernels' exp (a few ulp) in those
 * variants, scalar libm in the scalar one and for the tails. */
#include <math.h>
#include <omp.h>

#include "ops/vexp.h"
#include "ops/ops.h"

static inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

#if defined(__AVX512F__)
static inline __m512 sigmoid512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, exp512_ps(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}
#elif defined(__AVX2__) && defined(__FMA__)
static inline __m256 sigmoid256(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, exp256_ps(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}
#endif

/* Elements below which the forward stays on the calling thread: a decoding step's few rows cost less than
 * waking a team (and a woken OpenMP team spins against the inference engine's own threads). */
#define SWIGLU_SERIAL_MAX 32768

/* gate: (n) = silu(h1) * h3; gate may be h1 */
static void swiglu_forward(float *gate, const float *h1, const float *h3, size_t n) {
#pragma omp parallel if (n > SWIGLU_SERIAL_MAX)
    {
        /* each thread takes one contiguous, 16-aligned share */
        size_t per = (n / (size_t)omp_get_num_threads() + 15) / 16 * 16, i = per * (size_t)omp_get_thread_num();
        size_t end = i + per < n ? i + per : n;
#if defined(__AVX512F__)
        for (; i + 16 <= end; i += 16) {
            __m512 x = _mm512_loadu_ps(h1 + i);
            _mm512_storeu_ps(gate + i, _mm512_mul_ps(_mm512_mul_ps(x, sigmoid512(x)), _mm512_loadu_ps(h3 + i)));
        }
#elif defined(__AVX2__) && defined(__FMA__)
        for (; i + 8 <= end; i += 8) {
            __m256 x = _mm256_loadu_ps(h1 + i);
            _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_mul_ps(x, sigmoid256(x)), _mm256_loadu_ps(h3 + i)));
        }
#endif
        for (; i < end; i++) gate[i] = h1[i] * sigmoid(h1[i]) * h3[i];
    }
}

/* dh1, dh3: (n), overwritten. d silu(x) / dx = s (1 + x (1 - s)), s = sigmoid(x). */
static void swiglu_backward(float *dh1, float *dh3, const float *dgate, const float *h1, const float *h3,
                            size_t n) {
#pragma omp parallel
    {
        size_t per = (n / (size_t)omp_get_num_threads() + 15) / 16 * 16, i = per * (size_t)omp_get_thread_num();
        size_t end = i + per < n ? i + per : n;
#if defined(__AVX512F__)
        {
            const __m512 one = _mm512_set1_ps(1.0f);
            for (; i + 16 <= end; i += 16) {
                __m512 x = _mm512_loadu_ps(h1 + i), dg = _mm512_loadu_ps(dgate + i), s = sigmoid512(x);
                _mm512_storeu_ps(dh3 + i, _mm512_mul_ps(dg, _mm512_mul_ps(x, s)));
                __m512 dsilu = _mm512_mul_ps(s, _mm512_fmadd_ps(x, _mm512_sub_ps(one, s), one));
                _mm512_storeu_ps(dh1 + i, _mm512_mul_ps(_mm512_mul_ps(dg, _mm512_loadu_ps(h3 + i)), dsilu));
            }
        }
#elif defined(__AVX2__) && defined(__FMA__)
        {
            const __m256 one = _mm256_set1_ps(1.0f);
            for (; i + 8 <= end; i += 8) {
                __m256 x = _mm256_loadu_ps(h1 + i), dg = _mm256_loadu_ps(dgate + i), s = sigmoid256(x);
                _mm256_storeu_ps(dh3 + i, _mm256_mul_ps(dg, _mm256_mul_ps(x, s)));
                __m256 dsilu = _mm256_mul_ps(s, _mm256_fmadd_ps(x, _mm256_sub_ps(one, s), one));
                _mm256_storeu_ps(dh1 + i, _mm256_mul_ps(_mm256_mul_ps(dg, _mm256_loadu_ps(h3 + i)), dsilu));
            }
        }
#endif
        for (; i < end; i++) {
            float s = sigmoid(h1[i]);
            dh3[i] = dgate[i] * h1[i] * s;
            dh1[i] = dgate[i] * h3[i] * s * (1.0f + h1[i] * (1.0f - s));
        }
    }
}
