/* Plain compare's study (the needle mix or --data text), shared by
 * text_compare.c (its runs), text_run_file.c (their files) and text_report.c
 * (its report): one run's results, the cells of the grid, the settings every
 * run shares. */
#ifndef DA_TEXT_STUDY_H
#define DA_TEXT_STUDY_H

#include "eval/eval.h"
#include "experiments/compare.h"

/* One run's results: what its result file holds. */
typedef struct {
    double eval_loss, needle;
    double needle_acc[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS];
    double needle_ctx[DA_NEEDLE_MAX_CONTEXTS];  /* mean over depths */
    double needle_depth[DA_NEEDLE_MAX_DEPTHS]; /* mean over contexts */
    double attn_answer, attn_noise, digits;     /* digits: teacher-forced answer digit accuracy */
    da_outliers_result out;
    double quant[4], quant_needle[4]; /* loss increase and needle accuracy at 16, 8, 6, 4 bits */
    double train_s, eval_s;
    double loss_flash_s, loss_ref_s, fixed_s, per_prompt_s; /* evaluate()'s parts, for the budget */
    size_t n_params;
    double flops_per_token; /* training FLOPs per token at seq (da_train_flops_per_token) */
    da_needle_attention_map map; /* first seed only: one prompt's attention, for the figure */
} arch_result;

/* The attention-logit widths each trained model is evaluated at (quant[i] is at QBITS[i] bits). */
#define CMP_N_QBITS 4
static const int QBITS[CMP_N_QBITS] = {16, 8, 6, 4};

/* A cell of the grid: the model and training shape its runs share. */
typedef struct {
    grid_shape sh;
    int index[DA_GRID_N_KEYS];
    char name[96];
} cmp_cell;

enum { MAX_CELLS = 256 };

/* The study: the settings every run shares, steps resolved, and its cells. */
typedef struct {
    da_compare_config c;
    da_needle_config nc;
    char data[4200];
    int n_cells;
    cmp_cell cells[MAX_CELLS];
} cmp_study;

/* The files of a run (text_run_file.c). Run k's folder: an ordinary training run folder, in cells of its own with a grid. */
void cmp_run_dir(const cmp_study *x, int k, char *buf, size_t n);
/* A run's metrics.jsonl: the train loss per logged step and the val loss at
 * evaluation steps (NAN elsewhere), cap lines at most; returns how many.
 * *elapsed gets the training time summed over the run's sessions. */
int cmp_read_metrics(const char *dir, double *step, double *train, double *val, int cap, double *elapsed);
/* Run k's result file, and its results into r when the file holds a valid
 * result made with these settings (0; else -1, with a line on stderr when
 * say and the file is there but invalid). */
void cmp_result_path(const cmp_study *x, int k, char *buf, size_t n);
int cmp_result_load(const cmp_study *x, int k, arch_result *r, int say);
/* Writes run k's result file, atomically. */
da_status cmp_result_save(const cmp_study *x, int k, const arch_result *r);

/* report.json, the figures and report.md from the runs' result files (text_report.c). */
da_status cmp_report_write(const cmp_study *x);

#endif
