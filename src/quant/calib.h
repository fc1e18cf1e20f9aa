/* Calibration of quantized models: activation statistics of the
 * full-precision model on training windows (static int8 ranges, AWQ). */
#ifndef DA_QUANT_CALIB_H
#define DA_QUANT_CALIB_H

#include "data/text_data.h"
#include "quant/qmodel.h"

/* Fewer calibration sequences than this leave the static int8 ranges (an
 * absolute maximum) noticeably short of what the validation text reaches
 * (measured: see docs/quantization.md); quantize warns below it. */
#define DA_CALIB_MIN_SEQUENCES 32

/* Runs n_seq windows of T tokens drawn (seeded) from data's train split
 * through m in f32 and fills st (created here; free with da_qstats_free). */
da_status da_calibrate(const da_model *m, const da_text_data *data, int n_seq, int T, uint64_t seed, da_qstats *st);

#endif
