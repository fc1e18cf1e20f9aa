/* Calibration of quantized models: activation statistics of the
 * full-precision model on training windows (static int8 ranges, AWQ). */
#ifndef DA_QUANT_CALIB_H
#define DA_QUANT_CALIB_H

#include "data/text_data.h"
#include "quant/quantize.h"

/* The static int8 ranges are absolute maxima over the calibration
 * activations; measured on 20.7M-parameter DIFF and softmax models (docs/quantization.md,
 * "Quantized inference"), they grow with the sequences seen and settle by
 * about 16 sequences of 256 tokens (the KLD at 16 is within 10% of that at 64).
 * Below this count they depend on which sequences were drawn; quantize warns. */
#define DA_CALIB_MIN_SEQUENCES 16

/* Runs n_seq windows of T tokens drawn (seeded) from data's train split
 * through m in f32 and fills st (created here; free with da_qstats_free). */
da_status da_calibrate(const da_model *m, const da_text_data *data, int n_seq, int T, uint64_t seed, da_qstats *st);

/* AWQ: per input channel c of each site, s_c = mean|x_c|^alpha (normalised to
 * sqrt(max s * min s) = 1), alpha chosen per site from {0, 0.1, ..., 1} to minimise the
 * expected output error of the quantized matmuls,
 * sum_c E[x_c^2] / s_c^2 * |dW'[:, c]|^2 (dW' the quantization error of the
 * scaled weights; channels taken as uncorrelated). Scales W[:, c] *= s_c and the producer of x by 1/s_c
 * (the RMSNorm gain for the attention and FFN inputs, W3's rows for the FFN
 * gate, the final norm for the LM head). The attention-output site has no
 * per-channel producer for DIFF (the head norm's gain is shared by every
 * head), so it is left alone for both architectures. m is modified. */
/* alpha_out: (DA_N_SITES) the alpha chosen per site (0 where the site is left alone). */
da_status da_awq_apply(da_model *m, const da_qstats *st, int type, float *alpha_out);

#endif
