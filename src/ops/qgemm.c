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
 * With VNNI, Q8_0 takes two blocks per 512-bit vector: one vpdpbusd per row
 * instead of two multiply-adds, and one lane reduction for both blocks, so a
 * decoding batch of a few rows, which this kernel bounds once the weights are
 * read once for all of them, costs about a third less a token. Q8_0 at the
 * VNNI level goes 16 rows at a time instead (q8_0_rows16): each block of the
 * 16 rows is transposed once, one row per lane, so the tokens' dots need no
 * reduction across lanes at all; the same bits.
 * Other types, the rows past the last group of 8, and the scalar level take
 * vec_dot per row and token. */

#define QGEMM_PF_GROUPS 1 /* row groups the prefetches run ahead: the next (2 was up to 14% slower on q4_0 and q8_0) */

/* The n rows of a group lie contiguous (n rb bytes, blocks of bs bytes each), so block b of every row
 * advances the group by n bs bytes: block b prefetches the same share of the group QGEMM_PF_GROUPS ahead.
 * Without it, a matrix read from memory ran at a third (q4_0) to a quarter (q6_K) of the single-core read
 * rate: the hardware prefetcher does not run far enough ahead of the interleaved rows. */
static inline __attribute__((always_inline)) void prefetch_ahead(const unsigned char *w, int n, size_t rb, int64_t b,
                                                                 size_t bs) {
    prefetch_bytes(w + (size_t)QGEMM_PF_GROUPS * n * rb + (size_t)b * n * bs, n * bs);
}

/* The row QGEMM_PF_GROUPS rows past row, whole: for the kernels that take one row at a time. */
static inline void prefetch_row_ahead(const unsigned char *row, size_t rb) {
    prefetch_bytes(row + QGEMM_PF_GROUPS * rb, rb);
}

#if HAVE_AVX2
/* The fp16 scales at byte offset 0 of block b of rows w, w + rb, ... w + 7 rb,
 * as floats in the lane order ord (8 row indices). */
static inline __m256 scales8(const unsigned char *w, size_t rb, size_t off, const int *ord) {
    uint16_t h[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) memcpy(&h[i], w + (size_t)ord[i] * rb + off, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h));
}

/* Lane i of each 128-bit half of the result: the sum of that half of the i-th argument. hadd(hadd(a, b),
 * hadd(c, d)) in 9 one-uop instructions instead of 3 hadds of 3 to 4 uops each, which run at one every two
 * cycles and bound the 8-row kernels. The sums are exact, so the result is the same. */
static inline __m256i sum4_halves(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    const __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
}

/* Lane i: the sum of v[i]'s 8 lanes (sum4_halves of each half of v, then the two 128-bit halves added). */
static inline __m256i sum8_lanes(const __m256i v[8]) {
    const __m256i a = sum4_halves(v[0], v[1], v[2], v[3]), c = sum4_halves(v[4], v[5], v[6], v[7]);
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, c, 0x20), _mm256_permute2x128_si256(a, c, 0x31));
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

/* Rows w .. w + 7 rb (Q4_0) against tokens x[0..nt-1], over blocks b0 .. b1 - 1. d8: the 8 rows' scales of
 * those blocks as group_scales gives them, or NULL to read them here. */
static inline __attribute__((always_inline)) void q4_0_rows8(const unsigned char *w, size_t rb, int64_t b0,
                                                             int64_t b1, const float *d8, const da_qact *x, int nt,
                                                             float *out, long ldo, int accumulate, int pf) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
    for (int64_t b = b0; b < b1; b++) {
        const size_t off = (size_t)b * sizeof(block_q4_0);
        if (pf) prefetch_ahead(w, 8, rb, b, sizeof(block_q4_0));
        __m256i lo[4], hi[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) { /* rows 2p (low half) and 2p + 1 (high half) */
            const unsigned char *ra = w + (size_t)(2 * p) * rb + off + 2;
            __m256i q = _mm256_loadu2_m128i((const __m128i *)(const void *)(ra + rb), (const __m128i *)(const void *)ra);
            lo[p] = _mm256_and_si256(q, m4); /* elements 0..15 of each row */
            hi[p] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4); /* elements 16..31 */
        }
        const __m256 d = d8 ? _mm256_loadu_ps(d8 + 8 * (b - b0)) : scales8(w, rb, off, ord_pairs);
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
            __m256i s = sum4_halves(v[0], v[1], v[2], v[3]);
            s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * x[t].sum[b])); /* the "- 8" of every weight */
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(x[t].d[b])), acc[t]);
        }
    }
    store8(out, ldo, acc, nt, 1, accumulate);
}

