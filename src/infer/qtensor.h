/* One typed weight matrix of an engine (f32, f16, bf16, q8_0, q4_0, q4_K, or
 * q8_0 packed in 16-row groups) and reading its rows (qtensor.c). */
#ifndef DA_INFER_QTENSOR_H
#define DA_INFER_QTENSOR_H

#include <stddef.h>

#include "ops/qblock.h"

typedef struct {
    char name[96];
    int type;       /* da_qtype */
    int rows, cols; /* 1-D tensors: rows = length, cols = 0 (stored as f32) */
    size_t row_bytes;
    const unsigned char *data; /* rows * row_bytes */
    int packed;                /* Q8_0 whose full 16-row groups are in qblock.h's r16 layout (da_engine_pack):
                                * read its rows through da_qtensor_row or da_qtensor_dequantize_row */
} da_qtensor;

/* 1 for the float types, whose matmuls take float activations. */
static inline int da_qtype_is_float(int t) { return t == DA_QT_F32 || t == DA_QT_F16 || t == DA_QT_BF16; }
/* Row r of t in its type's own (ggml) layout: t's bytes, or, for a row of a packed group, buf (row_bytes)
 * filled with it. */
const unsigned char *da_qtensor_row(const da_qtensor *t, int r, unsigned char *buf);
/* y: (t->cols) row r of t dequantized, packed or not. */
void da_qtensor_dequantize_row(const da_qtensor *t, int r, float *y);
/* Rows of t in packed 16-row groups: 0 .. da_qtensor_packed_rows(t) - 1; the rest keep ggml's layout. */
static inline int da_qtensor_packed_rows(const da_qtensor *t) { return t->packed ? t->rows / 16 * 16 : 0; }

#endif
