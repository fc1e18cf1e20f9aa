/* diffattn training: AdamW, the training loop, checkpoints and resume, data parallel.
 * Implemented in src/train/train.c, src/train/train_config.c, src/train/train_state.c, src/train/optim.c,
 * src/train/train_step.c, src/train/eval_loss.c. */
#ifndef DIFFATTN_TRAIN_H
#define DIFFATTN_TRAIN_H

#include "diffattn/data.h"
#include "diffattn/formats.h"
#include "diffattn/model.h"
#include "diffattn/parallel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- optimizer */

typedef struct {
    float beta1, beta2, eps, weight_decay;
} da_adamw_config;

typedef struct {
    size_t n;
    float *m, *v; /* first and second moments, (n_params) each */
    long step;    /* optimizer steps taken */
    da_isa isa;   /* kernel level of the update: da_exec_default's, set by da_adamw_create */
} da_adamw;

da_status da_adamw_create(da_adamw *opt, size_t n_params);
void da_adamw_free(da_adamw *opt);
/* One decoupled-weight-decay AdamW step at learning rate lr. Decay applies
 * only to tensors with decay=1. */
void da_adamw_step(da_adamw *opt, da_model *m, const da_adamw_config *cfg, float lr);
/* Global L2 norm of the gradients. */
float da_grad_norm(const da_model *m);
void da_grad_scale(da_model *m, float s);
/* Linear warmup to lr_max over `warmup` steps, cosine to lr_min at `total`. */
float da_lr_schedule(long step, long warmup, long total, float lr_max, float lr_min);

/* ---------------------------------------------------------------- validation loss */

/* The mean next-token cross-entropy over n_windows fixed windows spread evenly
 * over the validation split (the same set for every model, so numbers compare
 * across runs and architectures). */
typedef struct da_eval_loss_result {
    double loss, ppl;
    long windows, tokens;
} da_eval_loss_result;

/* Loads nothing: the model and data are the caller's. kernel: the flash one
 * for speed, the reference one where logits are inspected or quantized. */
da_status da_eval_loss(da_model *m, const da_text_data *data, int T, long n_windows, int batch, da_attn_kernel kernel,
                       da_eval_loss_result *r);

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
    int bf16; /* 1: large matmuls in bf16 with fp32 accumulation (CPUs with AVX512-BF16) */
    /* Data parallel (docs/data-parallel.md);
     * neither is stored in the training state. */
    int deterministic; /* 1: per-window gradients summed exactly: bit-identical for any number of ranks */
    int zero;          /* 1: ZeRO-1, the AdamW moments sharded over the ranks */
    long lambda_ramp;  /* DIFF, DIFF2: the second map's weight goes from 0 to full over this many steps (0: full) */
} da_train_config;

/* The schema of da_train_config: one row per field, in checkpoint-metadata
 * order (keys "train." + key), with its flag, range and resume rule
 * (src/train/train_config.c). */
#define DA_TRAIN_CONFIG_N_FIELDS 22
extern const da_field da_train_config_fields[DA_TRAIN_CONFIG_N_FIELDS];

void da_train_config_default(da_train_config *tc);
/* Every field's range, then their relations; the message names the field. */
da_status da_train_config_validate(const da_train_config *tc);

typedef struct {
    long step, steps;
    float train_loss; /* NAN on the step-0 evaluation line */
    float val_loss;   /* NAN when this step had no evaluation */
    float lr, grad_norm, tok_per_s;
    double elapsed_s, eta_s;
    const char *note; /* NULL, or on the run's first line a note to show once (the data-parallel plan) */
    double accuracy;  /* the source's score of the held-out set at an evaluation; NAN otherwise */
} da_train_log;