/* Rows w .. w + 7 rb (Q8_0) against one token x, block b: acc += each row's dot times its scale. */
static inline __attribute__((always_inline)) __m256 q8_0_block8(const unsigned char *w, size_t rb, size_t off,
                                                                __m256 d, const da_qact *x, int64_t b, __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x->q + 32 * b));
    const __m256i ax = _mm256_sign_epi8(xv, xv);
    __m256i v[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) { /* |x| . (w * sign(x)) */
        __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(w + (size_t)r * rb + off + 2));
        v[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv, xv)), ones);
    }
    const __m256i s = sum8_lanes(v); /* lane r: row r's dot */
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(x->d[b])), acc);
}

#if HAVE_VNNI
/* Lanes 0..7: the sums of v[0..7]'s low 256 bits (a block b of rows 0..7), lanes 8..15 of their high 256 bits
 * (block b + 1): one reduction for two blocks, where sum8_lanes takes about as many instructions for one. */
static inline __m512i sum8_lanes_pair(const __m512i v[8]) {
    __m512i h[2];
    for (int g = 0; g < 2; g++) { /* quarter q, lane i: the sum of that quarter of v[4g + i] */
        const __m512i *u = v + 4 * g;
        const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(u[0], u[1]), _mm512_unpackhi_epi32(u[0], u[1]));
        const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(u[2], u[3]), _mm512_unpackhi_epi32(u[2], u[3]));
        h[g] = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
    }
    /* quarters (b rows 0..3, b + 1 rows 0..3, b rows 4..7, b + 1 rows 4..7), then in block order */
    const __m512i s = _mm512_add_epi32(_mm512_shuffle_i64x2(h[0], h[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i64x2(h[0], h[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_shuffle_i64x2(s, s, _MM_SHUFFLE(3, 1, 2, 0));
}
#endif

/* The same for Q8_0. The VNNI level takes blocks two at a time, one vpdpbusd per row for both: the integer
 * dots are exact either way, and each block's multiply-add into acc keeps its order, so the results are the
 * same bits as one block at a time (and as vec_dot's order of blocks). */
static inline __attribute__((always_inline)) void q8_0_rows8(const unsigned char *w, size_t rb, int64_t b0,
                                                             int64_t b1, const float *d8, const da_qact *x, int nt,
                                                             float *out, long ldo, int accumulate, int pf) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const size_t bs = sizeof(block_q8_0);
    int64_t b = b0;
#if HAVE_VNNI
    for (; b + 2 <= b1; b += 2) {
        const size_t off = (size_t)b * bs;
        if (pf) prefetch_ahead(w, 8, rb, b, bs), prefetch_ahead(w, 8, rb, b + 1, bs);
        const __m256 d0 = d8 ? _mm256_loadu_ps(d8 + 8 * (b - b0)) : scales8(w, rb, off, ord_natural);
        const __m256 d1 = d8 ? _mm256_loadu_ps(d8 + 8 * (b + 1 - b0)) : scales8(w, rb, off + bs, ord_natural);
        __m512i wv[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            const unsigned char *p = w + (size_t)r * rb + off + 2;
            wv[r] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)p)),
                                       _mm256_loadu_si256((const __m256i *)(const void *)(p + bs)), 1);
        }
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const __m512i xv = _mm512_loadu_si512((const void *)(x[t].q + 32 * b)), zero = _mm512_setzero_si512();
            const __m512i ax = _mm512_abs_epi8(xv);
            const __mmask64 neg = _mm512_movepi8_mask(xv);
            __m512i v[8];
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) /* |x| . (w * sign(x)) */
                v[r] = _mm512_dpbusd_epi32(zero, ax, _mm512_mask_sub_epi8(wv[r], neg, zero, wv[r]));
            const __m512 f = _mm512_cvtepi32_ps(sum8_lanes_pair(v));
            const __m256 f0 = _mm512_castps512_ps256(f);
            const __m256 f1 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1));
            acc[t] = _mm256_fmadd_ps(f0, _mm256_mul_ps(d0, _mm256_set1_ps(x[t].d[b])), acc[t]);
            acc[t] = _mm256_fmadd_ps(f1, _mm256_mul_ps(d1, _mm256_set1_ps(x[t].d[b + 1])), acc[t]);
        }
    }
#endif
    for (; b < b1; b++) {
        const size_t off = (size_t)b * bs;
        if (pf) prefetch_ahead(w, 8, rb, b, bs);
        const __m256 d = d8 ? _mm256_loadu_ps(d8 + 8 * (b - b0)) : scales8(w, rb, off, ord_natural);
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) acc[t] = q8_0_block8(w, rb, off, d, &x[t], b, acc[t]);
    }
    store8(out, ldo, acc, nt, 0, accumulate);
}

