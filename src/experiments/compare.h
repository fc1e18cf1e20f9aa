/* The two kinds of study that compare architectures: plain compare (the
 * needle mix or --data text, compare.c) and compare --task (the synthetic
 * tasks, task_compare.c), both through the study room (src/study/). */
#ifndef DA_COMPARE_H
#define DA_COMPARE_H

#include "diffattn/eval.h"
#include "diffattn/train.h"
#include "study/arch_column.h"
#include "study/grid.h"
#include "study/study.h"
#include "tasks/tasks.h"

/* ---------------------------------------------------------------- compare */

/* DIFF and the softmax baseline trained at equal parameters, tokens, data and
 * seed, then the same evaluations on both, with a side-by-side report
 * (report.md, report.json, figures per cell) in out_dir: a study of the same
 * pipeline as compare --task (cells of a grid, the study scheduler, one
 * report writer). */

typedef struct {
    /* out_dir, --jobs, --resume (finished runs are kept, an interrupted one continues from its last checkpoint,
     * and the steps are those the first run was started with), --force; in this process a stop checkpoints the
     * run in training and returns DA_INTERRUPTED */
    da_study_opts study;
    const char *data; /* NULL: the built-in needle mix */
    /* trained and evaluated side by side, in this order (default: da_arch_compare_defaults); each
     * gets a verdict against the baseline when the baseline is among them */
    da_arch archs[DA_COMPARE_MAX_ARCHS];
    int windows[DA_COMPARE_MAX_ARCHS]; /* > 0: that arch with a sliding window of this many keys ("swa") */
    /* a column with model options: its --archs token ("diff:head-norm=off"), its run folder's and report's
     * name; "" for a plain architecture */
    char columns[DA_COMPARE_MAX_ARCHS][DA_COLUMN_NAME_MAX];
    int n_archs;
    int swa_window; /* the window of "swa" in --archs */
    long steps;
    double budget_minutes; /* > 0: steps chosen so the whole job fits (overrides steps) */
    int dim, layers, heads, seq, batch;
    /* model and training axes (heads, dim, layers, lr, batch), in the order given: each combination is a cell,
     * whose runs are out_dir/runs/cell<i>_NAME_seedS (without a grid: runs/NAME_seedS) */
    da_grid_axis grid[DA_GRID_N_KEYS];
    int n_grid;
    int seeds;
    int needles, queries;  /* needle prompts: N needles, R asked */
    int n_contexts, contexts[4]; /* needle prompt lengths; 0 contexts: seq/2 - 64 and seq - 64 */
    int steps_given; /* on resume, steps was chosen now: the runs continue to it (else the first run's steps) */
    int match_params; /* 1: each architecture's FFN widened to the largest one's parameters (da_match_params) */
    volatile int *stop; /* when it becomes non-zero: checkpoint the run in training and return DA_INTERRUPTED */
} da_compare_config;

void da_compare_config_default(da_compare_config *c);
/* --archs into c->archs, c->windows and c->columns, as da_task_parse_archs
 * reads it (every da_arch_name, swa with c->swa_window set first, and
 * "arch:flag=value[:...]" columns). */
da_status da_compare_parse_archs(da_compare_config *c, const char *list);
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
    da_study_opts study;
    da_task_config task; /* the kind and the values of every parameter not swept */
    /* trained side by side in this order (default: da_arch_compare_defaults); the first one's
     * initialisation is copied into the others; verdicts are against softmax when it is listed */
    da_arch archs[DA_COMPARE_MAX_ARCHS];
    int windows[DA_COMPARE_MAX_ARCHS]; /* > 0: that arch with a sliding window of this many keys ("swa") */
    /* a column with model options: its --archs token ("diff:head-norm=off"), its name in reports and run
     * files; "" for a plain architecture */
    char columns[DA_COMPARE_MAX_ARCHS][DA_COLUMN_NAME_MAX];
    int n_archs;
    int swa_window;        /* the window of "swa" in --archs */
    int n_pairs, pairs[8]; /* mqar sweep (0: task.pairs) */
    int n_seqs, seqs[8];   /* sweep over sequence lengths (0: task.seq); not icl. With train_seqs: the
                            * evaluation lengths instead (none: the training lengths) */
    /* --train-seq: a length curriculum (not icl): the steps in n_train_seqs equal shares, in order, share i
     * trained at train_seqs[i]; each trained model is then scored at every length of seqs */
    int n_train_seqs, train_seqs[8];
    int n_noises;          /* noisy-recall sweep (0: task.noise) */
    double noises[8];
    int n_demos, demos[8]; /* icl sweep (0: task.demos); seq is 2 demos + 2 */
    da_grid_axis grid[DA_GRID_N_KEYS]; /* model and training axes, in the order given */
    int n_grid;
    int perms, perm_episodes; /* icl order robustness: random orders per episode, held-out episodes */
    int cf_episodes;          /* counterfactual: held-out episodes of the faithfulness evaluation */
    long steps;
    int eval_every, eval_seqs;
    int dim, layers, heads, batch;
    float lr;
    /* every other training setting (optimizer, clipping, bf16, checkpoints); batch, seq, steps, lr, seed and
     * eval_every come from the fields above and the cell; warmup is steps / 10 and min_lr lr / 10 unless given */
    da_train_config train;
    int warmup_given, min_lr_given;
    int match_params; /* 1: each cell's columns at its largest column's parameters (da_match_params) */
    int seeds, seed0; /* seeds seed0, seed0 + 1, ... */
} da_task_compare_config;

void da_task_compare_config_default(da_task_compare_config *c);
/* --archs into c->archs, c->windows and c->columns: every da_arch_name,
 * swa (the softmax model with a sliding window of c->swa_window keys, set
 * first), and an architecture with model options, "arch:flag=value[:...]"
 * (flags head-norm and lambda-init: "diff:head-norm=off",
 * "softmax:head-norm=on", "diff:lambda-init=0.5"). */
da_status da_task_parse_archs(da_task_compare_config *c, const char *list);
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