typedef struct {
    void (*on_log)(void *ctx, const da_train_log *log); /* may be NULL */
    void *ctx;
    volatile int *stop; /* when it becomes non-zero: checkpoint, then return code DA_INTERRUPTED */
    long stop_at_step;  /* > 0: after this step, checkpoint and return DA_INTERRUPTED, as if stopped */
    const char *init_from; /* NULL, or a model (read by every rank with load_init) whose weights,
                            * configuration and tokenizer start a new run instead of model_cfg; the
                            * optimizer, sampler and schedule start fresh */
    /* How init_from is read: NULL for da_model_load (diffattn safetensors, a Hugging Face folder). The
     * CLI passes da_model_load_float (generate.h), which also takes a GGUF in f32, f16 or bf16 and a
     * folder's tokenizer.json; it lives in infer/, above train/, hence a pointer. */
    da_status (*load_init)(da_model *m, const char *path, const da_load_opts *o);
    const da_load_opts *load_opts; /* load_init's options; NULL: the defaults */
    /* NULL, or called on a new run's model after its initialisation (not on resume), on every rank:
     * e.g. weights shared with another run's initialisation */
    da_status (*on_init)(void *ctx, da_model *m);
    /* NULL, or called on rank 0 after each evaluation (step 0, every eval_every steps, the last) with the
     * model as it is then */
    void (*on_eval)(void *ctx, const da_model *m, const da_train_log *log);
    /* NULL, or a text (or token shards) whose spans go into every window of a da_train run's text or shards at
     * distract_cfg's rates (data.h: da_distract_source); the held-out windows get them too */
    const char *distract;
    const da_distract_config *distract_cfg;
} da_train_hooks;

#define DA_INTERRUPTED 2
/* da_train with DA_RUN_NEW: out_dir already holds a run. */
#define DA_RUN_EXISTS 3

/* DA_RUN_EXISTS naming the first of files (n) found in dir, which holds a
 * `what` ("run", "compare") that a new one would replace; ok when none is. */
da_status da_refuse_existing(const char *dir, const char *what, const char *const *files, int n);

/* What da_train does with out_dir. */
typedef enum {
    DA_RUN_NEW = 0,       /* a new run; an error if out_dir already holds one (model or training state) */
    DA_RUN_RESUME = 1,    /* continue the run in out_dir from its training state */
    DA_RUN_OVERWRITE = 2, /* a new run, replacing one that out_dir holds */
} da_run_mode;

/* Trains on data_path (a text file or folder: bytes are tokens; or a folder
 * of token shards from `diffattn prepare`) into out_dir:
 * out_dir/model.safetensors (the latest model), out_dir/train_state.safetensors
 * (parameters, AdamW moments, step, RNG: everything a resume needs) and
 * out_dir/metrics.jsonl. mode: a da_run_mode. On DA_RUN_RESUME, model_cfg is
 * ignored and the run continues from the state file with the training
 * config tc. */
da_status da_train(const da_config *model_cfg, const da_train_config *tc, const char *data_path,
                   const char *out_dir, int mode, const da_train_hooks *hooks);
/* The same loop on any data source (data.h): a synthetic task's stream, or
 * da_text_source. The source's seq, when set, must equal tc->seq. With a
 * score, metrics.jsonl and the log carry its accuracy at each evaluation. */
da_status da_train_source(const da_config *model_cfg, const da_train_config *tc, const da_data_source *src,
                          const char *out_dir, int mode, const da_train_hooks *hooks);
/* Training steps on a model outside a run (no data source, folder or
 * checkpoint), with tc's optimizer, clipping and schedule: for benchmarks,
 * which time a step. x: the step's settings (its prof_s, when set, gets the
 * zeroing and AdamW phases), NULL for da_exec_default. m must outlive it. */
typedef struct da_train_stepper da_train_stepper;
da_status da_train_stepper_create(da_train_stepper **out, da_model *m, const da_train_config *tc, const da_exec *x);
/* Zeroes the gradients, runs forward and backward of a (B, T) on tokens and
 * targets, clips, takes one AdamW step; returns the loss. */
float da_train_step(da_train_stepper *s, da_acts *a, const int *tokens, const int *targets, int B, int T);
void da_train_stepper_free(da_train_stepper *s);
/* Reads the model and training configs stored in out_dir's state file. */
da_status da_train_state_peek(const char *out_dir, da_config *model_cfg, da_train_config *tc, long *step);
/* The configuration a resumed run continues with: the model and training
 * configs stored in out_dir, with the training fields marked in train_given
 * (one entry per row of da_train_config_fields) taken from *tc by each row's
 * on_resume rule; fields not stored in checkpoints always come from *tc. The
 * model fields marked in model_given (one per row of da_config_fields) take
 * their values from *given (heads counted as DIFF heads, as on a new run):
 * the run's own values are accepted, a different one is an error naming the
 * field (the model comes from the run). Fills *cfg, *tc and the
 * step the run reached. Under mpirun rank 0 reads out_dir and sends the
 * outcome to the other ranks, which need not see the folder. */
da_status da_train_resume_config(const char *out_dir, const da_config *given, const unsigned char *model_given,
                                 const unsigned char *train_given, da_config *cfg, da_train_config *tc, long *step);



#ifdef __cplusplus
}
#endif
#endif
