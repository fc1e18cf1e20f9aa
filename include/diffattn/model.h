/* diffattn models: configuration, parameters, the training forward and backward.
 * Implemented in src/model/config.c, src/model/model.c, src/model/transformer.c,
 * src/model/convert.c. */
#ifndef DIFFATTN_MODEL_H
#define DIFFATTN_MODEL_H

#include "diffattn/config.h"
#include "diffattn/core.h"
#include "diffattn/exec.h"
#include "diffattn/fields.h"
#include "diffattn/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- config */


/* The schema of da_config: one row per field, in checkpoint-metadata order
 * (src/model/config.c). n_kv_heads and ffn_hidden default to 0 there, meaning
 * "derived" (see da_config_from_diff_heads). */
#define DA_CONFIG_N_FIELDS 32
extern const da_field da_config_fields[DA_CONFIG_N_FIELDS];

/* The small default model (byte vocabulary, DIFF, dim 256, 4 layers, 4 heads),
 * with the derived fields filled in. */
void da_config_default(da_config *c);
/* Whether field i of da_config_fields is written for c (checkpoints, GGUF,
 * `info`): a field of one variant's own (its key starts with the variant's
 * field_prefix) for that variant only; there, and elsewhere, a
 * DA_STORED_UNLESS_DEFAULT field away from its default, the rest always. */
int da_config_field_written(const da_config *c, int i);
/* 1 when field i is a hyper-parameter of one variant's own (see above). */
int da_config_field_of_variant(int i);
/* 1 when field i is a hyper-parameter of c's variant's own. */
int da_config_field_of_arch(const da_config *c, int i);
/* Checks every field's range, then their relations; the message names the
 * offending field. */
da_status da_config_validate(const da_config *c);
/* Heads of architecture a at the parameters of diff_heads DIFF heads: a
 * softmax head is half a DIFF head's size, so softmax gets twice as many; a
 * variant says how many of its heads make one DIFF head's parameters (attn/variant.h). */
int da_arch_heads(da_arch a, int diff_heads);
/* Completes a configuration whose n_heads and n_kv_heads count DIFF heads (the
 * CLI's --heads, compare's --heads): scales them with da_arch_heads; 0 fields
 * take their derived values (n_kv_heads = n_heads, ffn_hidden =
 * da_default_ffn_hidden(dim)); then validates. */
da_status da_config_from_diff_heads(da_config *c);
/* d: the size of one RoPE'd sub-head: c->head_dim when set, else DIFF: dim/H/2; the others: dim/H. */
int da_head_dim(const da_config *c);
/* The --lambda-ramp factor of the step numbered step (0-based) of a ramp of
 * `ramp` steps: step / ramp, 1 from step ramp on and when ramp <= 0. */
float da_lambda_ramp_factor(long step, long ramp);
/* Width of a token's queries: n_heads * maps * d (dim by default, or 2*dim with DIFF V2's two query heads per output head). */
int da_q_dim(const da_config *c);
/* Attention maps per head: 2 for DIFF's two softmax maps, 1 for softmax (the variant's `maps`). */
int da_arch_maps(da_arch a);
/* Bytes one layer's decoding cache keeps for a context of n tokens (f32):
 * the plain KV cache's keys and values (the last window of them with a
 * sliding window), or the variant's own cache (attn_variant.cache_bytes). */
double da_kv_cache_bytes(const da_config *c, int n);
/* 8*dim/3 rounded up to a multiple of 64. */
int da_default_ffn_hidden(int dim);
/* 0.8 - 0.6*exp(-0.3*depth), depth 0-based. */
float da_lambda_init(int depth);
/* DIFF's lambda_init of layer l (0-based) under c: c->lambda_init, or the depth schedule. */
float da_config_lambda_init(const da_config *c, int layer);
/* 1 when c's attention has the per-head norm (c->head_norm resolved against the variant's default). */
int da_config_head_norm(const da_config *c);
const char *da_arch_name(da_arch a);
const char *da_rope_freq_name(da_rope_freq f);   /* "diff", "llama" */
int da_rope_freq_parse(const char *s, da_rope_freq *out);   /* 0 ok, -1 unknown */
const char *da_rope_scale_name(da_rope_scale s); /* "none", "linear", "llama3" */
int da_rope_scale_parse(const char *s, da_rope_scale *out); /* 0 ok, -1 unknown */
/* cos, sin: (T, d/2) tables of position t and pair j for cfg's head size,
 * frequency rule and scaling (every RoPE user builds its tables here). */
void da_rope_tables(const da_config *cfg, float *cos_tab, float *sin_tab, int T);
/* The inverse frequencies behind them: inv_freq (d/2), d = da_head_dim(cfg). */
void da_rope_inv_freq_of(const da_config *cfg, double *inv_freq);
/* Row pos of those tables, for any position (a ring session's past them):
 * cos_row, sin_row: (d/2), the same values da_rope_tables gives. */
