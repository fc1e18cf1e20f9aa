/* Calibration of quantized models: activation statistics of the
 * full-precision model on training windows (static int8 ranges, AWQ). */
#ifndef DA_QUANT_CALIB_H
#define DA_QUANT_CALIB_H

#include "data/text_data.h"
#include "quant/qmodel.h"

/* The static int8 ranges are absolute maxima over the calibration
 * activations; measured on 20.7M-parameter DIFF and softmax models (README,
 * "Quantized inference"), they grow with the sequences seen and settle by
 * about 16 sequences of 256 tokens (the KLD at 16 is within 10% of that at 64).
 * Below this count they depend on which sequences were drawn; quantize warns. */
#define DA_CALIB_MIN_SEQUENCES 16

/* Runs n_seq windows of T tokens drawn (seeded) from data's train split
 * through m in f32 and fills st (created here; free with da_qstats_free). */
da_status da_calibrate(const da_model *m, const da_text_data *data, int n_seq, int T, uint64_t seed, da_qstats *st);

#endif
