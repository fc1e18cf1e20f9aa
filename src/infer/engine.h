/* The inference engine's internals: a model as typed tensors (qtensor.h), and
 * the forward pass over a KV cache (engine_forward.c; a session's state:
 * session.h). The math is da_forward's (model/transformer.c); only the number
 * formats differ. Quantization
 * (quant/) builds engines; GGUF files (engine_gguf.c) store them. */
#ifndef DA_INFER_ENGINE_H
#define DA_INFER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/generate.h"
#include "diffattn/tokenizer.h"
#include "core/pool.h"
#include "io/gguf.h"
#include "ops/ops.h"
#include "infer/qtensor.h"
#include "ops/qblock.h"

/* Per layer, the four matmul input sites; then one for the LM head. */
enum { DA_SITE_ATTN_IN = 0, DA_SITE_ATTN_OUT = 1, DA_SITE_FFN_IN = 2, DA_SITE_FFN_GATE = 3, DA_SITES_PER_LAYER = 4 };
#define DA_N_SITES(cfg) (DA_SITES_PER_LAYER * (cfg)->n_layers + 1)


typedef struct {
    const float *attention_norm, *ffn_norm;            /* (C) (C) */
    const da_qtensor *attn[DA_ATTN_MAX_TENSORS];       /* the variant's attention tensors, in its order */
    const float *attn_f32[DA_ATTN_MAX_TENSORS];        /* its ATTN_PARAM tensors (always f32); others NULL */
    float attn_consts[4];                              /* the variant's layer_consts */
    const da_qtensor *w1, *w2, *w3;
    const float *poly_w, *poly_b; /* --mlp polynorm: (3) (1); else NULL */
} da_qlayer;

struct da_engine {
    da_config cfg;
    int weight_type;    /* the type of the block matmuls (the file's type) */
    int n_tensors;
    da_qtensor *t;      /* in da_model's tensor order, then the head copy if any */
    int head_copy;      /* tied embeddings: 1 when t[n_tensors - 1] is "output.weight", a quantized copy of
                         * an f32 embedding (t[0]) that serves as the LM head, so that decoding does not read
                         * the f32 embedding (the largest matrix of a large-vocabulary model) every token */
    da_qlayer *layers;
    int embed_type;     /* the type token_embd is written in: t[0]'s own, or, when t[0] is f32 (a model being
                         * quantized), the type it is rounded through; a tied model's head copy is that tensor.
                         * t[0] is looked up row by row in its own type (da_engine_embed_row) */
    const float *norm;
    const da_qtensor *output;
    float *act_absmax;  /* (DA_N_SITES) calibrated |x| ranges, or NULL */
    int calib_samples;  /* sequences behind act_absmax (and AWQ) */
    int awq;            /* 1: AWQ scales were folded in */
    da_act_mode act;    /* the file's default activation mode */
    unsigned char *blob; /* owns every tensor's bytes; NULL when the tensors view a da_model */
    size_t file_bytes;  /* size of the file it came from (0 when built in memory) */
    char *tokenizer_json; /* the model's tokenizer.json text, or NULL (see da_model.tokenizer_json) */
    da_tokenizer *tok;    /* parsed from it, its vocabulary checked against cfg */
};

/* ---------------------------------------------------------------- building (engine_weights.c) */

/* Names and shapes of every tensor for cfg, types unset, no data. */
da_status da_engine_init_table(da_engine *e, const da_config *cfg);
/* Appends the head copy of a tied model ("output.weight", vocab x dim, type unset). */
da_status da_engine_add_head_copy(da_engine *e);
/* Sets every tensor's row_bytes from its type, allocates the blob and points the data into it. */
da_status da_engine_alloc_blob(da_engine *e);
/* Rearranges e's Q8_0 matrices (the layers' and the LM head) into 16-row groups when ops's qgemm reads that
 * layout faster (ops->q8_0_r16); the same numbers. */
da_status da_engine_pack(da_engine *e, const da_ops *ops);
/* out: (C) token's embedding row as floats, whatever type t[0] holds it in. */
void da_engine_embed_row(const da_engine *e, int token, float *out);
/* The layer views (and λ) from the tensors, once their data is in place. */
void da_engine_bind(da_engine *e);
/* Frees what e owns and zeroes it (e itself is the caller's). */
void da_engine_release(da_engine *e);
/* An error naming the first weight that is NaN or infinite once dequantized
 * (f16/bf16 values, block scales); the loaders call it unless their options allow them. */
da_status da_engine_check_finite(const da_engine *e, const char *path);
/* Gives e the tokenizer.json text json (copied; NULL: none), parsed and its
 * vocabulary checked against e->cfg; where names the file in errors. */
da_status da_engine_set_tokenizer(da_engine *e, const char *json, const char *where);
/* m's f32 parameters as the tensors, no copy; m's tokenizer too (copied). */
da_status da_engine_init_from_model(da_engine *e, const da_model *m);
/* A full-precision da_model with e's weights dequantized. */
da_status da_engine_to_model(const da_engine *e, da_model *m);

/* ---------------------------------------------------------------- GGUF (engine_gguf.c) */

/* Reads a GGUF written by da_engine_save_gguf; every key, name, shape and
 * type is checked. Errors name the file and field. */
da_status da_engine_load_gguf(da_engine *e, const char *path);
da_status da_engine_save_gguf(const da_engine *e, const char *path);
/* The same file from an engine of types alone (its table and types, no tensor data): source writes tensor
 * i's bytes (engine tensor i: the embedding in da_engine_file_embed_type's type, the others in their own). */
da_status da_engine_save_gguf_streamed(const da_engine *e, const char *path, da_gguf_tensor_source source, void *ctx);
/* The type token_embd is written in: a tied model's head copy's, else the embedding's. */
int da_engine_file_embed_type(const da_engine *e);

/* ---------------------------------------------------------------- integer matmuls (engine_qmatmul.c) */

/* out: (n, W->rows) (+)= x[t] . rows of W for the n int8 activation rows x, on the team pool (NULL: the
 * caller alone), with ops's kernels. */
void da_engine_qmatmul_int(da_pool *pool, const da_ops *ops, const da_qtensor *W, const da_qact *x, int n, float *out,
                           int accumulate);
/* The same for m matrices of one input x in one team step: out[i]: (n, W[i]->rows) (+)= x . rows of W[i]. */
void da_engine_qmatmul_many(da_pool *pool, const da_ops *ops, int m, const da_qtensor *const *W, float *const *out,
                            const da_qact *x, int n, int accumulate);
/* The same for F16 or BF16 weights and float activations x: (n, W->cols). */
void da_engine_matmul_half(da_pool *pool, const da_ops *ops, const da_qtensor *W, const float *x, int n, float *out,
                           int accumulate);

/* ---------------------------------------------------------------- calibration statistics */

/* Gathered by da_session_feed when attached: per site, the largest |x| and
 * the sums over rows of |x| and x^2 per input channel. */
typedef struct da_qstats {
    float *absmax;    /* (n_sites) */
    double *chan;     /* per site, its width (C or F) channels, concatenated: sum |x| */
    double *chan2;    /* the same layout: sum x^2 */
    size_t *chan_off; /* (n_sites + 1) offset into chan */
    long rows;
} da_qstats;
da_status da_qstats_create(da_qstats *st, const da_config *cfg);
void da_qstats_free(da_qstats *st);
void da_session_attach_stats(da_session *s, da_qstats *st);

#endif