/* Super-blocks a prompt's group of 8 Q4_K rows takes at a time (their scale table: 512 bytes each). */
#define Q4K_SPAN 16

/* tab[16 (b - b0) + j] lane i: d * scale_j of row ord_pairs[i] in super-block b (j < 8), and dmin * min_{j-8}
 * (j >= 8): the 8 rows' 6-bit scales and mins unpacked once for all the prompt's tokens. */
static void q4_K_group_table(const unsigned char *w, size_t rb, int64_t b0, int64_t b1, float *tab) {
    for (int64_t b = b0; b < b1; b++) {
        float *t = tab + 128 * (b - b0);
        for (int i = 0; i < 8; i++) {
            const block_q4_K *B = (const block_q4_K *)(const void *)(w + (size_t)ord_pairs[i] * rb) + b;
            uint64_t sc, mn;
            q4k_scales_mins(B->scales, &sc, &mn);
            const float d = H2F(B->d), dmin = H2F(B->dmin);
            for (int j = 0; j < 8; j++) {
                t[8 * j + i] = d * (float)(uint8_t)(sc >> 8 * j);
                t[64 + 8 * j + i] = dmin * (float)(uint8_t)(mn >> 8 * j);
            }
        }
    }
}

/* Rows w .. w + 7 rb (Q4_K) against tokens x[0..nt-1], over super-blocks b0 .. b1 - 1, with their table.
 * q4_0_rows8's scheme per 32-value sub-block: rows paired in the two halves of a vector (16 bytes each, the
 * sub-block's low or high nibbles), one pair sum per row lane; the mins enter as dmin min_j (x . 1). */
static inline __attribute__((always_inline)) void q4_K_rows8(const unsigned char *w, size_t rb, int64_t b0,
                                                             int64_t b1, const float *tab, const da_qact *x, int nt,
                                                             float *out, long ldo, int accumulate, int pf) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
    for (int64_t b = b0; b < b1; b++) {
        const size_t off = (size_t)b * sizeof(block_q4_K) + offsetof(block_q4_K, qs);
        if (pf) prefetch_ahead(w, 8, rb, b, sizeof(block_q4_K));
        const float *t = tab + 128 * (b - b0);
        for (int j = 0; j < 8; j++) { /* sub-block j: bytes 32 (j / 2) .. + 31, low nibbles for even j */
            const int shift = 4 * (j & 1);
            __m256i w0[4], w1[4]; /* values 0..15 and 16..31 of rows 2p | 2p + 1 */
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                const unsigned char *ra = w + (size_t)(2 * p) * rb + off + 32 * (j / 2);
                const __m256i q0 = _mm256_loadu2_m128i((const __m128i *)(const void *)(ra + rb),
                                                       (const __m128i *)(const void *)ra);
                const __m256i q1 = _mm256_loadu2_m128i((const __m128i *)(const void *)(ra + rb + 16),
                                                       (const __m128i *)(const void *)(ra + 16));
                w0[p] = _mm256_and_si256(_mm256_srli_epi16(q0, shift), m4);
                w1[p] = _mm256_and_si256(_mm256_srli_epi16(q1, shift), m4);
            }
            const __m256 dsc = _mm256_loadu_ps(t + 8 * j), dmn = _mm256_loadu_ps(t + 64 + 8 * j);
#pragma GCC unroll 4
            for (int k = 0; k < nt; k++) {
                const int8_t *xq = x[k].q + 256 * b + 32 * j;
                const __m256i x0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)xq));
                const __m256i x1 =
                    _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(xq + 16)));
                __m256i v[4];
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++) /* int16 sums of 4 products <= 4 * 15 * 127: no saturation */
                    v[p] = _mm256_madd_epi16(
                        _mm256_add_epi16(_mm256_maddubs_epi16(w0[p], x0), _mm256_maddubs_epi16(w1[p], x1)), ones);
                const __m256 xd = _mm256_set1_ps(x[k].d[8 * b + j]);
                acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum4_halves(v[0], v[1], v[2], v[3])),
                                         _mm256_mul_ps(dsc, xd), acc[k]);
                acc[k] = _mm256_fnmadd_ps(dmn, _mm256_mul_ps(xd, _mm256_set1_ps((float)x[k].sum[8 * b + j])), acc[k]);
            }
        }
    }
    store8(out, ldo, acc, nt, 1, accumulate);
}

/* Blocks a prompt's group of 8 rows takes at a time: their scales, as floats, fill d8 once for all its tokens. */
#define SCALE_SPAN 128

