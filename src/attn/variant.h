/* The attention variants: one table entry per da_arch, and everything the
 * model, the engine, the evaluations and the reports need of a variant goes
 * through it (docs/architecture.md, "Adding an attention variant"). The code
 * above src/attn/ never names a variant.
 *
 * A layer's attention, for every variant:
 *     xn = rmsnorm(x)                        (the model's attention_norm)
 *     p_j = act_j(RoPE_j(xn W_j^T))          for each input tensor j (role ATTN_IN)
 *     o = variant(p, parameters)             (B, T, out_cols): the variant's kernels
 *     x += o W_out^T                         (the one ATTN_OUT tensor)
 * so the model and the engine do the matmuls (float, bf16 or quantized), the
 * RoPE and the activation of each product, and the variant's hooks do the rest. */
#ifndef DA_ATTN_VARIANT_H
#define DA_ATTN_VARIANT_H

#include <stddef.h>

#include "attn/attention.h"
#include "diffattn/config.h"

#define ATTN_MAX_TENSORS DA_ATTN_MAX_TENSORS /* attention tensors per layer */
#define ATTN_LAYER_CONSTS 4     /* floats a variant derives from a layer's parameters (layer_consts) */

typedef enum {
    ATTN_IN = 0,   /* [rows, dim] matrix applied to the attention input: its product is p_j (B, T, rows) */
    ATTN_OUT = 1,  /* [dim, cols]: the output projection, applied to the variant's output */
    ATTN_PARAM = 2 /* read by the variant's kernels themselves */
} attn_role;

typedef enum {
    ATTN_INIT_NORMAL = 0,        /* N(0, std^2) */
    ATTN_INIT_RESIDUAL = 1,      /* N(0, 0.02^2 / (2 n_layers)): GPT-2's scaling of residual outputs */
    ATTN_INIT_ONES = 2,          /* 1 (no random draw) */
    ATTN_INIT_FAN_IN_UNIFORM = 3, /* U(-1/sqrt(cols), 1/sqrt(cols)): torch's nn.Linear default */
    ATTN_INIT_ZEROS = 4,         /* 0 (no random draw) */
    ATTN_INIT_VARIANT = 5        /* the variant's init_tensor fills it (no random draw) */
} attn_init;

/* What the evaluations read from a product (da_acts_qk, da_acts_v, da_acts_lam). */
typedef enum { ATTN_VIEW_NONE = 0, ATTN_VIEW_Q, ATTN_VIEW_K, ATTN_VIEW_V, ATTN_VIEW_LAM } attn_view;

typedef enum { ATTN_ACT_NONE = 0, ATTN_ACT_SIGMOID = 1 } attn_act;

/* One tensor of a layer's attention, named layers.{i}.attn.<name>. */
typedef struct {
    char name[40];
    int rows, cols;  /* torch's [out, in]; cols 0: a vector of rows values */
    attn_role role;
    attn_init init;
    float std;       /* ATTN_INIT_NORMAL */
    int decay;       /* AdamW weight decay applies */
    int quantizable; /* the engine may store it in a block type (else f32 always) */
    int rope;        /* ATTN_IN: RoPE (GPT-J interleaved, d-wide sub-heads) on the product */
    attn_act act;    /* ATTN_IN: applied to the product after RoPE */
    attn_view view;
} attn_tensor;

/* One layer's attention in the training forward and backward (and the
 * engine's prompt forward, which calls forward with B = 1). */
typedef struct {
    const da_config *cfg;
    const da_exec *exec;   /* kernels' level, profile (prof_s may be NULL) */
    int layer;
    int flash;             /* 1: the fused kernel; 0: the reference kernel that keeps the maps */
    attn_shape shape;      /* this call's B, T */
    int cap_B, cap_T;      /* the shape `saved` was sized for (train_floats) */
    float *const *w;       /* the layer's tensors, the variant's order; ATTN_IN/ATTN_OUT may be NULL in the engine */
    float *const *g;       /* their gradients (backward: += ) */
    float *const *proj;    /* ATTN_IN j: (B, T, rows) p_j after RoPE and act; others NULL */
    float *const *dproj;   /* backward: the same shapes, overwritten with d loss / d p_j (after act, RoPE) */
    float *saved;          /* train_floats, kept from the forward for the backward */
    float *scratch;        /* scratch_floats, shared by the layers */
    float *consts;         /* ATTN_LAYER_CONSTS, set by the forward (layer_consts), read by the backward */
    float *out;            /* (B, T, out_cols): the input of the output projection */
    float *dout;           /* backward: d loss / d out (the variant may overwrite it) */
} attn_train_ctx;

