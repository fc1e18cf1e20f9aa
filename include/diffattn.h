/* diffattn: the Differential Transformer (DIFF V1) and its softmax baseline, in C11.
 *
 * The library never exits: every call that can fail returns a da_status whose
 * msg names the file, the field and, where there is one, the fix. */
#ifndef DIFFATTN_H
#define DIFFATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DA_VERSION "0.1.0"
#define DA_FORMAT_VERSION 1 /* the `version` in a model file's metadata */

/* ---------------------------------------------------------------- errors */

typedef struct {
    int code; /* 0 = ok */
    char msg[512];
} da_status;

da_status da_ok(void);
da_status da_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------------- config */

typedef enum { DA_ARCH_DIFF = 0, DA_ARCH_SOFTMAX = 1 } da_arch;

typedef struct {
    da_arch arch;
    int dim;
    int n_layers;
    int n_heads;    /* DIFF: differential heads; softmax: plain heads (twice DIFF's at equal params) */
    int n_kv_heads; /* GQA: n_heads / n_kv_heads query heads share one KV group */
    int vocab_size;
    int ffn_hidden;
    int max_seq_len;
    float norm_eps;
    float rope_theta;
    int tie_embeddings; /* 1: output.weight is tok_embeddings.weight */
} da_config;

/* The small default model (byte vocabulary, DIFF, dim 256, 4 layers, 4 heads). */
void da_config_default(da_config *c);
/* Checks every field and their relations; the message names the offending field. */
da_status da_config_validate(const da_config *c);
/* d: the size of one RoPE'd sub-head. DIFF: dim/H/2. softmax: dim/H. */
int da_head_dim(const da_config *c);
/* 8*dim/3 rounded up to a multiple of 64. */
int da_default_ffn_hidden(int dim);
/* 0.8 - 0.6*exp(-0.3*depth), depth 0-based. */
float da_lambda_init(int depth);
const char *da_arch_name(da_arch a);
int da_arch_parse(const char *s, da_arch *out); /* 0 ok, -1 unknown */

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
    float *wq, *wk, *wv, *wo;                            /* (C,C) (Ckv,C) (Ckv,C) (C,C) */
    float *lambda_q1, *lambda_k1, *lambda_q2, *lambda_k2; /* (d) each; DIFF only */
    float *subln;                                        /* (2d); DIFF only */
    float *ffn_norm;                                     /* (C) */
    float *w1, *w2, *w3;                                 /* (F,C) (C,F) (F,C) */
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
    /* Evaluation only, not saved: when > 0, the reference attention kernel
     * and KV-cache decoding fake-quantize the attention logits to this many
     * bits before their softmax (dynamic absmax, symmetric, one scale per
     * query row of each map: the paper's Figure 8). 0 (default): exact. The
     * flash kernel ignores it. */
    int attn_logit_bits;
} da_model;

/* Allocates a zeroed model for cfg (validated). */
da_status da_model_create(da_model *m, const da_config *cfg);
/* The initialisation documented in the README, from a seeded RNG. */
void da_model_init(da_model *m, uint64_t seed);
da_status da_model_alloc_grads(da_model *m);
void da_model_zero_grads(da_model *m);
void da_model_free(da_model *m);
const da_tensor *da_model_find(const da_model *m, const char *name);
/* lambda_full of a DIFF layer: exp(q1.k1) - exp(q2.k2) + lambda_init. */
float da_model_lambda(const da_model *m, int layer);

/* safetensors checkpoint (format described in docs/formats.md); a GGUF from
 * `diffattn quantize` also loads, its weights dequantized to f32. Loading
 * checks every name, shape and dtype (F32 or BF16) against the metadata. */
da_status da_model_load(da_model *m, const char *path);
da_status da_model_save(const da_model *m, const char *path); /* atomic */

/* ---------------------------------------------------------------- forward / backward */

typedef struct da_acts da_acts; /* activations for one (B, T) shape */

