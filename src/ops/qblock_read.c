/* Dequantizers of the block types diffattn reads from llama.cpp's files but
 * never writes (Q4_1, Q5_0, Q5_1, Q5_K, Q6_K; layouts in qblock.h), and
 * ggml's type names for messages. Checked against ggml's own dequantize_row_*
 * (tests/test_qblock_ggml.c). */
#include <string.h>

#include "ops/qblock.h"

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

static uint32_t qh32(const uint8_t qh[4]) {
    uint32_t v;
    memcpy(&v, qh, 4);
    return v; /* little-endian, as ggml reads it */
}

/* Q4_1, Q5_0, Q5_1: the 32 integer values q (before d, m, offset) of one block. */
static void q5_values(const uint8_t qs[16], uint32_t qh, int q[32]) {
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
        q[j + 16] = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
    }
}

static void dequant_q5_K(const block_q5_K *B, float *y, int64_t nsb) {
    for (int64_t b = 0; b < nsb; b++) {
        const float d = da_fp16_to_f32(B[b].d), dmin = da_fp16_to_f32(B[b].dmin);
        float *yb = y + b * QK_K;
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            da_q4k_scale_min(2 * c, B[b].scales, &sc0, &m0);
            da_q4k_scale_min(2 * c + 1, B[b].scales, &sc1, &m1);
            const uint8_t *q = B[b].qs + 32 * c;
            for (int l = 0; l < 32; l++) {
                const int lo = (q[l] & 0xF) | (((B[b].qh[l] >> (2 * c)) & 1) << 4);
                const int hi = (q[l] >> 4) | (((B[b].qh[l] >> (2 * c + 1)) & 1) << 4);
                yb[64 * c + l] = d * sc0 * lo - dmin * m0;
                yb[64 * c + 32 + l] = d * sc1 * hi - dmin * m1;
            }
        }
    }
}

static void dequant_q6_K(const block_q6_K *B, float *y, int64_t nsb) {
    for (int64_t b = 0; b < nsb; b++) {
        const float d = da_fp16_to_f32(B[b].d);
        for (int h = 0; h < 2; h++) { /* two 128-weight chunks */
            const uint8_t *ql = B[b].ql + 64 * h, *qh = B[b].qh + 32 * h;
            const int8_t *sc = B[b].scales + 8 * h;
            float *yc = y + b * QK_K + 128 * h;
            for (int l = 0; l < 32; l++) {
                const int s = l / 16;
                yc[l] = d * sc[s] * (((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
                yc[l + 32] = d * sc[s + 2] * (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                yc[l + 64] = d * sc[s + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                yc[l + 96] = d * sc[s + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
    }
}

int da_dequantize_row_read_only(int type, const void *src, float *y, int64_t n) {
    int q[32];
    switch (type) {
    case DA_QT_Q4_1: {
        const block_q4_1 *B = src;
        for (int64_t b = 0; b < n / 32; b++) {
            const float d = da_fp16_to_f32(B[b].d), m = da_fp16_to_f32(B[b].m);
            for (int j = 0; j < 16; j++) {
                y[32 * b + j] = d * (B[b].qs[j] & 0xF) + m;
                y[32 * b + j + 16] = d * (B[b].qs[j] >> 4) + m;
            }
        }
        return 0;
    }
    case DA_QT_Q5_0: {
        const block_q5_0 *B = src;
        for (int64_t b = 0; b < n / 32; b++) {
            const float d = da_fp16_to_f32(B[b].d);
            q5_values(B[b].qs, qh32(B[b].qh), q);
            for (int j = 0; j < 32; j++) y[32 * b + j] = d * (q[j] - 16);
        }
        return 0;
    }
    case DA_QT_Q5_1: {
        const block_q5_1 *B = src;
        for (int64_t b = 0; b < n / 32; b++) {
            const float d = da_fp16_to_f32(B[b].d), m = da_fp16_to_f32(B[b].m);
            q5_values(B[b].qs, qh32(B[b].qh), q);
            for (int j = 0; j < 32; j++) y[32 * b + j] = d * q[j] + m;
        }
        return 0;
    }
    case DA_QT_Q5_K: dequant_q5_K(src, y, n / QK_K); return 0;
    case DA_QT_Q6_K: dequant_q6_K(src, y, n / QK_K); return 0;
    default: return -1;
    }
}
