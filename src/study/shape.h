/* What every study that compares architectures shares (plain compare and
 * compare --task alike): how it runs, its columns (--archs), the model and
 * training shape of its runs, the grid over that shape, and its seeds. A
 * kind of study holds one of these and adds only its own fields (shape.c). */
#ifndef DA_STUDY_SHAPE_H
#define DA_STUDY_SHAPE_H

#include "study/arch_column.h"
#include "study/grid.h"
#include "study/study.h"

typedef struct {
    /* out_dir, --jobs, --resume, --force; in this process a stop checkpoints the run in training and returns
     * DA_INTERRUPTED */
    da_study_opts study;
    /* the columns, trained side by side in this order (default: da_arch_compare_defaults); each gets a
     * verdict against the plain baseline when it is among them */
    da_arch archs[DA_COMPARE_MAX_ARCHS];
    int windows[DA_COMPARE_MAX_ARCHS]; /* > 0: that arch with a sliding window of this many keys ("swa") */
    /* a column with model options: its --archs token ("diff:head-norm=off"), its name in run folders and
     * reports; "" for a plain architecture */
    char columns[DA_COMPARE_MAX_ARCHS][DA_COLUMN_NAME_MAX];
    int n_archs;
    int swa_window; /* the window of "swa" in --archs */
    long steps;     /* training steps per run */
    int dim, layers, heads, batch; /* heads: DIFF heads (the baseline gets twice as many, da_arch_heads) */
    /* model and training axes (heads, dim, layers, lr, batch), in the order given: each combination is a cell,
     * whose runs are out_dir/runs/cell<i>_NAME_seedS */
    da_grid_axis grid[DA_GRID_N_KEYS];
    int n_grid;
    int seeds;        /* per column and cell */
    int match_params; /* 1: each cell's columns widened to its largest column's parameters (da_match_params) */
} da_study_shape;

/* --archs into s->archs, s->windows, s->columns and s->n_archs: every
 * da_arch_name, swa (the softmax model with a sliding window of
 * s->swa_window keys, set first), and an architecture with model options,
 * "arch:flag=value[:...]" (head-norm, lambda-init, ...: "diff:head-norm=off",
 * "diff:lambda-init=0.5"); s is left as it was on an error. */
da_status da_study_parse_archs(da_study_shape *s, const char *list);
/* Column a's name in run folders and report.json ("swa", the column token,
 * or the architecture's name), and its label in report.md and figures. */
const char *da_study_column_name(const da_study_shape *s, int a);
const char *da_study_column_label(const da_study_shape *s, int a);
/* The slot of the plain baseline (no window, no options), which every
 * verdict is against; -1 when it is not listed. */
int da_study_baseline_slot(const da_study_shape *s);

#endif