/* The attention kernel: the fused flash kernel (memory linear in T, the
 * default) or the reference one that stores every T x T probability map. */
typedef enum { DA_ATTN_FLASH = 0, DA_ATTN_REFERENCE = 1 } da_attn_kernel;

/* Activations for batches of up to B sequences of up to T tokens, flash kernel. */
da_status da_acts_create(da_acts **out, const da_config *cfg, int B, int T);
da_status da_acts_create_kernel(da_acts **out, const da_config *cfg, int B, int T, da_attn_kernel kernel);
void da_acts_free(da_acts *a);

/* tokens, targets: (B, T), B and T at most those of da_acts_create; else NAN.
 * targets may be NULL (no loss). Returns the mean
 * cross-entropy over all B*T positions when targets are given, else 0. */
float da_forward(da_model *m, da_acts *a, const int *tokens, const int *targets, int B, int T);
/* (B, T, V) logits of the last da_forward. */
const float *da_acts_logits(const da_acts *a);
/* Views into the last da_forward, for evaluations. Layer l's queries and
 * keys after RoPE: q (B, T, C), k (B, T, Ckv); the residual stream after
 * layer l (its output): (B, T, C). */
void da_acts_qk(const da_acts *a, int layer, const float **q, const float **k);
/* Layer l's values: (B, T, Ckv). */
const float *da_acts_v(const da_acts *a, int layer);
const float *da_acts_hidden(const da_acts *a, int layer);

/* Gradient of the mean loss of the last da_forward (which needed targets);
 * accumulates (+=) into m->grads. */
void da_backward(da_model *m, da_acts *a);

/* ---------------------------------------------------------------- optimizer */

typedef struct {
    float beta1, beta2, eps, weight_decay;
} da_adamw_config;

typedef struct {
    size_t n;
    float *m, *v; /* first and second moments, (n_params) each */
    long step;    /* optimizer steps taken */
} da_adamw;

da_status da_adamw_create(da_adamw *opt, size_t n_params);
void da_adamw_free(da_adamw *opt);
/* One decoupled-weight-decay AdamW step at learning rate lr. Decay applies
 * only to tensors with decay=1. */
void da_adamw_step(da_adamw *opt, da_model *m, const da_adamw_config *cfg, float lr);
/* The same step on the parameters [lo, hi) of the flat buffer only, whose
 * moments opt->m, opt->v hold (index 0 is parameter lo): ZeRO-1's shard.
 * Each parameter gets the same arithmetic as in da_adamw_step. */
void da_adamw_step_range(da_adamw *opt, da_model *m, const da_adamw_config *cfg, float lr, size_t lo, size_t hi);
/* Global L2 norm of the gradients. */
float da_grad_norm(const da_model *m);
void da_grad_scale(da_model *m, float s);
/* Linear warmup to lr_max over `warmup` steps, cosine to lr_min at `total`. */
float da_lr_schedule(long step, long warmup, long total, float lr_max, float lr_min);

/* ---------------------------------------------------------------- training */

typedef struct {
    int batch;      /* sequences per optimizer step (the global batch), split over grad_accum micro-batches */
    int seq;        /* tokens per training window */
    int grad_accum; /* micro-batches per step; must divide batch */
    long steps;     /* optimizer steps in the whole run */
    long warmup;
    float lr, min_lr, weight_decay, clip; /* clip <= 0: no clipping */
    float beta1, beta2, adam_eps;
    long eval_every;   /* steps between validation passes; 0 = only at the start and the end */
    int eval_batches;  /* validation windows = eval_batches * batch */
    long save_every;   /* steps between checkpoints; 0 = only at the end */
    long log_every;
    uint64_t seed;
    float val_fraction;
    int bf16; /* 1: large matmuls in bf16 with fp32 accumulation (AVX512-BF16 builds) */
    /* Data parallel (see "Training on several processes" in the README);
     * neither is stored in the training state. */
    int deterministic; /* 1: per-window gradients summed exactly: bit-identical for any number of ranks */
    int zero;          /* 1: ZeRO-1, the AdamW moments sharded over the ranks */
} da_train_config;

