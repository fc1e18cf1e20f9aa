/* The training configuration: its schema table, defaults and validation. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "diffattn/train.h"

#define BIG 1e15 /* steps and intervals: no practical limit, but not negative */

#define F(key, flag, field, type, def, lo, hi, bounds, on_resume, stored, help) \
    {key, flag, offsetof(da_train_config, field), type, def, lo, hi, bounds, on_resume, stored, help, NULL}
#define MAY DA_RESUME_MAY_CHANGE

/* Metadata order is this order (train.batch, train.seq, ...). */
const da_field da_train_config_fields[DA_TRAIN_CONFIG_N_FIELDS] = {
    F("batch", "batch", batch, DA_FIELD_INT, 8, 1, 1 << 20, "[]", MAY, 1,
      "sequences per optimizer step: the global batch, summed over --grad-accum micro-batches and mpirun ranks"),
    /* the CLI's --seq sets it (and a new model's context) */
    F("seq", NULL, seq, DA_FIELD_INT, 256, 1, 1 << 20, "[]", MAY, 1, "tokens per training window"),
    F("grad_accum", "grad-accum", grad_accum, DA_FIELD_INT, 1, 1, 1 << 20, "[]", MAY, 1,
      "micro-batches per step; must divide --batch"),
    F("steps", "steps", steps, DA_FIELD_LONG, 500, 1, BIG, "[]", MAY, 1, "optimizer steps"),
    F("warmup", "warmup", warmup, DA_FIELD_LONG, 50, 0, BIG, "[]", MAY, 1, "linear warmup steps"),
    /* above 10 every step diverges: lr 1e30 ran and its report held bare nan */
    F("lr", "lr", lr, DA_FIELD_FLOAT, 1e-3, 0, 10, "(]", MAY, 1, "peak learning rate"),
    F("min_lr", "min-lr", min_lr, DA_FIELD_FLOAT, 1e-4, 0, 10, "[]", MAY, 1,
      "learning rate at the end of the cosine decay"),
    F("weight_decay", "weight-decay", weight_decay, DA_FIELD_FLOAT, 0.1, 0, 1, "[)", MAY, 1,
      "AdamW decoupled weight decay (2-D matrices only)"),
    F("clip", "clip", clip, DA_FIELD_FLOAT, 1.0, -INFINITY, INFINITY, "()", MAY, 1,
      "global gradient-norm clip (0 = off)"),
    F("beta1", NULL, beta1, DA_FIELD_FLOAT, 0.9, 0, 1, "[)", MAY, 1, "AdamW first-moment decay"),
    F("beta2", NULL, beta2, DA_FIELD_FLOAT, 0.95, 0, 1, "[)", MAY, 1, "AdamW second-moment decay"),
    F("adam_eps", NULL, adam_eps, DA_FIELD_FLOAT, 1e-8, 0, INFINITY, "()", MAY, 1, "AdamW epsilon"),
    F("eval_every", "eval-every", eval_every, DA_FIELD_LONG, 100, 0, BIG, "[]", MAY, 1,
      "steps between validation passes (0 = start and end only)"),
    F("eval_batches", "eval-batches", eval_batches, DA_FIELD_INT, 4, 1, 1 << 20, "[]", MAY, 1,
      "validation windows = this x --batch"),
    F("save_every", "save-every", save_every, DA_FIELD_LONG, 100, 0, BIG, "[]", MAY, 1,
      "steps between checkpoints (0 = end only)"),
    F("log_every", "log-every", log_every, DA_FIELD_LONG, 10, 1, BIG, "[]", MAY, 1, "steps between metrics lines"),
    /* the sampler continues from its stored state; the seed only started it */
    F("seed", "seed", seed, DA_FIELD_U64, 1337, 0, 0, "[]", DA_RESUME_IGNORED, 1,
      "seed of the initialisation and of the data sampler"),
    F("val_fraction", "val-fraction", val_fraction, DA_FIELD_FLOAT, 0.1, 0, 1, "()", MAY, 1,
      "share of the text held out for validation (the tail)"),
    F("bf16", "bf16", bf16, DA_FIELD_BOOL, 0, 0, 1, "[]", MAY, 1,
      "large matmuls in bf16 with fp32 accumulation (AVX512-BF16 CPUs; about 1.4x faster)"),
    F("deterministic", "deterministic", deterministic, DA_FIELD_BOOL, 0, 0, 1, "[]", MAY, 0,
      "sum each window's gradient exactly (integer fixed point): bit-identical results for any number of mpirun "
      "ranks; slower (windows run one at a time)"),
    F("zero", "zero", zero, DA_FIELD_INT, 0, 0, 1, "[]", MAY, 0,
      "1: shard the AdamW moments over the mpirun ranks (ZeRO-1; optimizer memory / P); 0: every rank holds them"),
    /* a function of the step: a resumed run continues the ramp from its stored length */
    F("lambda_ramp", "lambda-ramp", lambda_ramp, DA_FIELD_LONG, 0, 0, BIG, "[]", MAY, DA_STORED_UNLESS_DEFAULT,
      "two-map attentions (DIFF V1, V2): the second map's weight goes from 0 to its full value linearly over N steps (the model's "
      "lambda_hold; 0 = full from the start)"),
};
_Static_assert(sizeof da_train_config_fields / sizeof da_train_config_fields[0] == DA_TRAIN_CONFIG_N_FIELDS,
               "da_train_config_fields out of step with DA_TRAIN_CONFIG_N_FIELDS");
#undef F
#undef MAY

void da_train_config_default(da_train_config *tc) {
    memset(tc, 0, sizeof *tc);
    da_fields_default(da_train_config_fields, DA_TRAIN_CONFIG_N_FIELDS, tc);
}

/* The relations between fields; each field's own range is in the table. */
da_status da_train_config_validate(const da_train_config *tc) {
    da_status st = da_fields_check(da_train_config_fields, DA_TRAIN_CONFIG_N_FIELDS, tc);
    if (st.code) return st;
    if (tc->batch % tc->grad_accum)
        return da_errorf("grad_accum: %d must divide batch=%d", tc->grad_accum, tc->batch);
    if (tc->min_lr > tc->lr) return da_errorf("min_lr: %g must not exceed lr=%g", (double)tc->min_lr, (double)tc->lr);
    if (tc->bf16 && da_exec_default().isa < DA_ISA_AVX512_BF16)
        return da_errorf("bf16: the bf16 matmuls need a CPU with AVX512-BF16; this one runs the %s kernels",
                         da_isa_name(da_exec_default().isa));
    return da_ok();
}