void da_rope_at(const da_config *cfg, long pos, float *cos_row, float *sin_row);
int da_arch_parse(const char *s, da_arch *out); /* 0 ok, -1 unknown */

/* What reports say of an architecture: its attention variant's table entry
 * (src/attn/variant.h), seen through the public API. */
typedef struct {
    const char *name;  /* --arch spelling */
    const char *label; /* in reports: "DIFF" */
    const char *about; /* one line: what it computes */
    int maps;          /* attention maps per head */
    int per_layer_lambda; /* da_model_lambda gives one lambda per layer */
    int hf;            /* da_model_export_hf writes it */
    const char *hf_class; /* the transformers class of the export, or NULL */
    const char *heads_note, *head_dim_note; /* info's notes after n_heads and head_dim */
    const char *extra_params_note; /* what it adds over the baseline at the same heads, "" when nothing */
    const char *lambda_note;       /* eval outliers: what its lambda rows are, "" when one per layer */
    int baseline;      /* 1: the baseline the others are compared against */
    int compared;      /* 1: compare runs it when --archs is not given */
    const char *map_note; /* reports: its attention map as evaluations read it, "DIFF (A1 - lambda A2)" */
    int exact_logits_only; /* 1: the engine cannot fake-quantize its logits (quantized-logit results are NaN) */
} da_arch_info;
da_arch_info da_arch_describe(da_arch a);
/* The architecture whose info says baseline: what compare judges the others against. */
da_arch da_arch_baseline(void);
/* The architectures compare runs by default: the compared ones in da_arch
 * order, the baseline last. Writes them to out (DA_ARCH_N) and returns how many. */
int da_arch_compare_defaults(da_arch *out);
/* The names of n architectures joined by sep ("diff,softmax"), into out
 * (size bytes); returns out. da_arch_names_all: every architecture, in da_arch
 * order; da_arch_names_default: compare's defaults. */
const char *da_arch_names_join(char *out, size_t size, const da_arch *a, int n, const char *sep);
const char *da_arch_names_all(char *out, size_t size, const char *sep);
const char *da_arch_names_default(char *out, size_t size, const char *sep);

/* ---------------------------------------------------------------- model */

/* One parameter tensor of the flat parameter buffer. Shapes are torch's
 * nn.Linear layout [out, in]; 1-D tensors have ndim 1. */
typedef struct {
    char name[96];
    int ndim;
    int shape[2];
    size_t offset; /* in floats, into da_model.params (and .grads) */
    size_t numel;
    int decay; /* AdamW weight decay applies: 2-D matrices only */
} da_tensor;

typedef struct {
    float *attention_norm;                               /* (C) */
    /* The attention's tensors, in the variant's order (the checkpoint's,
     * layers.{i}.attn.*), and for the variants of today their names: */
    union {
        float *attn[DA_ATTN_MAX_TENSORS];
        struct {
            float *wq, *wk, *wv, *wo;                             /* (Cq,C) (Ckv,C) (Ckv,C) (C,C): every variant here */
            float *lambda_q1, *lambda_k1, *lambda_q2, *lambda_k2; /* (d) each; DIFF only */
            float *subln;                                         /* (2d); DIFF only */
        };
        struct {
            float *qkvo_[4];
            float *lambda_proj; /* (H, C); DIFF V2 only; wq is (2C, C) there */
        };
    };
    float *ffn_norm;                                     /* (C) */
    float *w1, *w2, *w3;                                 /* (F,C) (C,F) (F,C) */
    float *poly_w, *poly_b;                              /* (3) (1): --mlp polynorm's; else NULL */
} da_layer_weights;

/* Pointers into one flat buffer (the parameters or their gradients). */
typedef struct {
    float *tok_embeddings; /* (V, C) */
    float *norm;           /* (C) */
    float *output;         /* (V, C); aliases tok_embeddings when tied */
    da_layer_weights *layers;
} da_weights;

typedef struct {
    da_config cfg;
    int n_tensors;
    da_tensor *tensors;
    size_t n_params;
    float *params;
    float *grads; /* NULL until da_model_alloc_grads */
    da_weights w; /* views of params */
    da_weights g; /* views of grads (NULL pointers until allocated) */
    /* The Hugging Face tokenizer.json text of the ids (malloc'd; freed by
     * da_model_free), or NULL: bytes, or a file from before tokenizers were
     * embedded. Saved and loaded with the model (docs/formats.md); read it with
     * da_model_tokenizer (diffattn/tokenizer.h). */
    char *tokenizer_json;
} da_model;

