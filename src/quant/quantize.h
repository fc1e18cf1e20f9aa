/* Quantizing a model: its matmul weights rounded to block types, as an
 * engine (infer/engine.h) that runs or is saved as GGUF. */
#ifndef DA_QUANT_QUANTIZE_H
#define DA_QUANT_QUANTIZE_H

#include "diffattn/quant.h"
#include "infer/engine.h"

typedef struct {
    int type;        /* weight type of the layer matmuls: q8_0, q4_0, q4_K, f32, f16, bf16 */
    int output_type; /* of output.weight (untied); -1: q8_0 for 4-bit types, else type */
    int fallback_q8; /* 1: a matmul whose width is not a multiple of its type's block takes q8_0 (then f32,
                        for widths off q8_0's 32); 0: that is an error */
} da_quantize_types;

/* e: a new engine owning m's matmul weights quantized; norms, lambdas and the
 * embedding stay f32. A matmul whose width is not a multiple of the type's
 * block is an error naming it, unless o->fallback_q8. */
da_status da_engine_quantize(da_engine *e, const da_model *m, const da_quantize_types *o);
/* The same checks on the shapes of cfg alone, before any work is done; *n_fallback: the matmuls that fall back. */
da_status da_quantize_check(const da_config *cfg, const da_quantize_types *o, int *n_fallback);

/* q: the table and types da_engine_quantize would give a model of cfg, without tensor data (the plan of a
 * streamed conversion). */
da_status da_quantize_plan(da_engine *q, const da_config *cfg, const da_quantize_types *o);
/* The Hugging Face folder dir as a GGUF at out_path, read and written one tensor at a time (quantize_stream.c):
 * peak memory is about one layer in f32, whatever the model's size. plan: the engine of types alone, for the
 * caller's report (da_engine_release it). check_finite: refuse a non-finite weight, naming it. */
da_status da_quantize_folder(const char *dir, const char *out_path, const da_quantize_types *types, da_act_mode act,
                             int check_finite, da_engine *plan);

#endif
