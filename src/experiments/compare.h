/* `diffattn compare`: DIFF and the softmax baseline trained at equal
 * parameters, tokens, data and seed, then the same evaluations on both, with
 * a side-by-side report (report.md, report.json). */
#ifndef DA_COMPARE_H
#define DA_COMPARE_H

#include "diffattn/train.h"
#include "diffattn/generate.h"

typedef struct {
    const char *out_dir;
    const char *data;  /* NULL: the built-in needle mix */
    long steps;
    double budget_minutes; /* > 0: steps chosen so the whole job fits (overrides steps) */
    int dim, layers, heads, seq, batch;
    int seeds;
    int needles, queries;  /* needle prompts: N needles, R asked */
    int n_contexts, contexts[4]; /* needle prompt lengths; 0 contexts: seq/2 - 64 and seq - 64 */
    int quiet;
    /* Continue an interrupted job in out_dir: finished runs are kept, an
     * interrupted one continues from its last checkpoint, and the steps are
     * those the first run was started with. */
    int resume;
    volatile int *stop; /* when it becomes non-zero: checkpoint the run in training and return DA_INTERRUPTED */
} da_compare_config;

void da_compare_config_default(da_compare_config *c);
/* Writes the built-in training mix (filler text with needle sentences, each
 * document ending in a question and its answer) of about `bytes` bytes. */
da_status da_needle_mix_write(const char *path, long bytes, int context, uint64_t seed);
da_status da_compare(const da_compare_config *c);

/* ---------------------------------------------------------------- retrieval tasks
 * compare --task mqar|noisy-recall: every architecture from the same
 * initialisation where shapes agree (da_copy_shared_init), on the same
 * generated training stream per seed, scored every eval_every steps on the
 * same held-out sequences (teacher-forced answer accuracy). A sweep is the
 * product of the lists: one run per point, architecture and seed. */
#include "experiments/tasks.h"

typedef struct {
    const char *out_dir;
    da_task_config task; /* the kind and the values of every parameter not swept */
    int n_pairs, pairs[8]; /* mqar sweep (0: task.pairs) */
    int n_seqs, seqs[8];   /* sweep over sequence lengths (0: task.seq) */
    int n_noises;          /* noisy-recall sweep (0: task.noise) */
    double noises[8];
    long steps;
    int eval_every, eval_seqs;
    int dim, layers, heads, batch;
    float lr;
    int seeds, seed0; /* seeds seed0, seed0 + 1, ... */
    int quiet;
    volatile int *stop; /* non-zero: return DA_INTERRUPTED (no checkpoint: runs are minutes) */
} da_task_compare_config;

void da_task_compare_config_default(da_task_compare_config *c);
/* Writes out_dir/report.md, report.json, accuracy_<point>.png, steps_to_90.png and lambda.png. */
da_status da_task_compare(const da_task_compare_config *c);
/* Teacher-forced answer accuracy of m on n sequences of task t drawn from
 * seed; logit_bits > 0: the reference kernel with quantized attention logits. */
da_status da_task_answer_accuracy(da_model *m, const da_task_config *t, int n, uint64_t seed, int logit_bits,
                                  double *acc);
/* The first steps[i] with acc[i] >= threshold; -1 when none. */
long da_steps_to_threshold(const long *steps, const double *acc, int n, double threshold);
/* Copies into dst every tensor of src with dst's name and shape; returns how
 * many were copied. */
int da_copy_shared_init(da_model *dst, const da_model *src);

#endif
