/* Block-quantized weights in ggml's on-disk layouts (so a GGUF file written
 * here holds the same bytes llama.cpp would), their quantizers and
 * dequantizers, and the int8 activation rows the integer dot products take.
 *
 *   Q8_0: 32 weights per block: fp16 d, 32 int8 q;           w = d * q
 *   Q4_0: 32 weights per block: fp16 d, 16 bytes of nibbles;  w = d * (q - 8),
 *         byte j holds element j in its low nibble and element j + 16 in its high one
 *   Q4_K: 256 weights per super-block: fp16 d, fp16 dmin, 12 bytes of 6-bit
 *         scales sc[8] and mins m[8] (packed as ggml's get_scale_min_k4 reads
 *         them), 128 bytes of nibbles; sub-block j (32 weights):
 *         w = d * sc[j] * q - dmin * m[j]; in each 64-weight chunk, byte l
 *         holds sub-block 2c's element l (low) and 2c+1's element l (high). */
#ifndef DA_QUANT_H
#define DA_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/core.h"

#define QK8_0 32
#define QK4_0 32
#define QK_K 256

typedef uint16_t da_fp16;

typedef struct {
    da_fp16 d;
    int8_t qs[QK8_0];
} block_q8_0;
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout changed (ggml: 2 + 32 bytes)");

typedef struct {
    da_fp16 d;
    uint8_t qs[QK4_0 / 2];
} block_q4_0;
_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout changed (ggml: 2 + 16 bytes)");

typedef struct {
    da_fp16 d;
    da_fp16 dmin;
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
} block_q4_K;
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout changed (ggml: 2 + 2 + 12 + 128 bytes)");

/* The other block types of llama.cpp's Q4_0 .. Q8_0 and Q4_K_M .. Q6_K
 * files, read (dequantized, and dotted with int8 rows); of them only Q6_K is
 * written (da_quantize_row_q6_K: the LM head of the 4-bit types, as llama.cpp's).
 *   Q4_1: fp16 d, fp16 m, 16 bytes of nibbles (as Q4_0);          w = d * q + m
 *   Q5_0: fp16 d, 32 high bits qh (bit i: element i), nibbles;    w = d * (q - 16)
 *   Q5_1: fp16 d, fp16 m, qh, nibbles;                            w = d * q + m
 *   Q5_K: Q4_K's d, dmin and scales, 32 bytes qh, 128 bytes of nibbles: chunk c
 *         (64 weights) takes bit 2c (low nibbles) and 2c+1 (high) of qh[l]
 *   Q6_K: 128 bytes low nibbles ql, 64 bytes of 2-bit highs qh, int8 scales[16]
 *         (one per 16 weights), fp16 d; w = d * sc * (q - 32). In each
 *         128-weight chunk, ql[l] / ql[l+32] hold elements l, l+32 (low) and
 *         l+64, l+96 (high); qh[l]'s bit pairs 0,2,4,6 go with them in order. */
typedef struct {
    da_fp16 d, m;
    uint8_t qs[16];
} block_q4_1;
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout changed (ggml: 2 + 2 + 16 bytes)");

typedef struct {
    da_fp16 d;
    uint8_t qh[4];
    uint8_t qs[16];
} block_q5_0;
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout changed (ggml: 2 + 4 + 16 bytes)");

typedef struct {
    da_fp16 d, m;
    uint8_t qh[4];
    uint8_t qs[16];
} block_q5_1;
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout changed (ggml: 2 + 2 + 4 + 16 bytes)");

typedef struct {
    da_fp16 d, dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout changed (ggml: 2 + 2 + 12 + 32 + 128 bytes)");

typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    da_fp16 d;
} block_q6_K;
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout changed (ggml: 128 + 64 + 16 + 2 bytes)");

/* Weight types, numbered as ggml_type so they go to GGUF unchanged. */
typedef enum {
    DA_QT_F32 = 0,
    DA_QT_F16 = 1,
    DA_QT_Q4_0 = 2,
    DA_QT_Q4_1 = 3,
    DA_QT_Q5_0 = 6,
    DA_QT_Q5_1 = 7,
    DA_QT_Q8_0 = 8,
    DA_QT_Q4_K = 12,
    DA_QT_Q5_K = 13,
    DA_QT_Q6_K = 14,
    DA_QT_BF16 = 30,
} da_qtype;