/* The engine's plain key/value cache seen by a variant's decode step. */
typedef struct {
    const void *self;
    /* a: (n) = softmax(scale * Q: (d) . the keys of positions p0 .. p0+n-1 at column col), the
     * logits fake-quantized first when the session asks for it. */
    void (*scores)(const void *self, float *a, const float *Q, int col, int p0, int n, float scale);
    /* o: (w) = sum_t p[t] * the value of position p0 + t at column col. */
    void (*mix)(const void *self, float *o, const float *p, int col, int p0, int n, int w);
} attn_kv;

/* One (token, head) of a decode step over a plain KV cache: the query
 * position sees keys p0 .. p0+len-1. q: the token's query row (q_dim wide,
 * after RoPE), lam: its ATTN_VIEW_LAM row or NULL, att: 2 * slots floats of
 * scratch, o: the token's output row (out_cols). */
typedef struct {
    const attn_kv *kv;
    const da_config *cfg;
    const float *const *w; /* the layer's ATTN_PARAM tensors (f32); others NULL */
    const float *consts;   /* layer_consts */
    int layer, h, g, d, p0, len, slots;
    const float *q, *lam;
    float *att, *o;
} attn_decode_head;

/* One token of one layer of a variant with its own decoding cache. */
typedef struct {
    const da_config *cfg;
    float *cache;             /* the layer's cache_floats, holding positions 0 .. pos-1 */
    int max_T, pos;           /* the cache's capacity; the token's position */
    const float *const *proj; /* per ATTN_IN tensor: the token's product row (after RoPE and act); others NULL */
    const float *const *w;    /* the layer's ATTN_PARAM tensors (f32); others NULL */
    float *scratch;           /* cache_scratch_floats */
    float *out;               /* (out_cols): the token's attention output */
} attn_cache_step;

/* One layer of one sequence as the analysis hooks read it: da_forward's views. */
typedef struct {
    const da_config *cfg;
    const float *q, *k; /* (T, q_dim), (T, kv_cols): the ATTN_VIEW_Q and ATTN_VIEW_K products, after RoPE */
    const float *lam;   /* (T, n_heads): the ATTN_VIEW_LAM product, or NULL */
    float lambda;       /* the layer's one lambda (per_layer_lambda), else 0 */
    int T;                    /* the sequence's tokens (B = 1) */
    const float *const *proj; /* per ATTN_IN tensor: its product (T, rows); others NULL */
    const float *const *w;    /* the layer's tensors (ATTN_PARAM ones read by variants) */
    const float *saved;       /* the forward's saved activations (train_floats of (1, T), the flash kernel) */
} attn_probe;