/* d8[8 (b - b0) + lane] = the scale of block b of the group's rows in the kernel's lane order. Read once per
 * group instead of once per 4 tokens: gathering 8 fp16 values from 8 rows costs about what the 4 tokens'
 * dots of the block do. */
static void group_scales(int type, const unsigned char *w, size_t rb, int64_t b0, int64_t b1, float *d8) {
    const size_t bs = type == DA_QT_Q4_0 ? sizeof(block_q4_0) : sizeof(block_q8_0);
    const int *ord = type == DA_QT_Q4_0 ? ord_pairs : ord_natural;
    for (int64_t b = b0; b < b1; b++)
        _mm256_storeu_ps(d8 + 8 * (b - b0), scales8(w, rb, (size_t)b * bs, ord));
}

/* One group of 8 rows against nt <= 4 tokens over blocks (Q4_K: super-blocks) b0 .. b1 - 1; the token count
 * is a constant in each call so that the inner loops unroll. tab: group_scales' or q4_K_group_table's table
 * (Q4_0 and Q8_0 read the scales from the rows without one). pf: prefetch the rows ahead (the first tokens of
 * a group do; the rest find them in cache). */
static void rows8(int type, const unsigned char *w, size_t rb, int64_t b0, int64_t b1, const float *tab,
                  const da_qact *x, int nt, float *out, long ldo, int accumulate, int pf) {
#define ROWS8_NT(k)                                                                                                    \
    case k:                                                                                                            \
        if (type == DA_QT_Q4_0) q4_0_rows8(w, rb, b0, b1, tab, x, k, out, ldo, accumulate, pf);                        \
        else if (type == DA_QT_Q4_K) q4_K_rows8(w, rb, b0, b1, tab, x, k, out, ldo, accumulate, pf);                   \
        else q8_0_rows8(w, rb, b0, b1, tab, x, k, out, ldo, accumulate, pf);                                           \
        break;
    switch (nt) {
        ROWS8_NT(1)
        ROWS8_NT(2)
        ROWS8_NT(3)
        ROWS8_NT(4)
    }
#undef ROWS8_NT
}

/* Rows w .. w + 7 rb against n tokens, 4 at a time. With more than 4 tokens (always, for Q4_K) the group's
 * scales go into a table once per span of blocks for all the tokens. */
static void group8(int type, const unsigned char *w, size_t rb, int64_t cols, const da_qact *x, int n, float *out,
                   long ldo, int accumulate) {
    const int q4k = type == DA_QT_Q4_K;
    const int64_t nb = cols / (q4k ? QK_K : 32), span = q4k ? Q4K_SPAN : SCALE_SPAN;
    if (n <= 4 && !q4k) {
        rows8(type, w, rb, 0, nb, NULL, x, n, out, ldo, accumulate, 1);
        return;
    }
    _Static_assert(128 * Q4K_SPAN >= 8 * SCALE_SPAN, "one table serves both spans");
    float tab[128 * Q4K_SPAN];
    for (int64_t b0 = 0; b0 < nb; b0 += span) {
        const int64_t b1 = nb - b0 < span ? nb : b0 + span;
        if (q4k) q4_K_group_table(w, rb, b0, b1, tab);
        else group_scales(type, w, rb, b0, b1, tab);
        for (int t = 0; t < n; t += 4)
            rows8(type, w, rb, b0, b1, tab, x + t, n - t < 4 ? n - t : 4, out + (size_t)t * ldo, ldo,
                  accumulate || b0 > 0, t == 0);
    }
}
#endif

#if HAVE_VNNI
/* Tokens one pass of q8_0_rows16 takes: its 8 transposed weight vectors and 8 accumulators stay in registers. */
#define Q8_ROWS16_TOKENS 8

/* v[k] lane r (k < 8, r < 16): bytes 4k .. 4k + 3 of row r's 32 quants of the block at byte off, plus 128 each
 * (w ^ 0x80: unsigned, as vpdpbusd's first factor must be). Rows r and r + 8 share a vector; three rounds of
 * in-lane unpacks and one cross-lane permute transpose the 16 x 8 dwords. */
static inline __attribute__((always_inline)) void q8_0_transpose16(const unsigned char *w, size_t rb, size_t off,
                                                                   __m512i v[8]) {
    __m512i z[8], a[8], c[8];
#pragma GCC unroll 8
    for (int p = 0; p < 8; p++) {
        const unsigned char *q = w + (size_t)p * rb + off + 2;
        z[p] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)q)),
                                  _mm256_loadu_si256((const __m256i *)(const void *)(q + 8 * rb)), 1);
    }