void da_train_config_default(da_train_config *tc);
da_status da_train_config_validate(const da_train_config *tc);

typedef struct {
    long step, steps;
    float train_loss; /* NAN on the step-0 evaluation line */
    float val_loss;   /* NAN when this step had no evaluation */
    float lr, grad_norm, tok_per_s;
    double elapsed_s, eta_s;
    const char *note; /* NULL, or on the run's first line a note to show once (the data-parallel plan) */
} da_train_log;

typedef struct {
    void (*on_log)(void *ctx, const da_train_log *log); /* may be NULL */
    void *ctx;
    volatile int *stop; /* when it becomes non-zero: checkpoint, then return code DA_INTERRUPTED */
    long stop_at_step;  /* > 0: after this step, checkpoint and return DA_INTERRUPTED, as if stopped */
} da_train_hooks;

#define DA_INTERRUPTED 2
/* Under mpirun: a collective did not complete (a rank died or hangs), so the
 * job cannot continue: the CLI ends it (da_dist_abort). */
#define DA_DIST_FAILED 40
/* Under mpirun: another rank failed first and reports it; this one stays quiet. */
#define DA_DIST_PEER_FAILED 41

/* Trains on the byte-level text at data_path (a file or folder) into out_dir:
 * out_dir/model.safetensors (the latest model), out_dir/train_state.safetensors
 * (parameters, AdamW moments, step, RNG: everything --resume needs) and
 * out_dir/metrics.jsonl. With resume, model_cfg is ignored and the run
 * continues from the state file with the training config tc. */
da_status da_train(const da_config *model_cfg, const da_train_config *tc, const char *data_path,
                   const char *out_dir, int resume, const da_train_hooks *hooks);
/* Reads the model and training configs stored in out_dir's state file. */
da_status da_train_state_peek(const char *out_dir, da_config *model_cfg, da_train_config *tc, long *step);

/* ---------------------------------------------------------------- data parallel (MPI) */

/* Joins the MPI job when this process was started by mpirun (or another MPI
 * launcher); otherwise, and in a build without MPI, the process is rank 0 of
 * 1 and training runs exactly as in a single process. Once per process. */
da_status da_dist_init(void);
void da_dist_finalize(void);
int da_dist_rank(void);
int da_dist_size(void);
/* Seconds a collective may wait for the other ranks before it fails (60);
 * 0: blocking MPI collectives without a deadline. */
void da_dist_set_timeout(double seconds);
/* Ends every rank of the job (MPI_Abort) with this code. For the CLI, after
 * an error that leaves peers waiting; the library itself never calls it. */
void da_dist_abort(int code);

/* ---------------------------------------------------------------- generation */

typedef struct da_kv_cache da_kv_cache;

da_status da_kv_create(da_kv_cache **out, const da_config *cfg, int max_T);
void da_kv_free(da_kv_cache *kv);
void da_kv_reset(da_kv_cache *kv);
/* Feeds one token at position kv's length; returns the (V) logits, owned by kv. */
da_status da_decode_step(const da_model *m, da_kv_cache *kv, int token, const float **logits);
/* Fills an empty cache with a whole prompt in one batched forward (through a,
 * created for at least 1 x n), much faster than n decode steps; returns the
 * last position's (V) logits, owned by kv. The reference kernel in a honours
 * m->attn_logit_bits, as decoding does. */
da_status da_kv_prefill(da_model *m, da_kv_cache *kv, da_acts *a, const int *tokens, int n, const float **logits);

/* ---------------------------------------------------------------- RNG */

typedef struct {
    uint64_t s[4];
} da_rng; /* xoshiro256** */

void da_rng_seed(da_rng *r, uint64_t seed);
uint64_t da_rng_next(da_rng *r);
float da_rng_uniform(da_rng *r); /* [0, 1) */
float da_rng_normal(da_rng *r);

#ifdef __cplusplus
}
#endif
#endif
