/* Rows of a typed weight matrix (qtensor.h). */
#include "infer/qtensor.h"

const unsigned char *da_qtensor_row(const da_qtensor *t, int r, unsigned char *buf) {
    if (r >= da_qtensor_packed_rows(t)) return t->data + (size_t)r * t->row_bytes;
    da_q8_0_unpack16_row(t->data + (size_t)(r / 16) * 16 * t->row_bytes, t->cols / QK8_0, r % 16, buf);
    return buf;
}

void da_qtensor_dequantize_row(const da_qtensor *t, int r, float *y) {
    if (r < da_qtensor_packed_rows(t))
        da_q8_0_dequant16_row(t->data + (size_t)(r / 16) * 16 * t->row_bytes, t->cols / QK8_0, r % 16, y);
    else da_dequantize_row(t->type, t->data + (size_t)r * t->row_bytes, y, t->cols ? t->cols : t->rows);
}