#pragma GCC unroll 4
    for (int p = 0; p < 8; p += 2) { /* 128-bit lane: (row p, p + 1) x dwords (0, 1) and (2, 3) */
        a[p] = _mm512_unpacklo_epi32(z[p], z[p + 1]);
        a[p + 1] = _mm512_unpackhi_epi32(z[p], z[p + 1]);
    }
#pragma GCC unroll 2
    for (int g = 0; g < 8; g += 4) { /* c[g + j], lane: rows g .. g + 3 (and + 8) at dword j (of that lane's 4) */
        c[g] = _mm512_unpacklo_epi64(a[g], a[g + 2]);
        c[g + 1] = _mm512_unpackhi_epi64(a[g], a[g + 2]);
        c[g + 2] = _mm512_unpacklo_epi64(a[g + 1], a[g + 3]);
        c[g + 3] = _mm512_unpackhi_epi64(a[g + 1], a[g + 3]);
    }
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) { /* lanes of rows 0-3, 4-7, 8-11, 12-15 */
        v[j] = _mm512_xor_si512(_mm512_permutex2var_epi64(c[j], lo, c[4 + j]), flip);
        v[j + 4] = _mm512_xor_si512(_mm512_permutex2var_epi64(c[j], hi, c[4 + j]), flip);
    }
}

/* Rows w .. w + 15 rb (Q8_0) against tokens x[0..nt-1] over all nb blocks: out[t * ldo + 0..15] (=, or +=).
 * The weights are loaded and transposed once per block for all the tokens, one row per lane, so that a token's
 * block costs 8 vpdpbusd (each 4 of its activation bytes, broadcast, against 4 bytes of 16 rows) and no
 * reduction across lanes. The unsigned weights w + 128 add 128 sum(x) to each dot, taken off through the
 * token's block sum. Per row and token the arithmetic is q8_0_rows8's: the exact integer dot of each block,
 * then acc = fma(dot, d_w * d_x, acc) in block order from 0, so the outputs are its bits. */
static inline __attribute__((always_inline)) void q8_0_rows16(const unsigned char *w, size_t rb, int64_t nb,
                                                              const da_qact *x, int nt, float *out, long ldo,
                                                              int accumulate, int pf, int packed) {
    __m512 acc[Q8_ROWS16_TOKENS];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const size_t bs = sizeof(block_q8_0);
    for (int64_t b = 0; b < nb; b++) {
        const size_t off = (size_t)b * bs;
        if (pf) prefetch_ahead(w, 16, rb, b, bs);
        __m512i v[8];
        __m512 d;
        if (packed) { /* qblock.h's r16 layout: the transposed vectors and the scales as they are */
            const unsigned char *g = w + (size_t)b * DA_Q8_0_R16_BLOCK;
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) v[k] = _mm512_loadu_si512((const void *)(g + 32 + 64 * k));
            d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)g));
        } else {
            q8_0_transpose16(w, rb, off, v);
            /* lane r: row r's scale (two 8-row gathers through memory: 15% fewer cycles at one token than a
             * 16-lane vpgatherdd) */
            d = _mm512_insertf32x8(_mm512_castps256_ps512(scales8(w, rb, off, ord_natural)),
                                   scales8(w + 8 * rb, rb, off, ord_natural), 1);
        }
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = x[t].q + 32 * b;
            __m512i s = _mm512_set1_epi32(-128 * x[t].sum[b]);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                int32_t x4;
                memcpy(&x4, xq + 4 * k, 4);
                s = _mm512_dpbusd_epi32(s, v[k], _mm512_set1_epi32(x4));
            }
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(x[t].d[b])), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        float *o = out + (size_t)t * ldo;
        _mm512_storeu_ps(o, accumulate ? _mm512_add_ps(acc[t], _mm512_loadu_ps(o)) : acc[t]);
    }
}

/* Rows w .. w + 15 rb (Q8_0) against n tokens, Q8_ROWS16_TOKENS at a time (the token count a constant in each
 * call, so that the loops unroll); the first pass prefetches the next group, the later ones find the rows in
 * cache. */
