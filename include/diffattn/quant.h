/* diffattn quantization: a full-precision model's matmul weights rounded to ggml's block types (q8_0, q4_0, q4_k;
 * or f16, bf16, f32) and written as a GGUF v3 file that da_engine_load runs. With calibration data, AWQ scales each
 * weight's input channels by their activation size first, and static int8 activation ranges are stored
 * (docs/quantization.md). Implemented in src/quant/quantize_file.c. */
#ifndef DIFFATTN_QUANT_H
#define DIFFATTN_QUANT_H

#include "diffattn/generate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *type;        /* every layer matmul: "q8_0", "q4_0", "q4_k", "f16", "bf16" or "f32" */
    const char *output_type; /* the untied LM head (or q6_k); NULL: q6_k for the 4-bit types (q8_0 where the width
                                is off its 256 block, as llama.cpp), else type */
    const char *fallback;    /* a matmul whose width is not a multiple of type's block (q4_k: 256, others 32):
                                NULL = an error naming it; "q8_0" = q8_0 for it (f32 if even 32 does not divide) */
    const char *act;         /* the activation mode stored as the file's default (da_act_mode_name); NULL: "q8" */
    const char *calib_data;  /* text file or folder, or token shards; NULL: no calibration */
    int calib_samples;       /* calibration sequences (64) */
    int calib_seq;           /* tokens per calibration sequence; 0: the model's max_seq_len */
    int awq;                 /* with calib_data: 1 = AWQ scaling, 0 = only the int8 ranges */
    uint64_t seed;           /* calibration sampling seed */
    da_load_opts load;       /* how the model file is read */
} da_quantize_opts;

void da_quantize_opts_default(da_quantize_opts *o);

/* What quantization did, for the caller to report. */
typedef struct {
    char weight_type[8], output_type[8], act[16];
    int awq;                /* AWQ scales were folded in */
    double awq_seconds;
    int n_layers;
    float *alpha;           /* (4 n_layers + 1) AWQ's alpha per matmul input site (attn-in, attn-out, ffn-in,
                               ffn-gate per layer, then the LM head); NULL without AWQ */
    int has_ranges;         /* static int8 ranges were stored: */
    float range_max[4];     /* per site kind (attn-in, attn-out, ffn-in, ffn-gate): the largest |x| over layers */
    float range_ratio[4];   /* and the largest max/mean |x| over layers (an outlier measure) */
    float head_range;
    int few_calib_samples;  /* fewer than the sequences static ranges need to settle (16): they depend on the draw */
    int n_fallback;         /* layer matmuls that fell back to q8_0 or f32 */
    int tokenizer_unnamed;  /* the model's tokenizer has no llama.cpp pre-tokeniser name (da_tokenizer_llama_pre) */
    long file_bytes;
    size_t n_params;
} da_quantize_report;

/* Reads the safetensors model at model_path, quantizes it as o says and writes out_path (atomically). r (may be
 * NULL) is filled; free it with da_quantize_report_free. Errors name the file and the field. */
da_status da_quantize_file(const char *model_path, const char *out_path, const da_quantize_opts *o,
                           da_quantize_report *r);
void da_quantize_report_free(da_quantize_report *r);

/* m as a GGUF of float weights in llama.cpp's layout (docs/formats.md): type "f32", "f16" or "bf16" for every
 * matrix, the embedding included; norms stay f32. A softmax model is a "llama" llama.cpp runs. */
da_status da_model_export_gguf(const da_model *m, const char *out_path, const char *type);
/* The Hugging Face folder dir as da_model_export_gguf writes it, one tensor at a time (about one layer held in
 * f32), with its tokenizer.json. cfg: its configuration; tokenizer: 0 none (bytes), 1 written, 2 unnamed pre-tokeniser. */
da_status da_folder_export_gguf(const char *dir, const char *out_path, const char *type, const da_load_opts *o,
                                da_config *cfg, int *tokenizer);

#ifdef __cplusplus
}
#endif
#endif
