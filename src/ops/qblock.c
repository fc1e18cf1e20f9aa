/* Quantizers and dequantizers of ggml's Q8_0, Q4_0 and Q4_K blocks (layouts
 * in quant.h), fp16/bf16 rounding, and the int8 activation rows. */
#include <math.h>
#include <string.h>

#include "ops/qblock.h"

const char *da_qtype_name(int t) {
    switch (t) {
    case DA_QT_F32: return "f32";
    case DA_QT_F16: return "f16";
    case DA_QT_BF16: return "bf16";
    case DA_QT_Q8_0: return "q8_0";
    case DA_QT_Q4_0: return "q4_0";
    case DA_QT_Q4_K: return "q4_k";
    case DA_QT_Q4_1: return "q4_1";
    case DA_QT_Q5_0: return "q5_0";
    case DA_QT_Q5_1: return "q5_1";
    case DA_QT_Q5_K: return "q5_k";
    case DA_QT_Q6_K: return "q6_k";
    default: return NULL;
    }
}

const char *da_ggml_type_name(int t) {
    static const char *const names[] = {
        "f32",     "f16",    "q4_0",    "q4_1",  "q4_2",  "q4_3",    "q5_0",    "q5_1",    "q8_0",
        "q8_1",    "q2_K",   "q3_K",    "q4_K",  "q5_K",  "q6_K",    "q8_K",    "iq2_xxs", "iq2_xs",
        "iq3_xxs", "iq1_s",  "iq4_nl",  "iq3_s", "iq2_s", "iq4_xs",  "i8",      "i16",     "i32",
        "i64",     "f64",    "iq1_m",   "bf16",  "q4_0_4_4", "q4_0_4_8", "q4_0_8_8", "tq1_0", "tq2_0",
        "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4", "nvfp4", "q1_0", "q2_0",
    };
    return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "unknown";
}

int da_qtype_parse(const char *s, da_qtype *out) {
    static const da_qtype all[] = {DA_QT_F32, DA_QT_F16, DA_QT_BF16, DA_QT_Q8_0, DA_QT_Q4_0, DA_QT_Q4_K};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(s, da_qtype_name(all[i]))) {
            *out = all[i];
            return 0;
        }
    if (!strcmp(s, "q4_K")) {
        *out = DA_QT_Q4_K;
        return 0;
    }
    return -1;
}

int da_qtype_block(int t) {
    switch (t) {
    case DA_QT_F32: case DA_QT_F16: case DA_QT_BF16: return 1;
    case DA_QT_Q8_0: case DA_QT_Q4_0: case DA_QT_Q4_1: case DA_QT_Q5_0: case DA_QT_Q5_1: return 32;
    case DA_QT_Q4_K: case DA_QT_Q5_K: case DA_QT_Q6_K: return QK_K;
    default: return 0;
    }
}

size_t da_qtype_block_bytes(int t) {
    switch (t) {
    case DA_QT_F32: return 4;
    case DA_QT_F16: case DA_QT_BF16: return 2;
    case DA_QT_Q8_0: return sizeof(block_q8_0);
    case DA_QT_Q4_0: return sizeof(block_q4_0);
    case DA_QT_Q4_K: return sizeof(block_q4_K);
    case DA_QT_Q4_1: return sizeof(block_q4_1);
    case DA_QT_Q5_0: return sizeof(block_q5_0);
    case DA_QT_Q5_1: return sizeof(block_q5_1);
    case DA_QT_Q5_K: return sizeof(block_q5_K);
    case DA_QT_Q6_K: return sizeof(block_q6_K);
    default: return 0;
    }
}

size_t da_qtype_row_bytes(int t, int64_t n) {
    int b = da_qtype_block(t);
    if (!b || n < 0 || n % b) return 0;
    return (size_t)(n / b) * da_qtype_block_bytes(t);
}

