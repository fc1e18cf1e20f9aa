/* compare --task: the cells of a study, one run's results, and the study's
 * results in memory (shared by task_compare.c, which runs, and
 * task_report.c, which reports). */
#ifndef DA_TASK_STUDY_H
#define DA_TASK_STUDY_H

#include <stdio.h>

#include "experiments/compare.h"
#include "eval/outliers.h"

enum { TASK_MAX_EVALS = 512, TASK_MAX_LAYERS = 16, TASK_MAX_CELLS = 256, TASK_MAX_SEEDS = 64 };

/* One cell: a task point and a model/training shape. */
typedef struct {
    da_task_config task;
    int point; /* index of the task sweep point: the data streams and the held-out set follow it */
    int dim, layers, heads, batch;
    float lr;
    int grid_index[DA_GRID_N_KEYS]; /* the value index of each grid axis (c->grid order) */
    char point_name[64];            /* "pairs 4, seq 32" */
    char grid_name[96];             /* "heads 2, dim 64" (empty without a grid) */
    char name[168];                 /* both */
} task_cell;

/* The attention-logit widths each trained model is re-evaluated at (quant_acc[i] is at TASK_QBITS[i] bits). */
#define TASK_N_QBITS 3
#define TASK_QBITS {8, 6, 4}

/* One run's results: everything but train_s is a function of the settings
 * alone, so the same run in any process gives the same bytes. */
typedef struct {
    int n_evals;
    long step[TASK_MAX_EVALS];
    double acc[TASK_MAX_EVALS];
    float lambda[TASK_MAX_EVALS][TASK_MAX_LAYERS];
    double final_acc, quant_acc[TASK_N_QBITS];
    double attn_answer, attn_noise, attn_noise_tokens; /* shares, mean over answers, layers, heads */
    da_outliers_result out;
    da_icl_order_result order; /* icl only */
    da_cf_counts cf;           /* counterfactual only */
    double partial_acc;        /* RULER's tasks: the final share of answer tokens right (final_acc: of episodes) */
    size_t n_params;
    int ffn_hidden;           /* the model's FFN width (--match-params widens it) */
    double flops_per_token;   /* training FLOPs per token at the cell's training length (da_train_flops_per_token) */
    int n_lengths;            /* --train-seq: the evaluation lengths, and the answer accuracy at each */
    int length[8];
    double length_acc[8];
    double train_s; /* last: the one field that depends on the machine */
} task_run;

/* A run's result file (task_run_file.c) holds the settings the run was made
 * with, key (TASK_KEY_BYTES at most), and r. load: 0 when path holds key and
 * a valid r (counts in range, values finite, rates in [0, 1], attention
 * shares in [-1, 1]); say: a line
 * on stderr when a file with key is invalid. */
#define TASK_KEY_BYTES 1024
da_status task_run_save(const char *path, const char *key, const task_run *r);
int task_run_load(const char *path, const char *key, task_run *r, int say);

typedef struct {
    const da_task_compare_config *c;
    int n_cells, n_points;
    task_cell *cells;
    task_run *runs; /* (n_cells, n_archs, seeds) */
} task_study;


/* The report's table of the columns' parameters and training FLOPs per token
 * (task_columns.c): markdown, and ,"columns":[...] inside report.json's object. */
void task_columns_md(FILE *fp, const task_study *s);
void task_columns_json(FILE *fp, const task_study *s);
/* With a length curriculum: the accuracy per evaluation length and the effective lengths (task_lengths.c),
 * markdown, and ,"lengths":{...} inside report.json's object. */
void task_lengths_md(FILE *fp, const task_study *s);
void task_lengths_json(FILE *fp, const task_study *s);
/* With a length curriculum: length_<arch>.png, accuracy by cell and evaluation length, per column. */
da_status task_lengths_heatmaps(const task_study *s);
/* The evaluation lengths of c (--seq, else the --train-seq lengths) into out (8); their count. */
int task_eval_lengths(const da_task_compare_config *c, int *out);

/* The cells of c (validated settings); *n_points: the task sweep points. */
da_status task_cells(const da_task_compare_config *c, task_cell **cells, int *n_cells, int *n_points);
static inline task_run *study_run(const task_study *s, int cell, int arch, int seed) {
    return &s->runs[((size_t)cell * s->c->shape.n_archs + arch) * s->c->shape.seeds + seed];
}
/* 1 when slot a's architecture has one lambda per layer (da_model_lambda),
 * which the runs record during training. */
int task_has_lambda(const da_task_compare_config *c, int a);
/* The first plain slot with a lambda per layer (the lambda figure's), or -1. */
int task_lambda_slot(const da_task_compare_config *c);
/* The threshold whose reaching counts as learning the task. */
#define TASK_SUCCESS 0.9

da_status task_write_report(const task_study *s, double wall_s);

#endif
