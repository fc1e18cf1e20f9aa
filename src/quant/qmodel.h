/* Quantized inference: a model whose matmul weights are Q8_0, Q4_0, Q4_K
 * (or f32/f16/bf16) blocks, stored as GGUF, run with int8 activations and an
 * optional int8 KV cache. The math is da_forward's and da_decode_step's
 * (transformer.c, generate.c); only the number formats differ. */
#ifndef DA_QMODEL_H
#define DA_QMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/train.h"
#include "diffattn/generate.h"
#include "io/gguf.h"
#include "ops/qblock.h"

/* How a matmul's input row is fed to the weights:
 *   Q8:           int8 per 32-block (ggml's way for q8_0/q4_0/q4_K; near lossless), integer dots
 *   INT8_DYNAMIC: int8 with one scale per token (w8a8, dynamic per-token), integer dots
 *   INT8_STATIC:  int8 with one calibrated scale per tensor (w8a8, static), integer dots
 *   BF16:         activations rounded to bf16, weights dequantized (w8a16)
 *   F32:          fp32 activations, weights dequantized (weight-only reference) */
typedef enum {
    DA_ACTQ_Q8 = 0,
    DA_ACTQ_INT8_DYNAMIC = 1,
    DA_ACTQ_INT8_STATIC = 2,
    DA_ACTQ_BF16 = 3,
    DA_ACTQ_F32 = 4,
} da_act_mode;

const char *da_act_mode_name(da_act_mode m);
int da_act_mode_parse(const char *s, da_act_mode *out); /* 0 ok, -1 unknown */

/* Per layer, the four matmul input sites; then one for the LM head. */
enum { DA_SITE_ATTN_IN = 0, DA_SITE_ATTN_OUT = 1, DA_SITE_FFN_IN = 2, DA_SITE_FFN_GATE = 3, DA_SITES_PER_LAYER = 4 };
#define DA_N_SITES(cfg) (DA_SITES_PER_LAYER * (cfg)->n_layers + 1)

typedef struct {
    char name[96];
    int type;       /* da_qtype */
    int rows, cols; /* 1-D tensors: rows = length, cols = 0 (stored as f32) */
    size_t row_bytes;
    const unsigned char *data; /* rows * row_bytes */
} da_qtensor;

typedef struct {
    const float *attention_norm, *ffn_norm, *subln; /* (C) (C) (2d) */
    const da_qtensor *wq, *wk, *wv, *wo, *w1, *w2, *w3;
    float lambda; /* DIFF: lambda_full, from the lambda vectors */
} da_qlayer;

typedef struct {
    da_config cfg;
    int weight_type;    /* the type of the block matmuls (the file's type) */
    int n_tensors;
    da_qtensor *t;      /* in da_model's tensor order */
    da_qlayer *layers;
    const float *tok_embeddings; /* (V, C) f32 */
    const float *norm;
    const da_qtensor *output;
    float *act_absmax;  /* (DA_N_SITES) calibrated |x| ranges, or NULL */
    int calib_samples;  /* sequences behind act_absmax (and AWQ) */
    int awq;            /* 1: AWQ scales were folded in */
    da_act_mode act;    /* the file's default activation mode */
    unsigned char *blob; /* owns every tensor's bytes (quantized and f32) */
    size_t file_bytes;  /* size of the GGUF it came from (0 when built in memory) */
} da_qmodel;

typedef struct {
    int type;          /* weight type of the layer matmuls: q8_0, q4_0, q4_K, f32, f16, bf16 */
    int output_type;   /* of output.weight (untied); -1: q8_0 for 4-bit types, else type */
} da_quantize_opts;

/* Quantizes m's matmul weights; norms, lambdas and the embedding stay f32. */
da_status da_qmodel_quantize(da_qmodel *q, const da_model *m, const da_quantize_opts *o);
void da_qmodel_free(da_qmodel *q);
da_status da_qmodel_save(const da_qmodel *q, const char *path);
/* Reads a GGUF written by da_qmodel_save; every key, name, shape and type is
 * checked. Errors name the file and field. */
da_status da_qmodel_load(da_qmodel *q, const char *path);
/* A full-precision da_model with the dequantized weights of the GGUF at path
 * (for the evaluations that run da_forward). */
da_status da_model_load_gguf(da_model *m, const char *path);
size_t da_qmodel_bytes(const da_qmodel *q); /* tensor data bytes */

/* ---------------------------------------------------------------- running */

typedef struct da_qstate da_qstate;

typedef struct {
    da_act_mode act;
    int kv_int8; /* 1: the KV cache holds int8 with a scale per position, head and 32-block */
} da_qrun_opts;

/* Running state for up to max_T positions, fed at most max_n tokens a call. */
da_status da_qstate_create(da_qstate **out, const da_qmodel *q, const da_qrun_opts *o, int max_T, int max_n);
void da_qstate_free(da_qstate *s);
void da_qstate_reset(da_qstate *s);
int da_qstate_len(const da_qstate *s);

/* Calibration statistics, gathered by da_qforward when attached: per site,
 * the largest |x| and the sum over rows of |x| per input channel. */
typedef struct {
    float *absmax;   /* (n_sites) */
    double *chan;    /* per site, its width (C or F) channels, concatenated: sum |x| */
    double *chan2;   /* the same layout: sum x^2 */
    size_t *chan_off;/* (n_sites) offset into chan */
    long rows;
} da_qstats;
da_status da_qstats_create(da_qstats *st, const da_config *cfg);
void da_qstats_free(da_qstats *st);
void da_qstate_attach_stats(da_qstate *s, da_qstats *st);

/* Feeds tokens: (n) at positions len..len+n-1. logits: (n, V) written when
 * all_logits, else the last position's (V) only; owned by s. */
da_status da_qforward(const da_qmodel *q, da_qstate *s, const int *tokens, int n, int all_logits,
                      const float **logits);

/* ---------------------------------------------------------------- calibration */

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
