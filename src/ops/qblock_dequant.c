/* Dequantizers of every block type (layouts in qblock.h): the float types,
 * the ones diffattn writes (Q8_0, Q4_0, Q4_K) and the ones it only reads from
 * llama.cpp's files (Q4_1, Q5_0, Q5_1, Q5_K, Q6_K). Checked against ggml's
 * own dequantize_row_* (tests/test_qblock_ggml.c). */
#include <string.h>

#include "ops/qblock.h"

static float bf16_to_f32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
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

/* The types read but never written; -1 for an unknown type. */
static int read_only(int type, const void *src, float *y, int64_t n) {
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

void da_dequantize_row(int type, const void *src, float *y, int64_t n) {
    switch (type) {
    case DA_QT_F32: memcpy(y, src, (size_t)n * 4); break;
    case DA_QT_F16: {
        const unsigned char *p = src;
        for (int64_t i = 0; i < n; i++) {
            da_fp16 h;
            memcpy(&h, p + 2 * i, 2);
            y[i] = da_fp16_to_f32(h);
        }
        break;
    }
    case DA_QT_BF16: {
        const unsigned char *p = src;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            y[i] = bf16_to_f32(h);
        }
        break;
    }
    case DA_QT_Q8_0: {
        const block_q8_0 *B = src;
        for (int64_t b = 0; b < n / QK8_0; b++) {
            const float d = da_fp16_to_f32(B[b].d);
            for (int i = 0; i < QK8_0; i++) y[b * QK8_0 + i] = d * B[b].qs[i];
        }
        break;
    }
    case DA_QT_Q4_0: {
        const block_q4_0 *B = src;
        for (int64_t b = 0; b < n / QK4_0; b++) {
            const float d = da_fp16_to_f32(B[b].d);
            for (int j = 0; j < QK4_0 / 2; j++) {
                y[b * QK4_0 + j] = d * ((B[b].qs[j] & 0xF) - 8);
                y[b * QK4_0 + j + QK4_0 / 2] = d * ((B[b].qs[j] >> 4) - 8);
            }
        }
        break;
    }
    case DA_QT_Q4_K: {
        const block_q4_K *B = src;
        for (int64_t b = 0; b < n / QK_K; b++) {
            const float d = da_fp16_to_f32(B[b].d), dmin = da_fp16_to_f32(B[b].dmin);
            float *yb = y + b * QK_K;
            for (int c = 0; c < 4; c++) {
                uint8_t sc0, m0, sc1, m1;
                da_q4k_scale_min(2 * c, B[b].scales, &sc0, &m0);
                da_q4k_scale_min(2 * c + 1, B[b].scales, &sc1, &m1);
                const uint8_t *q = B[b].qs + 32 * c;
                for (int l = 0; l < 32; l++) {
                    yb[64 * c + l] = d * sc0 * (q[l] & 0xF) - dmin * m0;
                    yb[64 * c + 32 + l] = d * sc1 * (q[l] >> 4) - dmin * m1;
                }
            }
        }
        break;
    }
    default:
        if (read_only(type, src, y, n)) memset(y, 0, (size_t)n * sizeof *y);
    }
}

_Static_assert(DA_Q8_0_R16_BLOCK == 16 * sizeof(block_q8_0), "a packed block holds 16 rows' blocks");

void da_q8_0_pack16(unsigned char *group, int64_t nb, unsigned char *tmp) {
    const size_t rb = (size_t)nb * sizeof(block_q8_0);
    memcpy(tmp, group, 16 * rb);
    for (int64_t b = 0; b < nb; b++) {
        unsigned char *dst = group + (size_t)b * DA_Q8_0_R16_BLOCK;
        for (int r = 0; r < 16; r++) {
            const block_q8_0 *src = (const block_q8_0 *)(const void *)(tmp + (size_t)r * rb) + b;
            memcpy(dst + 2 * r, &src->d, 2);
            for (int k = 0; k < QK8_0 / 4; k++) { /* 4 quants at a time, each offset by 128 */
                uint32_t q4;
                memcpy(&q4, src->qs + 4 * k, 4);
                q4 ^= 0x80808080u;
                memcpy(dst + 32 + 64 * k + 4 * r, &q4, 4);
            }
        }
    }
}

void da_q8_0_unpack16_row(const unsigned char *group, int64_t nb, int r, unsigned char *row) {
    for (int64_t b = 0; b < nb; b++) {
        const unsigned char *src = group + (size_t)b * DA_Q8_0_R16_BLOCK;
        block_q8_0 *dst = (block_q8_0 *)(void *)row + b;
        memcpy(&dst->d, src + 2 * r, 2);
        for (int i = 0; i < QK8_0; i++) dst->qs[i] = (int8_t)(src[32 + 64 * (i / 4) + 4 * r + i % 4] ^ 0x80u);
    }
}

void da_q8_0_dequant16_row(const unsigned char *group, int64_t nb, int r, float *y) {
    for (int64_t b = 0; b < nb; b++) {
        const unsigned char *src = group + (size_t)b * DA_Q8_0_R16_BLOCK;
        da_fp16 h;
        memcpy(&h, src + 2 * r, 2);
        const float d = da_fp16_to_f32(h);
        for (int i = 0; i < QK8_0; i++)
            y[b * QK8_0 + i] = (float)(int8_t)(src[32 + 64 * (i / 4) + 4 * r + i % 4] ^ 0x80u) * d;
    }
}