static void q8_0_group16(const unsigned char *w, size_t rb, int64_t cols, const da_qact *x, int n, float *out,
                         long ldo, int accumulate, int packed) {
    for (int t = 0; t < n; t += Q8_ROWS16_TOKENS) {
        const int nt = n - t < Q8_ROWS16_TOKENS ? n - t : Q8_ROWS16_TOKENS;
        const da_qact *xt = x + t;
        float *o = out + (size_t)t * ldo;
        switch (nt) {
#define ROWS16_NT(k)                                                                                                   \
    case k:                                                                                                            \
        if (packed) q8_0_rows16(w, rb, cols / 32, xt, k, o, ldo, accumulate, t == 0, 1);                               \
        else q8_0_rows16(w, rb, cols / 32, xt, k, o, ldo, accumulate, t == 0, 0);                                      \
        break;
            ROWS16_NT(1)
            ROWS16_NT(2)
            ROWS16_NT(3)
            ROWS16_NT(4)
            ROWS16_NT(5)
            ROWS16_NT(6)
            ROWS16_NT(7)
            ROWS16_NT(8)
#undef ROWS16_NT
        }
    }
}
#endif

#if HAVE_AVX2
/* Rows w .. w + 3 rb (Q6_K, nsb super-blocks each) against one token x:
 * out[0..3] (=, or +=). rdot_q6_K's arithmetic (the same integer dot per
 * 16 values, the same float multiply-adds in the same order, so each output
 * is bit-identical to it), with what depends only on the token shared by the
 * 4 rows: the activation block and its 32 . x term. The LM head of the
 * 4-bit files is Q6_K: decoding runs this over 32 M weights a token. */
static void q6_K_rows4(const unsigned char *w, size_t rb, int64_t nsb, const da_qact *x, float *out, int accumulate) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < nsb; b++) {
        prefetch_ahead(w, 4, rb, b, sizeof(block_q6_K));
        const __m256 xd = _mm256_loadu_ps(x->d + 8 * b);
        float dx[4][8];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const block_q6_K *B = (const block_q6_K *)(const void *)(w + (size_t)r * rb) + b;
            _mm256_storeu_ps(dx[r], _mm256_mul_ps(_mm256_set1_ps(H2F(B->d)), xd));
        }
        for (int h = 0; h < 2; h++) {
            __m256i xv[4], x32[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                xv[k] = _mm256_loadu_si256((const __m256i *)(const void *)(x->q + 32 * (8 * b + 4 * h + k)));
                x32[k] = _mm256_maddubs_epi16(k32, xv[k]);
            }
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const block_q6_K *B = (const block_q6_K *)(const void *)(w + (size_t)r * rb) + b;
                const __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(B->ql + 64 * h));
                const __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(B->ql + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(B->qh + 32 * h));
                const __m256i sc16 = q6_K_scales16(B, h);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const __m256i sv = q6_K_block_dot(q6_K_weights(l0, l1, qh, k), xv[k], x32[k], sc16, k);
                    acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dx[r][4 * h + k]), _mm256_cvtepi32_ps(sv), acc[r]);
                }
            }
        }
    }
    for (int r = 0; r < 4; r++) out[r] = accumulate ? out[r] + hsum256(acc[r]) : hsum256(acc[r]);
}

#if !HAVE_VNNI /* the VNNI level keeps its own whole-block vec_dot */
/* Rows w .. w + 3 rb (Q4_K, nsb super-blocks each) against one token x: out[0..3] (=, or +=); decoding's
 * Q4_K matmuls. Per row and super-block the 8 sub-blocks' integer dots are summed across lanes first (exact,
 * as in the prompt kernel), so a super-block costs one conversion and two multiply-adds instead of a
 * conversion, a lane broadcast and a multiply-add per sub-block; the token's 256 values are loaded once for
 * the 4 rows. */
static void q4_K_rows4(const unsigned char *w, size_t rb, int64_t nsb, const da_qact *x, float *out, int accumulate) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nsb; b++) {
        prefetch_ahead(w, 4, rb, b, sizeof(block_q4_K));
        __m256i xv[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            xv[j] = _mm256_loadu_si256((const __m256i *)(const void *)(x->q + 256 * b + 32 * j));
        const __m256 xd = _mm256_loadu_ps(x->d + 8 * b); /* lane j: sub-block j's scale, and times its sum */
        const __m256i xsum = _mm256_loadu_si256((const __m256i *)(const void *)(x->sum + 8 * b));
        const __m256 xds = _mm256_mul_ps(xd, _mm256_cvtepi32_ps(xsum));
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const block_q4_K *B = (const block_q4_K *)(const void *)(w + (size_t)r * rb) + b;
            __m256i v[8]; /* sub-block j: the low (even j) or high nibbles of bytes 32 (j / 2) .. + 31 */
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(B->qs + 32 * c));
                v[2 * c] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q, m4), xv[2 * c]), ones);
                v[2 * c + 1] = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), xv[2 * c + 1]), ones);
            }
            const __m256i dots = sum8_lanes(v); /* lane j: sub-block j's dot */
            uint64_t sc, mn;
            q4k_scales_mins(B->scales, &sc, &mn);
            const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(H2F(B->d)), u8x8_to_ps(sc));
            const __m256 mins = _mm256_mul_ps(_mm256_set1_ps(H2F(B->dmin)), u8x8_to_ps(mn));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), _mm256_mul_ps(scale, xd), acc[r]);
            acc[r] = _mm256_fnmadd_ps(mins, xds, acc[r]);
        }
    }
    for (int r = 0; r < 4; r++) out[r] = accumulate ? out[r] + hsum256(acc[r]) : hsum256(acc[r]);
}
#endif