typedef struct attn_variant {
    da_arch arch;
    const char *name;   /* --arch and the metadata's spelling */
    const char *label;  /* in reports: "DIFF" */
    const char *about;  /* one line: what it computes */
    int maps;           /* attention maps per head (the shares an evaluation reads) */
    int heads_per_diff_head; /* heads at the parameters of one DIFF head (--heads counts DIFF heads) */
    int sub_heads_per_head;  /* d-wide sub-heads per head in dim: d = dim / (n_heads * this) */
    attn_layout layout;      /* for the kernels shared by every variant */
    int per_layer_lambda; /* 1: consts[0] (layer_consts) is the layer's one lambda (da_model_lambda) */
    int head_norm_option;   /* the per-head norm (da_config.head_norm): 0 none, an explicit value refused;
                             * 1 off unless on; 2 on unless off */
    int lambda_init_option; /* 1: da_config.lambda_init applies */
    int lambda_depth_shift; /* the depth schedule's depth is layer - this (0: DIFF's; GDA's 1: Motif's) */
    int head_dim_option;    /* 1: da_config.head_dim may be set (the kernels read widths from attn_shape) */
    int baseline;       /* 1: the baseline of compare's verdicts */
    int compared;       /* 1: compare runs it without --archs */
    const char *hf_class; /* Hugging Face: the transformers class of the export, or NULL */
    int hf;             /* 1: a Hugging Face family of io/family.c maps it (test_family checks the two agree) */
    int gguf;           /* 1: the engine (GGUF) runs it */
    const char *field_prefix; /* its own hyper-parameters: the config fields whose keys start so, or NULL */

    /* The layer's tensors, in their checkpoint order (the first is q_proj):
     * writes them to out (ATTN_MAX_TENSORS) and returns their count. */
    int (*tensors)(const da_config *c, attn_tensor *out);
    /* n_kv_heads when the configuration leaves it 0 (counted as n_heads is); NULL: n_heads, plain MHA. */
    int (*default_kv_heads)(const da_config *c);
    /* Relations of c's fields this variant needs beyond the schema's ranges;
     * the message names the field. NULL: none. */
    da_status (*validate)(const da_config *c);
    /* Fills tensor j (ATTN_INIT_VARIANT) of c's layers. NULL: it has none. */
    void (*init_tensor)(const da_config *c, int j, float *w);
    /* consts (ATTN_LAYER_CONSTS) from layer l's parameters w (the variant's order). */
    void (*layer_consts)(const da_config *c, int layer, const float *const *w, float *consts);

    /* Floats of `saved` for a (B, T) = cap shape with kernel flash. */
    size_t (*train_floats)(const attn_shape *cap, int flash);
    /* Floats of `scratch` for shape s and kernel flash; NULL: the shared
     * kernels' (attn_kernel_scratch of layout). */
    size_t (*scratch_floats)(const attn_shape *s, int flash);
    /* out from proj; fills consts and saved. Profile: the head norm goes to DA_PROF_HEAD_NORM. */
    void (*forward)(const attn_train_ctx *x);
    /* dproj from dout, and the ATTN_PARAM gradients (+=). */
    void (*backward)(const attn_train_ctx *x);

    /* Decode over a plain KV cache: the keys are the ATTN_VIEW_K product and
     * the values the ATTN_VIEW_V product, both kv_cols wide. */
    void (*decode_head)(const attn_decode_head *x);

    /* A decoding cache of the variant's own, instead of the plain KV cache
     * (NULL: none). Floats per layer for max_T positions; scratch floats of
     * one step; one token of one layer (the cache needs no other state: an
     * empty one is any memory at pos 0); and the bytes a context of n tokens
     * keeps per layer (f32), for `info` and the benchmarks. */
    size_t (*cache_floats)(const da_config *c, int max_T);
    size_t (*cache_scratch_floats)(const da_config *c, int max_T);
    void (*cache_step)(const attn_cache_step *x);
    double (*cache_bytes)(const da_config *c, int n);
    /* The bytes of its cache one step reads per layer at a context of n (bench generate's bandwidth bound). */
    double (*cache_read_bytes)(const da_config *c, long n);
    /* 1: its cache gives exact logits only (no logit fake-quantization: the quantized-logit analyses skip it). */
    int exact_logits_only;

    /* Analysis (eval outliers, needle, attention, quant-logits; compare).
     * The score maps an evaluation counts the logits of (every query sub-head). */
    int (*logit_maps)(const da_config *c);
    /* The attention logits (scaled dots) of query t in map s, at most
     * t - j0 + 1 of them, written to out; returns their count. The maps'
     * variants give one per key j0 <= j <= t, out[j - j0]. */
    int (*logits)(const attn_probe *p, int s, int t, int j0, float *out);
    /* row[0..t]: the attention of query t in head h, its maps combined as the
     * variant combines them, divided by the row's absolute mass: a signed
     * share, the absolute shares summing to at most 1; zero before the
     * window. tmp: t + 1 floats. */
    void (*attention_row)(const attn_probe *p, int h, int t, float *row, float *tmp);

    /* Flops of the attention (not the projections) per token of a T-token
     * sequence, forward and backward (backward = 2x forward). */
    double (*attn_flops_per_token)(const da_config *c, int T);

    /* Reports: the note `info` prints after n_heads and after head_dim, and
     * a description of the parameters it adds over softmax ("" when none). */
    const char *heads_note, *head_dim_note, *extra_params_note;
    /* eval outliers: what its "lambda" row is, "" when it has none. */
    const char *lambda_note;
    /* Reports: its attention map as the evaluations read it (attention_row). */
    const char *map_note;
} attn_variant;