/* ggml's name of any ggml type number ("q2_K", "iq4_xs", ...), for messages
 * about types this project does not read; "unknown" past ggml's list. */
const char *da_ggml_type_name(int t);

/* "f32", "q8_0", ...; NULL for a type this project does not handle.
 * da_qtype_parse takes only the types diffattn writes. */
const char *da_qtype_name(int t);
int da_qtype_parse(const char *s, da_qtype *out); /* 0 ok, -1 unknown */
/* Weights per block (1 for float types) and bytes per block; 0 if unknown. */
int da_qtype_block(int t);
size_t da_qtype_block_bytes(int t);
/* Bytes of one row of n weights (n a multiple of the block), 0 if unknown or n is not. */
size_t da_qtype_row_bytes(int t, int64_t n);

float da_fp16_to_f32(da_fp16 h);
da_fp16 da_f32_to_fp16(float f); /* round to nearest even */
float da_bf16_round(float f);    /* f rounded to bf16 (nearest even), as a float */

/* x: (n) -> n / block blocks in dst; n must be a multiple of the block. */
void da_quantize_row_q8_0(block_q8_0 *dst, const float *x, int64_t n);
void da_quantize_row_q4_0(block_q4_0 *dst, const float *x, int64_t n);
void da_quantize_row_q4_K(block_q4_K *dst, const float *x, int64_t n);
void da_quantize_row_q6_K(block_q6_K *dst, const float *x, int64_t n);
/* Any supported type (float types included) -> y: (n). */
void da_dequantize_row(int type, const void *src, float *y, int64_t n);
/* Any supported type from x: (n); dst must hold da_qtype_row_bytes(type, n). */
void da_quantize_row(int type, void *dst, const float *x, int64_t n);

/* Q8_0 rows in 16-row groups (the "r16" layout the AVX-512 VNNI matmul reads without shuffles). A group of
 * 16 rows of nb blocks keeps its 16 nb 34 bytes, block by block: for block b, at b 544, the 16 rows' scales
 * (f16, row order), then 8 chunks of 64 bytes; dword r of chunk k holds quants 4k .. 4k + 3 of row r, each
 * XOR 0x80 (offset to unsigned). The integers and scales are the rows' own, so a packed row dequantizes to
 * the same floats and dots to the same integers. */
#define DA_Q8_0_R16_BLOCK (16 * 34)
/* group: 16 rows of nb Q8_0 blocks (16 nb 34 bytes), rearranged in place; tmp: as many bytes. */
void da_q8_0_pack16(unsigned char *group, int64_t nb, unsigned char *tmp);
/* Row r (0..15) of a packed group, in ggml's layout: row, nb 34 bytes. */
void da_q8_0_unpack16_row(const unsigned char *group, int64_t nb, int r, unsigned char *row);
/* Row r (0..15) of a packed group dequantized: y, nb 32 floats (da_dequantize_row's values). */
void da_q8_0_dequant16_row(const unsigned char *group, int64_t nb, int r, float *y);

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K block. */
void da_q4k_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m);

/* ---------------------------------------------------------------- int8 activations */

/* One activation row, quantized for the integer dots: n int8 values in
 * blocks of 32, each with a float scale and the int sum of its values (the
 * sums serve Q4_0's offset and Q4_K's mins). Where the scale comes from:
 *   DA_ACT_BLOCK:   per block of 32 (absmax / 127), as ggml's q8_0 / q8_K rows; near lossless
 *   DA_ACT_TOKEN:   one scale per row (dynamic per-token int8, w8a8)
 *   DA_ACT_STATIC:  one scale given by the caller (static per-tensor int8, w8a8);
 *                   values beyond it saturate at +-127 */
typedef enum { DA_ACT_BLOCK = 0, DA_ACT_TOKEN = 1, DA_ACT_STATIC = 2 } da_act_scale_mode;

typedef struct {
    int64_t n;    /* values, a multiple of 32 */
    int8_t *q;    /* (n) */
    float *d;     /* (n / 32) */
    int32_t *sum; /* (n / 32) */
} da_qact;

/* quantize_act and the integer dots vec_dot are in the op tables (ops.h). */

#endif