#define QGEMM_TILED ((1u << DA_QT_Q4_0) | (1u << DA_QT_Q8_0) | (1u << DA_QT_Q4_K))
#else
#define QGEMM_TILED 0u
#endif

/* out[t * ldo + r] (=, or += when accumulate) dot of weight row r (r0 <= r < r1;
 * row r at w + r * row_bytes, type `type`, cols weights) with x[t], t < n. */
/* Rows r0 .. r1 - 1 of packed 16-row groups (DA_QT_Q8_0_R16) where the level has no kernel for them, or a
 * chunk starts inside a group: row by row, each unpacked into ggml's layout for vec_dot. */
static void qgemm_r16_rows(const unsigned char *w, size_t row_bytes, int r0, int r1, int64_t cols, const da_qact *x,
                           int n, float *out, long ldo, int accumulate) {
    if (r0 >= r1) return;
    unsigned char *row = malloc(row_bytes);
    for (int r = r0; row && r < r1; r++) {
        da_q8_0_unpack16_row(w + (size_t)(r / 16) * 16 * row_bytes, cols / QK8_0, r % 16, row);
        for (int t = 0; t < n; t++) {
            const float v = vec_dot(DA_QT_Q8_0, row, &x[t], cols);
            float *o = out + (size_t)t * ldo + r;
            *o = accumulate ? *o + v : v;
        }
    }
    if (!row) /* no memory for one row: NaN, as vec_dot's answer for a type it cannot take */
        for (int r = r0; r < r1; r++)
            for (int t = 0; t < n; t++) out[(size_t)t * ldo + r] = NAN;
    free(row);
}

static void qgemm(int type, const unsigned char *w, size_t row_bytes, int r0, int r1, int64_t cols,
                  const da_qact *x, int n, float *out, long ldo, int accumulate) {
    int r = r0;
    if (type == DA_QT_Q8_0_R16) {
#if HAVE_VNNI
        if (r % 16 == 0)
            for (; r + 16 <= r1; r += 16)
                q8_0_group16(w + (size_t)r * row_bytes, row_bytes, cols, x, n, out + r, ldo, accumulate, 1);
#endif
        qgemm_r16_rows(w, row_bytes, r, r1, cols, x, n, out, ldo, accumulate);
        return;
    }
#if HAVE_VNNI
    if (type == DA_QT_Q8_0)
        for (; r + 16 <= r1; r += 16)
            q8_0_group16(w + (size_t)r * row_bytes, row_bytes, cols, x, n, out + r, ldo, accumulate, 0);
#endif
#if HAVE_AVX2
    if (type == DA_QT_Q4_0 || type == DA_QT_Q8_0 || (type == DA_QT_Q4_K && n > 4))
        for (; r + 8 <= r1; r += 8)
            group8(type, w + (size_t)r * row_bytes, row_bytes, cols, x, n, out + r, ldo, accumulate);
#if !HAVE_VNNI
    if (type == DA_QT_Q4_K && n <= 4)
        for (; r + 4 <= r1; r += 4)
            for (int t = 0; t < n; t++)
                q4_K_rows4(w + (size_t)r * row_bytes, row_bytes, cols / QK_K, &x[t], out + (size_t)t * ldo + r,
                           accumulate);
#endif
    if (type == DA_QT_Q6_K)
        for (; r + 4 <= r1; r += 4)
            for (int t = 0; t < n; t++)
                q6_K_rows4(w + (size_t)r * row_bytes, row_bytes, cols / QK_K, &x[t], out + (size_t)t * ldo + r, accumulate);
#endif
    for (; r < r1; r++) {
        prefetch_row_ahead(w + (size_t)r * row_bytes, row_bytes);
        for (int t = 0; t < n; t++) {
            const float v = vec_dot(type, w + (size_t)r * row_bytes, &x[t], cols);
            float *o = out + (size_t)t * ldo + r;
            *o = accumulate ? *o + v : v;
        }
    }
}

/* ---------------------------------------------------------------- f16, bf16 and f32 rows, float activations */