/* The variant of a (DIFF when a is out of range: callers validate first). */
const attn_variant *da_attn_variant_of(da_arch a);
/* Every variant, in da_arch order: n of them. */
const attn_variant *da_attn_variant_at(int i);

/* The layer's tensors of c's variant: count, written to out. */
int da_attn_tensors(const da_config *c, attn_tensor *out);
/* n_kv_heads for a configuration that leaves it 0 (before da_config_from_diff_heads scales the counts). */
int da_attn_default_kv_heads(const da_config *c);
/* The index of the tensor with role r (ATTN_OUT) or view v, or -1. */
int da_attn_tensor_with_view(const da_config *c, attn_view v);
int da_attn_out_tensor(const da_config *c);
/* The attention tensor a full name (layers.{i}.attn.<name>) names, or NULL; into out. */
const attn_tensor *da_attn_tensor_named(const da_config *c, const char *full_name, attn_tensor *out);

/* Fills t, a tensor of c's variant with init ATTN_INIT_VARIANT, through its init_tensor. */
void da_attn_init_tensor(const da_config *c, const attn_tensor *t, float *w);

/* DIFF's lambda_init at 0-based depth: 0.8 - 0.6 exp(-0.3 depth). */
float da_attn_lambda_init(int depth);
/* lambda_init of layer l under c: c->lambda_init when set, else the depth schedule at depth
 * l - the variant's lambda_depth_shift. */
float da_attn_layer_lambda_init(const da_config *c, int layer);
/* 1 when c's variant applies its per-head norm (c->head_norm against the variant's default). */
int da_attn_head_norm_on(const da_config *c);
/* d: c->head_dim, or dim / (n_heads * sub_heads_per_head). */
int da_attn_head_dim(const da_config *c);
/* A token's key and value width, n_kv_heads * v_subheads * d (dim / n_rep by default), and
 * the attention output's (the output projection's input), n_heads * v_subheads * d (dim). */
int da_attn_kv_cols(const da_config *c);
int da_attn_out_cols(const da_config *c);
/* The second map's weight factor, 1 - c->lambda_hold (a ramp's state; 1 when none). */
static inline float da_attn_lambda_scale(const da_config *c) { return 1.0f - c->lambda_hold; }

/* The analysis hooks of the variants whose heads are maps laid out as
 * attention.h says (attn_layout): softmax, DIFF, DIFF2. */
int da_attn_maps_logit_maps(const da_config *c);
int da_attn_maps_logits(const attn_probe *p, int s, int t, int j0, float *out);
void da_attn_maps_row(const attn_probe *p, int h, int t, float *row, float *tmp);
/* The logits hook's dot products: out[j - j0] = q . k_j / sqrt(d) for the
 * keys j0..t of key sub-head ks, q the query sub-head at qv; their count. */
int da_attn_probe_dots(const attn_probe *p, const float *qv, int ks, int d, int t, int j0, float *out);

/* The floats of attn_train_ctx.scratch variant v needs for shape s and kernel flash. */
size_t da_attn_scratch_floats(const attn_variant *v, const attn_shape *s, int flash);

/* The attention shape of c for a (B, T) batch with n_threads threads. */
attn_shape da_attn_shape_of(const da_config *c, int B, int T, int n_threads);

#endif
