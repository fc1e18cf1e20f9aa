/* Quantized weight rows times int8 activation rows, many rows and tokens at
 * a time: the matmuls of the inference engine (decoding is n = 1, a prompt
 * n > 1). Included by ops_variant.c after qdot.c, whose helpers it uses.
 *
 * AVX2 (and the AVX-512 levels, which have it): Q8_0 and Q4_0 go 8 weight
 * rows at a time, in their ggml layout (no repacking). For each 32-block the
 * weights are loaded (and, for Q4_0, unpacked) once for up to 4 tokens; the
 * 8 rows' integer dots are reduced across lanes by 6 (Q8_0) or 3 (Q4_0)
 * horizontal adds into one vector of 8 lanes, one row per lane, which one
 * multiply-add with the 8 rows' scales accumulates. Against one row at a
 * time, the activation loads are shared by 8 rows, the reductions and scale
 * multiplies by 8, and the 8 independent lanes leave no serial chain of
 * multiply-adds. The integer dot of each 32-block is exact, as in vec_dot;
 * only the order of the float sums over blocks differs.
 * Other types, the rows past the last group of 8, and the scalar level take
 * vec_dot per row and token. */

#if HAVE_AVX2
/* The fp16 scales at byte offset 0 of block b of rows w, w + rb, ... w + 7 rb,
 * as floats in the lane order ord (8 row indices). */
static inline __m256 scales8(const unsigned char *w, size_t rb, size_t off, const int *ord) {
    uint16_t h[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) memcpy(&h[i], w + (size_t)ord[i] * rb + off, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h));
}

static const int ord_natural[8] = {0, 1, 2, 3, 4, 5, 6, 7};
/* the lanes of hadd(hadd(v01, v23), hadd(v45, v67)) when v_ab holds row a in
 * its low half and row b in its high half */
static const int ord_pairs[8] = {0, 2, 4, 6, 1, 3, 5, 7};

/* acc[t] lanes (in ord_pairs order, or natural) -> out[t * ldo + 0..7] */
static inline void store8(float *out, long ldo, const __m256 *acc, int nt, int pairs, int accumulate) {
    const __m256i unpair = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int t = 0; t < nt; t++) {
        __m256 v = pairs ? _mm256_permutevar8x32_ps(acc[t], unpair) : acc[t];
        float *o = out + (size_t)t * ldo;
        if (accumulate) v = _mm256_add_ps(v, _mm256_loadu_ps(o));
        _mm256_storeu_ps(o, v);
    }
}

/* Rows w .. w + 7 rb (Q4_0, nb blocks each) against tokens x[0..nt-1]. */
static inline __attribute__((always_inline)) void q4_0_rows8(const unsigned char *w, size_t rb, int64_t nb,
                                                             const da_qact *x, int nt, float *out, long ldo,
                                                             int accumulate) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nb; b++) {
        const size_t off = (size_t)b * sizeof(block_q4_0);
        __m256i lo[4], hi[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) { /* rows 2p (low half) and 2p + 1 (high half) */
            const unsigned char *ra = w + (size_t)(2 * p) * rb + off + 2;
            __m256i q = _mm256_loadu2_m128i((const __m128i *)(const void *)(ra + rb), (const __m128i *)(const void *)ra);
            lo[p] = _mm256_and_si256(q, m4); /* elements 0..15 of each row */
            hi[p] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4); /* elements 16..31 */
        }
        const __m256 d = scales8(w, rb, off, ord_pairs);
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = x[t].q + 32 * b;
            const __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)xq));
            const __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(xq + 16)));
            __m256i v[4];
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) /* int16 sums of 4 products <= 4 * 15 * 127: no saturation */
                v[p] = _mm256_madd_epi16(
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo[p], xlo), _mm256_maddubs_epi16(hi[p], xhi)), ones);
            __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
            s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * x[t].sum[b])); /* the "- 8" of every weight */
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(x[t].d[b])), acc[t]);
        }
    }
    store8(out, ldo, acc, nt, 1, accumulate);
}

/* Rows w .. w + 7 rb (Q8_0, nb blocks each) against tokens x[0..nt-1]. */
static inline __attribute__((always_inline)) void q8_0_rows8(const unsigned char *w, size_t rb, int64_t nb,
                                                             const da_qact *x, int nt, float *out, long ldo,
                                                             int accumulate) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nb; b++) {
        const size_t off = (size_t)b * sizeof(block_q8_0);
        const __m256 d = scales8(w, rb, off, ord_natural);
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x[t].q + 32 * b));
            const __m256i ax = _mm256_sign_epi8(xv, xv);
            __m256i v[8];
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) { /* |x| . (w * sign(x)) */
                __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(w + (size_t)r * rb + off + 2));
                v[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv, xv)), ones);
            }
            /* [r0 r1 r2 r3 | r0 r1 r2 r3] partial halves, then the same for r4..r7 */
            __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
            __m256i c = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
            __m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(a, c, 0x20), _mm256_permute2x128_si256(a, c, 0x31));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(x[t].d[b])), acc[t]);
        }
    }
    store8(out, ldo, acc, nt, 0, accumulate);
}

/* One group of 8 rows against nt <= 4 tokens; the token count is a constant
 * in each call so that the inner loops unroll. */
static void rows8(int type, const unsigned char *w, size_t rb, int64_t cols, const da_qact *x, int nt, float *out,
                  long ldo, int accumulate) {
#define ROWS8_NT(k)                                                                                                    \
    case k:                                                                                                            \
        if (type == DA_QT_Q4_0) q4_0_rows8(w, rb, cols / 32, x, k, out, ldo, accumulate);                              \
        else q8_0_rows8(w, rb, cols / 32, x, k, out, ldo, accumulate);                                                 \
        break;
    switch (nt) {
        ROWS8_NT(1)
        ROWS8_NT(2)
        ROWS8_NT(3)
        ROWS8_NT(4)
    }
#undef ROWS8_NT
}
#endif

/* out[t * ldo + r] (=, or += when accumulate) dot of weight row r (r0 <= r < r1;
 * row r at w + r * row_bytes, type `type`, cols weights) with x[t], t < n. */
static void qgemm(int type, const unsigned char *w, size_t row_bytes, int r0, int r1, int64_t cols,
                  const da_qact *x, int n, float *out, long ldo, int accumulate) {
    int r = r0;
#if HAVE_AVX2
    if (type == DA_QT_Q4_0 || type == DA_QT_Q8_0)
        for (; r + 8 <= r1; r += 8)
            for (int t = 0; t < n; t += 4)
                rows8(type, w + (size_t)r * row_bytes, row_bytes, cols, x + t, n - t < 4 ? n - t : 4,
                      out + (size_t)t * ldo + r, ldo, accumulate);
#endif
    for (; r < r1; r++)
        for (int t = 0; t < n; t++) {
            const float v = vec_dot(type, w + (size_t)r * row_bytes, &x[t], cols);
            float *o = out + (size_t)t * ldo + r;
            *o = accumulate ? *o + v : v;
        }
}