/* ---------------------------------------------------------------- half floats */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float da_fp16_to_f32(da_fp16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, nan */
    if (exp == 0) {                                                       /* zero, subnormal */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

da_fp16 da_f32_to_fp16(float f) {
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000;
    uint32_t au = u & 0x7fffffffu;
    if (au >= 0x7f800000u) return (da_fp16)(sign | 0x7c00 | (au > 0x7f800000u ? 0x200 : 0)); /* inf, nan */
    if (au >= 0x477ff000u) return (da_fp16)(sign | 0x7c00); /* rounds past 65504: inf */
    if (au < 0x38800000u) {                                  /* below 2^-14: subnormal half */
        /* value / 2^-24, rounded to nearest even */
        float v = bits_f32(au) * 0x1p24f;
        float r = nearbyintf(v);
        return (da_fp16)(sign | (uint32_t)r);
    }
    /* normal: drop 13 mantissa bits with round to nearest even */
    uint32_t mant_odd = (au >> 13) & 1;
    au += 0xfff + mant_odd;
    return (da_fp16)(sign | (((au >> 13) - (112u << 10)) & 0x7fff));
}

float da_bf16_round(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return f; /* nan */
    u += 0x7fff + ((u >> 16) & 1);
    return bits_f32(u & 0xffff0000u);
}

/* ---------------------------------------------------------------- Q8_0, Q4_0 */

void da_quantize_row_q8_0(block_q8_0 *dst, const float *x, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        float amax = 0.0f;
        for (int i = 0; i < QK8_0; i++) amax = fmaxf(amax, fabsf(x[i]));
        const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        dst[b].d = da_f32_to_fp16(d);
        for (int i = 0; i < QK8_0; i++) {
            float v = roundf(x[i] * id);
            dst[b].qs[i] = (int8_t)(v == v ? v : 0.0f); /* nan (a non-finite block) -> 0 */
        }
    }
}

/* As ggml: d = (the value of largest magnitude) / -8, so that value maps to
 * q = 0 exactly and the other end gets the extra level. */
void da_quantize_row_q4_0(block_q4_0 *dst, const float *x, int64_t n) {
    for (int64_t b = 0; b < n / QK4_0; b++, x += QK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < QK4_0; i++)
            if (fabsf(x[i]) > amax) {
                amax = fabsf(x[i]);
                max = x[i];
            }
        const float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
        dst[b].d = da_f32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + QK4_0 / 2] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            dst[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* ---------------------------------------------------------------- Q4_K */

void da_q4k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void q4k_pack_scale_min(uint8_t *q, int j, int ls, int lm) {
    if (j < 4) {
        q[j] = (uint8_t)ls;
        q[j + 4] = (uint8_t)lm;
    } else {
        q[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        q[j - 4] |= (uint8_t)((ls >> 4) << 6);
        q[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* Best scale s > 0 and offset mn >= 0 with x ~ s * L - mn, L in 0..15, for
 * 32 values weighted by w: a search over 21 inverse scales around
 * 15 / (max - min), each followed by the weighted least-squares (s, mn) for
 * its levels. Returns s; *mn_out the offset. */
static float fit_scale_min(const float *x, const float *w, float *mn_out) {
    float mn = x[0], mx = x[0], sw = 0, swx = 0;
    for (int i = 0; i < 32; i++) {
        mn = fminf(mn, x[i]);
        mx = fmaxf(mx, x[i]);
        sw += w[i];
        swx += w[i] * x[i];
    }
    if (mn > 0) mn = 0;
    if (mx == mn) {
        *mn_out = -mn;
        return 0.0f;
    }
    float best_s = (mx - mn) / 15.0f, best_m = mn, best_err = INFINITY;
    for (int is = 0; is <= 20; is++) {
        const float iscale = (-1.0f + 0.1f * is + 15.0f) / (mx - mn);
        float sl = 0, sl2 = 0, slx = 0;
        int L[32];
        for (int i = 0; i < 32; i++) {
            int l = (int)lrintf(iscale * (x[i] - mn));
            L[i] = l < 0 ? 0 : l > 15 ? 15 : l;
            sl += w[i] * L[i];
            sl2 += w[i] * L[i] * L[i];
            slx += w[i] * L[i] * x[i];
        }
        const float D = sw * sl2 - sl * sl;
        if (D <= 0) continue;
        float s = (sw * slx - sl * swx) / D, m = (sl2 * swx - sl * slx) / D;
        if (m > 0) { /* the offset must be <= 0 (x = s*L + m) */
            m = 0;
            s = sl2 > 0 ? slx / sl2 : 0;
        }
        float err = 0;
        for (int i = 0; i < 32; i++) {
            float e = s * L[i] + m - x[i];
            err += w[i] * e * e;
        }
        if (err < best_err) {
            best_err = err;
            best_s = s;
            best_m = m;
        }
    }
    *mn_out = -best_m;
    return best_s;
}

void da_quantize_row_q4_K(block_q4_K *dst, const float *x, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float scales[8], mins[8], w[32], max_scale = 0, max_min = 0, sum_x2 = 0;
        for (int i = 0; i < QK_K; i++) sum_x2 += x[i] * x[i];
        const float av_x = sqrtf(sum_x2 / QK_K);
        for (int j = 0; j < 8; j++) {
            for (int i = 0; i < 32; i++) w[i] = av_x + fabsf(x[32 * j + i]); /* ggml's importance */
            scales[j] = fit_scale_min(x + 32 * j, w, &mins[j]);
            max_scale = fmaxf(max_scale, scales[j]);
            max_min = fmaxf(max_min, mins[j]);
        }
        block_q4_K *B = &dst[b];
        memset(B->scales, 0, sizeof B->scales);
        const float inv_s = max_scale > 0 ? 63.0f / max_scale : 0.0f, inv_m = max_min > 0 ? 63.0f / max_min : 0.0f;
        for (int j = 0; j < 8; j++) {
            int ls = (int)lrintf(inv_s * scales[j]), lm = (int)lrintf(inv_m * mins[j]);
            ls = ls > 63 ? 63 : ls < 0 ? 0 : ls;
            lm = lm > 63 ? 63 : lm < 0 ? 0 : lm;
            q4k_pack_scale_min(B->scales, j, ls, lm);
        }
        B->d = da_f32_to_fp16(max_scale / 63.0f);
        B->dmin = da_f32_to_fp16(max_min / 63.0f);
        const float d = da_fp16_to_f32(B->d), dmin = da_fp16_to_f32(B->dmin);
        uint8_t L[QK_K];
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            da_q4k_scale_min(j, B->scales, &sc, &m);
            const float dl = d * sc, ml = dmin * m;
            for (int i = 0; i < 32; i++) {
                int l = dl ? (int)lrintf((x[32 * j + i] + ml) / dl) : 0;
                L[32 * j + i] = (uint8_t)(l < 0 ? 0 : l > 15 ? 15 : l);
            }
        }
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) B->qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

/* ---------------------------------------------------------------- Q6_K */

/* The scale s of 16 values x with levels L (0..63, stored as q + 32, q in
 * -32..31) for x ~ s * q, weighted by x^2 (the large values matter most, as
 * in ggml's make_qx_quants): the largest-magnitude value first maps to -32,
 * then 18 nearby inverse scales are tried, each with its weighted
 * least-squares s; the best fit is kept. 0 (and L all 0, as ggml stores it) for a zero group. */
static float fit_scale_q6(const float *x, uint8_t *L) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 16; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) {
        memset(L, 0, 16);
        return 0.0f;
    }
    float best_s = 0.0f, best = -1.0f;
    for (int k = 0; k <= 18; k++) {
        const float step = k == 0 ? 0.0f : 0.1f * (float)(k <= 9 ? k - 10 : k - 9); /* 0, then -0.9..-0.1, 0.1..0.9 */
        const float iscale = -(32.0f + step) / max;
        float slx = 0.0f, sl2 = 0.0f;
        int q[16];
        for (int i = 0; i < 16; i++) {
            int l = (int)lrintf(iscale * x[i]);
            q[i] = l < -32 ? -32 : l > 31 ? 31 : l;
            const float w = x[i] * x[i];
            slx += w * x[i] * (float)q[i];
            sl2 += w * (float)q[i] * (float)q[i];
        }
        /* the fit's gain slx^2 / sl2: larger is a smaller weighted squared error */
        if (sl2 > 0 && (best < 0 || slx * slx > best * sl2)) {
            best_s = slx / sl2;
            best = best_s * slx;
            for (int i = 0; i < 16; i++) L[i] = (uint8_t)(q[i] + 32);
        }
    }
    return best_s;
}

/* As ggml's Q6_K: 16 groups of 16 values, each with its least-squares
 * scale; the scales themselves in int8 against one fp16 d (the largest in
 * magnitude maps to -128), then every value requantized against its
 * group's rounded scale. */
void da_quantize_row_q6_K(block_q6_K *dst, const float *x, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        block_q6_K *B = &dst[b];
        uint8_t L[QK_K];
        float scales[16], max_scale = 0.0f, amax_scale = 0.0f;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_q6(x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > amax_scale) {
                amax_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(B, 0, sizeof *B);
        if (amax_scale < 1e-15f) continue; /* all zero: d = 0, every weight 0 */
        const float iscale = -128.0f / max_scale;
        B->d = da_f32_to_fp16(1.0f / iscale);
        for (int g = 0; g < 16; g++) {
            int l = (int)lrintf(iscale * scales[g]);
            B->scales[g] = (int8_t)(l > 127 ? 127 : l);
        }
        const float d = da_fp16_to_f32(B->d);
        for (int g = 0; g < 16; g++) {
            const float dg = d * B->scales[g];
            if (dg == 0.0f) continue;
            for (int i = 0; i < 16; i++) {
                int l = (int)lrintf(x[16 * g + i] / dg);
                L[16 * g + i] = (uint8_t)((l < -32 ? -32 : l > 31 ? 31 : l) + 32);
            }
        }
        for (int h = 0; h < 2; h++) { /* 128-weight chunks: the layout of qblock.h */
            const uint8_t *Lc = L + 128 * h;
            uint8_t *ql = B->ql + 64 * h, *qh = B->qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lc[l] & 0xF) | ((Lc[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lc[l + 32] & 0xF) | ((Lc[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lc[l] >> 4) | ((Lc[l + 32] >> 4) << 2) | ((Lc[l + 64] >> 4) << 4) |
                                  ((Lc[l + 96] >> 4) << 6));
            }
        }
    }
}

/* ---------------------------------------------------------------- any type */

void da_quantize_row(int type, void *dst, const float *x, int64_t n) {
    switch (type) {
    case DA_QT_F32: memcpy(dst, x, (size_t)n * 4); break;
    case DA_QT_F16: {
        unsigned char *p = dst;
        for (int64_t i = 0; i < n; i++) {
            da_fp16 h = da_f32_to_fp16(x[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        break;
    }
    case DA_QT_BF16: {
        unsigned char *p = dst;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(f32_bits(da_bf16_round(x[i])) >> 16);
            memcpy(p + 2 * i, &h, 2);
        }
        break;
    }
    case DA_QT_Q8_0: da_quantize_row_q8_0(dst, x, n); break;
    case DA_QT_Q4_0: da_quantize_row_q4_0(dst, x, n); break;
    case DA_QT_Q4_K: da_quantize_row_q4_K(dst, x, n); break;
    case DA_QT_Q6_K: da_quantize_row_q6_K(dst, x, n); break;
    default: break;
    }
}