/* Allocates a zeroed model for cfg (validated). */
da_status da_model_create(da_model *m, const da_config *cfg);
/* cfg's tensor table (names, shapes, offsets) and n_params alone, the
 * parameters not allocated (m->params NULL): what a loader checks a file
 * against before committing memory. Free it with da_model_free. */
da_status da_model_create_table(da_model *m, const da_config *cfg);
/* The initialisation documented in docs/model.md, from a seeded RNG. */
void da_model_init(da_model *m, uint64_t seed);
da_status da_model_alloc_grads(da_model *m);
void da_model_zero_grads(da_model *m);
void da_model_free(da_model *m);
const da_tensor *da_model_find(const da_model *m, const char *name);
/* lambda_full of a DIFF layer: exp(q1.k1) - exp(q2.k2) + lambda_init. */
float da_model_lambda(const da_model *m, int layer);

/* How da_model_convert turns a softmax model's heads into DIFF heads (docs/model.md,
 * "Converting a softmax model"). PRESERVE: each source head becomes one head of
 * the source's size whose second map is zero and held back (lambda_hold 1; DIFF V1
 * without the head norm): the converted model computes the source's logits.
 * SPLIT: source heads j and j + H/2 become DIFF head j, as Hugging Face's DiffLlama
 * pairs them, value heads concatenated, the head norm on (DIFF V1 only). */
typedef enum { DA_CONVERT_PRESERVE = 0, DA_CONVERT_SPLIT = 1 } da_convert_recipe;
/* out (created here; free with da_model_free): src, a softmax model without the
 * head norm, as arch `to` (diff or diff2) by recipe r; the new attention parameters
 * (lambda vectors, lambda_proj) are initialised from seed, the tokenizer copied. */
da_status da_model_convert(const da_model *src, da_arch to, da_convert_recipe r, uint64_t seed, da_model *out);

/* The parameters a model of configuration c has (da_model_create's table,
 * summed; SIZE_MAX when beyond size_t): what loaders check a file's bytes
 * against before allocating the model it declares. */
size_t da_config_param_count(const da_config *c);

/* ---------------------------------------------------------------- forward / backward */

typedef struct da_acts da_acts; /* activations for one (B, T) shape */

/* The attention kernel: the fused flash kernel (memory linear in T, the
 * default) or the reference one that stores every T x T probability map. */
typedef enum { DA_ATTN_FLASH = 0, DA_ATTN_REFERENCE = 1 } da_attn_kernel;

/* Activations for batches of up to B sequences of up to T tokens, flash
 * kernel, da_exec_default()'s context. */
da_status da_acts_create(da_acts **out, const da_config *cfg, int B, int T);
/* The same with the attention kernel and the context given; the acts keep a
 * copy of *x (NULL: da_exec_default()), which da_forward and da_backward
 * run with (x->prof_s, when set, must outlive the acts). */
da_status da_acts_create_ex(da_acts **out, const da_config *cfg, int B, int T, da_attn_kernel kernel,
                            const da_exec *x);
void da_acts_free(da_acts *a);

/* tokens, targets: (B, T), B and T at most those of da_acts_create; else NAN.
 * targets may be NULL (no loss). A target of -1 masks its position: it adds
 * no loss and no gradient. Returns the mean cross-entropy over the counted
 * positions when targets are given (0 when none counts), else 0. */
float da_forward(da_model *m, da_acts *a, const int *tokens, const int *targets, int B, int T);
/* (B, T, V) logits of the last da_forward. */
const float *da_acts_logits(const da_acts *a);
/* (B, T) loss at each position of the last da_forward with targets (0 where masked). */
const float *da_acts_losses(const da_acts *a);
/* Views into the last da_forward, for evaluations. Layer l's queries and
 * keys after RoPE: q (B, T, da_q_dim), k (B, T, Ckv); the residual stream after
 * layer l (its output): (B, T, C). */
void da_acts_qk(const da_acts *a, int layer, const float **q, const float **k);
/* Layer l's lambda per token and head, sigmoid(x . lambda_proj): (B, T, H);
 * NULL unless the variant has one (DIFF V2). */
const float *da_acts_lam(const da_acts *a, int layer);
/* Layer l's values: (B, T, Ckv). */
const float *da_acts_v(const da_acts *a, int layer);
const float *da_acts_hidden(const da_acts *a, int layer);
/* Layer l's attention output, the input of its out_proj: (B, T, C) (DIFF:
 * after the per-head norm). */
const float *da_acts_attn_out(const da_acts *a, int layer);

/* Gradient of the mean loss of the last da_forward (which needed targets);
 * accumulates (+=) into m->grads. */
void da_backward(da_model *m, da_acts *a);

#ifdef __cplusplus
}
#endif
#endif
