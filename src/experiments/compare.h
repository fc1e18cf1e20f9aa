/* The two kinds of study that compare architectures: plain compare (the
 * needle mix or --data text, text_compare.c) and compare --task (the synthetic
 * tasks, task_compare.c), both through the study room (src/study/). */
#ifndef DA_COMPARE_H
#define DA_COMPARE_H

#include "eval/eval.h"
#include "diffattn/train.h"
#include "study/shape.h"
#include "tasks/tasks.h"

/* ---------------------------------------------------------------- compare */

/* DIFF and the softmax baseline trained at equal parameters, tokens, data and
 * seed, then the same evaluations on both, with a side-by-side report
 * (report.md, report.json, figures per cell) in out_dir: a study of the same
 * pipeline as compare --task (cells of a grid, the study scheduler, one
 * report writer). */

typedef struct {
    /* --resume keeps finished runs, continues an interrupted one from its last checkpoint, and trains to the
     * steps the first run was started with unless steps_given */
    da_study_shape shape;
    const char *data;      /* NULL: the built-in needle mix */
    double budget_minutes; /* > 0: steps chosen so the whole job fits (overrides shape.steps) */
    int seq;               /* the training context */
    int needles, queries;  /* needle prompts: N needles, R asked */
    int n_contexts, contexts[4]; /* needle prompt lengths; 0 contexts: seq/2 - 64 and seq - 64 */
    int steps_given; /* on resume, steps was chosen now: the runs continue to it (else the first run's steps) */
} da_compare_config;

void da_compare_config_default(da_compare_config *c);
da_status da_compare(const da_compare_config *c);
/* Run k of da_compare (column k % n_archs, seed (k / n_archs) % seeds, cell
 * k / (n_archs seeds)): trains it, or continues it, and writes its result
 * file; what each process of jobs > 1 does. */
da_status da_compare_run(const da_compare_config *c, int k);

/* ---------------------------------------------------------------- retrieval tasks and studies
 * compare --task mqar|noisy-recall|icl|counterfactual: every architecture from
 * the same initialisation where shapes agree (da_copy_shared_init), on the
 * same generated training stream per seed, scored every eval_every steps on
 * the same held-out sequences (teacher-forced answer accuracy).
 *
 * A study is a grid of cells: the product of the task sweeps (--pairs, --seq,
 * --noise, --demos) and the grid axes (--grid heads=1,2,4 dim=64,128 ...).
 * Each (cell, seed, architecture) is one run, independent of every other:
 * an ordinary training run (da_train_source on da_task_source) in its own
 * folder out_dir/runs/cell<i>_<arch>_seed<s> (model.safetensors,
 * train_state.safetensors, metrics.jsonl with the accuracy per evaluation,
 * task.txt), plus its result file, written atomically when the run ends. So
 * runs can go to separate processes in any order (the results are the same
 * bits), and a killed study continues with the runs that have no valid
 * result file (--resume). */


typedef struct {
    /* the first column's initialisation is copied into the others where shapes agree */
    da_study_shape shape;
    da_task_config task;   /* the kind and the values of every parameter not swept */
    int n_pairs, pairs[8]; /* mqar sweep (0: task.pairs) */
    int n_seqs, seqs[8];   /* sweep over sequence lengths (0: task.seq); not icl. With train_seqs: the
                            * evaluation lengths instead (none: the training lengths) */
    /* --train-seq: a length curriculum (not icl): the steps in n_train_seqs equal shares, in order, share i
     * trained at train_seqs[i]; each trained model is then scored at every length of seqs */
    int n_train_seqs, train_seqs[8];
    int n_noises;          /* noisy-recall sweep (0: task.noise) */
    double noises[8];
    int n_demos, demos[8]; /* icl sweep (0: task.demos); seq is 2 demos + 2 */
    int perms, perm_episodes; /* icl order robustness: random orders per episode, held-out episodes */
    int cf_episodes;          /* counterfactual: held-out episodes of the faithfulness evaluation */
    int eval_every, eval_seqs;
    float lr;
    /* every other training setting (optimizer, clipping, bf16, checkpoints); batch, seq, steps, lr, seed and
     * eval_every come from the fields above and the cell; warmup is steps / 10 and min_lr lr / 10 unless given */
    da_train_config train;
    int warmup_given, min_lr_given;
    int seed0; /* the seeds are seed0, seed0 + 1, ... */
} da_task_compare_config;

void da_task_compare_config_default(da_task_compare_config *c);
/* The whole study (c->study: in this process or in c->study.jobs
 * processes), with progress and an ETA on stderr; then the report: out_dir/report.md, report.json,
 * accuracy.png (accuracy_<cell>.png with several cells), steps_to_90.png, lambda.png (when DIFF is listed),
 * for icl permutation_margin.png, and for a grid of several cells
 * success_<arch>.png and, per architecture against softmax,
 * success_<arch>_vs_softmax.png. */
da_status da_task_compare(const da_task_compare_config *c);

/* --dump-episodes: the held-out episodes of every task point of c (the sets
 * its runs score, eval_seqs each, in sweep order) as JSON lines
 * {"task", "input", "answer", "answer_positions"} to path, atomically.
 * input is the whole sequence, answers included (as the model is trained and
 * scored, teacher-forced); answer_positions[i] is the position whose next
 * token is answer[i], so input[answer_positions[i] + 1] == answer[i]. */
da_status da_task_dump_episodes(const da_task_compare_config *c, const char *path);

/* Trains and evaluates run k of the study (what a --jobs process does) and
 * writes its result file. */
da_status da_task_compare_run(const da_task_compare_config *c, int k);

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