/* Bytes per element: the "half" kernels also take F32 rows, for attention over an f32 KV cache. */
static inline size_t half_size(int type) { return type == DA_QT_F32 ? 4 : 2; }

/* element i of a row of 16-bit (or 32-bit) floats */
static inline float half_at(int type, const unsigned char *row, int64_t i) {
    if (type == DA_QT_F32) {
        float f;
        memcpy(&f, row + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, row + 2 * i, 2);
    if (type == DA_QT_F16) return H2F(h);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#if HAVE_AVX2
/* 8 weights of a 16-bit (or f32) row at p as floats */
static inline __m256 half8(int type, const unsigned char *p) {
    if (type == DA_QT_F32) return _mm256_loadu_ps((const float *)(const void *)p);
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (type == DA_QT_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Rows w .. w + 3 rb against one float row x: 4 dots, each over 8 lanes
 * (then summed across them), the x loads shared. cols % 8 == 0. */
static inline void half_rows4(int type, const unsigned char *w, size_t rb, int64_t cols, const float *x, float *dots) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const size_t es = half_size(type);
    for (int64_t i = 0; i < cols; i += 8) {
        prefetch_ahead(w, 4, rb, i / 8, 8 * es);
        const __m256 xv = _mm256_loadu_ps(x + i);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) acc[r] = _mm256_fmadd_ps(half8(type, w + (size_t)r * rb + es * i), xv, acc[r]);
    }
    for (int r = 0; r < 4; r++) dots[r] = hsum256(acc[r]);
}
#endif

/* out[t * ldo + r] (=, or += when accumulate) = row r (F16, BF16 or F32, r0 <= r < r1) . x[t * ldx ..], t < n. */
static void half_gemm(int type, const unsigned char *w, size_t row_bytes, int r0, int r1, int64_t cols,
                      const float *x, long ldx, int n, float *out, long ldo, int accumulate) {
    for (int t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * ldx;
        int r = r0;
#if HAVE_AVX2
        if (cols % 8 == 0)
            for (; r + 4 <= r1; r += 4) {
                float dots[4];
                half_rows4(type, w + (size_t)r * row_bytes, row_bytes, cols, xt, dots);
                for (int k = 0; k < 4; k++) {
                    float *o = out + (size_t)t * ldo + r + k;
                    *o = accumulate ? *o + dots[k] : dots[k];
                }
            }
#endif
        for (; r < r1; r++) {
            const unsigned char *row = w + (size_t)r * row_bytes;
            float v = 0.0f;
            for (int64_t i = 0; i < cols; i++) v += half_at(type, row, i) * xt[i];
            float *o = out + (size_t)t * ldo + r;
            *o = accumulate ? *o + v : v;
        }
    }
}

/* o[0..cols-1] += sum over t < n of p[t] * row t (F16, BF16 or F32, row t at w + t * row_bytes): the value
 * mix of attention over a KV cache. Four rows per pass over o where the level has vectors. */
static void half_axpy(int type, const unsigned char *w, size_t row_bytes, int n, const float *p, int64_t cols,
                      float *o) {
    int t = 0;
#if HAVE_AVX2
    const size_t es = half_size(type);
    if (cols % 8 == 0)
        for (; t + 4 <= n; t += 4) {
            const unsigned char *r = w + (size_t)t * row_bytes;
            const __m256 p0 = _mm256_set1_ps(p[t]), p1 = _mm256_set1_ps(p[t + 1]), p2 = _mm256_set1_ps(p[t + 2]),
                         p3 = _mm256_set1_ps(p[t + 3]);
            for (int64_t i = 0; i < cols; i += 8) {
                __m256 a = _mm256_loadu_ps(o + i);
                a = _mm256_fmadd_ps(p0, half8(type, r + es * i), a);
                a = _mm256_fmadd_ps(p1, half8(type, r + row_bytes + es * i), a);
                a = _mm256_fmadd_ps(p2, half8(type, r + 2 * row_bytes + es * i), a);
                a = _mm256_fmadd_ps(p3, half8(type, r + 3 * row_bytes + es * i), a);
                _mm256_storeu_ps(o + i, a);
            }
        }
#endif
    for (; t < n; t++) {
        const unsigned char *r = w + (size_t)t * row_bytes;
        for (int64_t i = 0; i < cols; i++) o[i] += p[t] * half_at(type, r, i);
    }
}

/* dst: n F16 values = x: (n) rounded to nearest even (the F16C instruction where the level has it). */
static void half_from_f32(const float *x, int64_t n, uint16_t *dst) {
    int64_t i = 0;
#if HAVE_AVX2
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) dst[i] = da_f32_to_fp16(x[i]);
}
